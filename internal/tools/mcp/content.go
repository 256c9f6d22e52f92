package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// resultText turns a tool result into the text the model sees: text parts
// joined by newlines, other content described briefly. Structured content
// is JSON-encoded when the result carries no text, since servers that
// return both are asked by the spec to repeat it as text. A result marked
// IsError becomes an error with that text.
func resultText(res *mcpsdk.CallToolResult) (string, error) {
	parts := make([]string, 0, len(res.Content)+1)
	hasText := false
	for _, c := range res.Content {
		if _, ok := c.(*mcpsdk.TextContent); ok {
			hasText = true
		}
		parts = append(parts, describe(c))
	}
	if !hasText && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	text := strings.Join(parts, "\n")
	if res.IsError {
		if text == "" {
			text = "the tool reported an error"
		}
		return "", errors.New(text)
	}
	return text, nil
}

// describe returns one content part as text.
func describe(c mcpsdk.Content) string {
	switch c := c.(type) {
	case *mcpsdk.TextContent:
		return c.Text
	case *mcpsdk.ImageContent:
		return fmt.Sprintf("[image: %s, %d bytes]", c.MIMEType, len(c.Data))
	case *mcpsdk.AudioContent:
		return fmt.Sprintf("[audio: %s, %d bytes]", c.MIMEType, len(c.Data))
	case *mcpsdk.ResourceLink:
		return fmt.Sprintf("[resource link: %s %s]", c.Name, c.URI)
	case *mcpsdk.EmbeddedResource:
		return describeResource(c.Resource)
	}
	return fmt.Sprintf("[%T content]", c)
}

// describeResource returns an embedded resource's text, or a description
// of a binary one.
func describeResource(r *mcpsdk.ResourceContents) string {
	switch {
	case r == nil:
		return "[resource]"
	case r.Blob != nil:
		return fmt.Sprintf("[resource: %s, %s, %d bytes]", r.URI, r.MIMEType, len(r.Blob))
	}
	return fmt.Sprintf("[resource: %s]\n%s", r.URI, r.Text)
}
