package kernel

import (
	"context"
	"errors"
	"fmt"

	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/session"
)

// modelTurn makes model call n of the run, streaming its events, and
// records the assistant message. When the message asks for tools, the
// run's usage so far is saved with it, before any tool runs: whoever
// continues the run after a crash in its tools reports what the call
// spent. It returns the tool calls the model made.
func (r *runner) modelTurn(ctx context.Context, n int) ([]session.ToolCall, error) {
	if err := r.foldSteers(); err != nil {
		return nil, err
	}
	if err := r.maybeCompact(ctx); err != nil {
		return nil, err
	}
	req, err := r.request(ctx, n)
	if err != nil {
		return nil, err
	}
	r.turn = newTurn(n)
	cctx, span := r.startChatSpan(ctx, req)
	err = r.stream(cctx, req, func(c llm.Chunk) error { return r.emit(r.turn.apply(c)...) })
	r.endChatSpan(span, r.turn, err)
	if err != nil {
		return nil, r.streamFailure(ctx, err)
	}
	if err := r.emit(r.turn.close()...); err != nil {
		return nil, err
	}
	r.addUsage(req.Model, r.turn.usage)
	msg, ok := r.turn.message()
	spent := r.turn.usage.InputTokens + r.turn.usage.OutputTokens
	r.turn = nil
	if ok {
		if err := r.record(msg); err != nil {
			return nil, err
		}
		if msg.Content != "" {
			seq, _ := r.events.flush() // record flushed it
			r.noteReply(seq)
		}
	}
	if len(msg.ToolCalls) > 0 {
		if err := r.saveUsage(); err != nil {
			return nil, err
		}
	}
	// The turn is recorded whole; a spent budget stops the run before its
	// tools or its next model call.
	if err := r.chargeTokens(ctx, spent); err != nil {
		return nil, err
	}
	return msg.ToolCalls, nil
}

// saveUsage saves on the run's record what its model calls spent so far.
func (r *runner) saveUsage() error {
	r.run.Usage, r.run.ModelUsage = r.usage, r.byModel
	if err := r.k.saveRun(r.storeCtx(), r.run); err != nil {
		return &emitError{err: err}
	}
	return nil
}

// chunkBuffer is how many chunks a model may stream ahead of the run's
// goroutine.
const chunkBuffer = 64

// stream calls the model with req on a goroutine of its own and hands
// each chunk to onChunk on the run's goroutine, which meanwhile logs the
// notices others post: however long the model is silent, the run's
// goroutine, the only writer of its events, stays free to log them. It
// returns the model's error, or onChunk's, having stopped the model.
func (r *runner) stream(ctx context.Context, req llm.Request, onChunk func(llm.Chunk) error) error {
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	chunks := make(chan llm.Chunk, chunkBuffer)
	done := make(chan struct{})
	var modelErr error // set before done closes
	go func() {
		defer close(done)
		modelErr = r.callModel(sctx, req, chunks)
	}()
	halt := func(err error) error { // stop the model; its own error then only says so
		stop()
		<-done
		return err
	}
	for {
		// A model streaming fast has the next chunk ready: take it without
		// a select over every channel, which costs more than the chunk.
		select {
		case c := <-chunks:
			if err := onChunk(c); err != nil {
				return halt(err)
			}
			if len(r.ar.notices.wake) == 0 {
				continue
			}
		default:
		}
		select {
		case c := <-chunks:
			if err := onChunk(c); err != nil {
				return halt(err)
			}
		case <-done:
			for len(chunks) > 0 { // handed over before the model returned
				if err := onChunk(<-chunks); err != nil {
					return err
				}
			}
			return modelErr
		case <-r.ar.notices.wake:
			if err := r.logNotices(); err != nil {
				return halt(err)
			}
		}
	}
}

// callModel runs the provider's Stream, sending its chunks on chunks, and
// turns a panic in the provider into an error: it runs on a goroutine of
// its own, where a panic would take the daemon down.
func (r *runner) callModel(ctx context.Context, req llm.Request, chunks chan<- llm.Chunk) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("model provider panicked: %v", p)
		}
	}()
	return r.spec.Provider.Stream(ctx, req, func(c llm.Chunk) error {
		select {
		case chunks <- c: // room: the common case, without a select over two channels
			return nil
		default:
		}
		select {
		case chunks <- c:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
}

// streamFailure classifies an error from a model stream.
func (r *runner) streamFailure(ctx context.Context, err error) error {
	if ee, ok := errors.AsType[*emitError](err); ok {
		return ee
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return &modelError{err: err}
}
