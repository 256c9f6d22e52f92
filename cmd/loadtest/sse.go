package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// frame is one SSE event as read off the wire. event and data belong to
// the frameReader and are valid until its next call.
type frame struct {
	id      int64
	hasID   bool
	event   []byte
	data    []byte // data lines joined with "\n"
	hasData bool
	size    int // raw bytes on the wire: every line of the frame and the blank line ending it
}

// frameReader reads SSE frames from a response body. It works on bufio's
// buffer and reuses its own, so reading a frame allocates nothing once the
// buffers have grown: the load generator must not be what limits a stream.
type frameReader struct {
	r     *bufio.Reader
	event []byte
	data  []byte
	long  []byte // a line longer than r's buffer, e.g. a whole input echoed back
}

func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 32<<10)}
}

// next reads the next frame that carries an id, an event or data into f.
// Comments (": ping") and blocks holding only a retry line are skipped
// and not counted. At the end of the body it returns io.EOF, or
// io.ErrUnexpectedEOF when the body ended inside a frame.
func (fr *frameReader) next(f *frame) error {
	*f = frame{event: fr.event[:0], data: fr.data[:0]}
	defer func() { fr.event, fr.data = f.event[:0], f.data[:0] }()
	for {
		line, n, err := fr.readLine()
		if err != nil {
			if f.size > 0 || n > 0 {
				return io.ErrUnexpectedEOF
			}
			return err
		}
		f.size += n
		if len(line) == 0 {
			if f.hasID || f.hasData || len(f.event) > 0 {
				return nil
			}
			f.size = 0 // a comment or retry block: not a frame
			continue
		}
		if err := f.field(line); err != nil {
			return err
		}
	}
}

// field applies one "name: value" line to f. Unknown fields and comments
// are ignored, as the SSE specification says.
func (f *frame) field(line []byte) error {
	name, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(name) {
	case "id":
		id, err := strconv.ParseInt(string(value), 10, 64)
		if err != nil {
			return fmt.Errorf("sse: id %q is not a seq", value)
		}
		f.id, f.hasID = id, true
	case "event":
		f.event = append(f.event[:0], value...)
	case "data":
		if f.hasData {
			f.data = append(f.data, '\n')
		}
		f.data = append(f.data, value...)
		f.hasData = true
	}
	return nil
}

// readLine returns the next line without its line ending, and how many
// bytes it took on the wire. The line is valid until the next call.
func (fr *frameReader) readLine() ([]byte, int, error) {
	line, err := fr.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		fr.long = append(fr.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = fr.r.ReadSlice('\n')
			fr.long = append(fr.long, line...)
		}
		line = fr.long
	}
	if err != nil {
		return nil, len(line), err
	}
	n := len(line)
	line = line[:n-1]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return line, n, nil
}
