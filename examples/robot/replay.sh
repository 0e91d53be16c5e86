#!/bin/sh
# replay.sh: a generated log of robot commands (robot_gen --replay; 100,000 by default) through
# `tensorctl replay`, against $TENSORD_URL or a tensord of its own that preloads the trained
# brain (DATA_DIR/brain.json and brain.safetensors, written by robot_train: make robot-demo).
# Prints tensorctl's summary, the commands per second end to end and the first plans.
# Usage: replay.sh BUILD_DIR DATA_DIR. Environment: ROBOT_REPLAY_N (100000), ROBOT_REPLAY_JOBS (8).
set -eu
B=$1
D=$(cd "$2" && pwd) # the daemon wants absolute ipc paths
N=${ROBOT_REPLAY_N:-100000}
if [ ! -f "$D/brain.json" ] || [ ! -f "$D/brain.safetensors" ]; then
	echo "replay.sh: no trained brain in $D (run make robot-demo first)" >&2
	exit 1
fi
LOG="$D/replay.jsonl"
OUT="$D/replay.out.jsonl"
"$B/bin/robot_gen" --replay "$N" "$LOG"
pid=""
if [ -n "${TENSORD_URL:-}" ]; then
	URL=$TENSORD_URL
else
	RUN="$D/run-replay"
	mkdir -p "$RUN"
	# both transports; the robots use unix:// (ROBOT_TRANSPORT=nng: nng's ipc://)
	URL="unix://$RUN/tensord.sock"
	[ "${ROBOT_TRANSPORT:-unix}" = nng ] && URL="ipc://$RUN/tensord-nng.sock"
	cat >"$RUN/tensord.json" <<EOC
{"listen": ["unix://$RUN/tensord.sock", "ipc://$RUN/tensord-nng.sock"], "models_dir": "$D", "cache_dir": "$D/cache", "log_level": "warn",
 "oip_http_listen": "", "oip_grpc_listen": "", "preload": ["brain.json"]}
EOC
	rm -f "$RUN/tensord.sock" "$RUN/tensord-nng.sock"
	"$B/bin/tensord" --config "$RUN/tensord.json" 2>"$RUN/tensord.log" &
	pid=$!
	trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
	n=0
	until "$B/bin/robot" --url "$URL" stop >/dev/null 2>&1; do
		n=$((n + 1))
		if [ $n -gt 1200 ] || ! kill -0 $pid 2>/dev/null; then
			echo "replay.sh: tensord did not get ready with the brain; its log:" >&2
			cat "$RUN/tensord.log" >&2
			exit 1
		fi
		sleep 0.1
	done
fi
rm -f "$OUT" # replay resumes from an existing output: start afresh
t0=$(date +%s.%N)
"$B/bin/tensorctl" --url "$URL" replay "$LOG" -o "$OUT" --no-progress --jobs "${ROBOT_REPLAY_JOBS:-8}"
t1=$(date +%s.%N)
lines=$(wc -l <"$OUT")
awk -v n="$lines" -v all="$N" -v a="$t0" -v b="$t1" 'BEGIN { printf "replay.sh: %d of %d commands in %.2f s: %.0f commands/s end to end (goal >= 500000)\n", n, all, b - a, n / (b - a) }'
head -3 "$OUT"
[ "$lines" -eq "$N" ]
