#!/usr/bin/env bash
# Issue 30's throughput goals in one run (docs/BENCHMARKS.md, "Replicas"): the same closed-loop
# load (CLIENTS client threads, each its next infer of the example mlp as soon as the last came
# back: build/bin/failover_load without events) against one replica alone, against three replicas
# behind HAProxy (deploy/haproxy/haproxy.cfg, TCP mode), and against the three as the client's
# endpoint list; rounds alternate so that drift hits all alike. Reports throughput per setup, the
# ratio three-behind-HAProxy / one (goal >= 0.9 on a machine where the replicas share the cores),
# and p50 latency through HAProxy against a direct connection (the balancer hop's cost).
# Usage: bench/compare_replicas.sh [CLIENTS] [REQUESTS] [ROUNDS]   (env: BUILD)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
export BUILD
C="${1:-20}" N="${2:-2000}" R="${3:-3}"
make -s BUILD="$BUILD" all "$BUILD/bin/failover_load" || exit 1
. scripts/replicas.sh
fail=0
trap replicas_cleanup EXIT
replicas_setup "${REPLICA_EXTRA:-}" || exit 1
haproxy_start || exit 1
grep -m1 'model name' /proc/cpuinfo | sed 's/.*: /CPU: /'
echo "cores: $(nproc); haproxy: $(haproxy -v | head -1 | cut -d' ' -f3)"
one="tcp://127.0.0.1:$(cat "$FO_DIR/r1/tcp_port")"
run() { # URL: "req/s p50_ms"
	"$BIN/failover_load" --url "$1" --weights "$models/mlp.safetensors" --clients "$C" --requests "$N" 2>/dev/null |
		awk '/req\/s/ { gsub(/[(]/, "", $0); for (i = 1; i <= NF; i++) if ($i == "req/s)") r = $(i - 1) }
		     /latency of right answers/ { for (i = 1; i <= NF; i++) if ($i == "p50") p = $(i + 1) }
		     END { print r, p }'
}
declare -A tp p50
for setup in one haproxy list; do tp[$setup]=""; p50[$setup]=""; done
for r in $(seq 1 "$R"); do
	for setup in one haproxy list; do
		case $setup in
		one) url=$one ;;
		haproxy) url="tcp://127.0.0.1:$ha_tsd1" ;;
		list) url=$list ;;
		esac
		read -r t p < <(run "$url")
		echo "round $r: $setup: $t req/s, p50 $p ms"
		tp[$setup]="${tp[$setup]} $t"
		p50[$setup]="${p50[$setup]} $p"
	done
done
med() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
for setup in one haproxy list; do
	echo "median: $setup: $(med "${tp[$setup]}") req/s, p50 $(med "${p50[$setup]}") ms"
done
awk -v a="$(med "${tp[haproxy]}")" -v b="$(med "${tp[one]}")" -v c="$(med "${tp[list]}")" \
	-v pa="$(med "${p50[haproxy]}")" -v pb="$(med "${p50[one]}")" 'BEGIN {
	printf "three behind HAProxy / one alone: %.2fx throughput (goal >= 0.9); endpoint list / one: %.2fx\n", a / b, c / b
	printf "p50 through HAProxy %.3f ms against %.3f ms direct: +%.3f ms for the balancer hop\n", pa, pb, pa - pb }'
