# replicas.sh: three tensord replicas on loopback serving the example mlp, and HAProxy's config
# for them (deploy/haproxy/haproxy.cfg with this run's ports), for tests/failover.sh and
# bench/compare_replicas.sh (sourced from the repository root, with BUILD set). replicas_setup
# makes $FO_DIR (exported: the events find the replicas there), starts the replicas (each ready)
# and sets list (their tcp:// endpoint list), models, ha_tsd1, ha_rest, ha_grpc (HAProxy's ports,
# its config in $FO_DIR/haproxy.cfg); replicas_cleanup stops everything and removes $FO_DIR
# (printing the logs' tails when fail is not 0). Replica I: $FO_DIR/rI/{tensord.json,pid,stderr}.
BIN="$BUILD/bin"

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
	echo "replicas: replica $1 not ready after 15 s" >&2
	return 1
}
replica_gone() { # I: whether replica I's process is gone (a zombie, a child of ours, is gone too)
	local st
	st=$(ps -o stat= -p "$(replica_pid "$1")" 2>/dev/null)
	[ -z "$st" ] || [ "${st:0:1}" = Z ]
}
wait_gone() { # I: until replica I's process is gone (at most 20 s)
	for _ in $(seq 1 400); do
		replica_gone "$1" && return 0
		sleep 0.05
	done
	echo "replicas: replica $1 (pid $(replica_pid "$1")) still running 20 s after SIGTERM" >&2
	return 1
}
replicas_cleanup() {
	[ -f "$FO_DIR/haproxy.pid" ] && kill "$(cat "$FO_DIR/haproxy.pid")" 2>/dev/null
	for i in 1 2 3; do
		pid=$(replica_pid $i) && kill -KILL "$pid" 2>/dev/null
	done
	wait 2>/dev/null
	if [ "${fail:-0}" -ne 0 ]; then
		for i in 1 2 3; do echo "---- replica $i stderr (tail) ----"; tail -20 "$FO_DIR/r$i/stderr" 2>/dev/null; done
		echo "---- haproxy (tail) ----"; tail -20 "$FO_DIR/haproxy.log" 2>/dev/null
	fi
	rm -rf "$FO_DIR"
}
replicas_setup() { # [EXTRA_JSON]: more config keys for every replica (', "k": v'); status 0 or 1
	local extra=${1:-} i d tcp http grpc
	for t in haproxy curl; do
		command -v "$t" >/dev/null || { echo "replicas: $t is not installed (scripts/install-deps.sh)"; return 1; }
	done
	FO_DIR=$(mktemp -d /tmp/tsd_replicas.XXXXXX)
	export FO_DIR
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
		printf '%s\n' "{\"listen\": [\"unix://$d/tensord.sock\"], \"tcp_listen\": [\"tcp://127.0.0.1:$tcp\"]," \
			" \"oip_http_listen\": \"http://127.0.0.1:$http\", \"oip_grpc_listen\": \"grpc://127.0.0.1:$grpc\"," \
			" \"models_dir\": \"$models\", \"preload\": [\"mlp.json\"], \"drain_grace_s\": 0.5, \"drain_seconds\": 5," \
			" \"log_level\": \"warn\"$extra}" >"$d/tensord.json"
		start_replica $i || return 1
		list="$list${list:+,}tcp://127.0.0.1:$tcp"
	done
	ha_tsd1=${ports[9]} ha_rest=${ports[10]} ha_grpc=${ports[11]}
	sed -e "s/127.0.0.1:7070/127.0.0.1:$ha_tsd1/; s/127.0.0.1:8000/127.0.0.1:$ha_rest/; s/127.0.0.1:8001/127.0.0.1:$ha_grpc/" \
		-e "s/:7071/:${ports[0]}/; s/:7072/:${ports[1]}/; s/:7073/:${ports[2]}/" \
		-e "s/:8011/:${ports[3]}/g; s/:8012/:${ports[4]}/g; s/:8013/:${ports[5]}/g" \
		-e "s/port 8011/port ${ports[3]}/; s/port 8012/port ${ports[4]}/; s/port 8013/port ${ports[5]}/" \
		-e "s/:8021/:${ports[6]}/; s/:8022/:${ports[7]}/; s/:8023/:${ports[8]}/" \
		deploy/haproxy/haproxy.cfg >"$FO_DIR/haproxy.cfg"
	haproxy -c -q -f "$FO_DIR/haproxy.cfg" || { echo "replicas: haproxy rejects the config"; return 1; }
}
haproxy_start() {
	haproxy -f "$FO_DIR/haproxy.cfg" -D -p "$FO_DIR/haproxy.pid" >>"$FO_DIR/haproxy.log" 2>&1 || {
		echo "replicas: haproxy did not start"; return 1; }
	sleep 0.5 # its first health checks (rise 2)
}
