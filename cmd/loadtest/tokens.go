package main

import "bytes"

// wordCounter counts the tokens of an answer from its text, not from its
// frames: the echo agent's model streams one token per word of its input,
// and a server that sends several tokens in one frame (or one token over
// two) delivers as many. It counts the words of the deltas of one message
// as if they were one text, so a word split between two deltas counts
// once. The zero value is at the start of a message.
type wordCounter struct {
	inWord bool
}

// deltaKey starts the delta member of a content event's JSON.
var deltaKey = []byte(`"delta":"`)

// add counts the words that start in the delta of data, a content event's
// JSON, and returns how many. It reads the JSON string in place, without
// decoding it: only whether each character is white space matters.
func (w *wordCounter) add(data []byte) int {
	i := bytes.Index(data, deltaKey)
	if i < 0 {
		return 0
	}
	s := data[i+len(deltaKey):]
	n := 0
	for j := 0; j < len(s) && s[j] != '"'; j++ {
		space := false
		switch c := s[j]; {
		case c == '\\' && j+1 < len(s):
			j++
			space, j = escapedSpace(s, j)
		default:
			space = c == ' ' || c == '\t' || c == '\n' || c == '\r'
		}
		if !space && !w.inWord {
			n++
		}
		w.inWord = !space
	}
	return n
}

// escapedSpace reports whether the escape whose letter is at s[j] stands
// for white space, and returns the index of its last byte.
func escapedSpace(s []byte, j int) (bool, int) {
	switch s[j] {
	case 'n', 't', 'r':
		return true, j
	case 'u':
		if j+4 < len(s) {
			code := s[j+1 : j+5]
			switch {
			case bytes.Equal(code, []byte("0020")):
				return true, j + 4
			case bytes.HasPrefix(code, []byte("000")):
				return bytes.IndexByte([]byte("9aAdD"), code[3]) >= 0, j + 4
			}
			return false, j + 4
		}
	}
	return false, j
}
