package verify

import (
	"context"
	"os"
)

// Run receives OTLP while argv runs (or, without argv, until a signal,
// the end of ctx or o.Duration), then judges what arrived. sigs carries
// the SIGINT and SIGTERM this process receives (nil: none): they are
// passed on to the command (see waitPassingSignals) and end the receiving
// without one.
//
// The report's verdict is decided; its ExitCode is left to the caller.
// When the command could not be started, Run returns a report with the
// verdict CommandNotStarted and a *NotStartedError. Any other error means
// there is no report: the options do not validate, or the receiver or the
// forwarder could not be set up.
func Run(ctx context.Context, s Streams, sigs <-chan os.Signal, o Options, argv []string) (*Report, error) {
	if err := o.Validate(argv); err != nil {
		return nil, err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	recv, err := startReceiver(o)
	if err != nil {
		return nil, err
	}

	rep := newReport(recv.srv.Endpoint(), o)
	var startErr error
	if len(argv) > 0 {
		rep.Command, startErr = runChild(s, argv, recv.srv, sigs, o)
	} else {
		rep.ListenedFor = receiveUntil(ctx, s, recv.srv.Endpoint(), sigs, o.Duration)
	}
	rep.Forward = recv.stop(s, o.Forward)
	rep.judge(recv.report(), o)
	if startErr != nil {
		// CMD never ran: the report says so.
		rep.Verdict, rep.VerdictReason = CommandNotStarted, startErr.Error()
		return rep, startErr
	}
	if len(argv) > 0 && !o.Scan.Disabled && doubleExport(rep.Report) {
		// Only after a double export: a clean run costs nothing. The
		// verdict is decided; the scan only adds to the diagnosis.
		rep.ReleaseScan = scanRelease(ctx, o.Scan, argv)
	}
	return rep, nil
}
