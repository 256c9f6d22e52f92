package transfer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/schedule"
	"github.com/kerneld/kerneld/internal/session"
)

// maxPendingBytes bounds the event bytes held for one append.
const maxPendingBytes = 1 << 20

// sessionImport writes one session of a dump.
type sessionImport struct {
	im   *importer
	rec  *sessionRecord
	d    *digest // sums the dump's records, checked against its session_end
	skip bool    // imported whole before: only read and checked
	// resuming says the session was begun by an earlier run, so records
	// it holds already are passed over.
	resuming bool

	token   int64
	renewed time.Time

	haveMsgs, haveSeq int64 // the last position and seq the target holds
	msgs              []session.Message
	evs               []session.Event
	evBytes           int
}

// begin decides what to do with the session of rec, creates it if it
// must, and takes its lease.
func (im *importer) begin(ctx context.Context, rec *sessionRecord) (*sessionImport, error) {
	si := &sessionImport{im: im, rec: rec, d: newDigest()}
	cur, err := im.dst.GetSession(ctx, rec.ID)
	mine := err == nil && cur.Imported != nil && cur.Imported.Dump == im.dump
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		err = si.create(ctx)
	case err != nil:
		return nil, fmt.Errorf("import session %s: %w", rec.ID, err)
	case mine && !cur.Imported.Done:
		si.resuming = true
	case mine && im.opt.Resume:
		si.skip = true
		return si, nil
	case im.opt.Overwrite:
		err = si.replace(ctx)
	case mine:
		return nil, errdefs.New(errdefs.ErrConflict, errdefs.CodeSessionImported,
			"session %s was imported from this dump already; pass --resume to finish an import that stopped part-way, or --overwrite to import it again", rec.ID)
	default:
		return nil, errdefs.New(errdefs.ErrConflict, errdefs.CodeSessionExists,
			"session %s exists in the target store; pass --overwrite to replace it", rec.ID)
	}
	if err != nil {
		return nil, err
	}
	return si, si.lease(ctx, cur)
}

// create stores the session, marked as being imported from this dump. It
// is not admitted against the tenant's quotas (kernel/admit.go): an import
// is an operator's command moving sessions that exist already, not a
// tenant's request for new ones.
func (si *sessionImport) create(ctx context.Context) error {
	s := si.rec.session()
	s.Imported = &session.ImportMark{Dump: si.im.dump}
	if err := si.im.dst.CreateSession(ctx, s); err != nil {
		return fmt.Errorf("import session %s: %w", s.ID, err)
	}
	return nil
}

// replace deletes the target's session, with its images and schedules,
// and creates it anew.
func (si *sessionImport) replace(ctx context.Context) error {
	id := si.rec.ID
	if err := si.im.dst.DeleteSession(ctx, id); err != nil {
		return fmt.Errorf("replace session %s: %w", id, err)
	}
	if imgs, ok := si.im.dst.(imageTarget); ok {
		if err := imgs.ReleaseImages(ctx, id); err != nil {
			return fmt.Errorf("replace session %s: %w", id, err)
		}
	}
	if sched, ok := si.im.dst.(scheduleTarget); ok {
		if err := sched.DeleteSessionSchedules(ctx, id); err != nil {
			return fmt.Errorf("replace session %s: %w", id, err)
		}
	}
	return si.create(ctx)
}

// lease takes the session's lease and, when resuming, learns how much of
// its history and log the target holds (cur is the session as read).
func (si *sessionImport) lease(ctx context.Context, cur session.Session) error {
	id := si.rec.ID
	token, err := si.im.dst.AcquireLease(ctx, id, si.im.opt.Holder, si.im.opt.LeaseTTL)
	if err != nil {
		return fmt.Errorf("import session %s: take its lease: %w", id, err)
	}
	si.token, si.renewed = token, si.im.opt.Now()
	if !si.resuming {
		return nil
	}
	si.haveSeq = cur.LastSeq
	last, err := si.im.dst.RecentMessages(ctx, id, 1)
	if err != nil {
		return fmt.Errorf("resume session %s: %w", id, err)
	}
	if len(last) > 0 {
		si.haveMsgs = last[0].Position
	}
	return nil
}

