// Package verify is the engine of `doubletake verify`: it runs a command
// with its OTLP exports pointed at an in-process receiver
// (internal/capture), analyses what arrives (internal/analyze), decides a
// verdict, names the release behind a double export (internal/scan), and
// renders the report as text or JUnit XML (JSON is the Report type's).
//
// Its files by concern: verify.go the run from start to report;
// options.go what the caller sets and its validation; receive.go the
// receiver and the forwarder; child.go the command, its environment and
// the signals passed on to it; verdict.go the report and its verdict;
// render.go the text and JUnit renderings; release.go the scan for the
// release behind a double export. The exit status of each verdict is the
// caller's (internal/cli).
package verify // import "github.com/doubletake/doubletake/internal/verify"
