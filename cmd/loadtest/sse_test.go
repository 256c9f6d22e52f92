package main

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// wantFrame is a frame as the tests expect it.
type wantFrame struct {
	id    int64
	hasID bool
	event string
	data  string
	size  int
}

// readAll reads every frame of body, one byte per read so that lines
// straddle bufio's refills, and returns them with the error that ended it.
func readAll(body string) ([]wantFrame, error) {
	fr := newFrameReader(iotest.OneByteReader(strings.NewReader(body)))
	var got []wantFrame
	var f frame
	for {
		if err := fr.next(&f); err != nil {
			return got, err
		}
		got = append(got, wantFrame{f.id, f.hasID, string(f.event), string(f.data), f.size})
	}
}

func TestFrameReader(t *testing.T) {
	token := "id: 7\nevent: TEXT_MESSAGE_CONTENT\ndata: {\"delta\":\" word\"}\n\n"
	long := strings.Repeat("x", 100_000) // beyond bufio's 32 KiB buffer
	tests := []struct {
		name string
		body string
		want []wantFrame
		err  error
	}{
		{
			name: "kerneld stream: retry and pings are not frames",
			body: "retry: 2000\n\n" + token + ": ping\n\n" + "id: 8\nevent: RUN_FINISHED\ndata: {}\n\n",
			want: []wantFrame{
				{7, true, "TEXT_MESSAGE_CONTENT", `{"delta":" word"}`, len(token)},
				{8, true, "RUN_FINISHED", "{}", len("id: 8\nevent: RUN_FINISHED\ndata: {}\n\n")},
			},
			err: io.EOF,
		},
		{
			name: "CRLF, data lines joined, no space after the colon, comment inside",
			body: "id:3\r\n: note\r\ndata: a\r\ndata:b\r\n\r\n",
			want: []wantFrame{{3, true, "", "a\nb", len("id:3\r\n: note\r\ndata: a\r\ndata:b\r\n\r\n")}},
			err:  io.EOF,
		},
		{
			name: "a line longer than the buffer",
			body: "event: TEXT_MESSAGE_CONTENT\ndata: " + long + "\n\n",
			want: []wantFrame{{0, false, "TEXT_MESSAGE_CONTENT", long, len("event: TEXT_MESSAGE_CONTENT\ndata: \n\n") + len(long)}},
			err:  io.EOF,
		},
		{
			name: "cut inside a frame",
			body: token + "id: 8\nevent: TEXT_MES",
			want: []wantFrame{{7, true, "TEXT_MESSAGE_CONTENT", `{"delta":" word"}`, len(token)}},
			err:  io.ErrUnexpectedEOF,
		},
		{
			name: "cut after a complete line but before the blank one",
			body: "id: 8\n",
			err:  io.ErrUnexpectedEOF,
		},
		{
			name: "empty body",
			body: "",
			err:  io.EOF,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readAll(tt.body)
			if !errors.Is(err, tt.err) {
				t.Errorf("error = %v, want %v", err, tt.err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d frames %+v, want %d", len(got), got, len(tt.want))
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("frame %d = %+v\nwant      %+v", i, shorten(got[i]), shorten(tt.want[i]))
				}
			}
		})
	}
}

func shorten(f wantFrame) wantFrame {
	if len(f.data) > 40 {
		f.data = f.data[:40] + "…"
	}
	return f
}

func TestFrameReader_BadID(t *testing.T) {
	if _, err := readAll("id: seven\ndata: {}\n\n"); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("error = %v, want one naming the id", err)
	}
}

// TestRunStream_Observe feeds a run's frames, with a resume that repeats
// one event and skips another, and checks what is counted.
func TestRunStream_Observe(t *testing.T) {
	frames := []wantFrame{
		{1, true, "RUN_STARTED", `{}`, 10},
		{2, true, "TEXT_MESSAGE_START", `{"messageId":"u","role":"user"}`, 10},
		{3, true, "TEXT_MESSAGE_CONTENT", `{"messageId":"u","delta":"one two"}`, 10},
		{4, true, "TEXT_MESSAGE_END", `{}`, 10},
		{5, true, "TEXT_MESSAGE_START", `{"messageId":"a","role":"assistant"}`, 10},
		{6, true, "TEXT_MESSAGE_CONTENT", `{"messageId":"a","delta":"one"}`, 100},
		{6, true, "TEXT_MESSAGE_CONTENT", `{"messageId":"a","delta":"one"}`, 100},  // repeated by a resume
		{8, true, "TEXT_MESSAGE_CONTENT", `{"messageId":"a","delta":" two"}`, 102}, // 7 skipped
		{9, true, "TEXT_MESSAGE_END", `{}`, 10},
		{10, true, "RUN_FINISHED", `{}`, 10},
	}
	rs := observeAll(frames)
	if rs.tokens != 2 || rs.frames != 2 {
		t.Errorf("tokens, frames = %d, %d; want 2, 2: only assistant content counts, once", rs.tokens, rs.frames)
	}
	if rs.dups != 1 || rs.gaps != 1 {
		t.Errorf("dups, gaps = %d, %d; want 1, 1", rs.dups, rs.gaps)
	}
	if !rs.ended || rs.runError != nil {
		t.Errorf("ended = %v, runError = %s; want a finished run", rs.ended, rs.runError)
	}
}

// TestRunStream_TokensFromText counts tokens from the answer's text, so
// several in one frame, or one split over two frames, count as they are.
func TestRunStream_TokensFromText(t *testing.T) {
	frames := []wantFrame{
		{1, true, "TEXT_MESSAGE_START", `{"messageId":"a","role":"assistant"}`, 10},
		{2, true, "TEXT_MESSAGE_CONTENT", `{"messageId":"a","delta":"one two thr"}`, 10},
		{3, true, "TEXT_MESSAGE_CONTENT", `{"messageId":"a","delta":"ee\nfour\u0020five \"six\""}`, 10},
		{4, true, "TEXT_MESSAGE_END", `{}`, 10},
		{5, true, "TEXT_MESSAGE_START", `{"messageId":"b","role":"assistant"}`, 10},
		{6, true, "TEXT_MESSAGE_CONTENT", `{"messageId":"b","delta":"seven"}`, 10},
		{7, true, "TEXT_MESSAGE_END", `{}`, 10},
	}
	rs := observeAll(frames)
	if rs.tokens != 7 || rs.frames != 3 {
		t.Errorf("tokens, frames = %d, %d; want 7, 3", rs.tokens, rs.frames)
	}
}

// observeAll returns what a run's stream observed of frames.
func observeAll(frames []wantFrame) *runStream {
	rs := &runStream{}
	for _, w := range frames {
		rs.observe(&frame{id: w.id, hasID: w.hasID, event: []byte(w.event), data: []byte(w.data), hasData: true, size: w.size})
	}
	return rs
}