// release gives the lease back, whatever happened.
func (si *sessionImport) release(ctx context.Context) {
	if si.token == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = si.im.dst.ReleaseLease(ctx, si.rec.ID, si.token) // it expires anyway
}

// record reads the record of kind read last, sums it and writes it.
func (si *sessionImport) record(ctx context.Context, kind string) error {
	rec, err := si.im.lr.decodeRecord(kind, si.rec.ID)
	if err != nil {
		return err
	}
	if err := si.d.add(rec); err != nil {
		return err
	}
	if si.skip {
		return nil
	}
	if err := si.write(ctx, rec); err != nil {
		return fmt.Errorf("import session %s (dump line %d): %w", si.rec.ID, si.im.lr.n, err)
	}
	return nil
}

// write writes one record; messages and events are gathered and
// appended a page at a time.
func (si *sessionImport) write(ctx context.Context, rec any) error {
	if _, ok := rec.(*eventRecord); !ok {
		if err := si.flushEvents(ctx); err != nil {
			return err
		}
	}
	if _, ok := rec.(*messageRecord); !ok {
		if err := si.flushMessages(ctx); err != nil {
			return err
		}
	}
	switch r := rec.(type) {
	case *runRecord:
		return si.writeRun(ctx, r)
	case *memoryRecord:
		return si.im.dst.PutMemory(ctx, r.entry(), 0)
	case *imageRecord:
		return si.writeImage(ctx, r)
	case *scheduleRecord:
		return si.writeSchedule(ctx, r)
	case *messageRecord:
		return si.addMessage(ctx, r)
	case *eventRecord:
		return si.addEvent(ctx, r)
	}
	return nil
}

func (si *sessionImport) writeRun(ctx context.Context, r *runRecord) error {
	err := si.im.dst.CreateRun(ctx, r.run(), session.RunConstraints{})
	if si.resuming && errors.Is(err, errdefs.ErrConflict) {
		return nil // written by the earlier run
	}
	return err
}

func (si *sessionImport) writeImage(ctx context.Context, r *imageRecord) error {
	imgs, ok := si.im.dst.(imageTarget)
	if !ok {
		return errdefs.New(errdefs.ErrUnprocessable, errdefs.CodeImagesUnsupported, "the target store keeps no images")
	}
	return imgs.PutImage(ctx, si.rec.ID, r.image(), 0)
}

func (si *sessionImport) writeSchedule(ctx context.Context, r *scheduleRecord) error {
	sched, ok := si.im.dst.(scheduleTarget)
	if !ok {
		return errdefs.New(errdefs.ErrUnprocessable, errdefs.CodeSchedulesUnsupported, "the target store keeps no schedules")
	}
	err := sched.CreateSchedule(ctx, r.schedule(), schedule.Bounds{})
	if si.resuming && errors.Is(err, errdefs.ErrConflict) {
		return nil
	}
	return err
}

// addMessage gathers a message the target lacks. Positions must follow
// one another: the store assigns them, so a gap could not be kept.
func (si *sessionImport) addMessage(ctx context.Context, r *messageRecord) error {
	if r.Position <= si.haveMsgs {
		return nil
	}
	if want := si.haveMsgs + int64(len(si.msgs)) + 1; r.Position != want {
		return errdefs.New(errdefs.ErrInvalid, errdefs.CodeInvalidDump, "message position %d where %d comes next", r.Position, want)
	}
	si.msgs = append(si.msgs, r.message())
	if len(si.msgs) < messagePage {
		return nil
	}
	return si.flushMessages(ctx)
}

