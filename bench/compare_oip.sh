#!/usr/bin/env bash
# tensord over the Open Inference Protocol against its floor and a peer, in one run, on the same
# inputs, with the same client and load (bench/oip_load.py: tritonclient for every OIP server,
# the tensord package for TSD1; issue 27's goals):
#  - the tiny model (examples/models/mlp.json), concurrency 1, binary data: tensord's HTTP
#    frontend against h2o answering tensord's own answer as a fixed body (bench_oip_floor: the
#    same library, set up as the daemon sets it up), rounds alternating; also with wrk; and over
#    gRPC against gRPC's C core answering tensord's own answer (bench_oip_grpc_floor);
#  - ppocr-cls and silero-vad (bench/onnx_models.h: the files in bench/.venv-onnx) at each
#    concurrency of LEVELS against tensord over HTTP, gRPC (when this tensord has
#    oip_grpc_listen) and TSD1 (unix://), KServe's Python ModelServer serving the same files
#    through onnxruntime (bench/kserve_onnx.py) over HTTP (binary data, and JSON: KServe 0.21
#    turns binary inputs into Python lists, its JSON can be the faster) and gRPC, and wrk (HTTP/1.1, the same
#    binary request bytes, bench/oip_wrk.lua) on tensord; every client's first answer checked
#    against onnxruntime's outputs (max abs diff <= 1e-4).
# Prints the CPU, the versions and one markdown table of the figures with the goals' ratios
# (bench/oip_report.py table). Every process it starts is stopped on exit. No network: needs
# bench/setup-onnx-peer.sh and bench/setup-kserve-peer.sh run once.
# Usage: bench/compare_oip.sh [quick|full]   (quick ~1 minute: DURATION=0.5 s a point, 1 round; full
#   DURATION=4; env: DURATION, WARMUP (s), LEVELS ("1 8 32"), ROUNDS (tiny model), MODELS,
#   PROCS (client processes, default min(N, CPUs)), PRIORITY (Triton's, of the ONNX models'
#   requests: 0 the default (normal: the batcher waits up to its delay_us), 1 realtime), BUILD,
#   OIP_CACHE_DIR (tensord's kernel cache, kept between runs; default BUILD/oip-cache), KEEP=1
#   keeps the work directory)
set -euo pipefail
cd "$(dirname "$0")/.."
MODE="${1:-quick}"
case "$MODE" in
quick) D0=0.5 W0=0.2 R0=1 ;;
full) D0=4 W0=1 R0=3 ;;
*) echo "usage: bench/compare_oip.sh [quick|full]" >&2; exit 2 ;;
esac
BUILD="${BUILD:-build}"
DURATION="${DURATION:-$D0}"
WARMUP="${WARMUP:-$W0}"
ROUNDS="${ROUNDS:-$R0}"
LEVELS="${LEVELS:-1 8 32}"
MODELS="${MODELS:-ppocr-cls silero-vad}"
PROCS="${PROCS:-0}"
PRIORITY="${PRIORITY:-0}"
ONNX_PY=bench/.venv-onnx/bin/python
KPY=bench/.venv-kserve/bin/python
[ -x "$ONNX_PY" ] || { echo "compare_oip: no bench/.venv-onnx (the ONNX files): run bench/setup-onnx-peer.sh" >&2; exit 1; }
[ -x "$KPY" ] || { echo "compare_oip: no bench/.venv-kserve (KServe, tritonclient): run bench/setup-kserve-peer.sh" >&2; exit 1; }
command -v wrk >/dev/null || { echo "compare_oip: wrk is not installed (Debian's wrk: scripts/install-deps.sh)" >&2; exit 1; }
make -s -j2 BUILD="$BUILD" "$BUILD/bin/tensord" "$BUILD/bin/tensorctl" "$BUILD/bin/make_weights" \
	"$BUILD/bin/bench_oip_floor" "$BUILD/bin/bench_oip_grpc_floor" "$BUILD/bin/bench_onnx_models" "$BUILD/lib/libtensord.so"
