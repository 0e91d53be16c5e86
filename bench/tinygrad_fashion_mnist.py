# Trains tinygrad's examples/beautiful_mnist.py model on Fashion-MNIST on tinygrad's CPU backend: the peer figure
# for tensord's examples/fashion_mnist. Run with bench/.venv/bin/python; args STEPS (default 70) and BATCH (512).
import gzip, os, statistics, sys, time
os.environ.setdefault("DEV", "CPU")
from typing import Callable
import numpy as np
from tinygrad import Tensor, TinyJit, nn, GlobalCounters, function, Context

DATA = "/usr/share/datasets/fashion-mnist"
STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 70
BATCH = int(sys.argv[2]) if len(sys.argv) > 2 else 512
EVAL_BATCH = 1000  # tensord's example evaluates in batches of 1000 too; 10000 test images split evenly

def idx(name: str, offset: int) -> np.ndarray:
  with gzip.open(f"{DATA}/{name}", "rb") as f: return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)

# the model and steps are beautiful_mnist.py's (tinygrad master, matching the 0.14 API), BS as an argument
class Model:
  def __init__(self):
    self.layers: list[Callable[[Tensor], Tensor]] = [
      nn.Conv2d(1, 32, 5), Tensor.relu,
      nn.Conv2d(32, 32, 5), Tensor.relu,
      nn.BatchNorm(32), Tensor.max_pool2d,
      nn.Conv2d(32, 64, 3), Tensor.relu,
      nn.Conv2d(64, 64, 3), Tensor.relu,
      nn.BatchNorm(64), Tensor.max_pool2d,
      lambda x: x.flatten(1), nn.Linear(576, 10)]

  @function
  def __call__(self, x: Tensor) -> Tensor: return x.sequential(self.layers)

  @TinyJit
  @Context(TRAINING=1)
  def train_step(self, X_train: Tensor, Y_train: Tensor) -> Tensor:
    opt.zero_grad()
    samples = Tensor.randint(BATCH, high=X_train.shape[0])
    loss = self(X_train[samples]).sparse_categorical_crossentropy(Y_train[samples]).backward()
    return loss.realize(*opt.schedule_step())

  @TinyJit
  def get_test_acc(self, X_test: Tensor, Y_test: Tensor) -> Tensor: return (self(X_test).argmax(axis=1) == Y_test).mean()*100

if __name__ == "__main__":
  # raw 0..255 values as float32 (the example's mnist() gives uint8, which the first conv promotes to float)
  X_train = Tensor(idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28).astype(np.float32)).realize()
  Y_train = Tensor(idx("train-labels-idx1-ubyte.gz", 8).astype(np.int32)).realize()
  X_test = idx("t10k-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28).astype(np.float32)
  Y_test = idx("t10k-labels-idx1-ubyte.gz", 8).astype(np.int32)

  Tensor.manual_seed(42)
  model = Model()
  opt = nn.optim.Adam(nn.state.get_parameters(model))

  times, loss_v = [], float("nan")
  for i in range(STEPS):
    GlobalCounters.reset()
    t0 = time.perf_counter()
    loss = model.train_step(X_train, Y_train)
    loss_v = loss.item()  # waits for the step's kernels
    times.append(time.perf_counter() - t0)
    print(f"\rstep {i+1}/{STEPS} loss {loss_v:.3f} {times[-1]:.2f} s ", end="", file=sys.stderr, flush=True)
  print(file=sys.stderr)

  accs = [model.get_test_acc(Tensor(X_test[at:at+EVAL_BATCH]), Tensor(Y_test[at:at+EVAL_BATCH])).item()
          for at in range(0, len(Y_test), EVAL_BATCH)]
  acc = statistics.fmean(accs)

  first = times[0] if times else float("nan")
  med = statistics.median(times[1:]) if len(times) > 1 else float("nan")
  print(f"tinygrad fashion_mnist: steps {STEPS} batch {BATCH} first step {first:.2f} s, median {med:.3f} s/step, "
        f"test_accuracy {acc:.2f}%")
