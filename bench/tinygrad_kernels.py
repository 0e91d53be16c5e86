# Prints how many kernels tinygrad (CPU backend) runs for each reference graph: the fusion peer
# for tensord's scheduler. Inputs are realized first so only the graph itself is counted.
import os
os.environ.setdefault("DEV", "CPU")
from tinygrad import Tensor, Device, GlobalCounters, dtypes

def count(name, build):
  Tensor.manual_seed(0)
  outs, inputs = build()
  Tensor.realize(*inputs)
  Device[Device.DEFAULT].synchronize()
  GlobalCounters.reset()
  Tensor.realize(*outs)
  Device[Device.DEFAULT].synchronize()
  print(f"{name:<38} {GlobalCounters.kernel_count} kernels")

def mm_bias_relu():
  x, w, b = Tensor.randn(64, 128), Tensor.randn(128, 128), Tensor.randn(128)
  return [(x @ w + b).relu()], [x, w, b]

def mlp():
  x, w1, b1 = Tensor.randn(64, 784), Tensor.randn(784, 128), Tensor.randn(128)
  w2, b2 = Tensor.randn(128, 10), Tensor.randn(10)
  return [((x @ w1 + b1).relu() @ w2 + b2)], [x, w1, b1, w2, b2]

def softmax():
  x = Tensor.randn(64, 10)
  return [x.softmax(-1)], [x]

def layernorm():
  x = Tensor.randn(64, 128)
  return [x.layernorm(-1)], [x]

def argmax():
  x = Tensor.randn(64, 10)
  return [x.argmax(-1)], [x]

def sparse_ce():
  x, y = Tensor.randn(64, 10), Tensor.randint(64, high=10)
  return [x.sparse_categorical_crossentropy(y)], [x, y]

def conv_relu():
  x, w, b = Tensor.randn(8, 1, 28, 28), Tensor.randn(32, 1, 3, 3), Tensor.randn(32)
  return [x.conv2d(w, b).relu()], [x, w, b]

def siblings():
  x = Tensor.randn(64, 128)
  return [x + 1, x * 2], [x]

print(f"tinygrad kernel counts [{Device.DEFAULT}]")
count("matmul+bias+relu (64x128@128x128)", mm_bias_relu)
count("MLP fwd 784-128-10, batch 64", mlp)
count("softmax last axis (64x10)", softmax)
count("layernorm last axis (64x128)", layernorm)
count("argmax last axis (64x10)", argmax)
count("sparse categorical CE (64x10)", sparse_ce)
count("conv2d 1->32 3x3 + relu (8x28x28)", conv_relu)
count("siblings x+1, x*2 realized together", siblings)