SITE=$("$ONNX_PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
export TENSORD_LIB="$PWD/$BUILD/lib/libtensord.so"

DIR=$(mktemp -d /tmp/tsd_oip.XXXXXX)
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	[ "${KEEP:-0}" = 1 ] && echo "compare_oip: work directory kept: $DIR" || rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# wait_http PORT PATH PID LOG: until PATH answers 200, or the process died (its log shown)
wait_http() {
	for _ in $(seq 1 600); do
		curl -sf -o /dev/null "http://127.0.0.1:$1$2" && return 0
		kill -0 "$3" 2>/dev/null || { echo "compare_oip: a server exited:" >&2; tail -20 "$4" >&2; exit 1; }
		sleep 0.1
	done
	echo "compare_oip: no answer on port $1 after 60 s" >&2
	tail -20 "$4" >&2
	exit 1
}

GRPC=0
HELP=$("$BUILD/bin/tensord" --help 2>&1 || true) # (not piped into grep -q: pipefail and SIGPIPE)
grep -q oip_grpc_listen <<<"$HELP" && GRPC=1
{
	echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) CPUs, avx512f: $(grep -qw avx512f /proc/cpuinfo && echo yes || echo no)"
	echo "tensord $(git describe --always --dirty 2>/dev/null || echo '?'), h2o $(awk -F'"' '/define H2O_VERSION /{print $2}' "$(pkg-config --variable=includedir libh2o)/h2o/version.h" 2>/dev/null || echo '?'), gRPC core $(pkg-config --modversion grpc 2>/dev/null || echo '?'), $(wrk -v 2>&1 | head -1 | awk '{print $1, $2}')"
	"$KPY" -c 'import importlib.metadata as m, sys; print(f"python {sys.version.split()[0]},", ", ".join(f"{p} {m.version(p)}" for p in
		("kserve", "onnxruntime", "tritonclient", "grpcio", "numpy")))'
	[ "$GRPC" = 1 ] && echo "tensord gRPC frontend: yes" ||
		echo "tensord gRPC frontend: not in this build (tensord --help has no oip_grpc_listen): its gRPC goals are not measured"
	echo "tensord CPU threads: ${TENSORD_CPU_THREADS:-one per online CPU ($(nproc))}; onnxruntime (KServe): intra-op 2; priority of the ONNX requests: $PRIORITY"
	echo "per point: $WARMUP s warm-up, $DURATION s timed; levels $LEVELS; tiny model $ROUNDS rounds"
} | tee "$DIR/about.txt"

# ---- the inputs: bench_onnx_models's (as compare_onnx.sh), onnxruntime's outputs on them ----
mkdir -p "$DIR/onnx" "$DIR/req/mlp/in" "$DIR/models"
# shellcheck disable=SC2086
"$BUILD/bin/bench_onnx_models" -n 3 -o "$DIR/onnx" -b 1 "$SITE" $MODELS >"$DIR/onnx.log"
"$KPY" bench/oip_load.py prep "$SITE" "$DIR/onnx"
mv "$DIR/onnx/req/"* "$DIR/req/"
if [ "$PRIORITY" != 0 ]; then for m in $MODELS; do "$KPY" bench/oip_load.py body --priority "$PRIORITY" "$DIR/req/$m" >/dev/null; done; fi
"$BUILD/bin/make_weights" "$DIR/models/mlp.safetensors" >/dev/null
# the MLP's spec with its weights sent by tensorctl (models_dir is the venv's site-packages)
"$KPY" -c 'import json, numpy as np, sys
spec = json.load(open("examples/models/mlp.json")); spec.pop("weights", None)
json.dump(spec, open(sys.argv[1], "w")); np.save(sys.argv[2], np.full((1, 16), 0.5, np.float32))' \
	"$DIR/models/mlp.json" "$DIR/req/mlp/in/x.npy"
"$KPY" bench/oip_load.py body --priority 1 "$DIR/req/mlp" >/dev/null

# ---- tensord ----
HTTP_PORT=$(free_port)
GRPC_PORT=$(free_port)
SOCK="$DIR/tensord.sock"
# the kernel cache kept between runs (the first run compiles every bucket of the models: ~1 min)
CACHE="${OIP_CACHE_DIR:-$PWD/$BUILD/oip-cache}"
mkdir -p "$CACHE"
GRPC_CFG=""
[ "$GRPC" = 1 ] && GRPC_CFG="\"oip_grpc_listen\": \"grpc://127.0.0.1:$GRPC_PORT\","
cat >"$DIR/tensord.json" <<EOF
{"listen": ["unix://$SOCK"], "models_dir": "$SITE", "cache_dir": "$CACHE", "log_level": "warn",
 $GRPC_CFG "oip_http_listen": "http://127.0.0.1:$HTTP_PORT"}
