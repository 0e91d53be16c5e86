#!/usr/bin/env bash
# Creates bench/.venv-kserve (git-ignored): KServe's Python ModelServer with onnxruntime, the peer
# a user would pick instead of tensord for bench/compare_oip.sh (bench/kserve_onnx.py serves the
# ONNX files of bench/.venv-onnx through it), and Triton's Python client, the one client that
# drives both servers (bench/oip_load.py). Versions pinned; the only step of the comparison that
# reaches PyPI. None of it is a dependency of tensord. Idempotent.
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-python3}"
PINS=(kserve==0.21.0 onnxruntime==1.32.0 numpy==2.4.6 "tritonclient[http,grpc]==2.73.0")
show() {
	.venv-kserve/bin/python -c 'import importlib.metadata as m; print(*(f"{p} {m.version(p)}" for p in
		("kserve", "onnxruntime", "numpy", "tritonclient", "grpcio", "geventhttpclient", "fastapi", "uvicorn")))'
}
want() { # every pin installed at its version
	.venv-kserve/bin/python - "${PINS[@]}" <<-'EOF' 2>/dev/null
	import importlib.metadata as m, sys
	sys.exit(any(m.version(p.split("[")[0].split("==")[0]) != p.split("==")[1] for p in sys.argv[1:]))
	EOF
}
if [ -x .venv-kserve/bin/python ] && want; then
	show
	exit 0
fi
[ -x .venv-kserve/bin/python ] || "$PY" -m venv .venv-kserve
.venv-kserve/bin/python -m pip install -q --upgrade pip
.venv-kserve/bin/python -m pip install -q "${PINS[@]}"
show
