#!/usr/bin/env bash
# The gateway A/B of docs/benchmarks.md: `doubletake run` without and with
# the dedup processor, interleaved over rounds, at saturation and at a fixed
# rate, for 0% and 50% duplicates.
#
#   bench/ab.sh                      # the full matrix (about 9 minutes)
#   bench/ab.sh -rounds 2 -duration 3s -warmup 1s   # a quick look
#   bench/ab.sh -pair default -dups 0 -loads fixed -rate 40000
#       # the embedded default (--upstream) against a stock durable collector
#   bench/ab.sh -matrix full         # that pair in every cell of senders 1,2,16,64 ×
#                                    # spans per request 64,512,8192 × saturation,
#                                    # 10k and 40k spans/s: 5 rounds (hours)
#   bench/ab.sh -matrix quick        # the same cells, one short round each (about 10 min)
#   bench/ab.sh -matrix closed       # the closed-loop cells 1×64, 1×512, 2×512 (each sender
#                                    # sends its next request when the last is answered),
#                                    # the default against stock: 5 rounds (about 15 min)
#   bench/ab.sh -matrix fresh        # dedup against no dedup over the first 1M spans of a
#                                    # new process (-fresh N; -pair default -cells 1x64 for
#                                    # the default against stock): 5 rounds (about 2 min)
#
# Extra arguments go to the driver, bench/ab (go run ./bench/ab -h lists
# them). PIN=1 (with taskset and at least 2 CPUs) pins the driver (load
# generator + counting sink) to CPU $DRIVER_CPUS (default 0) and the gateway
# to $GATEWAY_CPUS (default: every other CPU); by default nothing is pinned
# (docs/benchmarks.md says why). The report goes to stdout and, with the
# per-run figures, to $OUT_DIR (default bench/results).
set -euo pipefail
cd "$(dirname "$0")/.."

out_dir=${OUT_DIR:-bench/results}
mkdir -p "$out_dir"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

go build -o "$tmp/doubletake" ./cmd/doubletake
go build -o "$tmp/ab" ./bench/ab

ncpu=$(nproc)
pin=()
gateway=()
if [ "${PIN:-0}" = 1 ] && command -v taskset >/dev/null && [ "$ncpu" -ge 2 ]; then
	driver_cpus=${DRIVER_CPUS:-0}
	gateway_cpus=${GATEWAY_CPUS:-1-$((ncpu - 1))}
	[ "$ncpu" -eq 2 ] && gateway_cpus=${GATEWAY_CPUS:-1}
	pin=(taskset -c "$driver_cpus")
	gateway=(-gateway-cpus "$gateway_cpus")
	echo "pinning: driver on CPU $driver_cpus, gateway on CPU $gateway_cpus" >&2
fi

"${pin[@]}" "$tmp/ab" \
	-bin "$tmp/doubletake" "${gateway[@]}" \
	-out "$out_dir/ab-$stamp.md" -json "$out_dir/ab-$stamp.json" \
	"$@"
echo "report: $out_dir/ab-$stamp.md, per-run figures: $out_dir/ab-$stamp.json" >&2
