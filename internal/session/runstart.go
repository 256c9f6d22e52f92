package session

import "github.com/kerneld/kerneld/internal/errdefs"

// RunStart is everything that starts a run, which a store writes at once
// (kernel.RunStore.StartRun): the run's record, its session's, the events
// that open it in the log and the messages it adds to the history. A
// process that dies while a run starts leaves all of it or none of it.
type RunStart struct {
	// Run is the run as started. When Create is set it is a new run,
	// stored under Constraints; otherwise it replaces the stored run under
	// UpdateRun's version rule. Its StartSeq is the seq Events[0] gets.
	Run         Run
	Create      bool
	Constraints RunConstraints
	// Session replaces the stored session under UpdateSession's version
	// rule.
	Session Session
	// Events are appended to the session's log, as by AppendEvents, their
	// seqs written in place; there is at least one.
	Events []Event
	// Messages are appended to the history, as by AppendMessages, their
	// positions written in place.
	Messages []Message
}

// CheckRunStart rejects a start without events, or whose run, events or
// messages name another session than its session.
func CheckRunStart(st *RunStart) error {
	id := st.Session.ID
	if len(st.Events) == 0 {
		return errdefs.New(errdefs.ErrInvalid, errdefs.CodeInvalidRequest, "the start of run %s logs no event", st.Run.ID)
	}
	evs, err := EventsOfOneSession(st.Events)
	if err != nil {
		return err
	}
	msgs := id
	if len(st.Messages) > 0 {
		if msgs, err = MessagesOfOneSession(st.Messages); err != nil {
			return err
		}
	}
	if st.Run.SessionID != id || evs != id || msgs != id {
		return errdefs.New(errdefs.ErrInvalid, errdefs.CodeMixedSessions, "the start of run %s mixes sessions", st.Run.ID)
	}
	return nil
}
