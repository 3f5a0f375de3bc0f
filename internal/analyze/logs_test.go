package analyze

import (
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// logs builds one request; a body of "" makes an untimed record.
func logs(service string, bodies ...string) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", service)
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("app")
	for i, b := range bodies {
		lr := sl.LogRecords().AppendEmpty()
		if b == "" {
			lr.Body().SetStr("no time")
			continue
		}
		lr.SetTimestamp(pcommon.Timestamp(t0.UnixNano() + int64(i)))
		lr.SetSeverityNumber(plog.SeverityNumberInfo)
		lr.Body().SetStr(b)
		lr.Attributes().PutStr("k", "v")
	}
	return ld
}

func TestLogsDuplicates(t *testing.T) {
	a := New(Options{})
	a.AddLogs(at(1, 0, "p1"), logs("svc", "started", "ready", ""))
	a.AddLogs(at(2, 40*time.Millisecond, "p2"), logs("svc", "started", "ready", ""))
	a.AddLogs(at(3, 50*time.Millisecond, "p1"), logs("svc", "x", "y"))
	r := a.Report()
	d := Delays{Min: Millis(40 * time.Millisecond), Median: Millis(40 * time.Millisecond), Max: Millis(40 * time.Millisecond)}
	want := LogReport{Received: 8, Unique: 6, Duplicated: 2, ExtraCopies: 2, Untimed: 2, Groups: []LogGroup{{
		Service: "svc", Scope: "app", Received: 8, Unique: 6, Duplicated: 2, ExtraCopies: 2,
		Copies: []CopyCount{{2, 2}}, Delays: &d,
		Examples: []LogExample{
			{Body: "started", Copies: 2, Delays: []Millis{Millis(40 * time.Millisecond)}},
			{Body: "ready", Copies: 2, Delays: []Millis{Millis(40 * time.Millisecond)}},
		},
	}}}
	if !reflect.DeepEqual(r.Logs, want) {
		t.Fatalf("logs:\n got %+v\nwant %+v", r.Logs, want)
	}
	wantF := []Finding{{
		Signal: SignalLogs, Diagnosis: DiagTwoExporters, Subject: `service "svc"`, Items: 2,
		Line: `logs of service "svc": 2 extra copies of records from scope app, identical, 40ms after the first, on 2 connections: two exporters in one process (identical copies from one resource within the 5s export interval)`,
	}}
	if !reflect.DeepEqual(r.Findings, wantF) {
		t.Fatalf("findings:\n got %+v\nwant %+v", r.Findings, wantF)
	}
	if got, want := r.DuplicateRatio(), 2.0/8; got != want {
		t.Errorf("DuplicateRatio = %v, want %v", got, want)
	}
}

func TestLogsDifferentContentIsNotADuplicate(t *testing.T) {
	a := New(Options{})
	a.AddLogs(at(1, 0, "p1"), logs("svc", "a"))
	b := logs("svc", "a")
	b.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Attributes().PutStr("k", "other")
	a.AddLogs(at(2, 0, "p1"), b)
	a.AddLogs(at(3, 0, "p1"), logs("svc2", "a"))
	r := a.Report()
	if !r.Clean() || r.Logs.Unique != 3 {
		t.Fatalf("distinct records reported as duplicates: %+v", r.Logs)
	}
}
