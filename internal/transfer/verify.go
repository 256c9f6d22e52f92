package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// Mismatch is a session whose contents in the store differ from the dump.
type Mismatch struct {
	SessionID string
	Problem   string
}

// VerifyReport is what Verify checked and what differed.
type VerifyReport struct {
	Summary               // what the dump holds
	Mismatches []Mismatch // in dump order
}

// Verify checks that src holds every session of the dump r as the dump
// states it: the same counts of runs, messages, memory entries, images,
// schedules and events, and the same SHA-256 of their contents (the sum
// a dump's session_end states; the session's version and import mark are
// left out of it). It reads both a session at a time. An error means the
// dump or the store could not be read; differences are in the report.
func Verify(ctx context.Context, src Source, r io.Reader) (VerifyReport, error) {
	lr := newLineReader(r)
	if _, err := readHeader(lr); err != nil {
		return VerifyReport{}, err
	}
	var rep VerifyReport
	for {
		kind, err := lr.next()
		if errors.Is(err, io.EOF) {
			return rep, errdefs.New(errdefs.ErrInvalid, errdefs.CodeDumpCutShort,
				"the dump ends after line %d without its end record: it was cut short", lr.n)
		}
		if err != nil {
			return rep, err
		}
		switch kind {
		case kindSession:
			if err := verifySession(ctx, src, lr, &rep); err != nil {
				return rep, err
			}
		case kindEnd:
			return rep, nil
		default:
			return rep, lr.errorf("record %q is outside any session", kind)
		}
	}
}

// verifySession sums the session whose record was read last, through its
// session_end, and compares the store's session with it.
func verifySession(ctx context.Context, src Source, lr *lineReader, rep *VerifyReport) error {
	var rec sessionRecord
	if err := lr.decode(&rec); err != nil {
		return err
	}
	want, err := sumDumpSession(lr, &rec)
	if err != nil {
		return err
	}
	rep.add(want.counts)
	problem, err := compareStored(ctx, src, &rec, want)
	if err != nil {
		return err
	}
	if problem != "" {
		rep.Mismatches = append(rep.Mismatches, Mismatch{SessionID: rec.ID, Problem: problem})
	}
	return nil
}

// sumDumpSession sums the dump's records of session rec and checks the
// sums against its session_end.
func sumDumpSession(lr *lineReader, rec *sessionRecord) (*digest, error) {
	d := newDigest()
	if err := d.add(rec); err != nil {
		return nil, err
	}
	for {
		kind, err := lr.next()
		if errors.Is(err, io.EOF) {
			return nil, errdefs.New(errdefs.ErrInvalid, errdefs.CodeDumpCutShort, "the dump ends inside session %s", rec.ID)
		}
		if err != nil {
			return nil, err
		}
		if kind == kindSessionEnd {
			break
		}
		r, err := lr.decodeRecord(kind, rec.ID)
		if err != nil {
			return nil, err
		}
		if err := d.add(r); err != nil {
			return nil, err
		}
	}
	var end sessionEndRecord
	if err := lr.decode(&end); err != nil {
		return nil, err
	}
	if end.Counts != d.counts || end.SHA256 != d.sum() {
		return nil, lr.errorf("the records of session %s do not match their session_end: the dump was altered or damaged", rec.ID)
	}
	return d, nil
}

// compareStored sums the store's session rec.ID and says how it differs
// from want; "" if it does not.
func compareStored(ctx context.Context, src Source, rec *sessionRecord, want *digest) (string, error) {
	cur, err := src.GetSession(ctx, rec.ID)
	if errors.Is(err, errdefs.ErrNotFound) {
		return "missing from the store", nil
	}
	if err != nil {
		return "", fmt.Errorf("verify session %s: %w", rec.ID, err)
	}
	got := newDigest()
	if err := readSession(ctx, src, cur, got.add); err != nil {
		return "", fmt.Errorf("verify session %s: %w", rec.ID, err)
	}
	var problems []string
	if cur.Imported != nil && !cur.Imported.Done {
		problems = append(problems, "its import did not finish")
	}
	problems = append(problems, countProblems(want.counts, got.counts)...)
	if len(problems) == 0 && want.sum() != got.sum() {
		problems = append(problems, "contents differ (sha256 "+want.sum()+" in the dump, "+got.sum()+" in the store)")
	}
	return strings.Join(problems, "; "), nil
}

// countProblems lists the counts that differ.
func countProblems(want, got Counts) []string {
	var out []string
	check := func(what string, w, g int64) {
		if w != g {
			out = append(out, fmt.Sprintf("%s: %d in the dump, %d in the store", what, w, g))
		}
	}
	check("runs", int64(want.Runs), int64(got.Runs))
	check("messages", int64(want.Messages), int64(got.Messages))
	check("memory entries", int64(want.Memory), int64(got.Memory))
	check("images", int64(want.Images), int64(got.Images))
	check("schedules", int64(want.Schedules), int64(got.Schedules))
	check("events", want.Events, got.Events)
	return out
}
