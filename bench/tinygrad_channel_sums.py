# Times the per-channel sum over (N, H, W) of a 512 x C x 20 x 20 float32 tensor on tinygrad (its device from DEV,
# default CPU): the peer figure for bench/channel_sums.c. Run with bench/.venv/bin/python; args C (32) RUNS (7).
import os, statistics, sys, time
os.environ.setdefault("DEV", "CPU")
from tinygrad import Tensor, Device

C = int(sys.argv[1]) if len(sys.argv) > 1 else 32
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 7

def run():
  dev = Device[Device.DEFAULT]
  x = Tensor.rand(512, C, 20, 20, dtype="float32").realize()  # a fresh input each run, as tensord's bench
  dev.synchronize()
  t0 = time.perf_counter()
  x.sum(axis=(0, 2, 3)).realize()
  dev.synchronize()
  return time.perf_counter() - t0

run()  # warm-up: schedules and compiles the kernels
times = sorted(run() for _ in range(RUNS))
med, best = statistics.median(times), times[0]
gbs = 512 * C * 400 * 4 / 1e9 / best
print(f"tinygrad channel sums 512x{C}x20x20: median {med*1e3:.2f} ms best {best*1e3:.2f} ms ({gbs:.1f} GB/s) [{Device.DEFAULT}]")
