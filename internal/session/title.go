package session

import (
	"strings"
	"unicode/utf8"
)

// TitleSource says where a session's title came from.
type TitleSource string

// Title sources. A session with any source is never titled again by
// kerneld: a client that set a title, even an empty one, keeps it.
const (
	TitleFromClient TitleSource = "client"
	TitleFromModel  TitleSource = "model"
	TitleFromInput  TitleSource = "input"
)

// CustomSessionTitled is the CUSTOM event a run logs when kerneld gave
// its session a title: {"title", "source"}.
const CustomSessionTitled = "kerneld.session.titled"

// titleWords and titleBytes bound a title made from an input.
const (
	titleWords = 6
	titleBytes = 80
)

// TitleFromText returns a title made of the first words of text: at most
// titleWords words and titleBytes bytes, cut at a word or, for a single
// long word, at a rune boundary. Quotes and trailing punctuation a model
// tends to add are trimmed.
func TitleFromText(text string) string {
	words := strings.Fields(text)
	var b strings.Builder
	for i, w := range words {
		if i == titleWords || b.Len()+len(w)+1 > titleBytes {
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	title := b.String()
	if title == "" && len(words) > 0 {
		title = CutRunes(words[0], titleBytes)
	}
	return strings.Trim(title, "\"'`*#.:;, ")
}

// CutRunes returns the longest prefix of s of at most n bytes that ends
// at a rune boundary.
func CutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// TitledEvent is the CUSTOM event that logs a session's new title.
func TitledEvent(runID, title string, source TitleSource) Event {
	return Custom(CustomSessionTitled, map[string]any{"runId": runID, "title": title, "source": string(source)})
}
