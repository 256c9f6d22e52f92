package client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// maxFrame bounds one SSE frame. kerneld's frames are one JSON line each;
// a MESSAGES_SNAPSHOT of a long conversation is the largest.
const maxFrame = 64 << 20

// frame is one dispatched Server-Sent Event.
type frame struct {
	id    []byte // nil when the frame had no id line
	event []byte
	data  []byte
}

// frameReader splits a text/event-stream body into frames. Unlike a
// reader that returns whatever precedes EOF, it dispatches a frame only at
// the blank line that ends it (as the SSE specification says): a
// connection cut mid-frame yields io.ErrUnexpectedEOF, never half an event
// whose id would then be skipped on resume.
type frameReader struct {
	r    *bufio.Reader
	line []byte // scratch for lines longer than the buffer
	data bytes.Buffer
}

func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 32<<10)}
}

// next returns the next frame; io.EOF when the body ended between frames.
func (fr *frameReader) next() (frame, error) {
	var f frame
	fr.data.Reset()
	hasData, started := false, false
	for {
		line, err := fr.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && started {
				err = io.ErrUnexpectedEOF
			}
			return frame{}, err
		}
		if len(line) == 0 { // the blank line: dispatch
			if !hasData && f.id == nil {
				started = false
				continue // only comments or a retry line
			}
			f.data = fr.data.Bytes()
			return f, nil
		}
		started = true
		name, value := splitField(line)
		switch string(name) {
		case "id":
			f.id = append([]byte{}, value...)
		case "event":
			f.event = append([]byte{}, value...)
		case "data":
			if hasData {
				fr.data.WriteByte('\n')
			}
			fr.data.Write(value)
			hasData = true
		}
		// comments (":...") and retry lines are ignored
	}
}

// readLine returns the next line without its line ending. The slice is
// valid until the next call.
func (fr *frameReader) readLine() ([]byte, error) {
	line, err := fr.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		fr.line = append(fr.line[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(fr.line) > maxFrame {
				return nil, fmt.Errorf("event stream: a line is longer than %d bytes", maxFrame)
			}
			line, err = fr.r.ReadSlice('\n')
			fr.line = append(fr.line, line...)
		}
		line = fr.line
	}
	if err != nil {
		return nil, err // a line without its newline is incomplete
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// splitField splits "name: value" (one optional space after the colon).
func splitField(line []byte) (name, value []byte) {
	i := bytes.IndexByte(line, ':')
	if i < 0 {
		return line, nil
	}
	value = line[i+1:]
	if len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	return line[:i], value
}
