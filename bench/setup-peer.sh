#!/usr/bin/env bash
# Creates bench/.venv (git-ignored) with tinygrad and numpy from PyPI: the side-by-side peer
# for tensord's benchmarks. tinygrad is never a dependency of tensord itself.
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q tinygrad numpy threadpoolctl
.venv/bin/python -c 'import importlib.metadata as m; print("tinygrad", m.version("tinygrad"), "numpy", m.version("numpy"))'
