#!/usr/bin/env bash
# CPU profiles of the default `--upstream` gateway and of the stock durable
# collector of `bench/ab.sh -pair default` under the same fixed load, with
# perf (the distribution has no pprof extension), and the share of the
# gateway's samples under each frame of interest, side by side.
#
#   bench/profile.sh                 # 40,000 spans/s, 15 s each, default then stock
#
# Each run's line gives the gateway's CPU, the bytes it wrote and in how
# many calls (write(2) and pwrite(2), /proc/PID/io wchar and syscw: the
# queue's and the journal's storage, and its sends) and the load
# generator's answer latency.
#   RATE=40000 SECONDS_=15 ROUNDS=2 bench/profile.sh
#   RATE=0 CONCURRENCY=1 BATCH=64 bench/profile.sh   # one sender, 64-span requests, closed loop
#
# Needs perf (perf_event_paranoid <= 2 profiles one's own processes). Uses
# 127.0.0.1 ports 24133, 24317-24319, 24888-24890. The per-frame tables and
# the logs go to $OUT_DIR (default bench/results/profile-<time>), the perf
# data (for perf report) to $PERF_DIR (default a directory under /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v perf >/dev/null || { echo "profile.sh: perf is not installed" >&2; exit 1; }
rate=${RATE:-40000}
concurrency=${CONCURRENCY:-16}
batch=${BATCH:-1000}
secs=${SECONDS_:-15}
rounds=${ROUNDS:-1}
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out=${OUT_DIR:-bench/results/profile-$stamp}
perfdir=${PERF_DIR:-/tmp/doubletake-profile-$stamp}
mkdir -p "$out" "$perfdir"
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
go build -o "$tmp/doubletake" ./cmd/doubletake
go build -o "$tmp/load" ./cmd/doubletake-load
stock="$tmp/doubletake-load-stock.yaml"
cat > "$stock" <<YAML
extensions:
  health_check: {endpoint: 127.0.0.1:24133}
  file_storage: {directory: $tmp/data-stock/queue, create_directory: true}
receivers:
  otlp:
    protocols:
      grpc: {endpoint: 127.0.0.1:24317, max_recv_msg_size_mib: 16}
      http: {endpoint: 127.0.0.1:24318}
processors:
  memory_limiter: {check_interval: 1s, limit_percentage: 80, spike_limit_percentage: 20}
  batch: {}
exporters:
  otlp_grpc:
    endpoint: 127.0.0.1:24319
    tls: {insecure: true}
    sending_queue: {enabled: true, storage: file_storage}
service:
  extensions: [health_check, file_storage]
  telemetry:
    logs: {level: warn}
    metrics:
      readers:
        - pull: {exporter: {prometheus: {host: 127.0.0.1, port: 24888}}}
  pipelines:
    traces: {receivers: [otlp], processors: [memory_limiter, batch], exporters: [otlp_grpc]}
YAML

