package transfer

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/kerneld/kerneld/internal/session"
)

// ExportOptions name the export in its header.
type ExportOptions struct {
	Source string           // the store's kind, for the header
	Now    func() time.Time // nil: time.Now
}

// Summary is what a transfer moved, or checked.
type Summary struct {
	Sessions int
	Counts   Counts // summed over the sessions
}

func (s *Summary) add(c Counts) {
	s.Sessions++
	s.Counts.Runs += c.Runs
	s.Counts.Messages += c.Messages
	s.Counts.Memory += c.Memory
	s.Counts.Images += c.Images
	s.Counts.Schedules += c.Schedules
	s.Counts.Events += c.Events
}

// Export writes every session of src, of every tenant, to w as a dump.
// It reads a page at a time, so its memory does not grow with the store.
//
// A session is read record kind by record kind, not in one transaction:
// export a store no kerneld is writing to (the SQLite store's directory
// lock sees to that), or a session that changes meanwhile may be
// exported torn. Its events are exported up to the LastSeq its session
// record states, so the record and its events always agree.
func Export(ctx context.Context, src Source, w io.Writer, opt ExportOptions) (Summary, error) {
	now := opt.Now
	if now == nil {
		now = time.Now
	}
	out := &lineWriter{w: bufio.NewWriterSize(w, 256<<10), m: newMarshaler()}
	err := out.write(&headerRecord{Kind: kindHeader, Format: Format, Version: FormatVersion,
		Dump: session.NewID(), CreatedAt: micro(now()), Source: opt.Source})
	if err != nil {
		return Summary{}, err
	}
	var sum Summary
	err = eachSession(ctx, src, func(s session.Session) error {
		d := newDigest()
		err := readSession(ctx, src, s, func(rec any) error {
			if err := d.add(rec); err != nil {
				return err
			}
			return out.write(rec)
		})
		if err != nil {
			return err
		}
		sum.add(d.counts)
		return out.write(&sessionEndRecord{Kind: kindSessionEnd, SessionID: s.ID, Counts: d.counts, SHA256: d.sum()})
	})
	if err != nil {
		return sum, err
	}
	if err := out.write(&endRecord{Kind: kindEnd, Sessions: sum.Sessions}); err != nil {
		return sum, err
	}
	return sum, out.w.Flush()
}

// lineWriter writes records as dump lines.
type lineWriter struct {
	w *bufio.Writer
	m *marshaler
}

func (lw *lineWriter) write(rec any) error {
	line, err := lw.m.line(rec)
	if err != nil {
		return err
	}
	if _, err := lw.w.Write(line); err != nil {
		return fmt.Errorf("write dump: %w", err)
	}
	return nil
}

