#!/usr/bin/env bash
# failover.sh: the failure test (make failover-check), loopback only, bounded in time. Three tensord
# replicas serving the example mlp (tcp://, the Open Inference Protocol's REST and gRPC), loaded by
# 20 client threads, each a request every 5 ms (build/bin/failover_load: every answer checked against the mlp computed there;
# every 25th request a model.load of a fresh name, which must never run twice):
#   1. the replicas given to the clients as an endpoint list; in the middle one replica is killed
#      (SIGKILL; a supervisor restarts it 0.3 s later), another sent SIGTERM (it drains and stays
#      down), a third restarted (SIGTERM, then started again);
#   2. the same behind HAProxy (deploy/haproxy/haproxy.cfg with this run's ports), the clients
#      on HAProxy's one address with TENSORD_CLIENT_RETRIES=3;
#   3. a drain behind HAProxy: one replica sent SIGTERM under load (drain_grace_s 0.5: readiness
#      false, HAProxy stops routing to it, then it drains): no request may fail;
#   4. REST through HAProxy: health, metadata and infer with curl, while one replica is down.
# Counts, latencies and the failure window's p99 are printed (failover_load). Fails when a request
# is lost or wrong, a model.load ran twice, more than 0.1% of the infers failed after their
# retries (0 in the drain), or a step's checks fail.
# Usage: [BUILD=dir] tests/failover.sh; tests/failover.sh kill|term|start|restart|wait I (the
# events, run by failover_load with FO_DIR set).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
export BUILD

. scripts/replicas.sh

# ---- the events, run by failover_load (FO_DIR: the run's directory) ----
case "${1:-}" in
kill) # SIGKILL, and a supervisor's restart 0.3 s later (in the background)
	kill -KILL "$(replica_pid "$2")"
	(sleep 0.3; start_replica "$2") >/dev/null 2>&1 &
	exit 0 ;;
term) kill -TERM "$(replica_pid "$2")"; exit 0 ;;
restart) (kill -TERM "$(replica_pid "$2")"; wait_gone "$2" && start_replica "$2") >/dev/null 2>&1 & exit 0 ;;
start) start_replica "$2"; exit $? ;;
wait) wait_gone "$2"; exit $? ;;
"") ;;
*) echo "usage: tests/failover.sh [kill|term|restart|start|wait I]" >&2; exit 2 ;;
esac

# ---- the run ----
fail=0
trap replicas_cleanup EXIT
replicas_setup || { fail=1; exit 1; }

load() { # NAME URL EXTRA...: run the load, its report printed with NAME
	local name=$1 url=$2
	shift 2
	echo "failover: $name"
	timeout -k 5 300 "$BIN/failover_load" --url "$url" --weights "$models/mlp.safetensors" --spec "$models/mlp.json" \
		--clients 20 --requests 500 --interval-ms 5 --load-every 25 --timeout-ms 10000 --check "$list" "$@" 2>&1 |
		sed 's/^/  /'
	local rc=${PIPESTATUS[0]}
	[ "$rc" -eq 0 ] || { echo "failover: $name FAILED (exit $rc)"; fail=1; }
}
all_up() { # every replica running and ready again
	for i in 1 2 3; do
		if replica_gone $i; then start_replica $i || fail=1; fi
		wait_ready $i || fail=1
	done
}
me="tests/failover.sh"

# 1. the endpoint list
load "1. three replicas as an endpoint list: SIGKILL one at 25% (restarted 0.3 s later), SIGTERM one at 50%, restart one at 75%" \
	"$list" --event "25:$me kill 1" --event "50:$me term 2" --event "75:$me restart 3"
$me wait 2 || fail=1
all_up

# 2. behind HAProxy
haproxy_start || { fail=1; exit 1; }
TENSORD_CLIENT_RETRIES=${FO_RETRIES:-3} load "2. the same behind HAProxy (TCP mode, health checks on /v2/health/ready)" \
	"tcp://127.0.0.1:$ha_tsd1" --event "25:$me kill 1" --event "50:$me term 2" --event "75:$me restart 3"
$me wait 2 || fail=1
all_up
sleep 0.5 # HAProxy sees every replica up (rise 2)

# 3. a drain behind HAProxy: nothing may fail
TENSORD_CLIENT_RETRIES=${FO_RETRIES:-3} load "3. a drain behind HAProxy: SIGTERM one replica at 30% (drain_grace_s 0.5)" \
	"tcp://127.0.0.1:$ha_tsd1" --event "30:$me term 1" --max-fail-pct 0
$me wait 1 || fail=1

# 4. REST through HAProxy with replica 1 down: health, metadata, infer
echo "failover: 4. the Open Inference Protocol's REST through HAProxy (replica 1 down)"
sleep 0.3
rest="http://127.0.0.1:$ha_rest"
body='{"inputs":[{"name":"x","datatype":"FP32","shape":[1,16],"data":[0.5,-1,0.25,2,0,1.5,-0.5,0.75,1,-2,0.125,0.3,-0.7,0.9,1.1,-0.2]}]}'
ok=0
for k in $(seq 1 12); do
	r=$(curl -sf "$rest/v2/health/ready" -o /dev/null -w '%{http_code}') &&
		curl -sf "$rest/v2/models/mlp" | grep -q '"name":"mlp"' &&
		curl -sf -X POST -H 'Content-Type: application/json' -d "$body" "$rest/v2/models/mlp/infer" | grep -q '"outputs"' &&
		ok=$((ok + 1))
done
echo "  failover: REST via HAProxy: $ok of 12 health + metadata + infer rounds answered"
[ $ok -eq 12 ] || { echo "failover: REST through HAProxy FAILED"; fail=1; }
live=$(curl -s -o /dev/null -w '%{http_code}' "$rest/v2/health/live")
[ "$live" = 200 ] || { echo "failover: /v2/health/live through HAProxy answered $live"; fail=1; }

[ $fail -eq 0 ] && echo "failover: all steps passed" || echo "failover: FAILED"
exit $fail
