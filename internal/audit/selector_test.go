package audit

import (
	"strings"
	"testing"
)

func TestSplitSelector(t *testing.T) {
	cases := []struct {
		in             string
		name, matchers string
		err            string
	}{
		{in: "up", name: "up"},
		{in: `  http_requests_total{code="500"} `, name: "http_requests_total", matchers: `code="500"`},
		{in: `{__name__=~"audit_.*"}`, matchers: `__name__=~"audit_.*"`},
		{in: `{job="a}b", path='x{y}'}`, matchers: `job="a}b", path='x{y}'`},
		{in: `{job="say \"}\""}`, matchers: `job="say \"}\""`},
		{in: "{a=`b}`}", matchers: "a=`b}`"},
		{in: `ns:metric:rate5m{a="b",}`, name: "ns:metric:rate5m", matchers: `a="b",`},
		{in: "", err: "empty selector"},
		{in: "{}", err: "no matchers"},
		{in: `up[5m]`, err: `unexpected "[" after the metric name`},
		{in: `up{a="b"}[5m]`, err: `unexpected "[5m]" after }`},
		{in: `rate(up[5m])`, err: `unexpected "("`},
		{in: `-up`, err: "want a metric name"},
		{in: `{a="b"`, err: "missing }"},
		{in: `{a="b}`, err: "unterminated string"},
		{in: `{a={b}}`, err: "unexpected { inside"},
		{in: `9lives`, err: "want a metric name"},
		{in: `up offset 5m`, err: `unexpected "o"`},
	}
	for _, c := range cases {
		name, m, err := splitSelector(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("splitSelector(%q) error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || name != c.name || m != c.matchers {
			t.Errorf("splitSelector(%q) = %q, %q, %v; want %q, %q", c.in, name, m, err, c.name, c.matchers)
		}
	}
}

func TestWithName(t *testing.T) {
	cases := []struct {
		sel, name, want string
		ok              bool
	}{
		{`{job="a"}`, "x_total", `{__name__="x_total", job="a"}`, true},
		{`x_total`, "x_total", `{__name__="x_total"}`, true},
		{`x_total{job="a"}`, "x_total", `{__name__="x_total", job="a"}`, true},
		{`y_total{job="a"}`, "x_total", "", false},
		{`{__name__=~"x.*"}`, `we"ird`, `{__name__="we\"ird", __name__=~"x.*"}`, true},
	}
	for _, c := range cases {
		got, ok, err := withName(c.sel, c.name)
		if err != nil || ok != c.ok || got != c.want {
			t.Errorf("withName(%q, %q) = %q, %v, %v; want %q, %v", c.sel, c.name, got, ok, err, c.want, c.ok)
		}
	}
}

// FuzzSplitSelector: any input either fails or splits into a name and
// matchers that, narrowed to that name and split again, come back intact.
func FuzzSplitSelector(f *testing.F) {
	for _, s := range []string{"up", `x{a="b"}`, `{a=~"x|y", b!="}"}`, "{a=`{`}", `{"utf8.name"}`, `x{a="\\"}`, "{", `{a="`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sel string) {
		name, m, err := splitSelector(sel)
		if err != nil {
			return
		}
		if name == "" && m == "" {
			t.Fatalf("%q: no name and no matchers without an error", sel)
		}
		n := name
		if n == "" {
			n = "x"
		}
		narrowed, ok, err := withName(sel, n)
		if err != nil || !ok {
			t.Fatalf("withName(%q, %q): %v %v", sel, n, ok, err)
		}
		name2, m2, err := splitSelector(narrowed)
		if err != nil {
			t.Fatalf("narrowed %q does not split: %v", narrowed, err)
		}
		if name2 != "" || !strings.HasPrefix(m2, `__name__=`) || (m != "" && !strings.HasSuffix(m2, ", "+m)) {
			t.Fatalf("narrowed %q split into %q, %q; original matchers %q", narrowed, name2, m2, m)
		}
	})
}