run() { # variant round
	local v=$1 r=$2 cfg=$stock
	rm -rf "$tmp/data-$v"
	if [ "$v" = default ]; then
		cfg="$tmp/default.yaml"
		"$tmp/doubletake" run default-config --upstream http://127.0.0.1:24319 \
			--grpc-endpoint 127.0.0.1:24317 --http-endpoint 127.0.0.1:24318 \
			--health-endpoint 127.0.0.1:24133 --telemetry-endpoint 127.0.0.1:24888 \
			--metrics-endpoint 127.0.0.1:24889 --status-endpoint 127.0.0.1:24890 \
			--data-dir "$tmp/data-$v" > "$cfg"
	fi
	"$tmp/load" sink -listen 127.0.0.1:24319 -duration 10m -every 1h > "$out/sink-$v-$r.log" 2>&1 &
	local sp=$!
	pids+=("$sp")
	"$tmp/doubletake" run --config "$cfg" > "$out/gateway-$v-$r.log" 2>&1 &
	local gp=$!
	pids+=("$gp")
	local up=0
	for _ in $(seq 150); do
		if curl -sf 127.0.0.1:24133 >/dev/null; then up=1; break; fi
		kill -0 "$gp" 2>/dev/null || break
		sleep 0.2 # polling the health endpoint, bounded at 30 s
	done
	[ "$up" = 1 ] || { echo "profile.sh: the $v gateway did not start (see $out/gateway-$v-$r.log)" >&2; exit 1; }
	"$tmp/load" gen -target 127.0.0.1:24317 -rate "$rate" -concurrency "$concurrency" -batch "$batch" -duration $((secs + 5))s -warmup 3s > "$out/gen-$v-$r.log" 2>&1 &
	local lp=$!
	pids+=("$lp")
	sleep 3 # the generator's warm-up
	local t0 t1 w0 w1 c0 c1
	t0=$(awk '{print $14+$15}' "/proc/$gp/stat")
	w0=$(awk '/^wchar/{print $2}' "/proc/$gp/io")
	c0=$(awk '/^syscw/{print $2}' "/proc/$gp/io")
	perf record -F 999 -g -p "$gp" -o "$perfdir/perf-$v-$r.data" -- sleep "$secs" > /dev/null 2>&1
	t1=$(awk '{print $14+$15}' "/proc/$gp/stat")
	w1=$(awk '/^wchar/{print $2}' "/proc/$gp/io")
	c1=$(awk '/^syscw/{print $2}' "/proc/$gp/io")
	wait "$lp"
	echo "$v round $r: gateway CPU $(awk -v t=$((t1 - t0)) -v s="$secs" -v hz="$(getconf CLK_TCK)" 'BEGIN{printf "%.2f cores", t/hz/s}') over ${secs}s; written $(((w1 - w0) / secs / 1024)) KiB/s in $(((c1 - c0) / secs)) write calls/s; $(grep -m1 'accepted:' "$out/gen-$v-$r.log"); $(grep -m1 'latency:' "$out/gen-$v-$r.log")"
	kill "$gp" "$sp"
	wait "$gp" "$sp" 2>/dev/null || true
}

for r in $(seq "$rounds"); do
	for v in default stock; do run "$v" "$r"; done
done

frames=(
	'grpc.(*Server).handleStream'
	'codecV2).Unmarshal'
	'guard.CheckProto'
	'dedupprocessor.(*tracesProcessor).ConsumeTraces'
	'nestedState).process'
	'spanUnit).judge'
	'spanScratch).commit'
	'journal.(*Journal).write'
	'dedupotlpexporter.(*wrapped[...]).send'
	'groupcommit.(*Group[...]).gather'
	'queueProbe).read'
	'bbolt.(*DB).Update'
	'bbolt.(*Tx).Commit'
	'persistentQueue'
	'tracesEncoding).Unmarshal'
	'tracesEncoding).Marshal'
	'batchprocessor'
	'otlpexporter.(*baseExporter).pushTraces'
	'compress/flate'
	'runtime.gcBgMarkWorker'
	'runtime.mallocgc'
	'runtime.schedule'
	'syscall.Syscall'
)
for f in "$perfdir"/perf-*.data; do
	perf script -i "$f" 2>/dev/null | python3 -c '
import sys
frames = sys.argv[1:]
n, hits, stack = 0, [0] * len(frames), []
def flush():
    global n
    if stack:
        n += 1
        s = "\n".join(stack)
        for i, f in enumerate(frames):
            if f in s:
                hits[i] += 1
for line in sys.stdin:
    if not line.strip():
        flush(); stack.clear()
    elif line[0] in " \t":
        stack.append(line.strip())
flush()
print("samples %d" % n)
for f, h in zip(frames, hits):
    print("%6.2f%% %6d  %s" % (100 * h / max(n, 1), h, f))
' "${frames[@]}" > "$out/$(basename "${f%.data}").txt"
done
paste "$out"/perf-default-1.txt "$out"/perf-stock-1.txt | awk -F'\t' 'BEGIN{print "default\t\t\t| stock"} {printf "%-60s| %s\n", $1, $2}'
echo "tables and logs: $out; perf data: $perfdir" >&2
