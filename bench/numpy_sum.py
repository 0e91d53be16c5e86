# numpy_sum.py: numpy's a.sum() of 2^k float32 values, the same as bench/global_sum.c makes
# (uniform in [0, 1) from the same LCG), median and best of several runs, with its error
# against a float64 sum. Args: log2 of the size (24), runs (9).
import sys
import time

import numpy as np

k = int(sys.argv[1]) if len(sys.argv) > 1 else 24
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 9
n = 1 << k
# the LCG of global_sum.c, vectorised: s_i = A^i s_0 + C (A^i - 1) / (A - 1), taken mod 2^64
M = (1 << 64) - 1
A, C = 6364136223846793005, 1442695040888963407
s = np.empty(n, dtype=np.uint64)
x = 1
for i in range(min(n, 1 << 12)):
    x = (x * A + C) & M
    s[i] = x
step = 1 << 12
a_pow, c_sum = 1, 0
for _ in range(step):  # the map s -> A^step s + c_sum
    a_pow, c_sum = (a_pow * A) & M, (c_sum * A + C) & M
while step < n:
    m = min(step, n - step)
    with np.errstate(over="ignore"):
        s[step:step + m] = s[:m] * np.uint64(a_pow) + np.uint64(c_sum)
    a2, c2 = (a_pow * a_pow) & M, (c_sum * a_pow + c_sum) & M
    a_pow, c_sum = a2, c2
    step *= 2
v = ((s >> np.uint64(40)).astype(np.float64) / 16777216.0).astype(np.float32)
ref = v.astype(np.float64).sum()
t0 = time.perf_counter()
while True:  # warm-up: once, and until 0.25 s passed (as bench.h's BENCH_WARMUP_MS)
    v.sum()
    if time.perf_counter() - t0 >= 0.25:
        break
t = []
for _ in range(runs):
    t0 = time.perf_counter()
    r = v.sum()
    t.append((time.perf_counter() - t0) * 1e3)
t.sort()
print(f"numpy {np.__version__} a.sum() of {n} float32: median {t[runs // 2]:.3f} ms best {t[0]:.3f} ms "
      f"({n * 4 / 1e6 / t[0]:.1f} GB/s) rel error {abs(float(r) - ref) / ref:.2g}")
