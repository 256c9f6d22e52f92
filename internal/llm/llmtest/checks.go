package llmtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/llm"
)

// Adapter tells the shared checks how to reach one provider's client and
// what a few of its replies look like, so that the checks every network
// provider must pass are written once.
type Adapter struct {
	// Name starts every error the provider returns, e.g. "openai".
	Name string
	// APIKey is the key Dial configures; no error may show it.
	APIKey string
	// Dial builds a client for s with extra model options.
	Dial func(tb testing.TB, s *Server, opts map[string]any) llm.Provider
	// OK is a complete, successful stream whose text is "Hello".
	OK Reply
	// Slow streams tokens until the client leaves, then closes closed
	// (see Trickle).
	Slow func(closed chan<- struct{}) Reply
}

// closeWait bounds how long a check waits for the server to see the
// client hang up.
const closeWait = 2 * time.Second

// Failure is a call whose attempts fail, or fail and then recover: what
// the server replies and what the caller should get.
type Failure struct {
	Name         string
	Replies      []Reply
	Opts         map[string]any // extra model options
	WantRequests int
	WantText     string
	WantErr      string // "" for success
	WantRetry    bool   // the error is retryable (what the kernel would see after retries)
}

// CheckFailures runs each case, in parallel, against a fresh server: the
// client makes the requests the case expects and emits text once however
// often it retries. A failure's message is the expected one, never shows
// the key, says whether a retry could help and matches
// errdefs.ErrUpstream.
func (a Adapter) CheckFailures(t *testing.T, cases []Failure) {
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			a.checkFailure(t, tc)
		})
	}
}

// checkFailure runs one case of CheckFailures.
func (a Adapter) checkFailure(t *testing.T, tc Failure) {
	s := NewServer(t, tc.Replies...)
	got, err := Collect(t, a.Dial(t, s, tc.Opts), Hello)
	assert.Len(t, s.Requests(), tc.WantRequests, "requests")
	assert.Equal(t, tc.WantText, got.Text, "text is emitted once, never repeated")
	if tc.WantErr == "" {
		require.NoError(t, err)
		return
	}
	require.EqualError(t, err, tc.WantErr)
	assert.NotContains(t, err.Error(), a.APIKey)
	assert.Equal(t, tc.WantRetry, llm.Retryable(err))
	assert.ErrorIs(t, err, errdefs.ErrUpstream)
}

// CheckRetryAfter checks that a call first answered limited, a 429 that
// asks for a wait of want, waits as asked (and not much longer) before it
// retries and gets OK.
func (a Adapter) CheckRetryAfter(t *testing.T, limited Reply, want time.Duration) {
	t.Helper()
	s := NewServer(t, limited, a.OK)
	got, err := Collect(t, a.Dial(t, s, nil), Hello)
	require.NoError(t, err)
	assert.Equal(t, "Hello", got.Text)
	reqs := s.Requests()
	require.Len(t, reqs, 2)
	waited := reqs[1].At.Sub(reqs[0].At)
	assert.GreaterOrEqual(t, waited, want-50*time.Millisecond, "waited as asked")
	assert.Less(t, waited, want+time.Second, "and not much longer")
}

