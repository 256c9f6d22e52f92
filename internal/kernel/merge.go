package kernel

import (
	"strings"

	"github.com/kerneld/kerneld/internal/session"
)

// maxMergedDelta bounds the text one merged delta carries, so that a
// burst still reaches clients as frames of a sensible size.
const maxMergedDelta = 16 << 10

// deltaMerger merges the deltas that queue up in a writer's pending batch
// while an append is in flight: a TEXT_MESSAGE_CONTENT,
// REASONING_MESSAGE_CONTENT or TOOL_CALL_ARGS that directly follows a
// delta of the same type, run and message joins it, so a burst of tokens
// costs the store one row and each client one frame, carrying the same
// text. Only the pending batch's last event ever grows, so nothing is
// reordered, and a delta never joins another message's, nor crosses
// anything logged between them (a message's end, a run's end). Deltas
// queued while the writer is idle are taken at once, alone: a model
// streaming at reading speed is still logged token by token.
type deltaMerger struct {
	on bool
	// set says the pending batch's last event is a plain delta of message
	// id whose text, with what joined it (joined), is text.
	set    bool
	joined bool
	id     string
	text   strings.Builder
}

// add appends ev to pending, or merges it into pending's last event.
func (m *deltaMerger) add(pending []session.Event, ev session.Event) []session.Event {
	if m.join(pending, ev) {
		return pending
	}
	m.finish(pending)
	m.set, m.joined = false, false
	return append(pending, ev)
}

// join merges ev into pending's last event if both are plain deltas of
// the same message and the result stays within maxMergedDelta.
func (m *deltaMerger) join(pending []session.Event, ev session.Event) bool {
	if !m.on || len(pending) == 0 || !ev.Type.IsDelta() {
		return false
	}
	last := &pending[len(pending)-1]
	if last.Type != ev.Type || last.RunID != ev.RunID {
		return false
	}
	if !m.set && !m.start(*last) {
		return false
	}
	id, delta, ok := ev.Delta()
	if !ok || id != m.id || m.text.Len()+len(delta) > maxMergedDelta {
		return false
	}
	m.text.WriteString(delta)
	m.joined = true
	return true
}

// start makes last, a plain delta, the one later deltas join.
func (m *deltaMerger) start(last session.Event) bool {
	id, delta, ok := last.Delta()
	if !ok {
		return false
	}
	m.set, m.id = true, id
	m.text.Reset()
	m.text.WriteString(delta)
	return true
}

// finish writes what joined pending's last event into it.
func (m *deltaMerger) finish(pending []session.Event) {
	if !m.set || !m.joined || len(pending) == 0 {
		return
	}
	last := &pending[len(pending)-1]
	merged := session.DeltaEvent(last.Type, m.id, m.text.String())
	last.Data = merged.Data
}

// finishBatch finishes pending, which the writer takes as a batch (or
// drops), and starts afresh for the next one.
func (m *deltaMerger) finishBatch(pending []session.Event) []session.Event {
	m.finish(pending)
	m.set, m.joined = false, false
	m.text.Reset()
	return pending
}
