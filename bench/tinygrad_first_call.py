# Time to the first result in a new process under tinygrad (CPU backend): the peer figures for
# bench/first_call.c. Builds the MLP 784-128-10 or beautiful_mnist's conv net with random
# weights, realizes them ("weights ready"), runs one forward pass at batch 1 and reads the
# logits ("first result"); prints both as time.time_ns() so the caller measures from before
# the interpreter started. The kernel cache is tinygrad's CACHEDB (set by the caller).
import os, sys, time
os.environ.setdefault("DEV", "CPU")
import numpy as np
from tinygrad import Tensor, nn

which = sys.argv[1] if len(sys.argv) > 1 else "mlp"
Tensor.manual_seed(1)
x = (np.arange(784, dtype=np.float32) % 255)
if which == "fmnist":
  layers = [nn.Conv2d(1, 32, 5), Tensor.relu, nn.Conv2d(32, 32, 5), Tensor.relu, nn.BatchNorm(32), Tensor.max_pool2d,
            nn.Conv2d(32, 64, 3), Tensor.relu, nn.Conv2d(64, 64, 3), Tensor.relu, nn.BatchNorm(64), Tensor.max_pool2d,
            lambda t: t.flatten(1), nn.Linear(576, 10)]
  Tensor.realize(*nn.state.get_parameters(layers))
  ready = time.time_ns()
  out = Tensor(x.reshape(1, 1, 28, 28)).sequential(layers).numpy()
else:
  w1, b1 = (Tensor.randn(784, 128) * 0.05).realize(), (Tensor.randn(128) * 0.01).realize()
  w2, b2 = (Tensor.randn(128, 10) * 0.1).realize(), (Tensor.randn(10) * 0.01).realize()
  ready = time.time_ns()
  out = ((Tensor(x.reshape(1, 784)) @ w1 + b1).relu() @ w2 + b2).numpy()
print(f"ready_ns {ready} first_ns {time.time_ns()}")
