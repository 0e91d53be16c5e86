# Times a 1024x1024 fp32 matmul on tinygrad's CPU backend: the peer figure for tensord's matmul.
# Run with bench/.venv/bin/python (made by bench/setup-peer.sh); prints median and best of 5 runs.
import os, statistics, sys, time
os.environ.setdefault("DEV", "CPU")
from tinygrad import Tensor, Device

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
RUNS = 5

def run(a, b):
  dev = Device[Device.DEFAULT]
  t0 = time.perf_counter()
  (a @ b).realize()
  dev.synchronize()
  return time.perf_counter() - t0

a = Tensor.rand(N, N, dtype="float32").realize()
b = Tensor.rand(N, N, dtype="float32").realize()
Device[Device.DEFAULT].synchronize()
run(a, b)  # warm-up: schedules and compiles the kernel
times = [run(a, b) for _ in range(RUNS)]
med, best = statistics.median(times), min(times)
gflops = 2 * N**3 / best / 1e9
print(f"tinygrad matmul {N}: median {med*1e3:.1f} ms best {best*1e3:.1f} ms ({gflops:.1f} GFLOPS) [{Device.DEFAULT}]")
