#!/usr/bin/env bash
# tensorctl.sh: tensorctl against a live tensord (make tensorctl-check): every subcommand, the
# replay output (order, values, bad lines) and its resumption, sequences (infer --sequence, replay
# of interleaved sequence steps), .npy round trips, bench's CSV and SVG, train on Fashion-MNIST,
# usage errors and exit codes. Usage: tests/tensorctl.sh [BUILD]
set -u
BUILD=${1:-build}
CTL=$(realpath "$BUILD/bin/tensorctl")
TSD=$(realpath "$BUILD/bin/tensord")
HERE=$(cd "$(dirname "$0")" && pwd)
DIR=$(mktemp -d /tmp/tensorctl-test.XXXXXX)
FAILS=0
PASSES=0
PID=
PID2=

cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	[ -n "$PID2" ] && kill "$PID2" 2>/dev/null && wait "$PID2" 2>/dev/null
	if [ "$FAILS" = 0 ]; then rm -rf "$DIR"; else echo "tensorctl.sh: files kept in $DIR"; fi
}
trap cleanup EXIT

ok() { PASSES=$((PASSES + 1)); }
fail() { FAILS=$((FAILS + 1)); echo "FAIL: $*"; }
# expect RC CMD...: run CMD (tensorctl's arguments), its stdout in $DIR/out, stderr in $DIR/err
expect() {
	local want=$1; shift
	"$CTL" "$@" >"$DIR/out" 2>"$DIR/err"
	local rc=$?
	if [ "$rc" = "$want" ]; then ok; else
		fail "tensorctl $* exited $rc, expected $want"; tail -5 "$DIR/err"; fi
	if grep -q -E "Sanitizer|runtime error:" "$DIR/err"; then  # a sanitized build's report
		fail "tensorctl $*: sanitizer report"; head -30 "$DIR/err"; fi
}
has() { if grep -q -- "$2" "$1"; then ok; else fail "$1 lacks '$2'"; head -5 "$1"; fi; }
same() { if cmp -s "$1" "$2"; then ok; else fail "$1 and $2 differ"; diff "$1" "$2" | head -5; fi; }

# ---- the daemon ----
mkdir -p "$DIR/models"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
HTTP_PORT=$(free_port)
GRPC_PORT=$(free_port)
cat >"$DIR/tensord.json" <<EOF
{"listen": ["unix://$DIR/u.sock", "ipc://$DIR/s.sock"], "models_dir": "$DIR/models", "cache_dir": "$DIR/cache",
 "log_level": "warn", "oip_http_listen": "http://127.0.0.1:$HTTP_PORT", "oip_grpc_listen": "grpc://127.0.0.1:$GRPC_PORT"}
EOF
start_daemon() {
	"$TSD" --config "$DIR/tensord.json" 2>>"$DIR/tensord.log" &
	PID=$!
	for _ in $(seq 100); do "$CTL" status >/dev/null 2>&1 && break; sleep 0.1; done
}
# both transports serve; TSD_TEST_TRANSPORT=nng (make tensorctl-check's second run) picks nng's
if [ "${TSD_TEST_TRANSPORT:-unix}" = nng ]; then export TENSORD_URL="ipc://$DIR/s.sock"
else export TENSORD_URL="unix://$DIR/u.sock"; fi
echo "tensorctl.sh: clients on $TENSORD_URL"
start_daemon

# ---- help, usage errors, exit codes ----
expect 0 --help
has "$DIR/out" "exit status"
for c in status models load unload infer realize save train stats bench replay; do
	expect 0 "$c" --help
	has "$DIR/out" "usage: tensorctl $c"
done
expect 2 bogus
expect 2
expect 2 --timeout x status
expect 2 replay
expect 2 infer
expect 2 infer tiny
expect 2 replay /nonexistent.jsonl
expect 2 bench tiny --concurrency 0:x
expect 3 --url "ipc://$DIR/nobody.sock" status
expect 3 --url "unix://$DIR/nobody.sock" status