EOF
"$BUILD/bin/tensord" --config "$DIR/tensord.json" 2>"$DIR/tensord.log" &
TSD_PID=$!
PIDS+=($!)
wait_http "$HTTP_PORT" /v2/health/ready "${PIDS[-1]}" "$DIR/tensord.log"
CTL=("$BUILD/bin/tensorctl" --url "unix://$SOCK")
"${CTL[@]}" load "$DIR/models/mlp.json" --upload "$DIR/models/mlp.safetensors" >/dev/null
for m in $MODELS; do "${CTL[@]}" load "$DIR/onnx/$m.load.json" >/dev/null; done

# ---- the floor: tensord's own answer to the tiny model's request, as a fixed body ----
HLEN=$(cat "$DIR/req/mlp/body.hlen")
curl -sf -D "$DIR/floor.headers" -o "$DIR/floor.body" --data-binary @"$DIR/req/mlp/body.bin" \
	-H "Inference-Header-Content-Length: $HLEN" -H "Content-Type: application/octet-stream" \
	"http://127.0.0.1:$HTTP_PORT/v2/models/mlp/infer"
FLOOR_HLEN=$(tr -d '\r' <"$DIR/floor.headers" | awk -F': ' 'tolower($1) == "inference-header-content-length" {print $2}')
"$BUILD/bin/bench_oip_floor" -p 0 -f "$DIR/floor.body" -H "$FLOOR_HLEN" >"$DIR/floor.out" 2>"$DIR/floor.log" &
FLOOR_PID=$!
PIDS+=($!)
for _ in $(seq 1 100); do grep -q '^port ' "$DIR/floor.out" 2>/dev/null && break; sleep 0.05; done
FLOOR_PORT=$(awk '/^port / {print $2}' "$DIR/floor.out")
[ -n "$FLOOR_PORT" ] || { echo "compare_oip: the floor server did not start:" >&2; cat "$DIR/floor.log" >&2; exit 1; }

GRPC_FLOOR_PORT=""
if [ "$GRPC" = 1 ]; then # gRPC's floor: tensord's serialized answer from gRPC's C core
	"$KPY" bench/oip_load.py grpc-answer --url "127.0.0.1:$GRPC_PORT" --model mlp --req "$DIR/req/mlp" --priority 1 \
		"$DIR/grpc_floor.msg" >/dev/null
	"$BUILD/bin/bench_oip_grpc_floor" -p 0 -f "$DIR/grpc_floor.msg" >"$DIR/grpc_floor.out" 2>"$DIR/grpc_floor.log" &
	GRPC_FLOOR_PID=$!
	PIDS+=($!)
	for _ in $(seq 1 100); do grep -q '^port ' "$DIR/grpc_floor.out" 2>/dev/null && break; sleep 0.05; done
	GRPC_FLOOR_PORT=$(awk '/^port / {print $2}' "$DIR/grpc_floor.out")
	[ -n "$GRPC_FLOOR_PORT" ] || { echo "compare_oip: the gRPC floor did not start:" >&2; cat "$DIR/grpc_floor.log" >&2; exit 1; }
fi

# ---- KServe (its gRPC server too) ----
K_HTTP=$(free_port)
K_GRPC=$(free_port)
KSERVE_LOGLEVEL=WARNING "$KPY" bench/kserve_onnx.py "$SITE" "$DIR/onnx" --http_port "$K_HTTP" --grpc_port "$K_GRPC" \
	--enable_latency_logging false --configure_logging false >"$DIR/kserve.log" 2>&1 &
PIDS+=($!)
wait_http "$K_HTTP" /v2/health/ready "${PIDS[-1]}" "$DIR/kserve.log"

