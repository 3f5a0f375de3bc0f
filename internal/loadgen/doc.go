// Package loadgen is the OTLP load generator and the counting sink that
// the load command (cmd/doubletake-load) and the gateway A/B driver
// (bench/ab) share: requests encoded before the load starts (a request is
// the template's bytes with 24 bytes of ids written per span), span ids the
// sink maps back to their sequence numbers, answer latencies in a
// histogram, and the /proc readings that turn a run into CPU per span.
//
// Traffic only goes to loopback addresses.
package loadgen