// eachSession calls fn with every session of src, of every tenant, newest
// first, a page at a time.
func eachSession(ctx context.Context, src Source, fn func(session.Session) error) error {
	var after *session.Cursor
	for {
		page, err := src.ListSessions(ctx, session.Query{After: after, Limit: sessionPage})
		if err != nil {
			return fmt.Errorf("list sessions: %w", err)
		}
		for _, s := range page {
			if err := fn(s); err != nil {
				return err
			}
		}
		if len(page) < sessionPage {
			return nil
		}
		last := page[len(page)-1]
		after = &session.Cursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
}

// readSession calls emit with each record of session s in dump order: the
// session, its runs oldest first, memory by key, images by hash,
// schedules oldest first, messages by position and events by seq.
func readSession(ctx context.Context, src Source, s session.Session, emit func(rec any) error) error {
	rec := toSessionRecord(s)
	if err := emit(&rec); err != nil {
		return err
	}
	steps := []func(context.Context, Source, string, func(any) error) error{
		readRuns, readMemory, readImages, readSchedules, readMessages,
	}
	for _, step := range steps {
		if err := step(ctx, src, s.ID, emit); err != nil {
			return fmt.Errorf("export session %s: %w", s.ID, err)
		}
	}
	if err := readEvents(ctx, src, s.ID, s.LastSeq, emit); err != nil {
		return fmt.Errorf("export session %s: %w", s.ID, err)
	}
	return nil
}

// readRuns emits a session's runs oldest first, which is the order an
// import must create them in: stores list runs by creation. Stores list
// them newest first, so it pages through their ids, then reads each run;
// it holds the ids of one session's runs, never the runs.
func readRuns(ctx context.Context, src Source, id string, emit func(any) error) error {
	var ids []string
	for {
		q := session.RunQuery{Limit: runPage}
		if len(ids) > 0 {
			q.Before = ids[len(ids)-1]
		}
		page, err := src.ListRuns(ctx, id, q)
		if err != nil {
			return fmt.Errorf("list runs: %w", err)
		}
		for _, r := range page {
			ids = append(ids, r.ID)
		}
		if len(page) < runPage {
			break
		}
	}
	slices.Reverse(ids)
	for _, runID := range ids {
		r, err := src.GetRun(ctx, id, runID)
		if err != nil {
			return fmt.Errorf("get run %s: %w", runID, err)
		}
		rec := toRunRecord(r)
		if err := emit(&rec); err != nil {
			return err
		}
	}
	return nil
}

func readMemory(ctx context.Context, src Source, id string, emit func(any) error) error {
	entries, err := src.ListMemory(ctx, id)
	if err != nil {
		return fmt.Errorf("list memory: %w", err)
	}
	for _, e := range entries {
		rec := toMemoryRecord(e)
		if err := emit(&rec); err != nil {
			return err
		}
	}
	return nil
}

// readImages emits the images the session refers to, bytes included, one
// at a time; a store that keeps none has none to emit.
func readImages(ctx context.Context, src Source, id string, emit func(any) error) error {
	imgs, ok := src.(imageSource)
	if !ok {
		return nil
	}
	list, err := imgs.ListImages(ctx, id)
	if err != nil {
		return fmt.Errorf("list images: %w", err)
	}
	for _, desc := range list {
		img, err := imgs.GetImage(ctx, id, desc.Hash)
		if err != nil {
			return fmt.Errorf("get image %s: %w", desc.Hash, err)
		}
		rec := toImageRecord(id, img)
		if err := emit(&rec); err != nil {
			return err
		}
	}
	return nil
}

func readSchedules(ctx context.Context, src Source, id string, emit func(any) error) error {
	sched, ok := src.(scheduleSource)
	if !ok {
		return nil
	}
	list, err := sched.ListSchedules(ctx, id)
	if err != nil {
		return fmt.Errorf("list schedules: %w", err)
	}
	for _, s := range list {
		rec := toScheduleRecord(s)
		if err := emit(&rec); err != nil {
			return err
		}
	}
	return nil
}

func readMessages(ctx context.Context, src Source, id string, emit func(any) error) error {
	var after int64
	for {
		page, err := src.ListMessages(ctx, id, after, messagePage)
		if err != nil {
			return fmt.Errorf("list messages: %w", err)
		}
		for _, m := range page {
			rec := toMessageRecord(m)
			if err := emit(&rec); err != nil {
				return err
			}
			after = m.Position
		}
		if len(page) < messagePage {
			return nil
		}
	}
}

// readEvents emits a session's events with seqs up to last.
func readEvents(ctx context.Context, src Source, id string, last int64, emit func(any) error) error {
	for after := int64(0); after < last; {
		page, err := src.ReadEvents(ctx, id, after, int(min(int64(eventPage), last-after)))
		if err != nil {
			return fmt.Errorf("read events: %w", err)
		}
		if len(page) == 0 {
			return fmt.Errorf("read events: the log ends at seq %d, before the session's last seq %d", after, last)
		}
		for _, e := range page {
			rec := toEventRecord(e)
			if err := emit(&rec); err != nil {
				return err
			}
			after = e.Seq
		}
	}
	return nil
}
