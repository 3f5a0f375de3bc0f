package capture

import (
	"strings"
	"testing"
)

func TestParseTargetNeverQuotesThePassword(t *testing.T) {
	for _, raw := range []string{
		"http://u:s3cret@collector:4317",
		"http://u:s3cret@collector:bad port",
		"ftp://u:s3cret@collector:4317",
		"http://u:s3cret@collector:4317/path",
		"http://u:s3cret@%zz:4317",
	} {
		_, err := ParseTarget(raw, "grpc")
		if err == nil {
			t.Fatalf("ParseTarget(%q) accepted credentials", raw)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ParseTarget(%q): error shows the password: %v", raw, err)
		}
	}
}
