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
BIN="$BUILD/bin"
export BUILD

# ---- the events (FO_DIR: this run's directory) ----
replica_pid() { cat "$FO_DIR/r$1/pid" 2>/dev/null; }
start_replica() { # I: start replica I (its config is written), returns when it is ready
	local i=$1 d="$FO_DIR/r$1"
	"$BIN/tensord" --config "$d/tensord.json" >>"$d/stderr" 2>&1 &
	echo $! >"$d/pid"
	disown
	wait_ready "$i"
}
wait_ready() {
	local port
	port=$(cat "$FO_DIR/r$1/http_port")
	for _ in $(seq 1 300); do
		curl -sf -o /dev/null "http://127.0.0.1:$port/v2/health/ready" && return 0
		sleep 0.05
	done
	echo "failover: replica $1 not ready after 15 s" >&2
	return 1
}
wait_gone() { # I: until replica I's process is gone (at most 20 s)
	local pid
	pid=$(replica_pid "$1")
	for _ in $(seq 1 400); do
		st=$(ps -o stat= -p "$pid" 2>/dev/null) # a zombie (a child of this script's) is gone too
		[ -z "$st" ] || [ "${st:0:1}" = Z ] && return 0
		sleep 0.05
	done
	echo "failover: replica $1 (pid $pid) still running 20 s after SIGTERM" >&2
	return 1
}
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
for t in haproxy curl; do
	command -v "$t" >/dev/null || { echo "failover: $t is not installed (scripts/install-deps.sh)"; exit 1; }
done
FO_DIR=$(mktemp -d /tmp/tsd_failover.XXXXXX)
export FO_DIR
fail=0
cleanup() {
	[ -f "$FO_DIR/haproxy.pid" ] && kill "$(cat "$FO_DIR/haproxy.pid")" 2>/dev/null
	for i in 1 2 3; do
		pid=$(replica_pid $i) && kill -KILL "$pid" 2>/dev/null
	done
	wait 2>/dev/null
	if [ $fail -ne 0 ]; then
		for i in 1 2 3; do echo "---- replica $i stderr (tail) ----"; tail -20 "$FO_DIR/r$i/stderr" 2>/dev/null; done
		echo "---- haproxy (tail) ----"; tail -20 "$FO_DIR/haproxy.log" 2>/dev/null
	fi
	rm -rf "$FO_DIR"
}
trap cleanup EXIT
ports=($(python3 -c 'import socket
ss=[socket.socket() for _ in range(12)]
for s in ss: s.bind(("127.0.0.1",0))
print(" ".join(str(s.getsockname()[1]) for s in ss))'))
models="$FO_DIR/models"
mkdir -p "$models"
cp examples/models/mlp.json "$models/mlp.json"
"$BIN/make_weights" "$models/mlp.safetensors" >/dev/null
list=""
for i in 1 2 3; do
	d="$FO_DIR/r$i"
	mkdir -p "$d"
	tcp=${ports[$((i - 1))]} http=${ports[$((i + 2))]} grpc=${ports[$((i + 5))]}
	echo "$tcp" >"$d/tcp_port"
	echo "$http" >"$d/http_port"
	cat >"$d/tensord.json" <<EOF
{"listen": ["unix://$d/tensord.sock"], "tcp_listen": ["tcp://127.0.0.1:$tcp"],
 "oip_http_listen": "http://127.0.0.1:$http", "oip_grpc_listen": "grpc://127.0.0.1:$grpc",
 "models_dir": "$models", "preload": ["mlp.json"], "drain_grace_s": 0.5, "drain_seconds": 5,
 "log_level": "warn"}
EOF
	start_replica $i || fail=1
	list="$list${list:+,}tcp://127.0.0.1:$tcp"
done
[ $fail -eq 0 ] || exit 1
ha_tsd1=${ports[9]} ha_rest=${ports[10]} ha_grpc=${ports[11]}
sed -e "s/127.0.0.1:7070/127.0.0.1:$ha_tsd1/; s/127.0.0.1:8000/127.0.0.1:$ha_rest/; s/127.0.0.1:8001/127.0.0.1:$ha_grpc/" \
	-e "s/:7071/:${ports[0]}/; s/:7072/:${ports[1]}/; s/:7073/:${ports[2]}/" \
	-e "s/:8011/:${ports[3]}/g; s/:8012/:${ports[4]}/g; s/:8013/:${ports[5]}/g" \
	-e "s/port 8011/port ${ports[3]}/; s/port 8012/port ${ports[4]}/; s/port 8013/port ${ports[5]}/" \
	-e "s/:8021/:${ports[6]}/; s/:8022/:${ports[7]}/; s/:8023/:${ports[8]}/" \
	deploy/haproxy/haproxy.cfg >"$FO_DIR/haproxy.cfg"
haproxy -c -q -f "$FO_DIR/haproxy.cfg" || { echo "failover: haproxy rejects the config"; fail=1; exit 1; }

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
		st=$(ps -o stat= -p "$(replica_pid $i)" 2>/dev/null)
		if [ -z "$st" ] || [ "${st:0:1}" = Z ]; then start_replica $i || fail=1; fi
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
haproxy -f "$FO_DIR/haproxy.cfg" -D -p "$FO_DIR/haproxy.pid" >>"$FO_DIR/haproxy.log" 2>&1 || { echo "failover: haproxy did not start"; fail=1; exit 1; }
sleep 0.5 # its first health checks
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
