package transfer

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// ImportOptions say what Import does with sessions the target has.
type ImportOptions struct {
	// Overwrite replaces a session the target has already (deleting it
	// with everything it holds) instead of refusing the import.
	Overwrite bool
	// Resume skips the sessions an earlier run of the same dump imported
	// whole, so that an import that stopped part-way can be run again.
	// A session it had begun is always continued.
	Resume bool
	// Holder names the importer in the leases it takes; LeaseTTL is
	// their length (default 30 s), renewed while a session is written.
	Holder   string
	LeaseTTL time.Duration
	Now      func() time.Time // nil: time.Now
}

// ImportSummary is what Import wrote and what it skipped.
type ImportSummary struct {
	Summary
	Skipped int // sessions already imported whole from this dump
}

// Import writes the sessions of the dump r into dst, each with every id,
// position and seq it had, and returns what it wrote.
//
// Each session is marked with the dump's id while it is written and
// marked done once all of it is in (session.ImportMark), so an import that
// stops part-way (the dump cut short, the store failing, the process
// killed) is finished by running it again with Resume: the sessions done
// are skipped and the one begun is continued after what it holds. A
// session the target has already is refused unless Overwrite is set.
//
// Runs, messages and events are written under the session's lease, so a
// kerneld sharing the target store does not run the session meanwhile.
func Import(ctx context.Context, dst Target, r io.Reader, opt ImportOptions) (ImportSummary, error) {
	if opt.LeaseTTL <= 0 {
		opt.LeaseTTL = 30 * time.Second
	}
	if opt.Holder == "" {
		opt.Holder = "kerneld-import"
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	lr := newLineReader(r)
	h, err := readHeader(lr)
	if err != nil {
		return ImportSummary{}, err
	}
	im := &importer{dst: dst, opt: opt, dump: h.Dump, lr: lr}
	return im.run(ctx)
}

// readHeader reads a dump's first line and checks that it is a dump this
// kerneld can read.
func readHeader(lr *lineReader) (headerRecord, error) {
	var h headerRecord
	kind, err := lr.next()
	if errors.Is(err, io.EOF) {
		return h, errdefs.New(errdefs.ErrInvalid, errdefs.CodeInvalidDump, "the dump is empty")
	}
	if err != nil {
		return h, err
	}
	if kind != kindHeader {
		return h, lr.errorf("a dump starts with its header record, not %q", kind)
	}
	if err := lr.decode(&h); err != nil {
		return h, err
	}
	switch {
	case h.Format != Format:
		return h, lr.errorf("format %q is not %q", h.Format, Format)
	case h.Version > FormatVersion:
		return h, lr.errorf("format version %d is newer than this kerneld reads (%d): import it with a newer kerneld", h.Version, FormatVersion)
	case h.Dump == "":
		return h, lr.errorf("the header names no dump id")
	}
	return h, nil
}

// importer is one run of Import.
type importer struct {
	dst  Target
	opt  ImportOptions
	dump string
	lr   *lineReader
}

func (im *importer) run(ctx context.Context) (ImportSummary, error) {
	var sum ImportSummary
	for {
		kind, err := im.lr.next()
		if errors.Is(err, io.EOF) {
			return sum, im.cutShort()
		}
		if err != nil {
			return sum, err
		}
		switch kind {
		case kindSession:
			c, skipped, err := im.session(ctx)
			if err != nil {
				return sum, err
			}
			if skipped {
				sum.Skipped++
			} else {
				sum.add(c)
			}
		case kindEnd:
			return sum, im.end(sum.Sessions + sum.Skipped)
		default:
			return sum, im.lr.errorf("record %q is outside any session", kind)
		}
	}
}

// cutShort is the error of a dump that ends before its end record.
func (im *importer) cutShort() error {
	return errdefs.New(errdefs.ErrInvalid, errdefs.CodeDumpCutShort,
		"the dump ends after line %d without its end record: it was cut short; import the whole dump again with --resume to finish", im.lr.n)
}

// end checks the end record against the sessions read.
func (im *importer) end(sessions int) error {
	var e endRecord
	if err := im.lr.decode(&e); err != nil {
		return err
	}
	if e.Sessions != sessions {
		return im.lr.errorf("the end record counts %d sessions, the dump holds %d", e.Sessions, sessions)
	}
	return nil
}

// session imports the session whose record was read last, through its
// session_end, and returns its counts; skipped says it was imported
// before.
func (im *importer) session(ctx context.Context) (Counts, bool, error) {
	var rec sessionRecord
	if err := im.lr.decode(&rec); err != nil {
		return Counts{}, false, err
	}
	si, err := im.begin(ctx, &rec)
	if err != nil {
		return Counts{}, false, err
	}
	defer si.release(ctx)
	if err := si.d.add(&rec); err != nil {
		return Counts{}, false, err
	}
	for {
		kind, err := im.lr.next()
		if errors.Is(err, io.EOF) {
			return Counts{}, false, im.cutShort()
		}
		if err != nil {
			return Counts{}, false, err
		}
		if kind == kindSessionEnd {
			return si.d.counts, si.skip, si.finish(ctx)
		}
		if err := si.record(ctx, kind); err != nil {
			return Counts{}, false, err
		}
	}
}

// decodeRecord decodes the line read last as a record of kind within
// session id.
func (lr *lineReader) decodeRecord(kind, id string) (any, error) {
	var rec any
	switch kind {
	case kindRun:
		rec = &runRecord{}
	case kindMemory:
		rec = &memoryRecord{}
	case kindImage:
		rec = &imageRecord{}
	case kindSchedule:
		rec = &scheduleRecord{}
	case kindMessage:
		rec = &messageRecord{}
	case kindEvent:
		rec = &eventRecord{}
	default:
		return nil, lr.errorf("record %q inside session %s", kind, id)
	}
	if err := lr.decode(rec); err != nil {
		return nil, err
	}
	if got := recordSession(rec); got != id {
		return nil, lr.errorf("a %s record of session %s inside session %s", kind, got, id)
	}
	return rec, nil
}

// recordSession returns the session a record belongs to.
func recordSession(rec any) string {
	switch r := rec.(type) {
	case *runRecord:
		return r.SessionID
	case *memoryRecord:
		return r.SessionID
	case *imageRecord:
		return r.SessionID
	case *scheduleRecord:
		return r.SessionID
	case *messageRecord:
		return r.SessionID
	case *eventRecord:
		return r.SessionID
	}
	return ""
}