# ---- status, load, models, infer, stats ----
expect 0 status
has "$DIR/out" "ready:     yes"
# an endpoint list with a replica that is not there: the one that is answers (clients/failover.c)
expect 0 --url "unix://$DIR/nobody.sock,$TENSORD_URL" status
has "$DIR/out" "ready:     yes"
expect 0 load "$HERE/tensorctl/tiny.json"
has "$DIR/out" "loaded tiny version 1"
expect 0 models
has "$DIR/out" "ids:int32\[-1,8\]"
cat >"$DIR/in.json" <<'EOF'
{"ids": {"dtype": "int32", "shape": [2, 8], "data": [[1, 2, 3, 4, 5, 6, 7, 8], [1, 1, 1, 1, 1, 1, 1, 0]]}}
EOF
expect 0 infer tiny "$DIR/in.json"
tr -d ' \t\n' <"$DIR/out" >"$DIR/out1"
has "$DIR/out1" '"sum":{"dtype":"int32","shape":\[2\],"data":\[36,7\]}'
has "$DIR/out1" '"mean":{"dtype":"float32","shape":\[2\],"data":\[18,3.5\]}'
# the same with its inputs in shared memory (unix:// only; on nng a named refusal)
if [ "${TSD_TEST_TRANSPORT:-unix}" = nng ]; then
	expect 1 infer tiny "$DIR/in.json" --shm
	has "$DIR/err" "unix://"
else
	expect 0 infer tiny "$DIR/in.json" --shm
	tr -d ' \t\n' <"$DIR/out" >"$DIR/out2"
	same "$DIR/out1" "$DIR/out2"
fi
expect 1 infer nosuchmodel "$DIR/in.json"
has "$DIR/err" "unknown_model"
expect 0 stats
python3 -c "import json,sys; json.load(open(sys.argv[1]))['histograms']['queue_us']" "$DIR/out" && ok || fail "stats is not JSON with histograms"

# ---- ONNX files: as the file fixes their shapes, and batched through --shape ----
LIN=${ONNX_DATA:-/usr/share/libonnx-testdata/data}/pytorch-converted/test_Linear/model.onnx
if [ -f "$LIN" ]; then
	expect 0 load "$LIN" --name lin4
	has "$DIR/out" "loaded lin4 version 1"
	expect 0 load "$LIN" --shape 0=-1,10 --batch-max 8  # named after the file: "model"
	has "$DIR/out" "loaded model version 1"
	expect 0 models
	has "$DIR/out" "0:float32\[-1,10\]"
	has "$DIR/out" "3:float32\[-1,8\]"
	python3 "$HERE/tensorctl/npy.py" "$DIR/x4.npy" '<f4' 4,10 0.5 -1 0.25 2 -0.75 1.5 3 -2 0.1
	python3 "$HERE/tensorctl/npy.py" "$DIR/x1.npy" '<f4' 1,10 0.5 -1 0.25 2 -0.75 1.5 3 -2 0.1
	mkdir -p "$DIR/l4" "$DIR/lb" "$DIR/l1"
	expect 0 infer lin4 "0=$DIR/x4.npy" --out-dir "$DIR/l4"
	expect 0 infer model "0=$DIR/x4.npy" --out-dir "$DIR/lb"
	expect 0 infer model "0=$DIR/x1.npy" --out-dir "$DIR/l1"
	python3 - "$DIR/l4/3.npy" "$DIR/lb/3.npy" "$DIR/l1/3.npy" <<'EOF' && ok || fail "ONNX outputs: fixed vs batched"
