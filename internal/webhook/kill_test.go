package webhook_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/store/sqlite"
	"github.com/kerneld/kerneld/internal/webhook"
	"github.com/kerneld/kerneld/internal/webhook/webhooktest"
)

// The child process of TestOutbox_SurvivesKill9 reads these.
const (
	childEnv       = "KERNELD_WEBHOOK_TEST_CHILD_DIR"
	childURLEnv    = "KERNELD_WEBHOOK_TEST_CHILD_URL"
	childSecretEnv = "KERNELD_WEBHOOK_TEST_CHILD_SECRET"
	killDeliveries = 5
	childClaimTTL  = 300 * time.Millisecond
)

// writeAndWait is the child: it writes deliveries to the outbox in dir,
// claims two of them as a dispatcher about to post them would, says so,
// and waits to be killed.
func writeAndWait(dir, url string) int {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(dir, "kerneld.db")})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	tg, err := webhook.NewTargets(webhook.TargetsConfig{Secret: os.Getenv(childSecretEnv),
		Routes: []webhook.Route{{Endpoint: webhook.Endpoint{URL: url, Events: []string{"*"}}}}})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	var ds []webhook.Delivery
	for i := range killDeliveries {
		d, _ := tg.Deliveries(webhook.Announcement{Type: webhook.RunFinished, Key: fmt.Sprint(i), Tenant: "acme", SessionID: "s", Time: time.Now()})
		ds = append(ds, d...)
	}
	if err := st.AddDeliveries(ctx, ds...); err != nil {
		fmt.Println("error", err)
		return 1
	}
	if _, err := st.ClaimDeliveries(ctx, "child", time.Now(), childClaimTTL, 2); err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("written")
	select {} // until SIGKILL
}

// TestOutbox_SurvivesKill9 kills -9 a process that wrote deliveries to the
// SQLite outbox, two of them claimed, before any was sent; a dispatcher
// started on the same file afterwards delivers each exactly once, the
// claimed ones once their claim expires.
func TestOutbox_SurvivesKill9(t *testing.T) {
	dir, secret := t.TempDir(), webhook.NewSecret()
	rcv := webhooktest.NewReceiver(t, secret)
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir, childURLEnv+"="+rcv.URL, childSecretEnv+"="+secret)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "written", strings.TrimSpace(line))
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait() // killed, as intended

	st, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(dir, "kerneld.db")})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, st.Close()) })
	tg := mustTargets(t, webhook.TargetsConfig{Secret: secret})
	f := &fixture{rcv: rcv, targets: tg, outbox: st}
	f.dispatcher(t, webhook.DispatcherOptions{})
	list, err := st.ListDeliveries(t.Context(), webhook.Query{Tenant: "acme"})
	require.NoError(t, err)
	require.Len(t, list, killDeliveries, "every acknowledged delivery survived")
	for _, d := range list {
		waitState(t, st, d.ID, webhook.StateDelivered)
	}
	counts, bad := rcv.Counts()
	assert.Len(t, counts, killDeliveries)
	for id, n := range counts {
		assert.Equal(t, 1, n, "delivery %s", id)
	}
	assert.Zero(t, bad)
}
