#!/usr/bin/env bash
# Creates bench/.venv-onnx (git-ignored) with onnxruntime and numpy, the side-by-side peer of
# bench/compare_onnx.sh, and the PyPI packages that carry its real-world models
# (rapidocr-onnxruntime, silero-vad). Those two are installed without their dependencies (torch,
# opencv, ...): only their .onnx files are used. Also onnx, whose wheel carries ONNX's "light"
# models (make onnx-light). None of it is a dependency of tensord.
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-python3}"
[ -x .venv-onnx/bin/python ] || "$PY" -m venv .venv-onnx
.venv-onnx/bin/python -m pip install -q --upgrade pip
.venv-onnx/bin/python -m pip install -q onnxruntime numpy onnx
.venv-onnx/bin/python -m pip install -q --no-deps rapidocr-onnxruntime silero-vad
.venv-onnx/bin/python -c 'import importlib.metadata as m; print(*(f"{p} {m.version(p)}" for p in
	("onnxruntime", "numpy", "onnx", "rapidocr-onnxruntime", "silero-vad")))'
