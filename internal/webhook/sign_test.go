package webhook_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/webhook"
)

// TestKey_Sign checks a signature against the test vector the Standard
// Webhooks reference libraries share.
func TestKey_Sign(t *testing.T) {
	key, err := webhook.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	got := key.Sign("msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	assert.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", got)
}

func TestKey_Verify(t *testing.T) {
	key, err := webhook.ParseSecret(webhook.NewSecret())
	require.NoError(t, err)
	other, err := webhook.ParseSecret(webhook.NewSecret())
	require.NoError(t, err)
	now := time.Unix(1_900_000_000, 0)
	body := []byte(`{"type":"run.finished"}`)
	signed := func(k webhook.Key, at time.Time) http.Header {
		h := http.Header{}
		k.SetHeaders(h, "msg_1", at, body)
		return h
	}
	require.NoError(t, key.Verify(signed(key, now), body, now, 5*time.Minute))

	rotated := signed(key, now)
	rotated.Set(webhook.HeaderSignature, other.Sign("msg_1", now, body)+" "+key.Sign("msg_1", now, body))
	assert.NoError(t, key.Verify(rotated, body, now, 5*time.Minute), "any one of several signatures will do")

	for name, tt := range map[string]struct {
		h    http.Header
		body string
	}{
		"other key":       {signed(other, now), string(body)},
		"tampered body":   {signed(key, now), `{"type":"run.failed"}`},
		"too old":         {signed(key, now.Add(-6*time.Minute)), string(body)},
		"from the future": {signed(key, now.Add(6*time.Minute)), string(body)},
		"no headers":      {http.Header{}, string(body)},
	} {
		t.Run(name, func(t *testing.T) {
			assert.ErrorIs(t, key.Verify(tt.h, []byte(tt.body), now, 5*time.Minute), webhook.ErrBadSignature)
		})
	}
}

func TestParseSecret(t *testing.T) {
	for _, s := range []string{"", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not base64!", "whsec_c2hvcnQ="} {
		_, err := webhook.ParseSecret(s)
		assert.Error(t, err, "%q", s)
	}
	a, err := webhook.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	b, err := webhook.ParseSecret(webhook.NewSecret())
	require.NoError(t, err)
	assert.NotEqual(t, a.ID, b.ID, "a key's id names it")
	assert.NotContains(t, a.ID, "MfKQ9r8", "and never shows it")
}
