package audit

import (
	"errors"
	"fmt"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// Errors a caller maps to exit codes and advice. Backend failures are
// *StatusError (401, 403) and *UnreachableError as well.
var (
	// ErrNoData: the query ran and matched nothing: nothing was audited.
	ErrNoData = errors.New("nothing to audit")
	// ErrBadQuery: the backend refused a selector or parameter as invalid.
	ErrBadQuery = errors.New("the backend refused the query")
	// ErrMalformed: an answer could not be decoded.
	ErrMalformed = errors.New("malformed response")
)

// wrapProm turns an error of client_golang's API into one of ours.
func wrapProm(what string, err error) error {
	var se *StatusError
	var ue *UnreachableError
	if errors.As(err, &se) || errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", what, err)
	}
	var pe *promv1.Error
	if errors.As(err, &pe) {
		switch pe.Type {
		case promv1.ErrBadData:
			return fmt.Errorf("%s: %w: %s", what, ErrBadQuery, pe.Msg)
		case promv1.ErrBadResponse:
			return fmt.Errorf("%s: %w: %s", what, ErrMalformed, pe.Msg)
		default:
			msg := pe.Msg
			if d := oneLine(pe.Detail); d != "" {
				msg += ": " + d
			}
			return fmt.Errorf("%s: %s", what, msg)
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// fatal reports whether err stops a whole audit rather than one series.
func fatal(err error) bool {
	var se *StatusError
	var ue *UnreachableError
	return errors.As(err, &se) || errors.As(err, &ue) || errors.Is(err, ErrBadQuery)
}
