# Times float32 matmuls with numpy (its bundled OpenBLAS, 2 threads set by threadpoolctl): the peer
# figures for bench/compare_numpy.sh. Args: shapes as N (square) or MxKxN (a trailing t: the right
# side stored N x K and transposed, x @ w.T); prints one line each.
import statistics, sys, time
import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

RUNS = 7
THREADS = 2

def shape(s):
  p = [int(x) for x in s.rstrip("t").split("x")]
  return (p[0], p[0], p[0]) if len(p) == 1 else tuple(p)

with threadpool_limits(limits=THREADS, user_api="blas"):
  info = [i for i in threadpool_info() if i["user_api"] == "blas"][0]
  print(f"numpy {np.__version__}: {info['internal_api']} {info['version']} kernel {info['architecture']}, "
        f"{info['num_threads']} threads")
  rng = np.random.default_rng(0)
  for s in sys.argv[1:]:
    m, k, n = shape(s)
    a = rng.random((m, k), dtype=np.float32)
    b = rng.random((n, k), dtype=np.float32).T if s.endswith("t") else rng.random((k, n), dtype=np.float32)
    t0 = time.perf_counter()
    while True:  # warm-up: once, and until 0.25 s passed (as bench.h's BENCH_WARMUP_MS)
      a @ b
      if time.perf_counter() - t0 >= 0.25:
        break
    t = []
    for _ in range(RUNS):
      t0 = time.perf_counter()
      a @ b
      t.append(time.perf_counter() - t0)
    med, best = statistics.median(t), min(t)
    print(f"numpy matmul {s}: median {med*1e3:.3f} ms best {best*1e3:.3f} ms ({2*m*k*n/best/1e9:.1f} GFLOPS)")
