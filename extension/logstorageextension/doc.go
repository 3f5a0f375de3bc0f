//go:generate ../../scripts/generate.sh

// Package logstorageextension is a collector storage extension made for
// what the collector stores: append and consume. file_storage keeps its
// data in a bbolt B+tree and pays a transaction (pages copied, the meta
// page written) for every persistent-queue put, read and delete and every
// dedup journal append; log_storage appends each write (a Set, a Delete or
// a Batch) as one checksummed record to a segment file, with one write
// system call, and keeps an index of where each key's value is in memory.
// Segments whose values are all deleted or overwritten are removed; when
// the segments hold more than twice the current values and a segment
// besides, the oldest one's current values are written again and it is
// removed, so the disk holds at most about twice the data plus a segment.
//
// Opening a client replays its segments. A record that fails its checksum
// or framing ends its segment: a torn tail of the newest segment (a write
// cut short by a crash, never acknowledged) is cut; anything else is
// damage, kept aside as SEGMENT.damaged-TIME, logged, and counted in
// otelcol_log_storage_discarded_bytes. An entry named as a segment that is
// not a regular file (a symlink, a FIFO, a directory) is moved aside
// unread as NAME.foreign-TIME and logged.
//
// One process holds the directory at a time: Start takes an flock on
// DIRECTORY/LOCK, which holds its PID, and a second one fails naming the
// directory and that PID. With file_storage_directory set, Start moves
// what file_storage left there into the clients of the same names before
// any component opens one (the FileStorageMover doubletake's distribution
// passes: each file checked, a damaged one salvaged, kept aside after).
//
//	extensions:
//	  log_storage:
//	    directory: /var/lib/otelcol/log
//	exporters:
//	  otlp_grpc:
//	    sending_queue:
//	      storage: log_storage
//	service:
//	  extensions: [log_storage]
package logstorageextension
