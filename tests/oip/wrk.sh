#!/usr/bin/env bash
# tests/oip/wrk.sh BUILD: wrk (Debian's, a tool-independent HTTP/1.1 load) against a live
# tensord's Open Inference Protocol frontend: health/ready, a JSON infer and a binary infer of the
# example MLP (tests/oip/infer.lua), 4 connections each for 2 s; fails unless every answer was
# 200 and each run completed requests. Part of make oip-check.
set -euo pipefail
B="${1:-build}"
command -v wrk >/dev/null || { echo "wrk.sh: wrk is not installed (scripts/install-deps.sh)"; exit 1; }
DIR=$(mktemp -d /tmp/tsd_wrk.XXXXXX)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$DIR/models"
cp examples/models/mlp.json "$DIR/models/mlp.json"
"$B/bin/make_weights" "$DIR/models/mlp.safetensors" >/dev/null
cat >"$DIR/tensord.json" <<EOC
{"listen": ["unix://$DIR/u.sock"], "models_dir": "$DIR/models", "cache_dir": "$DIR/cache", "log_level": "warn",
 "oip_http_listen": "http://127.0.0.1:$PORT", "oip_grpc_listen": "", "preload": ["mlp.json"]}
EOC
"$B/bin/tensord" --config "$DIR/tensord.json" 2>"$DIR/log" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null || true; rm -rf "$DIR"' EXIT
for _ in $(seq 1 300); do
	python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$PORT/v2/health/ready', timeout=1)" 2>/dev/null && break
	kill -0 $pid 2>/dev/null || { cat "$DIR/log"; exit 1; }
	sleep 0.1
done
run() { # name, wrk arguments...
	local name=$1 out
	shift
	out=$(wrk -t1 -c4 -d2s "$@" 2>&1)
	local n
	n=$(awk '/requests in/ {print $1}' <<<"$out")
	if grep -q "Non-2xx" <<<"$out" || [ -z "$n" ] || [ "$n" -eq 0 ]; then
		echo "wrk.sh: $name failed:"
		echo "$out"
		exit 1
	fi
	echo "wrk.sh: $name: $n requests, $(awk '/Requests\/sec/ {print $2}' <<<"$out") per second, all 200"
}
run "health/ready" "http://127.0.0.1:$PORT/v2/health/ready"
WRK_BODY=json run "infer (JSON)" -s tests/oip/infer.lua "http://127.0.0.1:$PORT/v2/models/mlp/infer"
WRK_BODY=binary run "infer (binary)" -s tests/oip/infer.lua "http://127.0.0.1:$PORT/v2/models/mlp/infer"
# HTTP/2 (prior knowledge, cleartext): the same infer answered
out=$(curl -sS --http2-prior-knowledge -o "$DIR/h2.json" -w '%{http_version} %{http_code}' -X POST \
	-H 'Content-Type: application/json' --data '{"inputs":[{"name":"x","shape":[1,16],"datatype":"FP32","data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]}]}' \
	"http://127.0.0.1:$PORT/v2/models/mlp/infer")
if [ "$out" != "2 200" ] || ! grep -q '"outputs"' "$DIR/h2.json"; then
	echo "wrk.sh: HTTP/2 infer failed: $out"; cat "$DIR/h2.json"; exit 1
fi
echo "wrk.sh: HTTP/2 infer: 200"
kill -TERM $pid
wait $pid
trap 'rm -rf "$DIR"' EXIT
echo "wrk.sh: tensord exited 0"
