# Per-call time of the real-world ONNX models of bench/onnx_models.h under onnxruntime (CPU): the
# peer figures for bench/onnx_models.c, on the very inputs it wrote (DIR/MODEL-bBATCH-in<i>.npy),
# and a check of its outputs (-out<k>.npy) against onnxruntime's (rtol 1e-3, atol 1e-4).
# Each call passes numpy inputs and gets numpy outputs; median of the calls after five warm-up
# calls. Threads: intra-op 2 (the machine's cores), inter-op 1, sequential execution.
# The models come from DIR/models.txt (name and file per line, written by bench_onnx_models -o).
# Usage: bench/.venv-onnx/bin/python bench/ort_models.py SITE_PACKAGES DIR CALLS
import glob, os, statistics, sys, time
import numpy as np
import onnxruntime as ort

RTOL, ATOL, THREADS = 1e-3, 1e-4, 2

site, out_dir, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(os.path.join(out_dir, "models.txt")) as f:
    models = [line.split() for line in f if line.strip()]
opts = ort.SessionOptions()
opts.intra_op_num_threads = THREADS
opts.inter_op_num_threads = 1
opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
opts.log_severity_level = 3  # silence the warnings about unused initializers
print(f"onnxruntime {ort.__version__} (CPU), intra-op threads {THREADS}, inter-op 1, graph optimizations: all")
failed = False
for name, rel in models:
    sess = ort.InferenceSession(os.path.join(site, rel), opts, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    for prefix in sorted(glob.glob(os.path.join(out_dir, f"{name}-b*-in0.npy")),
                         key=lambda p: int(p.rsplit("-b", 1)[1].split("-")[0])):
        prefix = prefix[: -len("-in0.npy")]
        batch = int(prefix.rsplit("-b", 1)[1])
        feed = {n: np.load(f"{prefix}-in{i}.npy") for i, n in enumerate(names)}
        for _ in range(5):
            ref = sess.run(None, feed)
        times = []
        for _ in range(calls):
            t0 = time.perf_counter()
            sess.run(None, feed)
            times.append(time.perf_counter() - t0)
        med = statistics.median(times) * 1e3
        checks, worst, all_ok = [], 0.0, True
        for k, r in enumerate(ref):
            got = np.load(f"{prefix}-out{k}.npy")
            ok = got.shape == r.shape and np.allclose(got, r, rtol=RTOL, atol=ATOL)
            diff = float(np.max(np.abs(got - r))) if got.shape == r.shape else float("inf")
            worst, all_ok = max(worst, diff), all_ok and ok
            checks.append(f"out{k} max abs diff {diff:.2e} {'ok' if ok else 'MISMATCH'}")
        failed |= not all_ok
        print(f"onnxruntime {name:10s} batch {batch:3d}: median {med:9.3f} ms per call (best {min(times) * 1e3:9.3f}); "
              f"tensord's outputs: {', '.join(checks)}")
        print(f"result onnxruntime {name} {batch} {med:.4f} {min(times) * 1e3:.4f} {'ok' if all_ok else 'MISMATCH'} {worst:.2e}")
sys.exit(1 if failed else 0)
