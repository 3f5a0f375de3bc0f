package e2e

import (
	"bytes"
	"errors"
	osexec "os/exec"
	"testing"
)

type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs the doubletake binary to completion.
func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	cmd := osexec.Command(binary, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *osexec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("running doubletake: %v", err)
	}
	return r
}
