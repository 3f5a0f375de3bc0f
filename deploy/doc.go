// Package deploy holds no code: its tests prove the files operators deploy
// beside doubletake (Prometheus alerting rules under prometheus/, the
// OpenTelemetry Collector Builder manifest under builder/) with the real
// tools that read them.
package deploy
