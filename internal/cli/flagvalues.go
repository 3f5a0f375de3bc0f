package cli

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/common/model"
)

// timeValue is a flag holding a time: RFC 3339 or Unix seconds.
type timeValue struct{ t *time.Time }

func (v timeValue) String() string {
	if v.t == nil || v.t.IsZero() {
		return ""
	}
	return v.t.Format(time.RFC3339)
}

func (v timeValue) Set(s string) error {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		*v.t = t
		return nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f > 0 {
		*v.t = time.Unix(0, int64(f*1e9))
		return nil
	}
	return fmt.Errorf("want RFC 3339 (2025-01-02T15:04:05Z) or Unix seconds")
}

func (timeValue) Type() string { return "time" }

// durationValue is a flag holding a Prometheus-style duration (1h, 7d, 2w).
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil {
		return ""
	}
	return model.Duration(*v.d).String()
}

func (v durationValue) Set(s string) error {
	d, err := model.ParseDuration(s)
	if err != nil {
		return err
	}
	if d <= 0 {
		return errors.New("want a positive duration")
	}
	*v.d = time.Duration(d)
	return nil
}

func (durationValue) Type() string { return "duration" }