// CheckCancel checks that cancelling the call's context stops the stream
// at once, without a retry, and that the server sees the connection close.
func (a Adapter) CheckCancel(t *testing.T) {
	t.Helper()
	closed := make(chan struct{})
	s := NewServer(t, a.Slow(closed))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	tokens := 0
	start := make(chan time.Time, 1)
	err := a.Dial(t, s, nil).Stream(ctx, Hello, func(llm.Chunk) error {
		if tokens++; tokens == 2 {
			start <- time.Now()
			cancel()
		}
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.Less(t, time.Since(<-start), 500*time.Millisecond, "Stream returns promptly")
	waitClosed(t, closed)
	assert.Len(t, s.Requests(), 1)
}

// CheckEmitError checks that when emit fails, Stream returns its error
// unchanged, does not retry, and closes the connection.
func (a Adapter) CheckEmitError(t *testing.T) {
	t.Helper()
	closed := make(chan struct{})
	s := NewServer(t, a.Slow(closed))
	stop := errors.New("subscriber gone")
	err := a.Dial(t, s, nil).Stream(t.Context(), Hello, func(llm.Chunk) error { return stop })
	require.Same(t, stop, err)
	waitClosed(t, closed)
	assert.Len(t, s.Requests(), 1)
}

// waitClosed fails t unless closed is closed soon.
func waitClosed(t *testing.T, closed <-chan struct{}) {
	t.Helper()
	select {
	case <-closed:
	case <-time.After(closeWait):
		t.Fatal("the server did not see the connection close")
	}
}

// CheckTimeout checks that an attempt that gets no response within the
// timeout option is abandoned and retried, and that the call then fails
// saying so.
func (a Adapter) CheckTimeout(t *testing.T) {
	t.Helper()
	s := NewServer(t, hang)
	start := time.Now()
	_, err := Collect(t, a.Dial(t, s, map[string]any{"timeout": "200ms", "max_retries": 1}), Hello)
	require.EqualError(t, err, a.Name+": no complete response within 200ms")
	assert.Len(t, s.Requests(), 2)
	assert.Less(t, time.Since(start), 3*time.Second)
}

// StreamCase is a stream the API may send and the response it stands for.
type StreamCase struct {
	Name  string
	Reply Reply
	Want  Result // its Chunks are not compared
}

// CheckStreams serves each case's reply to a single request and checks
// that the client puts it back together as the case wants. When the case
// wants usage, it must come in the last chunk.
func (a Adapter) CheckStreams(t *testing.T, cases []StreamCase) {
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) { a.checkStream(t, tc.Reply, tc.Want) })
	}
}

// checkStream runs one case of CheckStreams.
func (a Adapter) checkStream(t *testing.T, reply Reply, want Result) {
	s := NewServer(t, reply)
	got, err := Collect(t, a.Dial(t, s, nil), Hello)
	require.NoError(t, err)
	assert.Equal(t, want.Text, got.Text)
	assert.Equal(t, want.Reasoning, got.Reasoning)
	assert.Equal(t, want.Calls, got.Calls)
	require.Equal(t, want.Usage, got.Usage)
	if want.Usage != nil {
		assert.NotNil(t, got.Chunks[len(got.Chunks)-1].Usage, "usage comes last")
	}
	assert.Len(t, s.Requests(), 1)
}

// CheckToolCallPieces serves reply and checks the tool-call pieces the
// client emits, in order: the kernel streams each one as it arrives.
func (a Adapter) CheckToolCallPieces(t *testing.T, reply Reply, want []llm.ToolCallDelta) {
	t.Helper()
	got, err := Collect(t, a.Dial(t, NewServer(t, reply), nil), Hello)
	require.NoError(t, err)
	assert.Equal(t, want, got.ToolCallPieces())
}

// ConfigCase is a model block and what building a provider from it gives.
type ConfigCase struct {
	Name     string
	Config   llm.ModelConfig
	WantErr  string // "" for success
	WantKind error  // the errdefs kind of the error
	WantCode string // the errdefs code of the error; "" for none
}

// CheckConfigs builds a provider with factory from each case's model
// block. A good block gives a provider; a wrong one gives the expected
// error, and only a missing key may be errdefs.ErrUnavailable, which lists
// the agent as unavailable: any other mistake in the file must fail
// startup.
func CheckConfigs(t *testing.T, factory llm.Factory, cases []ConfigCase) {
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			p, err := factory(tc.Config)
			if tc.WantErr == "" {
				require.NoError(t, err)
				assert.NotNil(t, p)
				return
			}
			require.EqualError(t, err, tc.WantErr)
			assert.ErrorIs(t, err, tc.WantKind)
			assert.Equal(t, tc.WantCode, string(errdefs.CodeOf(err)))
			if !errors.Is(tc.WantKind, errdefs.ErrUnavailable) {
				assert.NotErrorIs(t, err, errdefs.ErrUnavailable, "a wrong file must fail startup")
			}
		})
	}
}