import struct, sys
def npy(p):
    b = open(p, 'rb').read()
    n = struct.unpack('<H', b[8:10])[0]
    return b[10:10 + n].decode(), struct.unpack('<%df' % ((len(b) - 10 - n) // 4), b[10 + n:])
h4, a = npy(sys.argv[1]); hb, b = npy(sys.argv[2]); h1, c = npy(sys.argv[3])
assert "(4, 8)" in h4 and "(4, 8)" in hb and "(1, 8)" in h1, (h4, hb, h1)
assert all(abs(x - y) <= 1e-5 * (1 + abs(x)) for x, y in zip(a, b)), (a, b)
assert all(abs(x - y) <= 1e-5 * (1 + abs(x)) for x, y in zip(a[:8], c)), (a[:8], c)
assert any(abs(x) > 1e-3 for x in a)
EOF
	expect 1 infer lin4 "0=$DIR/x1.npy"  # the file fixes 4 rows
	has "$DIR/err" "shape_mismatch"
	expect 1 load "$LIN" --name k --const 0=1,2  # 40 values wanted
	has "$DIR/err" "2 value(s), the input has 40"
	expect 2 load "$LIN" --shape 0
	expect 2 load "$HERE/tensorctl/tiny.json" --shape a=1
	head -c 100 /dev/urandom >"$DIR/junk.onnx"
	expect 1 load "$DIR/junk.onnx"
	has "$DIR/err" "not a valid ONNX"
	expect 0 unload lin4
else
	echo "tensorctl.sh: ONNX checks SKIPPED ($LIN absent)"
fi

# ---- .npy: inputs, outputs, round trip through realize ----
python3 "$HERE/tensorctl/npy.py" "$DIR/ids.npy" '<i4' 2,8 1 2 3 4 5 6 7 8 1 1 1 1 1 1 1 0
mkdir -p "$DIR/o1" "$DIR/o2"
expect 0 infer tiny "ids=$DIR/ids.npy" --out-dir "$DIR/o1"
has "$DIR/out" "o1/sum.npy"
python3 - "$DIR/o1/sum.npy" "$DIR/o1/mean.npy" <<'EOF' && ok || fail ".npy outputs"
import struct, sys
def npy(p):
    b = open(p, 'rb').read()
    assert b[:8] == b'\x93NUMPY\x01\x00', b[:8]
    hl = struct.unpack('<H', b[8:10])[0]
    assert (10 + hl) % 64 == 0
    return eval(b[10:10 + hl].decode()), b[10 + hl:]
h, d = npy(sys.argv[1])
assert h == {'descr': '<i4', 'fortran_order': False, 'shape': (2,)}, h
assert struct.unpack('<2i', d) == (36, 7)
h, d = npy(sys.argv[2])
assert h['descr'] == '<f4' and h['shape'] == (2,) and struct.unpack('<2f', d) == (18.0, 3.5)
EOF
cat >"$DIR/ident.json" <<'EOF'
{"graph": {"nodes": [{"id": "a", "op": "input", "dtype": "int32", "shape": [2]},
  {"id": "z", "op": "const", "value": 0, "dtype": "int32"},
  {"id": "s", "op": "add", "in": ["a", "z"]}], "outputs": ["s"]}}
EOF
expect 0 realize "$DIR/ident.json" "a=$DIR/o1/sum.npy" --out-dir "$DIR/o2"
same "$DIR/o1/sum.npy" "$DIR/o2/s.npy"
expect 1 realize "$DIR/ident.json"
expect 2 realize "$DIR/ident.json" "a=$DIR/nonexistent.npy"

# ---- replay: values, order, bad lines; against single infers ----
python3 - "$DIR" <<'EOF'
import json, random, sys
d = sys.argv[1]
random.seed(7)
with open(d + '/log.jsonl', 'w') as f, open(d + '/want.jsonl', 'w') as w:
    for i in range(5000):
        ids = [random.randint(-100000, 100000) for _ in range(8)]
        f.write(json.dumps({"id": i, "model": "tiny", "inputs": {"ids": ids}}) + '\n')
        s = sum(ids)
        m = str(s // 2) if s % 2 == 0 else '%.1f' % (s / 2)
        w.write('{"id":%d,"outputs":{"sum":%d,"mean":%s}}\n' % (i, s, m))
        if i % 1000 == 999:  # bad lines among good ones: their batch-mates are unaffected
            f.write('{"id": "bad%d", "model": "tiny", "inputs": {"ids": [1, 2]}}\n' % i)
            w.write('{"id":"bad%d","error":"shape_mismatch","message":"inputs.ids: a list of 8 expected at depth 0, got 2"}\n' % i)
            f.write('not json\n')
            w.write('{"error":"bad_request","message":"not a JSON object"}\n')
            f.write('{"id": [%d], "model": "other", "inputs": {"ids": 1}}\n' % i)
            w.write('{"id":[%d],"error":"unknown_model","message":"model other is not loaded"}\n' % i)
EOF
expect 4 replay "$DIR/log.jsonl" -o "$DIR/r1.jsonl"
same "$DIR/want.jsonl" "$DIR/r1.jsonl"
has "$DIR/err" "5015 lines (0 before, 5015 this run), 15 errors"
expect 4 replay "$DIR/log.jsonl" --batch 7 --jobs 3 --priority realtime
same "$DIR/want.jsonl" "$DIR/out"
expect 2 replay "$DIR/log.jsonl" --priority urgent
for n in 0 1234 4999; do  # the same rows sent one by one with infer
	python3 -c "import json,sys; l=json.loads(open(sys.argv[1]).readlines()[int(sys.argv[2])]); print(json.dumps({'ids': {'dtype': 'int32', 'shape': [1, 8], 'data': l['inputs']['ids']}}))" "$DIR/log.jsonl" $n >"$DIR/one.json"
	expect 0 infer tiny "$DIR/one.json"
	python3 -c "import json,sys; a=json.load(open(sys.argv[1])); b=json.loads(open(sys.argv[2]).readlines()[int(sys.argv[3])])['outputs']; assert a['sum']['data']==[b['sum']] and a['mean']['data']==[b['mean']], (a,b)" "$DIR/out" "$DIR/r1.jsonl" $n && ok || fail "replay line $n differs from infer"
done

# ---- replay: a batch axis inside the shape, a model without one, models mixed ----
expect 0 load "$HERE/tensorctl/cols.json"
expect 0 load "$HERE/tensorctl/fixed.json"
cat >"$DIR/mix.jsonl" <<'EOF'
{"id": 1, "model": "cols", "inputs": {"x": [[1, -2, 3], [-4, 5, 0.1]]}}
{"id": 2, "model": "cols", "inputs": {"x": [[-1, 2, -3], [4, -5, 1e-3]]}}
{"id": 3, "model": "fixed", "inputs": {"a": [1, -2, 3.25]}}
{"id": 4, "model": "fixed", "inputs": {"a": [-1, 2, 1e30]}}
{"inputs": {"x": [[0, 0, 0], [1, 1, 1]]}, "model": "cols", "other": [1, {"a": "}"}]}
EOF
cat >"$DIR/mix_want.jsonl" <<'EOF'
{"id":1,"outputs":{"y":[[1,0,3],[0,5,0.100000001]],"z":[[2,-4,6],[-8,10,0.200000003]]}}
{"id":2,"outputs":{"y":[[0,2,0],[4,0,0.00100000005]],"z":[[-2,4,-6],[8,-10,0.00200000009]]}}
{"id":3,"outputs":{"r":[1,0,3.25]}}
{"id":4,"outputs":{"r":[0,2,1.00000002e+30]}}
{"outputs":{"y":[[0,0,0],[1,1,1]],"z":[[0,0,0],[2,2,2]]}}
EOF
expect 0 replay "$DIR/mix.jsonl"
same "$DIR/mix_want.jsonl" "$DIR/out"

# mutated lines: each answered on its own line; malformed ones refused, good ones answered
python3 "$HERE/tensorctl/replay_fuzz.py" gen "$DIR/fuzz.jsonl" 5 4000
expect 4 replay "$DIR/fuzz.jsonl" -o "$DIR/fuzz.out" --batch 16
python3 "$HERE/tensorctl/replay_fuzz.py" check "$DIR/fuzz.jsonl" "$DIR/fuzz.out" && ok || fail "replay of mutated lines"

# ---- replay: resumption ----
expect 5 replay "$DIR/log.jsonl" -o "$DIR/r2.jsonl" --stop-after 1234 --batch 100
[ "$(wc -l <"$DIR/r2.jsonl")" = 1234 ] && ok || fail "--stop-after 1234 wrote $(wc -l <"$DIR/r2.jsonl") lines"
head -c -9 "$DIR/r2.jsonl" >"$DIR/r3.jsonl" # a partial last line, as a kill leaves it
mv "$DIR/r3.jsonl" "$DIR/r2.jsonl"
expect 4 replay "$DIR/log.jsonl" -o "$DIR/r2.jsonl" --jobs 2
has "$DIR/err" "(1233 before, 3782 this run)"
same "$DIR/r1.jsonl" "$DIR/r2.jsonl"
expect 4 replay "$DIR/log.jsonl" -o "$DIR/r2.jsonl" # complete: nothing to do
same "$DIR/r1.jsonl" "$DIR/r2.jsonl"
# SIGTERM during a run of small batches: exit 5 (or 4 when it finished first), then resume
for _ in 1 2 3 4 5 6 7 8; do cat "$DIR/log.jsonl"; done >"$DIR/big.jsonl"
for _ in 1 2 3 4 5 6 7 8; do cat "$DIR/r1.jsonl"; done >"$DIR/big_want.jsonl"
"$CTL" replay "$DIR/big.jsonl" -o "$DIR/r4.jsonl" --batch 4 --jobs 1 2>"$DIR/err" &
RP=$!
sleep 0.3
kill -TERM $RP
wait $RP
rc=$?
{ [ $rc = 5 ] || [ $rc = 4 ]; } && ok || fail "replay after SIGTERM exited $rc"
expect 4 replay "$DIR/big.jsonl" -o "$DIR/r4.jsonl"
same "$DIR/big_want.jsonl" "$DIR/r4.jsonl"
expect 3 --url "ipc://$DIR/nobody.sock" replay "$DIR/log.jsonl"
# the daemon killed under a replay: exit 3 with complete lines only; resumed once it is back
"$CTL" --timeout 5000 replay "$DIR/big.jsonl" -o "$DIR/r5.jsonl" --batch 4 --jobs 2 2>"$DIR/err" &
RP=$!
sleep 0.5
kill -KILL "$PID"
wait "$PID" 2>/dev/null
wait $RP
rc=$?
{ [ $rc = 3 ] || [ $rc = 4 ]; } && ok || fail "replay with the daemon killed exited $rc"
start_daemon
expect 0 load "$HERE/tensorctl/tiny.json"
expect 4 replay "$DIR/big.jsonl" -o "$DIR/r5.jsonl"
same "$DIR/big_want.jsonl" "$DIR/r5.jsonl"

# ---- sequences: infer --sequence, replay of interleaved sequences (tests/tensorctl/rnn.json:
# the integer recurrent cell of tests/test_sequence.c, exact in float32; its sequences outlive
# the connection, so one sequence can span several tensorctl runs) ----
python3 "$HERE/tensorctl/npy.py" "$DIR/W.npy" '<f4' 4,3 1 0 -1 2 1 0 0 -2 1 1 1 1
python3 "$HERE/tensorctl/npy.py" "$DIR/U.npy" '<f4' 4,4 1 0 0 0 0 0 1 0 0 -1 0 0 0 0 0 1
python3 "$HERE/tensorctl/npy.py" "$DIR/V.npy" '<f4' 2,4 1 -1 2 0 0 1 1 -1
expect 0 load "$HERE/tensorctl/rnn.json" "W=$DIR/W.npy" "U=$DIR/U.npy" "V=$DIR/V.npy"
echo '{"x": {"dtype": "float32", "shape": [1, 3], "data": [1, 2, 3]}}' >"$DIR/x.json"
# y_is NAME COLS DATA: the last infer printed output NAME [1, COLS] with those numbers
y_is() { tr -d ' \t\n' <"$DIR/out" >"$DIR/out1"; has "$DIR/out1" "\"$1\":{\"dtype\":\"float32\",\"shape\":\[1,$2\],\"data\":\[$3\]}"; }
expect 1 infer rnn "$DIR/x.json" --sequence 41  # a step without --start
has "$DIR/err" "sequence_ended: sequence 41 of model \"rnn\": not live"
has "$DIR/err" "infer --sequence ID --start"
expect 0 infer rnn "$DIR/x.json" --sequence 41 --start
y_is y 2 "-6,-6"
if grep -q '"hn"' "$DIR/out"; then fail "the state was printed without --state"; else ok; fi
expect 0 infer rnn "$DIR/x.json" --sequence 41 --state
y_is y 2 "-14,-15"
y_is hn 4 "-3,3,-4,14"
expect 0 infer rnn "$DIR/x.json" --sequence 41 --end
y_is y 2 "-13,-24"
expect 1 infer rnn "$DIR/x.json" --sequence 41
has "$DIR/err" "ended by its sequence_end request"
expect 0 infer rnn "$DIR/x.json" --sequence rover-1 --start --end  # a name
y_is y 2 "-6,-6"
expect 2 infer rnn "$DIR/x.json" --start
has "$DIR/err" "need --sequence ID"
expect 2 infer rnn "$DIR/x.json" --sequence 0
expect 2 infer rnn "$DIR/x.json" --sequence 9007199254740993
expect 2 realize "$DIR/ident.json" --sequence 3
# a step that carries the state: refused by the daemon, and the sequence goes on unchanged
python3 "$HERE/tensorctl/npy.py" "$DIR/h.npy" '<f4' 1,4 0
python3 "$HERE/tensorctl/npy.py" "$DIR/x1.npy" '<f4' 1,3 1 2 3
expect 0 infer rnn "x=$DIR/x1.npy" --sequence 42 --start
expect 1 infer rnn "x=$DIR/x1.npy" "h=$DIR/h.npy" --sequence 42
has "$DIR/err" "bad_request: tensors: \"h\" is the sequence's state"
expect 0 infer rnn "x=$DIR/x1.npy" --sequence 42 --end
y_is y 2 "-14,-15"
# replay: two sequences interleaved (and a plain line carrying its state) give what the same
# steps give run one by one with infer
python3 - "$DIR" <<'EOF'
import json, random, sys
d = sys.argv[1]
random.seed(3)
with open(d + '/two.jsonl', 'w') as f, open(d + '/two.steps', 'w') as st:
    for k in range(12):
        for sid in (51, "arm-b"):
            x = [random.randint(-3, 3) for _ in range(3)]
            line = {"id": "%s/%d" % (sid, k), "model": "rnn", "sequence_id": sid, "inputs": {"x": x}}
            flags = []
            if k == 0:
                line["sequence_start"] = True
                flags.append("--start")
            if k == 11:
                line["sequence_end"] = True
                flags.append("--end")
            f.write(json.dumps(line) + '\n')
            st.write("%s %s %s\n" % (sid, ",".join(map(str, x)), " ".join(flags)))
        if k == 5:
            f.write(json.dumps({"id": "plain", "model": "rnn", "inputs": {"x": [1, 2, 3], "h": [1, 0, -1, 2]}}) + '\n')
EOF
expect 0 replay "$DIR/two.jsonl" -o "$DIR/two.out" --jobs 2 --batch 3
: >"$DIR/two.one"
while read -r sid x flags; do
	echo "{\"x\": {\"dtype\": \"float32\", \"shape\": [1, 3], \"data\": [$x]}}" >"$DIR/one.json"
	# shellcheck disable=SC2086
	"$CTL" infer rnn "$DIR/one.json" --sequence "$sid" $flags >"$DIR/one.out" || fail "infer --sequence $sid $flags"
	python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['y']['data'])" "$DIR/one.out" >>"$DIR/two.one"
done <"$DIR/two.steps"
python3 - "$DIR/two.out" "$DIR/two.one" <<'EOF' && ok || fail "replay of two interleaved sequences differs from the steps run one by one"
import json, sys
got = [json.loads(l) for l in open(sys.argv[1])]
one = [json.loads(l) for l in open(sys.argv[2])]
plain = [g for g in got if g["id"] == "plain"]
assert plain == [{"id": "plain", "outputs": {"y": [-6, -6], "hn": [-1, 3, -1, 8]}}], plain
seq = [g for g in got if g["id"] != "plain"]
assert len(seq) == len(one) == 24 and all("error" not in g for g in seq), got
assert [g["outputs"]["y"] for g in seq] == one, (seq, one)
assert all(list(g["outputs"]) == ["y"] for g in seq)  # the state stays in the daemon
EOF
# replay: 64 sequences starting, stepping, restarting and ending at random among plain lines,
# in small chunks on 4 connections, against the same cell computed here; then named errors
python3 - "$DIR" <<'EOF'
import json, random, sys
d = sys.argv[1]
W = [[1, 0, -1], [2, 1, 0], [0, -2, 1], [1, 1, 1]]
U = [[1, 0, 0, 0], [0, 0, 1, 0], [0, -1, 0, 0], [0, 0, 0, 1]]
V = [[1, -1, 2, 0], [0, 1, 1, -1]]
H0 = [1, 0, -1, 2]
def step(x, h):
    hn = [sum(a * b for a, b in zip(wr, x)) + sum(a * b for a, b in zip(ur, h)) for wr, ur in zip(W, U)]
    return hn, [sum(a * b for a, b in zip(vr, hn)) for vr in V]
def js(v):
    return "[" + ",".join("%d" % a for a in v) + "]"
random.seed(11)
live = {}
ids = [k + 1000 for k in range(40)] + ["s%d" % k for k in range(24)]
with open(d + '/many.jsonl', 'w') as f, open(d + '/many_want.jsonl', 'w') as w:
    for i in range(3000):
        x = [random.randint(-3, 3) for _ in range(3)]
        if random.random() < 0.1:  # a plain line: the state is an input
            h = [random.randint(-5, 5) for _ in range(4)]
            f.write(json.dumps({"id": i, "model": "rnn", "inputs": {"x": x, "h": h}}) + '\n')
            hn, y = step(x, h)
            w.write('{"id":%d,"outputs":{"y":%s,"hn":%s}}\n' % (i, js(y), js(hn)))
            continue
        sid = random.choice(ids)
        line = {"id": i, "model": "rnn", "sequence_id": sid, "inputs": {"x": x}}
        if sid not in live or random.random() < 0.02:
            line["sequence_start"] = True
            live[sid] = list(H0)
        if random.random() < 0.05:
            line["sequence_state"] = True
        end = random.random() < 0.04
        if end:
            line["sequence_end"] = True
        f.write(json.dumps(line) + '\n')
        live[sid], y = step(x, live[sid])
        out = '"y":%s' % js(y) + (',"hn":%s' % js(live[sid]) if line.get("sequence_state") else "")
        w.write('{"id":%d,"outputs":{%s}}\n' % (i, out))
        if end:
            del live[sid]
    f.write('{"id": "late", "model": "rnn", "sequence_id": "never", "inputs": {"x": [1, 2, 3]}}\n')
    w.write('{"id":"late","error":"sequence_ended","message":"sequence never of model \\"rnn\\": not live '
            '(never started, or ended long ago); a new one starts with sequence_start"}\n')
    f.write('{"id": "carry", "model": "rnn", "sequence_id": 1000, "inputs": {"x": [1, 2, 3], "h": [0, 0, 0, 0]}}\n')
    w.write('{"id":"carry","error":"bad_request","message":"inputs.h: the sequence\'s state: the daemon holds it, '
            'a step does not carry it"}\n')
    f.write('{"id": "zero", "model": "rnn", "sequence_id": 0, "inputs": {"x": [1, 2, 3]}}\n')
    w.write('{"id":"zero","error":"bad_request","message":"sequence_id: an integer in [1, 2^53] or a string of 1 to '
            '128 bytes"}\n')
with open(d + '/many_end.jsonl', 'w') as f:  # the sequences left live: a last step each
    for sid in live:
        f.write(json.dumps({"id": "end", "model": "rnn", "sequence_id": sid, "sequence_end": True,
                            "inputs": {"x": [0, 0, 0]}}) + '\n')
EOF
expect 4 replay "$DIR/many.jsonl" -o "$DIR/many.out" --batch 16 --jobs 4
same "$DIR/many_want.jsonl" "$DIR/many.out"
has "$DIR/err" "3003 lines (0 before, 3003 this run), 3 errors"
expect 0 replay "$DIR/many_end.jsonl" --jobs 3 --batch 2
expect 4 replay "$DIR/many.jsonl" --priority realtime  # the same again, fresh sequences, default chunks
same "$DIR/many_want.jsonl" "$DIR/out"
expect 0 replay "$DIR/many_end.jsonl"
expect 0 stats
python3 -c "import json,sys; q=json.load(open(sys.argv[1]))['models']['rnn']['sequence']; assert q['live'] == 0, q" "$DIR/out" && ok || fail "sequences left live after the replays"

# ---- bench: CSV and SVG (shape, not timings) ----
expect 0 bench tiny --concurrency 1:2 --window-ms 50 --max-windows 3 --csv "$DIR/b.csv" --plot "$DIR/b.svg"
python3 - "$DIR/b.csv" "$DIR/b.svg" <<'EOF' && ok || fail "bench CSV or SVG"
import csv, sys, xml.dom.minidom
rows = list(csv.DictReader(open(sys.argv[1])))
assert [r['concurrency'] for r in rows] == ['1', '2'], rows
for r in rows:
    assert float(r['throughput_rps']) > 0 and float(r['p99_ms']) >= float(r['p50_ms']) > 0, r
    assert r['errors'] == '0'
svg = xml.dom.minidom.parse(sys.argv[2])
assert len(svg.getElementsByTagName('polyline')) == 5
texts = ' '.join(t.firstChild.data for t in svg.getElementsByTagName('text') if t.firstChild)
assert 'p99 latency' in texts and 'throughput' in texts and 'concurrent requests' in texts, texts
EOF
expect 0 bench tiny --rate 50,100 --concurrency 2 --window-ms 50 --max-windows 3 --csv "$DIR/b2.csv"
has "$DIR/b2.csv" "^rate,throughput_rps"
expect 1 bench nosuchmodel --window-ms 50
# over the Open Inference Protocol's HTTP and gRPC frontends: the same sweep and table, no
# errors; nothing listening: no reply (3)
for p in http grpc; do
	[ $p = http ] && port=$HTTP_PORT || port=$GRPC_PORT
	expect 0 bench tiny --protocol $p --$p-url "$p://127.0.0.1:$port" --concurrency 1:2 --window-ms 50 --max-windows 3 --csv "$DIR/b-$p.csv"
	has "$DIR/out" "p99 ms"
	python3 - "$DIR/b-$p.csv" <<'EOF' && ok || fail "bench --protocol $p CSV"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert [r["concurrency"] for r in rows] == ["1", "2"], rows
assert all(float(r["throughput_rps"]) > 0 and r["errors"] == "0" for r in rows), rows
EOF
	expect 3 bench tiny --protocol $p --$p-url "$p://127.0.0.1:1" --window-ms 50
	has "$DIR/err" "$p://127.0.0.1:1"
done
has "$DIR/err" "grpc UNAVAILABLE"
expect 2 bench tiny --protocol quic
expect 2 bench tiny --protocol grpc --priority bulk
# a gRPC frontend that answers with an error: a second daemon, without the model (the model's
# inputs and the figures still from the first): gRPC's status and message, exit 1
GRPC2_PORT=$(free_port)
mkdir -p "$DIR/models2"
cat >"$DIR/tensord2.json" <<EOF
{"listen": ["unix://$DIR/u2.sock"], "models_dir": "$DIR/models2", "cache_dir": "$DIR/cache2",
 "log_level": "warn", "oip_http_listen": "", "oip_grpc_listen": "grpc://127.0.0.1:$GRPC2_PORT"}
EOF
"$TSD" --config "$DIR/tensord2.json" 2>>"$DIR/tensord2.log" &
PID2=$!
for _ in $(seq 100); do "$CTL" --url "unix://$DIR/u2.sock" status >/dev/null 2>&1 && break; sleep 0.1; done
expect 1 bench tiny --protocol grpc --grpc-url "grpc://127.0.0.1:$GRPC2_PORT" --window-ms 50
has "$DIR/err" "grpc NOT_FOUND: .*tiny"
kill -TERM "$PID2" && wait "$PID2" || fail "the second tensord exited $?"
PID2=

# ---- train (Fashion-MNIST), save, unload ----
python3 "$HERE/tensorctl/npy.py" "$DIR/w.npy" '<f4' 10,784 0
python3 "$HERE/tensorctl/npy.py" "$DIR/b.npy" '<f4' 10 0
expect 0 load "$HERE/tensorctl/fmnist.json" "w=$DIR/w.npy" "b=$DIR/b.npy"
F=/usr/share/datasets/fashion-mnist
if [ -f "$F/train-images-idx3-ubyte.gz" ]; then
	expect 0 train fmnist --data "$F/train-images-idx3-ubyte.gz" --data "$F/train-labels-idx1-ubyte.gz" \
		--target label --steps 30 --batch 64 --log-every 10
	has "$DIR/out" "step 30 loss"
	python3 -c "import sys; l=[float(x.split()[3]) for x in open(sys.argv[1])]; assert l[-1] < 1.6 < 2.31 and len(l) == 3, l" "$DIR/out" && ok || fail "train loss did not fall"
else
	echo "SKIP: train (no Fashion-MNIST in $F)"
fi
expect 2 train fmnist --data "$DIR/nonexistent.gz"
expect 2 train tiny --data "$DIR/ids.npy"  # not trainable
python3 - "$DIR/ds.safetensors" <<'EOF'  # 10 samples: x float32 [10, 784], label int64 [10]
import json, struct, sys
x = struct.pack('<7840f', *[(i % 784) / 784.0 for i in range(7840)])
y = struct.pack('<10q', *[i % 10 for i in range(10)])
h = json.dumps({"x": {"dtype": "F32", "shape": [10, 784], "data_offsets": [0, len(x)]},
                "label": {"dtype": "I64", "shape": [10], "data_offsets": [len(x), len(x) + len(y)]},
                "__metadata__": {"what": "test"}}).encode()
open(sys.argv[1], 'wb').write(struct.pack('<Q', len(h)) + h + x + y)
EOF
expect 0 train fmnist --data "$DIR/ds.safetensors" --steps 4 --batch 5 --lr 0.05   # the target's name from model.list
has "$DIR/out" "step 4 loss"
has "$DIR/err" "train: 4 steps of 5 samples (dataset 10)"
expect 0 save fmnist w.safetensors
[ -f "$DIR/models/w.safetensors" ] && ok || fail "save PATH wrote nothing"
mkdir -p "$DIR/sv"
expect 0 save fmnist --out-dir "$DIR/sv"
[ -f "$DIR/sv/w.npy" ] && [ -f "$DIR/sv/b.npy" ] && ok || fail "save --out-dir"
expect 0 load "$HERE/tensorctl/fmnist.json" --upload "$DIR/models/w.safetensors"
has "$DIR/out" "version 2"
python3 -c "import json,sys; json.dump(json.load(open(sys.argv[1]))['graph'], open(sys.argv[2], 'w'))" \
	"$HERE/tensorctl/fmnist.json" "$DIR/graph.json"
expect 2 load "$DIR/graph.json" --upload "$DIR/models/w.safetensors"
expect 0 load "$DIR/graph.json" --name bare --upload "$DIR/models/w.safetensors"
python3 "$HERE/tensorctl/npy.py" "$DIR/x.npy" '<f4' 3,784 0.5
expect 0 infer bare "x=$DIR/x.npy"
tr -d ' \t\n' <"$DIR/out" >"$DIR/out1"
has "$DIR/out1" '"y":{"dtype":"float32","shape":\[3,10\]'
expect 0 unload fmnist
expect 1 unload fmnist
expect 2 save fmnist

# the daemon drains and exits 0 after all that
kill -TERM "$PID"
wait "$PID"
rc=$?
PID=
[ $rc = 0 ] && ok || { fail "tensord exited $rc"; tail -20 "$DIR/tensord.log"; }

echo "tensorctl.sh: $PASSES passed, $FAILS failed"
[ "$FAILS" = 0 ]
