package deploy

import (
	"os"
	"os/exec"
	"testing"
)

// requireTool returns the path of an executable the test needs. A missing
// one fails the test under CI=true and skips it, saying why, elsewhere.
func requireTool(t *testing.T, name, from string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (%s) is required under CI=true: %v", name, from, err)
	}
	t.Skipf("%s (%s) not available: %v (CI=true makes this a failure)", name, from, err)
	return ""
}

// TestAlertRules checks the rules and runs their unit tests
// (prometheus/doubletake-rules_test.yaml: every alert firing on its
// condition and silent on a near miss) with promtool.
func TestAlertRules(t *testing.T) {
	promtool := requireTool(t, "promtool", "Debian package prometheus")
	for _, args := range [][]string{
		{"check", "rules", "doubletake-rules.yaml"},
		{"test", "rules", "doubletake-rules_test.yaml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "prometheus"
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}
