package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestDeploy_ComposeConfig checks deploy/compose.yaml and its Postgres
// variant the way Docker reads them, when the docker client and its
// compose plugin are here.
func TestDeploy_ComposeConfig(t *testing.T) {
	if err := exec.Command("docker", "compose", "version").Run(); err != nil {
		t.Skipf("skip: no docker compose here (%v)", err)
	}
	for file, wants := range map[string][]string{
		"compose.yaml":          {"appendonly", "KERNELD_REDIS_URL"},
		"compose.postgres.yaml": {"pg_isready", "KERNELD_POSTGRES_URL"},
	} {
		t.Run(file, func(t *testing.T) {
			cmd := exec.Command("docker", "compose", "-f", "../../deploy/"+file, "config")
			cmd.Env = append(os.Environ(), "KERNELD_API_KEYS=test-key")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("docker compose config: %v\n%s", err, out)
			}
			for _, want := range append([]string{"kerneld-1", "kerneld-2", "kerneld-3"}, wants...) {
				if !strings.Contains(string(out), want) {
					t.Errorf("the resolved compose file lacks %q", want)
				}
			}
		})
	}
}

// TestDeploy_ClusterScript checks that make cluster's script parses.
func TestDeploy_ClusterScript(t *testing.T) {
	if out, err := exec.Command("bash", "-n", "../../deploy/cluster.sh").CombinedOutput(); err != nil {
		t.Fatalf("bash -n deploy/cluster.sh: %v\n%s", err, out)
	}
}