// addEvent gathers an event the target lacks; seqs must follow one
// another, as the store assigns them.
func (si *sessionImport) addEvent(ctx context.Context, r *eventRecord) error {
	if r.Seq <= si.haveSeq {
		return nil
	}
	if want := si.haveSeq + int64(len(si.evs)) + 1; r.Seq != want {
		return errdefs.New(errdefs.ErrInvalid, errdefs.CodeInvalidDump, "event seq %d where %d comes next", r.Seq, want)
	}
	ev := r.event()
	si.evs = append(si.evs, ev)
	si.evBytes += len(ev.Data) + len(ev.Meta)
	if len(si.evs) < eventPage && si.evBytes < maxPendingBytes {
		return nil
	}
	return si.flushEvents(ctx)
}

func (si *sessionImport) flushMessages(ctx context.Context) error {
	if len(si.msgs) == 0 {
		return nil
	}
	if err := si.renew(ctx); err != nil {
		return err
	}
	first := si.haveMsgs + 1
	if err := si.im.dst.AppendMessages(ctx, si.token, si.msgs...); err != nil {
		return fmt.Errorf("append messages: %w", err)
	}
	if got := si.msgs[0].Position; got != first {
		return fmt.Errorf("append messages: the store put message %d at position %d", first, got)
	}
	si.haveMsgs += int64(len(si.msgs))
	si.msgs = si.msgs[:0]
	return nil
}

func (si *sessionImport) flushEvents(ctx context.Context) error {
	if len(si.evs) == 0 {
		return nil
	}
	if err := si.renew(ctx); err != nil {
		return err
	}
	first := si.haveSeq + 1
	if err := si.im.dst.AppendEvents(ctx, si.token, si.evs); err != nil {
		return fmt.Errorf("append events: %w", err)
	}
	if got := si.evs[0].Seq; got != first {
		return fmt.Errorf("append events: the store gave event %d seq %d", first, got)
	}
	si.haveSeq += int64(len(si.evs))
	clear(si.evs)
	si.evs, si.evBytes = si.evs[:0], 0
	return nil
}

// renew renews the lease once a third of it has passed.
func (si *sessionImport) renew(ctx context.Context) error {
	now := si.im.opt.Now()
	if now.Sub(si.renewed) < si.im.opt.LeaseTTL/3 {
		return nil
	}
	if err := si.im.dst.RenewLease(ctx, si.rec.ID, si.token, si.im.opt.LeaseTTL); err != nil {
		return fmt.Errorf("renew lease: %w", err)
	}
	si.renewed = now
	return nil
}

// finish checks the session's records against its session_end, writes
// what is pending and marks the session done.
func (si *sessionImport) finish(ctx context.Context) error {
	var end sessionEndRecord
	if err := si.im.lr.decode(&end); err != nil {
		return err
	}
	id := si.rec.ID
	if end.SessionID != id || end.Counts != si.d.counts || end.SHA256 != si.d.sum() {
		return si.im.lr.errorf("the records of session %s do not match their session_end: the dump was altered or damaged", id)
	}
	if si.skip {
		return nil
	}
	if err := errors.Join(si.flushMessages(ctx), si.flushEvents(ctx)); err != nil {
		return fmt.Errorf("import session %s: %w", id, err)
	}
	return si.markDone(ctx)
}

// markDone gives the session its record's fields, marked done. Its log
// must hold every event the record counts.
func (si *sessionImport) markDone(ctx context.Context) error {
	id := si.rec.ID
	cur, err := si.im.dst.GetSession(ctx, id)
	if err != nil {
		return fmt.Errorf("import session %s: %w", id, err)
	}
	if cur.LastSeq != si.rec.LastSeq {
		return fmt.Errorf("import session %s: its log ends at seq %d, the dump's at %d", id, cur.LastSeq, si.rec.LastSeq)
	}
	s := si.rec.session()
	s.Imported = &session.ImportMark{Dump: si.im.dump, Done: true}
	s.Version = cur.Version
	if err := si.im.dst.UpdateSession(ctx, s); err != nil {
		return fmt.Errorf("import session %s: mark it done: %w", id, err)
	}
	return nil
}
