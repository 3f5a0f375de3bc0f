#!/usr/bin/env bash
# CPU profiles (perf) of one gateway variant of `bench/ab -pair dedup` over
# a fresh process's first spans and over as many spans once the dedup
# window has wrapped, and the share of the samples in each phase under the
# frames that tell them apart (page faults, GC, dedup, decoding):
# docs/benchmarks.md, "Closed loop and a fresh process".
#
#   bench/profile-fresh.sh with      # the pipeline with dedup (default)
#   bench/profile-fresh.sh without   # the same pipeline without it
#   FRESH=3s FILL=8s bench/profile-fresh.sh with
#
# FRESH is how long each profiled phase sends (16 closed-loop senders of
# 1000 spans: about 1M spans on 2 vCPUs), FILL how long the load between
# the phases sends (more than max_spans, 2M, so that the window wraps).
# Needs perf (perf_event_paranoid <= 2). Uses 127.0.0.1 ports 24417-24419
# and 24433. Reports and perf data go to $OUT_DIR (default
# bench/results/profile-fresh-<variant>-<time>).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v perf >/dev/null || { echo "profile-fresh.sh: perf is not installed" >&2; exit 1; }
variant=${1:-with}
fresh=${FRESH:-3s}
fill=${FILL:-8s}
out=${OUT_DIR:-bench/results/profile-fresh-$variant-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
go build -o "$tmp/doubletake" ./cmd/doubletake
go build -o "$tmp/load" ./cmd/doubletake-load
go run ./bench/ab -print-config "$variant" | sed -e 's/127.0.0.1:4317/127.0.0.1:24417/; s/127.0.0.1:4318/127.0.0.1:24418/; s/127.0.0.1:13133/127.0.0.1:24433/; s/127.0.0.1:4319/127.0.0.1:24419/' > "$tmp/gateway.yaml"
"$tmp/load" sink -listen 127.0.0.1:24419 -duration 10m -nonce 7 > "$out/sink.log" 2>&1 &
pids+=($!)
"$tmp/doubletake" run --config "$tmp/gateway.yaml" > "$out/gateway.log" 2>&1 &
gw=$!
pids+=("$gw")
for _ in $(seq 600); do curl -sf http://127.0.0.1:24433/ >/dev/null && break; sleep 0.05; done
curl -sf http://127.0.0.1:24433/ >/dev/null || { echo "the gateway did not become healthy" >&2; exit 1; }
phase() { # phase NAME: perf record of the gateway while the generator sends for $fresh
	perf record -F 499 -g -p "$gw" -o "$out/$1.data" 2> "$out/perf-$1.log" &
	local pp=$!
	while ! grep -q . "$out/perf-$1.log" 2>/dev/null && [ ! -s "$out/$1.data" ]; do sleep 0.05; done
	"$tmp/load" gen -target 127.0.0.1:24417 -warmup 0 -duration "$fresh" -nonce 7 > "$out/gen-$1.log" 2>&1
	kill -INT "$pp"
	wait "$pp" || true
}
phase fresh
"$tmp/load" gen -target 127.0.0.1:24417 -warmup 0 -duration "$fill" -nonce 7 > "$out/gen-fill.log" 2>&1
phase wrapped
for ph in fresh wrapped; do
	spans=$(sed -n 's/^totals: *\([0-9]*\) spans accepted.*/\1/p' "$out/gen-$ph.log")
	perf script -i "$out/$ph.data" -F ip,sym 2>/dev/null | python3 -c '
import sys
spans = int(sys.argv[1]); phase = sys.argv[2]
cats = [("page faults", "exc_page_fault"), ("GC workers", "gcBgMarkWorker"), ("GC assist", "gcAssistAlloc"),
        ("dedup (own)", "dedupprocessor"), ("decode", "UnmarshalProto"), ("encode", "MarshalProto")]
n, hits = 0, {c: 0 for c, _ in cats}
for s in sys.stdin.read().split("\n\n"):
    frames = " ".join(s.split())
    if not frames:
        continue
    n += 1
    for c, pat in cats:  # the first category a sample falls under
        if pat in frames:
            hits[c] += 1
            break
k = spans / 1000
print(f"{phase}: {n} samples over {spans} spans, {n / k:.3f} per 1k spans; " +
      ", ".join(f"{c} {h / k:.3f}" for c, h in hits.items()) + f", everything else {(n - sum(hits.values())) / k:.3f}")
' "$spans" "$ph" | tee -a "$out/summary.txt"
done
echo "perf data and logs: $out" >&2
