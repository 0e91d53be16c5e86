#!/usr/bin/env bash
# Creates tests/oip/.venv (git-ignored) with Triton's Python client from PyPI, pinned: the
# Open Inference Protocol clients nobody here wrote that make oip-check drives tensord with
# (tests/oip/test_tritonclient.py). Never a dependency of tensord. Idempotent.
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-python3}"
PIN="tritonclient[http,grpc]==2.73.0"
if [ -x .venv/bin/python ] && .venv/bin/python -c 'import importlib.metadata as m, sys; sys.exit(m.version("tritonclient") != "2.73.0")' 2>/dev/null; then
	exit 0
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "$PIN" numpy
.venv/bin/python -c 'import importlib.metadata as m; print(*(f"{p} {m.version(p)}" for p in ("tritonclient", "numpy", "grpcio", "geventhttpclient")))'
