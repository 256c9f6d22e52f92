package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
)

// The content of a user message: a string, or a list of AG-UI content
// parts. Both the AG-UI route and "POST /sessions/{id}/run" take it. Of
// the parts, kerneld takes text and images, in AG-UI 1.0's shape
//
//	{"type":"image","source":{"type":"data","value":"<base64>","mimeType":"image/png"}}
//	{"type":"image","source":{"type":"url","value":"https://…","mimeType":"image/png"}}
//
// and in the shape of AG-UI clients before 1.0
//
//	{"type":"binary","mimeType":"image/png","data":"<base64>"}   (or "url")
//
// Audio, video, documents and files the vendor holds are refused by name.

// content is what a message's content says.
type content struct {
	text   string      // its text parts, joined as AG-UI's contentToText joins them
	images []imagePart // its images, in order
}

// imagePart is an image part as the client sent it: base64 data with a
// media type, or a URL (with a media type if the client gave one). The
// images library decodes and checks it.
type imagePart struct {
	field     string // where it is in the request, for problems
	mediaType string
	data      string // base64
	url       string
}

// contentPart holds the members of every part kerneld reads; which apply
// depends on Type. id, metadata and filename are the client's.
type contentPart struct {
	Type     string          `json:"type"`
	ID       *string         `json:"id"`
	Text     *string         `json:"text"`
	Source   *partSource     `json:"source"`
	MimeType *string         `json:"mimeType"`
	Data     *string         `json:"data"`
	URL      *string         `json:"url"`
	Filename *string         `json:"filename"`
	Metadata json.RawMessage `json:"metadata"`
}

type partSource struct {
	Type     string  `json:"type"`
	Value    *string `json:"value"`
	MimeType *string `json:"mimeType"`
	Provider *string `json:"provider"`
}

// readContent reads the content at field, a string or a list of parts,
// under opts (strictJSON refuses members a part does not have).
func readContent(field string, raw json.RawMessage, opts jsonv2.Options) (content, *fieldProblem) {
	var s string
	if err := unmarshalPart(raw, &s, opts); err == nil {
		return content{text: s}, nil
	}
	var parts []json.RawMessage
	if err := unmarshalPart(raw, &parts, opts); err != nil || parts == nil {
		return content{}, &fieldProblem{field, "must be a string or a list of content parts"}
	}
	var c content
	var text strings.Builder
	for i, rawPart := range parts {
		at := fmt.Sprintf("%s[%d]", field, i)
		var p contentPart
		if err := unmarshalPart(rawPart, &p, opts); err != nil {
			return content{}, &fieldProblem{at, "must be a content part: " + partError(err)}
		}
		img, isImage, problem := p.read(at)
		switch {
		case problem != nil:
			return content{}, problem
		case isImage:
			c.images = append(c.images, img)
		default:
			text.WriteString(*p.Text)
		}
	}
	c.text = text.String()
	return c, nil
}

// partError says briefly what is wrong with a part that did not decode.
func partError(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		msg = msg[i+2:]
	}
	return msg
}

// read returns the image a part at field carries, or reports that it is
// a text part (isImage false), or what is wrong with it.
func (p contentPart) read(field string) (img imagePart, isImage bool, problem *fieldProblem) {
	switch p.Type {
	case "text":
		if p.Text == nil {
			return imagePart{}, false, &fieldProblem{field + ".text", "required"}
		}
		return imagePart{}, false, nil
	case "image":
		img, problem := p.readSource(field)
		return img, true, problem
	case "binary":
		img, problem := p.readBinary(field)
		return img, true, problem
	case "audio", "video", "document":
		return imagePart{}, false, &fieldProblem{field, "is " + article(p.Type) + " " + p.Type + " part; kerneld takes text and image parts"}
	}
	return imagePart{}, false, &fieldProblem{field + ".type", `must be "text" or "image" (or "binary", before AG-UI 1.0)`}
}

// readSource reads an AG-UI 1.0 image part's source.
func (p contentPart) readSource(field string) (imagePart, *fieldProblem) {
	src := p.Source
	if src == nil {
		return imagePart{}, &fieldProblem{field + ".source", "required"}
	}
	if src.Value == nil {
		return imagePart{}, &fieldProblem{field + ".source.value", "required"}
	}
	img := imagePart{field: field, mediaType: deref(src.MimeType)}
	switch src.Type {
	case "data":
		if src.MimeType == nil {
			return imagePart{}, &fieldProblem{field + ".source.mimeType", "required with data"}
		}
		img.data = *src.Value
	case "url":
		img.url = *src.Value
	case "file":
		return imagePart{}, &fieldProblem{field + ".source", "is a file held by a model provider; send the image's data or a URL"}
	default:
		return imagePart{}, &fieldProblem{field + ".source.type", `must be "data" or "url"`}
	}
	return img, nil
}

// readBinary reads the binary part of AG-UI clients before 1.0.
func (p contentPart) readBinary(field string) (imagePart, *fieldProblem) {
	if p.MimeType == nil {
		return imagePart{}, &fieldProblem{field + ".mimeType", "required"}
	}
	if !strings.HasPrefix(strings.ToLower(*p.MimeType), "image/") {
		return imagePart{}, &fieldProblem{field, "is " + *p.MimeType + "; kerneld takes text and image parts"}
	}
	img := imagePart{field: field, mediaType: *p.MimeType}
	switch {
	case p.Data != nil && p.URL != nil:
		return imagePart{}, &fieldProblem{field, "has both data and url; send one"}
	case p.Data != nil:
		img.data = *p.Data
	case p.URL != nil:
		img.url = *p.URL
	default:
		return imagePart{}, &fieldProblem{field, "has no data or url; kerneld cannot fetch a binary part by id"}
	}
	return img, nil
}

// article is "an" before a word starting with a vowel, else "a".
func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}

// messageText returns a message's text: its string content, or its text
// parts joined. Other parts are left out: it serves the messages whose
// images kerneld does not take (system, developer and tool messages).
func messageText(content json.RawMessage) (string, bool) {
	var s string
	if err := unmarshalPart(content, &s, looseJSON); err == nil {
		return s, true
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := unmarshalPart(content, &parts, looseJSON); err != nil {
		return "", false
	}
	var b bytes.Buffer
	for _, p := range parts {
		if p.Type == "text" && p.Text != nil {
			b.WriteString(*p.Text)
		}
	}
	return b.String(), true
}
