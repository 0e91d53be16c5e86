#!/usr/bin/env bash
# Creates tests/onnx/.venv (git-ignored) with the onnx wheel from PyPI, pinned: its node test
# cases (definitions, not data) are what make onnx-check-1.23 generates data from
# (scripts/onnx-node-data.py). Never a dependency of tensord. Idempotent.
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-python3}"
VER=1.23.2
if [ -x .venv/bin/python ] && .venv/bin/python -c "import importlib.metadata as m, sys; sys.exit(m.version('onnx') != '$VER')" 2>/dev/null; then
	exit 0
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "onnx==$VER"
.venv/bin/python -c 'import importlib.metadata as m; print(*(f"{p} {m.version(p)}" for p in ("onnx", "numpy")))'
