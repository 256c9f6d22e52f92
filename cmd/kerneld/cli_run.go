package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kerneld/kerneld/client"
)

// run handles `kerneld run AGENT "input"`: a new session, one run,
// its answer on stdout. A failed run (RUN_ERROR) is an error: the exit
// status is not 0.
func (c *cli) run(args []string) error {
	c.instructionsFlag()
	pos, err := c.parse(args, 2, `run AGENT "input" [--instructions TEXT]`)
	if err != nil {
		return err
	}
	id, err := c.newSession(pos[0])
	if err != nil {
		return err
	}
	err = c.answer(id, pos[1], nil, nil)
	if c.ctx.Err() != nil {
		return fmt.Errorf("interrupted; the run goes on (kerneld watch %s)", id)
	}
	return err
}

// instructionsFlag takes --instructions, the new session's own
// instructions, added to its agent's system prompt.
func (c *cli) instructionsFlag() {
	c.fs.StringVar(&c.instructions, "instructions", "", "instructions added to the agent's system prompt for this session")
}

// newSession creates a session of agent and names it on stderr, for the
// commands that need its id (watch, approve).
func (c *cli) newSession(agent string) (string, error) {
	s, err := c.c.CreateSession(c.ctx, client.CreateSessionRequest{Agent: agent, Instructions: c.instructions})
	if err != nil {
		return "", err
	}
	c.note("session", s.ID)
	return s.ID, nil
}

// chat handles "kerneld chat AGENT": each line of stdin is an input to
// one session, answered before the next line is read. A tool call that
// needs approval is asked about in place: the next line answers it (see
// approvalAnswers). Ctrl-C cancels the answer being written; Ctrl-C at
// the prompt, or a second one while an answer is being cancelled, exits.
// A failed answer is reported and the conversation goes on. The end of
// stdin ends the chat.
func (c *cli) chat(args []string) error {
	c.instructionsFlag()
	pos, err := c.parse(args, 1, "chat AGENT [--instructions TEXT]")
	if err != nil {
		return err
	}
	id, err := c.newSession(pos[0])
	if err != nil {
		return err
	}
	lines := make(chan string)
	go readLines(c.stdin, lines) // ends with stdin; an exit abandons it with the process
	for {
		if c.interactive {
			c.prompt()
		}
		select {
		case line, ok := <-lines:
			if !ok {
				return nil
			}
			if strings.TrimSpace(line) == "" {
				continue
			}
			err := c.answer(id, line, lines, c.interrupts)
			if errors.Is(err, errQuit) {
				return nil
			}
			var failed runFailedError
			if errors.As(err, &failed) {
				c.note(err)
				continue
			}
			if err != nil {
				return err
			}
		case <-c.interrupts:
			return nil
		case <-c.ctx.Done():
			return nil
		}
	}
}

// readLines sends stdin's lines to lines, and closes it at the end.
func readLines(r io.Reader, lines chan<- string) {
	defer close(lines)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines <- sc.Text()
	}
}

// errQuit ends a chat: a second Ctrl-C.
var errQuit = errors.New("quit")

// runFailedError is a run that ended with RUN_ERROR.
type runFailedError struct{ ev client.Event }

func (e runFailedError) Error() string {
	return fmt.Sprintf("run failed (%s): %s", e.ev.Code, e.ev.Message)
}

// answer runs input in the session and prints the run's events. With
// lines, the run's approvals are asked about and answered from them; when
// they end with a call undecided, answer returns and the run waits. With
// interrupts, the first one cancels the run and the second returns
// errQuit.
func (c *cli) answer(sessionID, input string, lines <-chan string, interrupts <-chan os.Signal) error {
	stream, err := c.c.StreamRun(c.ctx, sessionID, client.CreateRunRequest{Input: input, Source: "cli"}, client.FollowOptions{})
	if err != nil {
		return err
	}
	events, stop := readEvents(stream)
	defer stop()
	p := c.printer(false)
	p.askInPlace = lines != nil
	ask := &asker{c: c, sessionID: sessionID}
	cancelling := false
	for {
		var answers <-chan string // read only while a call waits for its answer
		if ask.waiting() {
			answers = lines
		}
		select {
		case e, ok := <-events:
			if !ok {
				return nil
			}
			if err := c.show(p, ask, e); err != nil {
				return err
			}
		case line, ok := <-answers:
			if !ok {
				ask.abandon()
				return nil
			}
			if err := ask.answer(line); err != nil {
				return err
			}
		case <-interrupts:
			if cancelling {
				return errQuit
			}
			cancelling = true
			if err := c.cancel(sessionID, stream.RunID()); err != nil {
				return err
			}
		}
	}
}

// show prints one step of a run's stream and hands the event to the
// asker; a failed run ends the answer with runFailedError.
func (c *cli) show(p *printer, ask *asker, e eventOrError) error {
	if e.err != nil {
		return e.err
	}
	if err := p.print(e.ev); err != nil {
		return err
	}
	if e.ev.Type == client.RunErrorType {
		return runFailedError{e.ev}
	}
	ask.see(e.ev)
	return nil
}

// cancel stops the run being answered, at the person's Ctrl-C. A run
// that has ended meanwhile is left as it is.
func (c *cli) cancel(sessionID, runID string) error {
	c.note("\ncancelling (Ctrl-C again to quit)")
	_, err := c.c.CancelRun(c.ctx, sessionID, runID)
	return err
}

// readEvents reads stream in a goroutine, so that Ctrl-C and typed lines
// are seen while a read blocks. stop ends the goroutine and waits for it.
func readEvents(stream *client.Stream) (events <-chan eventOrError, stop func()) {
	ch := make(chan eventOrError)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range stream.All() {
			select {
			case ch <- eventOrError{ev, err}:
			case <-quit:
				return
			}
		}
		close(ch)
	}()
	return ch, func() { close(quit); stream.Close(); <-done }
}

// eventOrError is one step of a stream.
type eventOrError struct {
	ev  client.Event
	err error
}
