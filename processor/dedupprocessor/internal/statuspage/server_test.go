package statuspage

import "testing"

// TestBreakable: a name gets break points after its separators and stays
// escaped.
func TestBreakable(t *testing.T) {
	for in, want := range map[string]string{
		"http.server.request_duration": "http.<wbr>server.<wbr>request_<wbr>duration",
		"<b>a_b</b>":                   "&lt;b&gt;a_<wbr>b&lt;/b&gt;",
		"plain":                        "plain",
		"":                             "",
	} {
		if got := string(breakable(in)); got != want {
			t.Errorf("breakable(%q) = %q, want %q", in, got, want)
		}
	}
}
