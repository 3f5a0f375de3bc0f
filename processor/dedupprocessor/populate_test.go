package dedupprocessor

import "testing"

type fakeWindow struct {
	bytes     int
	populated int
}

func (f *fakeWindow) Populate()  { f.populated++ }
func (f *fakeWindow) Bytes() int { return f.bytes }

// TestPopulateWindowRespectsTheSoftLimit: a window is made resident at
// creation with memory_soft_limit_mib off, or when it fits under the
// limit beside what the process holds now; one that would push the
// process over the limit is left to grow as it fills.
func TestPopulateWindowRespectsTheSoftLimit(t *testing.T) {
	rss := residentBytes()
	for _, tc := range []struct {
		name     string
		bytes    int
		limitMiB int
		want     bool
	}{
		{"no limit", 64 << 20, 0, true},
		{"fits", 64 << 20, int(rss>>20) + 128, true},
		{"does not fit", 64 << 20, int(rss>>20) + 32, false},
	} {
		w := &fakeWindow{bytes: tc.bytes}
		got := populateWindow(w, tc.limitMiB)
		if got != tc.want || (w.populated == 1) != tc.want {
			t.Errorf("%s: populated %v (%d calls), want %v", tc.name, got, w.populated, tc.want)
		}
	}
}
