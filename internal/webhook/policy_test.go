package webhook_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/dns/dnsmessage"

	"github.com/kerneld/kerneld/internal/webhook"
)

func TestPolicy_CheckURL(t *testing.T) {
	var p webhook.Policy
	for _, ok := range []string{
		"https://hooks.example.com/kerneld", "https://hooks.example.com:8443/a?b=c",
		"http://localhost:9000/hook", "http://127.0.0.1:9000/hook", "http://[::1]:9000/hook", "https://10.1.2.3/hook",
	} {
		assert.NoError(t, p.CheckURL(ok), ok)
	}
	for _, bad := range []string{
		"", "hooks.example.com/kerneld", "ftp://hooks.example.com/", "http://hooks.example.com/kerneld",
		"https://user:pass@hooks.example.com/", "https://hooks.example.com/#frag", "https:///path",
		"https://169.254.169.254/latest/meta-data/", "https://[fe80::1]/hook", "https://[fd00:ec2::254]/",
		"https://100.100.100.200/", "https://0.0.0.0/", "https://[::ffff:169.254.169.254]/",
	} {
		assert.Error(t, p.CheckURL(bad), bad)
	}
	allowed := webhook.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("169.254.10.0/24")}}
	assert.NoError(t, allowed.CheckURL("https://169.254.10.7/hook"), "allow_networks lifts the block")
	assert.Error(t, allowed.CheckURL("https://169.254.169.254/"), "only for what it lists")
	denied := webhook.Policy{Deny: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	assert.ErrorIs(t, denied.CheckURL("https://10.1.2.3/hook"), webhook.ErrAddressRefused)
}

// TestPolicy_Client_RefusesLinkLocal dials link-local addresses through
// the policy's client: the dialer refuses them before connecting, so no
// packet leaves.
func TestPolicy_Client_RefusesLinkLocal(t *testing.T) {
	client := webhook.Policy{}.Client(2 * time.Second)
	for _, url := range []string{"http://169.254.169.254/latest/meta-data/", "http://[fe80::1]/", "http://0.0.0.0:1/"} {
		req, err := http.NewRequestWithContext(t.Context(), "GET", url, nil)
		require.NoError(t, err)
		_, err = client.Do(req)
		assert.ErrorIs(t, err, webhook.ErrAddressRefused, url)
	}
}

// TestPolicy_Client_ChecksWhatDNSAnswers resolves a host name through a
// DNS server that answers with the metadata address: the URL passes
// CheckURL (it names no address), and the dialer still refuses it.
func TestPolicy_Client_ChecksWhatDNSAnswers(t *testing.T) {
	resolver := fakeDNS(t, map[string][4]byte{"metadata.kerneld.test.": {169, 254, 169, 254}, "loop.kerneld.test.": {127, 0, 0, 1}})
	p := webhook.Policy{Resolver: resolver}
	require.NoError(t, p.CheckURL("https://metadata.kerneld.test/latest/meta-data/"))

	client := p.Client(2 * time.Second)
	req, err := http.NewRequestWithContext(t.Context(), "GET", "http://metadata.kerneld.test/latest/meta-data/", nil)
	require.NoError(t, err)
	_, err = client.Do(req)
	assert.ErrorIs(t, err, webhook.ErrAddressRefused)

	// The same resolver's loopback answer is dialled: it is the check that refuses, not the resolver.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	req, err = http.NewRequestWithContext(t.Context(), "GET", "http://loop.kerneld.test:"+port+"/", nil)
	require.NoError(t, err)
	res, err := client.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusNoContent, res.StatusCode)
}

// TestPolicy_Client_NoRedirects checks that a receiver cannot send the
// request on elsewhere with a redirect.
func TestPolicy_Client_NoRedirects(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	req, err := http.NewRequestWithContext(t.Context(), "POST", srv.URL, nil)
	require.NoError(t, err)
	res, err := webhook.Policy{}.Client(2 * time.Second).Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusTemporaryRedirect, res.StatusCode, "the redirect is the answer, not followed")
}

// fakeDNS serves A records for names on a loopback UDP port, and returns a
// resolver that asks it.
func fakeDNS(t *testing.T, a map[string][4]byte) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() { pc.Close(); wg.Wait() })
	wg.Go(func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if msg := dnsAnswer(buf[:n], a); msg != nil {
				_, _ = pc.WriteTo(msg, from)
			}
		}
	})
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
}

// dnsAnswer answers one query: an A record when a has the name, no
// records otherwise.
func dnsAnswer(query []byte, a map[string][4]byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
	_ = b.StartQuestions()
	_ = b.Question(q)
	_ = b.StartAnswers()
	if ip, ok := a[q.Name.String()]; ok && q.Type == dnsmessage.TypeA {
		_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.AResource{A: ip})
	}
	msg, err := b.Finish()
	if err != nil {
		return nil
	}
	return msg
}
