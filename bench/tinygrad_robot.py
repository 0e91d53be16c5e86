# The robot brain (examples/robot/spec.c) in tinygrad with TinyJit, in-process: the same
# weights (a safetensors file), the same greedy decode written as tensor maths (bag of words via
# one_hot x embedding, five argmax steps fed back as one-hot rows), timed per call at batch 1, 8,
# 16, 32, 64, 512, 4096 (upload, the jitted decode, read-back with .numpy(); median) and one
# decision p50/p95. First checks its plans against tensord's (bench_robot_table's check file).
# Usage: bench/.venv/bin/python bench/tinygrad_robot.py WEIGHTS.safetensors CHECK.json [calls (200)]
import json, os, statistics, sys, time
os.environ.setdefault("DEV", "CPU")
import numpy as np
from tinygrad import Tensor, TinyJit, Device, dtypes
from tinygrad.nn.state import safe_load

L, T, START = 8, 5, 1
weights, check = sys.argv[1], sys.argv[2]
CALLS = int(sys.argv[3]) if len(sys.argv) > 3 else 200
w = {k: v.to(Device.DEFAULT).realize() for k, v in safe_load(weights).items()}
V1, H = w["emb"].shape
P = w["w_out"].shape[1]

def one_hot(ids, n):  # integer ids -> float32 rows; out-of-range ids give zero rows
  return (ids.unsqueeze(-1) == Tensor.arange(n)).float()

def decode(ids):
  ctx = one_hot(ids - 1, V1).sum(1) @ w["emb"] + w["b1"]
  pe = w["prev_emb"][START].reshape(1, H)
  ys = []
  for t in range(T):
    h = (ctx + pe + w["pos"][t]).relu()
    z = h @ w["w_out"] + w["b_out"]
    ys.append(z.argmax(-1))
    pe = one_hot(ys[-1], P) @ w["prev_emb"]  # as spec.c
  return Tensor.stack(*ys, dim=1).cast(dtypes.int32).realize()

ref = json.load(open(check))
ids = np.array(ref["ids"], dtype=np.int32)
got = decode(Tensor(ids)).numpy()
same = int((got == np.array(ref["plans"], dtype=np.int32)).all(axis=1).sum())
print(f"tinygrad: plans equal to tensord's on {same}/{len(ids)} commands [{Device.DEFAULT}]")

cmds = np.tile(ids, (4096 // len(ids) + 1, 1))
for b in (1, 8, 16, 32, 64, 512, 4096):
  x = np.ascontiguousarray(cmds[:b])
  fn = TinyJit(decode)
  for _ in range(3): fn(Tensor(x)).numpy()
  n = CALLS if b < 512 else max(CALLS // 4, 10)
  times = []
  for _ in range(n):
    t0 = time.perf_counter()
    fn(Tensor(x)).numpy()
    times.append(time.perf_counter() - t0)
  print(f"RESULT tinygrad batch {b} ms {statistics.median(times) * 1e3:.4f}")
fn = TinyJit(decode)
x = np.ascontiguousarray(cmds[:1])
for _ in range(100): fn(Tensor(x)).numpy()
times = []
for i in range(2000):
  x = np.ascontiguousarray(cmds[i % 64:i % 64 + 1])
  t0 = time.perf_counter()
  fn(Tensor(x)).numpy()
  times.append(time.perf_counter() - t0)
times.sort()
print(f"RESULT tinygrad decision p50 {times[1000] * 1e3:.4f} p95 {times[1900] * 1e3:.4f}")