WRK_SECS=$(awk -v d="$DURATION" 'BEGIN { s = int(d + 0.5); print s < 1 ? 1 : s }') # wrk: whole seconds
RES="$DIR/results.jsonl"
: >"$RES"
# point LABEL CONCURRENCY oip_load.py run arguments...: one JSON line into RES
point() {
	local label=$1 c=$2
	shift 2
	"$KPY" bench/oip_load.py run --label "$label" -c "$c" -P "$PROCS" -d "$DURATION" --warmup "$WARMUP" "$@" |
		tee -a "$RES" | "$KPY" bench/oip_report.py brief || true
}
# wrkpoint LABEL MODEL CONCURRENCY PORT PID: wrk on one binary infer, its figures as a JSON line,
# with the server's CPU time (process PID, user and system) over the run
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
wrkpoint() {
	local label=$1 m=$2 c=$3 port=$4 pid=$5 out t0
	t0=$(cpu_ticks "$pid")
	out=$(OIP_REQ="$DIR/req/$m" wrk -t "$(( c < $(nproc) ? c : $(nproc) ))" -c "$c" -d "${WRK_SECS}s" --latency \
		-s bench/oip_wrk.lua "http://127.0.0.1:$port/v2/models/$m/infer" 2>&1) || true
	"$KPY" bench/oip_report.py wrk --label "$label" --model "$m" -c "$c" \
		--cpu-s "$(awk -v a="$t0" -v b="$(cpu_ticks "$pid")" -v hz="$(getconf CLK_TCK)" 'BEGIN { print (b - a) / hz }')" <<<"$out" |
		tee -a "$RES" |
		"$KPY" bench/oip_report.py brief || true
}

echo "(servers up and models loaded in $SECONDS s)"
echo "== the tiny model at concurrency 1, realtime (Triton's priority 1): tensord's HTTP frontend and its floor, $ROUNDS rounds"
T=(--protocol http --model mlp --req "$DIR/req/mlp" --no-check --priority 1)
for r in $(seq "$ROUNDS"); do
	point "tiny tensord http" 1 --url "127.0.0.1:$HTTP_PORT" --server-pid "$TSD_PID" "${T[@]}"
	point "tiny floor http" 1 --url "127.0.0.1:$FLOOR_PORT" --server-pid "$FLOOR_PID" "${T[@]}"
	if [ "$GRPC" = 1 ]; then
		G=(--protocol grpc --model mlp --req "$DIR/req/mlp" --no-check --priority 1)
		point "tiny tensord grpc" 1 --url "127.0.0.1:$GRPC_PORT" --server-pid "$TSD_PID" "${G[@]}"
		point "tiny floor grpc" 1 --url "127.0.0.1:$GRPC_FLOOR_PORT" --server-pid "$GRPC_FLOOR_PID" "${G[@]}"
	fi
	wrkpoint "tiny tensord wrk" mlp 1 "$HTTP_PORT" "$TSD_PID"
	wrkpoint "tiny floor wrk" mlp 1 "$FLOOR_PORT" "$FLOOR_PID"
done

for m in $MODELS; do
	for c in $LEVELS; do
		echo "== $m at concurrency $c"
		R=(--model "$m" --req "$DIR/req/$m" --priority "$PRIORITY")
		point "tensord http" "$c" --url "127.0.0.1:$HTTP_PORT" --protocol http "${R[@]}"
		[ "$GRPC" = 1 ] && point "tensord grpc" "$c" --url "127.0.0.1:$GRPC_PORT" --protocol grpc "${R[@]}"
		point "tensord tsd" "$c" --url "unix://$SOCK" --protocol tsd "${R[@]}"
		point "kserve http" "$c" --url "127.0.0.1:$K_HTTP" --protocol http "${R[@]}"
		point "kserve http json" "$c" --url "127.0.0.1:$K_HTTP" --protocol http --json "${R[@]}"
		point "kserve grpc" "$c" --url "127.0.0.1:$K_GRPC" --protocol grpc "${R[@]}"
		wrkpoint "tensord wrk" "$m" "$c" "$HTTP_PORT" "$TSD_PID"
	done
done

echo "(the run took $SECONDS s)"
echo
"$KPY" bench/oip_report.py table --about "$DIR/about.txt" "$RES"
kill -0 "$TSD_PID" 2>/dev/null || { echo "compare_oip: tensord died during the run:" >&2; tail -20 "$DIR/tensord.log" >&2; exit 1; }
