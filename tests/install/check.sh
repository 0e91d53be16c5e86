#!/bin/sh
# check.sh: `make install-check`'s driver: builds check.c against the prefix installed under
# $INSTALL_CHECK with pkg-config alone, starts the installed tensord there and runs the program.
set -eu
: "${INSTALL_CHECK:?}" "${CC:=cc}"
dir="$INSTALL_CHECK"
here=$(dirname "$0")
flags=$(pkg-config --cflags --libs tensord)
echo "install-check: cc check.c $flags"
# shellcheck disable=SC2086
$CC -std=c11 -Wall -Wextra -Werror -o "$dir/check" "$here/check.c" $flags -lm
mkdir -p "$dir/run"
printf '{"listen": ["ipc://%s/run/d.sock"], "log_level": "warn", "oip_http_listen": "", "oip_grpc_listen": "", "cache_dir": "%s/run/cache"}\n' \
	"$dir" "$dir" > "$dir/run/tensord.json"
"$dir/usr/bin/tensord" --config "$dir/run/tensord.json" 2> "$dir/run/tensord.err" &
pid=$!
rc=0
LD_LIBRARY_PATH="$dir/usr/lib" "$dir/check" "ipc://$dir/run/d.sock" || rc=$?
kill -TERM "$pid" 2>/dev/null || true
wait "$pid" || { echo "install-check: tensord exited $?"; cat "$dir/run/tensord.err"; rc=1; }
[ "$rc" = 0 ] || { echo "install-check: FAILED"; tail -20 "$dir/run/tensord.err"; }
exit "$rc"
