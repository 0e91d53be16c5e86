# Per-call time of the real-world ONNX models of bench/onnx_models.h under onnxruntime (CPU): the
# peer figures for bench/onnx_models.c, on the very inputs it wrote (DIR/MODEL-bBATCH-in<i>.npy),
# and a check of its outputs (-out<k>.npy) against onnxruntime's (rtol 1e-3, atol 1e-4).
# Each call passes numpy inputs and gets numpy outputs; median of the calls after five warm-up
# calls. Threads: intra-op 2 (the machine's cores), inter-op 1, sequential execution.
# The models come from DIR/models.txt (name and file per line, written by bench_onnx_models -o).
# Usage: bench/.venv-onnx/bin/python bench/ort_models.py SITE_PACKAGES DIR CALLS
# Also a module: the models of a DIR, their sessions and inputs, for bench/kserve_onnx.py and
# bench/oip_load.py (bench/compare_oip.sh).
import glob, json, os, statistics, sys, time
import numpy as np
import onnxruntime as ort

RTOL, ATOL, THREADS = 1e-3, 1e-4, 2
# Quantized models and the float model each was made from (bench/quantize_models.py). Their
# outputs are checked against onnxruntime running the graph as written (graph optimizations off:
# every QuantizeLinear, DequantizeLinear and integer op as the spec defines it), within the
# quantization's own error (onnxruntime's optimized int8 run against its float run of the same
# inputs): its optimized run fuses the QDQ patterns into int8 kernels that requantize in their own
# way, as far from the graph's values as that error (0.19 on ppocr-cls's probabilities).
QUANTIZED_FROM = {"ppocr-qdq": "ppocr-cls", "ppocr-dyn": "ppocr-cls"}


def models(out_dir):
    """[(name, file under site-packages)] of DIR/models.txt."""
    with open(os.path.join(out_dir, "models.txt")) as f:
        return [tuple(line.split()[:2]) for line in f if line.strip()]


def load_spec(out_dir, name):
    """The model's model.load object (DIR/MODEL.load.json): its shapes, constants, batching."""
    with open(os.path.join(out_dir, f"{name}.load.json")) as f:
        return json.load(f)


def session(path, literal=False):
    """An onnxruntime CPU session with the options of every peer figure (literal: no graph
    optimizations, the graph run as written)."""
    opts = ort.SessionOptions()
    if literal:
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = THREADS
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.log_severity_level = 3  # silence the warnings about unused initializers
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def runs(out_dir, name):
    """[(batch, prefix)] of the runs bench_onnx_models wrote for the model, by batch."""
    found = [(int(p.rsplit("-b", 1)[1].split("-")[0]), p[: -len("-in0.npy")])
             for p in glob.glob(os.path.join(out_dir, f"{name}-b*-in0.npy"))]
    return sorted(found)


def feed(sess, prefix):
    """{input: array} of a run (PREFIX-in<i>.npy in the session's input order)."""
    return {i.name: np.load(f"{prefix}-in{k}.npy") for k, i in enumerate(sess.get_inputs())}


def main():
    site, out_dir, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
    print(f"onnxruntime {ort.__version__} (CPU), intra-op threads {THREADS}, inter-op 1, graph optimizations: all")
    failed = False
    files = dict(models(out_dir))
    for name, rel in files.items():
        sess = session(os.path.join(site, rel))
        base = QUANTIZED_FROM.get(name)
        fsess = session(os.path.join(site, files[base])) if base in files else None
        lsess = session(os.path.join(site, rel), literal=True) if fsess else None
        for batch, prefix in runs(out_dir, name):
            failed |= not time_run(sess, name, batch, prefix, calls, fsess, lsess)
    sys.exit(1 if failed else 0)


def time_run(sess, name, batch, prefix, calls, float_sess=None, literal_sess=None):
    """Times one run and checks tensord's outputs of it; True when they match: within RTOL and
    ATOL of sess's, or for a quantized model (float_sess: a session of the float model it was made
    from, literal_sess: the quantized graph run as written) within the largest difference between
    onnxruntime's quantized and float outputs of literal_sess's (the diff printed is to sess's)."""
    fd = feed(sess, prefix)
    for _ in range(5):
        ref = sess.run(None, fd)
    own = [float(np.max(np.abs(r - f))) for r, f in zip(ref, float_sess.run(None, fd))] if float_sess else None
    lit = literal_sess.run(None, fd) if literal_sess else None
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        sess.run(None, fd)
        times.append(time.perf_counter() - t0)
    med = statistics.median(times) * 1e3
    checks, worst, all_ok = [], 0.0, True
    for k, r in enumerate(ref):
        got = np.load(f"{prefix}-out{k}.npy")
        diff = float(np.max(np.abs(got - r))) if got.shape == r.shape else float("inf")
        if own:
            ldiff = float(np.max(np.abs(got - lit[k]))) if got.shape == lit[k].shape else float("inf")
            ok = ldiff <= max(own[k], ATOL)
        else:
            ok = got.shape == r.shape and np.allclose(got, r, rtol=RTOL, atol=ATOL)
        worst, all_ok = max(worst, diff), all_ok and ok
        bound = f" (to the graph as written {ldiff:.2e}; quantization's own error {own[k]:.2e})" if own else ""
        checks.append(f"out{k} max abs diff {diff:.2e}{bound} {'ok' if ok else 'MISMATCH'}")
    print(f"onnxruntime {name:10s} batch {batch:3d}: median {med:9.3f} ms per call (best {min(times) * 1e3:9.3f}); "
          f"tensord's outputs: {', '.join(checks)}")
    print(f"result onnxruntime {name} {batch} {med:.4f} {min(times) * 1e3:.4f} {'ok' if all_ok else 'MISMATCH'} {worst:.2e}")
    return all_ok


if __name__ == "__main__":
    main()
