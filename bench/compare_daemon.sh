#!/usr/bin/env bash
# The daemon's figures in one table: bench_daemon_rtt (batch-1 round trip over unix://, or nng's
# ipc:// with TSD_BENCH_TRANSPORT=nng, realtime and normal priority, against a socketpair echo
# between two processes, the floor, and a plain nng req/rep echo) and bench_daemon_throughput
# (requests/s at 1, 8, 64 clients, batching on and off, launches per request). Builds both
# (with tensord) into BUILD (default build), runs them, prints their output and a summary.
# Usage: bench/compare_daemon.sh [rtt calls (20000)] [throughput seconds per run (3)] [delay_us (1000)]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
CALLS="${1:-20000}"
SECONDS_PER_RUN="${2:-3}"
DELAY_US="${3:-1000}"
make -s BUILD="$BUILD" "$BUILD/bin/tensord" "$BUILD/bin/bench_daemon_rtt" "$BUILD/bin/bench_daemon_throughput"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$BUILD/bin/bench_daemon_rtt" "$CALLS" | tee "$tmp/rtt"
echo
"$BUILD/bin/bench_daemon_throughput" "$SECONDS_PER_RUN" "$DELAY_US" | tee "$tmp/tp"
echo

# field NAME FILE: the value after NAME on the file's RESULT line
field() { awk -v k="$1" '$1 == "RESULT" { for (i = 3; i < NF; i++) if ($i == k) print $(i + 1) }' "$2"; }
ok() { awk -v a="$1" -v b="$2" -v op="$3" 'BEGIN { r = op == "le" ? a <= b : a >= b; print r ? "yes" : "NO" }'; }

cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
echo "summary ($cpu, $(nproc) CPUs)"
printf '%-52s %12s %10s %5s\n' "figure" "value" "goal" "met"
r=$(field ratio "$tmp/rtt")
printf '%-52s %12s %10s %5s\n' "rtt p50 infer realtime (us)" "$(field realtime_p50_us "$tmp/rtt")" "" ""
printf '%-52s %12s %10s %5s\n' "rtt p99 infer realtime (us)" "$(field realtime_p99_us "$tmp/rtt")" "" ""
printf '%-52s %12s %10s %5s\n' "rtt p50 infer normal (us)" "$(field normal_p50_us "$tmp/rtt")" "" ""
printf '%-52s %12s %10s %5s\n' "rtt p50 nng echo (us)" "$(field echo_p50_us "$tmp/rtt")" "" ""
printf '%-52s %12s %10s %5s\n' "p50(infer realtime) / p50(nng echo)" "$r" "" ""
printf '%-52s %12s %10s %5s\n' "rtt p50 socketpair echo, two processes (us)" "$(field sp_p50_us "$tmp/rtt")" "" ""
r=$(field ratio_sp "$tmp/rtt")
printf '%-52s %12s %10s %5s\n' "p50(infer realtime) / p50(socketpair echo)" "$r" "<= 1.5" "$(ok "$r" 1.5 le)"
r=$(field ratio_sp_p99 "$tmp/rtt")
printf '%-52s %12s %10s %5s\n' "p99(infer realtime) / p99(socketpair echo)" "$r" "<= 2" "$(ok "$r" 2 le)"
r=$(field cpu_ratio_sp "$tmp/rtt")
printf '%-52s %12s %10s %5s\n' "CPU per decision / per socketpair round trip" "$r" "<= 3" "$(ok "$r" 3 le)"
for k in on_1 on_8 on_64 off_1 off_8 off_64; do
	printf '%-52s %12s %10s %5s\n' "requests/s batching ${k%_*}, ${k#*_} client(s)" "$(field "$k" "$tmp/tp")" "" ""
done
s=$(field scale_on "$tmp/tp")
l=$(field launches_per_req_on_64 "$tmp/tp")
printf '%-52s %12s %10s %5s\n' "batching on: 64 clients / 1 client" "${s}x" ">= 10x" "$(ok "$s" 10 ge)"
printf '%-52s %12s %10s %5s\n' "batching on, 64 clients: launches per request" "$l" "<= 0.1" "$(ok "$l" 0.1 le)"
