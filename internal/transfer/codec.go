package transfer

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// marshaler encodes records as dump lines. It does not escape HTML, so
// that embedded JSON keeps its bytes exactly (encoding/json would rewrite
// <, > and & inside a json.RawMessage).
type marshaler struct {
	buf bytes.Buffer
	enc *json.Encoder
}

func newMarshaler() *marshaler {
	m := &marshaler{}
	m.enc = json.NewEncoder(&m.buf)
	m.enc.SetEscapeHTML(false)
	return m
}

// line returns rec's line, newline included. It is valid until the next
// call.
func (m *marshaler) line(rec any) ([]byte, error) {
	m.buf.Reset()
	if err := m.enc.Encode(rec); err != nil {
		return nil, fmt.Errorf("encode %T: %w", rec, err)
	}
	return m.buf.Bytes(), nil
}

// digest sums one session's records as the dump states them: the same
// contents give the same sum whichever store they were read from. The
// session record is summed without its version, which an import moves on.
type digest struct {
	m      *marshaler
	h      hash.Hash
	counts Counts
}

func newDigest() *digest { return &digest{m: newMarshaler(), h: sha256.New()} }

// add sums rec, one of the record types, and counts it.
func (d *digest) add(rec any) error {
	switch r := rec.(type) {
	case *sessionRecord:
		c := *r
		c.Version = 0
		rec = &c
	case *runRecord:
		d.counts.Runs++
	case *messageRecord:
		d.counts.Messages++
	case *memoryRecord:
		d.counts.Memory++
	case *imageRecord:
		d.counts.Images++
	case *scheduleRecord:
		d.counts.Schedules++
	case *eventRecord:
		d.counts.Events++
	}
	line, err := d.m.line(rec)
	if err != nil {
		return err
	}
	d.h.Write(line)
	return nil
}

// sum returns the hex SHA-256 of what was added.
func (d *digest) sum() string { return hex.EncodeToString(d.h.Sum(nil)) }

// lineReader reads a dump line by line, counting lines for errors.
type lineReader struct {
	r    *bufio.Reader
	line []byte
	n    int // number of the line read last, from 1
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// maxLine bounds a dump's line: far above any record kerneld writes (an
// image is at most a few MiB), it keeps a file that is not a dump from
// being read into memory whole. Tests lower it.
var maxLine = 64 << 20

// next reads the next line and returns its kind; io.EOF once none is
// left. A last line without its newline was cut short: it is an error.
func (lr *lineReader) next() (string, error) {
	line, err := lr.readLine()
	if errors.Is(err, io.EOF) {
		if len(line) == 0 {
			return "", io.EOF
		}
		lr.n++
		return "", lr.errorf("line is cut short (no newline at the end of the dump)")
	}
	if err != nil {
		return "", fmt.Errorf("read dump: %w", err)
	}
	lr.n++
	lr.line = line
	var k kindOnly
	if err := json.Unmarshal(line, &k); err != nil {
		return "", lr.errorf("not a JSON record: %v", err)
	}
	return k.Kind, nil
}

// readLine reads up to and including the next newline, at most maxLine
// bytes of it.
func (lr *lineReader) readLine() ([]byte, error) {
	var line []byte
	for {
		part, err := lr.r.ReadSlice('\n')
		if len(line)+len(part) > maxLine {
			lr.n++
			return nil, lr.errorf("line is longer than %d bytes: not a kerneld dump", maxLine)
		}
		line = append(line, part...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}

// decode decodes the line read last into rec.
func (lr *lineReader) decode(rec any) error {
	if err := json.Unmarshal(lr.line, rec); err != nil {
		return lr.errorf("decode record: %v", err)
	}
	return nil
}

// errorf returns an ErrInvalid error naming the line read last.
func (lr *lineReader) errorf(format string, args ...any) error {
	return errdefs.New(errdefs.ErrInvalid, errdefs.CodeInvalidDump, "dump line %d: %s", lr.n, fmt.Sprintf(format, args...))
}
