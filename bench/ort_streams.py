"""ort_streams.py: the peer of bench_sequence_streams: onnxruntime (CPU, its default threads, or
ORT_THREADS) running S silero-vad streams one after another in one process, each step one
512-sample chunk at batch 1 carrying its own LSTM state, the way one program would serve S
robots without a server. Prints steps/s and "result ort_sps N".
Usage: ort_streams.py SITE_PACKAGES [STREAMS] [ROUNDS]"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import onnxruntime as ort


def main() -> int:
    site = sys.argv[1]
    streams = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    so = ort.SessionOptions()
    if os.environ.get("ORT_THREADS"):
        so.intra_op_num_threads = int(os.environ["ORT_THREADS"])
    sess = ort.InferenceSession(os.path.join(site, "silero_vad/data/silero_vad_op18_ifless.onnx"), so,
                                providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    sr = np.array(16000, np.int64)
    states = [np.zeros((2, 1, 128), np.float32) for _ in range(streams)]
    chunk = (rng.standard_normal((1, 512)) * 0.3).astype(np.float32)
    for s in range(streams):  # warm-up
        sess.run(None, {"input": chunk, "sr": sr, "state": states[s]})
    t0 = time.perf_counter()
    for _ in range(rounds):
        for s in range(streams):
            out, states[s] = sess.run(None, {"input": chunk, "sr": sr, "state": states[s]})
    dt = time.perf_counter() - t0
    sps = streams * rounds / dt
    print(f"onnxruntime {ort.__version__}: {streams} streams one after another, {sps:.0f} steps/s")
    print(f"result ort_sps {sps:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
