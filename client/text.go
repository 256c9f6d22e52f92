package client

import (
	"iter"
)

// AssistantText iterates over the assistant's text as it streams: the
// deltas of the assistant's text messages, in order, with "\n" between
// two messages (a run that calls a tool between two answers writes two).
// It leaves out what the stream carries besides, the user's input that
// kerneld echoes at the start of every run included, so
//
//	for text, err := range stream.AssistantText() {
//		if err != nil {
//			return err
//		}
//		fmt.Print(text)
//	}
//
// prints the answer and nothing else. A message whose TEXT_MESSAGE_START
// came before the stream's start (FollowOptions.After in its middle) is
// taken as the assistant's: kerneld echoes an input whole, right after
// RUN_STARTED. The iteration ends as All's does; events read here are not
// delivered again.
func (s *Stream) AssistantText() iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		written := false // an assistant message has been written: the next one starts a line
		for ev, err := range s.All() {
			if err != nil {
				yield("", err)
				return
			}
			text := assistantDelta(ev)
			if ev.Type == TextMessageStart && ev.Role == roleAssistant && written {
				text = "\n"
			}
			if text == "" {
				continue
			}
			written = true
			if !yield(text, nil) {
				return
			}
		}
	}
}

// roleAssistant is the role of the model's messages.
const roleAssistant = "assistant"

// assistantDelta returns the assistant's text an event carries, if any.
func assistantDelta(ev Event) string {
	if ev.Type == TextMessageContent && (ev.Role == roleAssistant || ev.Role == "") {
		return ev.Delta
	}
	return ""
}
