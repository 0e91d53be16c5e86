# Per-call time of the MLP 784-128-10 (relu) under tinygrad's TinyJit at batch 1 and 256: the
# peer figures for bench/jit_mlp.c. Each call uploads its input and reads the logits back
# (.numpy()), median of the calls after three warm-up calls (run, capture, first replay).
# Run with bench/.venv/bin/python (made by bench/setup-peer.sh).
import os, statistics, sys, time
os.environ.setdefault("DEV", "CPU")
import numpy as np
from tinygrad import Tensor, TinyJit, Device

CALLS = int(sys.argv[1]) if len(sys.argv) > 1 else 200
Tensor.manual_seed(1)
w1 = (Tensor.randn(784, 128) * 0.05).realize()
b1 = (Tensor.randn(128) * 0.01).realize()
w2 = (Tensor.randn(128, 10) * 0.1).realize()
b2 = (Tensor.randn(10) * 0.01).realize()

def forward(x): return ((x @ w1 + b1).relu() @ w2 + b2).realize()

for bs in (1, 256):
  x = (np.arange(bs * 784, dtype=np.float32).reshape(bs, 784) * 7919 % 1000) / 1000
  for mode in ("plain", "jit"):
    fn = TinyJit(forward) if mode == "jit" else forward
    for _ in range(3): fn(Tensor(x)).numpy()
    times = []
    for c in range(CALLS):
      x[0, c % 784] += 1e-3
      t0 = time.perf_counter()
      fn(Tensor(x)).numpy()
      times.append(time.perf_counter() - t0)
    med = statistics.median(times) * 1e6
    # the call alone: input already on the device, output left there
    xt = Tensor(x).realize()
    calls = []
    for c in range(CALLS):
      t0 = time.perf_counter()
      fn(xt)
      Device[Device.DEFAULT].synchronize()
      calls.append(time.perf_counter() - t0)
    call = statistics.median(calls) * 1e6
    print(f"tinygrad mlp batch {bs:3d} {mode:6s}: median {med:8.1f} us per call with upload and read-back, {call:8.1f} us the call alone [{Device.DEFAULT}]")
