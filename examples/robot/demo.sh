#!/bin/sh
# demo.sh: the robot-brain example end to end (make robot-demo, make robot-check): generate the
# data, start a tensord of its own (or use $TENSORD_URL), train through train.step, report the
# held-out accuracy, then robot (a few commands and --bench), robot_fleet, and robot_fleet
# --stateful (each robot one sequence of a recurrent policy whose state the daemon keeps; it
# fails unless every answer equals the same steps computed in the robot).
# Usage: demo.sh BUILD_DIR DATA_DIR. Environment: ROBOT_STEPS (1500), ROBOT_MIN_ACC (90),
# ROBOT_SERVE_MAX (4096), ROBOT_SKIP_FLEET (unset), ROBOT_BENCH (2000 decisions; 0 skips),
# ROBOT_FLEET_N (32), ROBOT_FLEET_SECONDS (5), ROBOT_SKIP_STATEFUL (unset),
# ROBOT_STATEFUL_N (ROBOT_FLEET_N), ROBOT_STATEFUL_SECONDS (ROBOT_FLEET_SECONDS) or
# ROBOT_STATEFUL_STEPS (steps per robot instead of seconds),
# ROBOT_ONLY_STATEFUL (set: only the stateful fleet, no training), TENSORD_URL (a running daemon
# to use instead).
set -eu
B=$1
mkdir -p "$2"
D=$(cd "$2" && pwd) # the daemon wants absolute ipc paths
"$B/bin/robot_gen" "$D"
pid=""
if [ -n "${TENSORD_URL:-}" ]; then
	URL=$TENSORD_URL
else
	RUN="$D/run"
	mkdir -p "$RUN"
	# both transports; the robots use unix:// (ROBOT_TRANSPORT=nng: nng's ipc://)
	URL="unix://$RUN/tensord.sock"
	[ "${ROBOT_TRANSPORT:-unix}" = nng ] && URL="ipc://$RUN/tensord-nng.sock"
	cat >"$RUN/tensord.json" <<EOC
{"listen": ["unix://$RUN/tensord.sock", "ipc://$RUN/tensord-nng.sock"], "models_dir": "$D", "cache_dir": "$D/cache", "log_level": "warn", "oip_http_listen": "", "oip_grpc_listen": ""}
EOC
	rm -f "$RUN/tensord.sock" "$RUN/tensord-nng.sock"
	"$B/bin/tensord" --config "$RUN/tensord.json" 2>"$RUN/tensord.log" &
	pid=$!
	trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
	n=0
	while [ ! -S "$RUN/tensord.sock" ]; do
		n=$((n + 1))
		if [ $n -gt 200 ] || ! kill -0 $pid 2>/dev/null; then
			echo "demo.sh: tensord did not start; its log:" >&2
			cat "$RUN/tensord.log" >&2
			exit 1
		fi
		sleep 0.05
	done
fi
if [ -z "${ROBOT_ONLY_STATEFUL:-}" ]; then
	echo "== train through the daemon ($URL)"
	"$B/bin/robot_train" "$D" --url "$URL" --steps "${ROBOT_STEPS:-1500}" --min-acc "${ROBOT_MIN_ACC:-90}" \
		--serve-max "${ROBOT_SERVE_MAX:-4096}"
	echo "== robot: one command at a time"
	"$B/bin/robot" --url "$URL" "chuck the red block in the trash" "could you please fetch me the lime ball" \
		"freeze" "move to the desk" "move the navy cube onto the desk" "head back to base"
	if [ "${ROBOT_BENCH:-2000}" -gt 0 ]; then
		"$B/bin/robot" --url "$URL" --bench "${ROBOT_BENCH:-2000}"
	fi
	if [ -z "${ROBOT_SKIP_FLEET:-}" ]; then
		echo "== fleet"
		"$B/bin/robot_fleet" --url "$URL" -n "${ROBOT_FLEET_N:-32}" --seconds "${ROBOT_FLEET_SECONDS:-5}"
	fi
fi
if [ -z "${ROBOT_SKIP_STATEFUL:-}" ]; then
	echo "== fleet, stateful (one sequence a robot: the daemon keeps each robot's recurrent state)"
	if [ -n "${ROBOT_STATEFUL_STEPS:-}" ]; then
		set -- --steps "$ROBOT_STATEFUL_STEPS"
	else
		set -- --seconds "${ROBOT_STATEFUL_SECONDS:-${ROBOT_FLEET_SECONDS:-5}}"
	fi
	"$B/bin/robot_fleet" --url "$URL" --stateful -n "${ROBOT_STATEFUL_N:-${ROBOT_FLEET_N:-32}}" "$@"
fi
