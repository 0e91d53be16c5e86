#!/usr/bin/env bash
# Trains the beautiful_mnist conv net on Fashion-MNIST with tensord and with tinygrad's CPU backend, one after the
# other (tensord with tinygrad's hyperparameters: Adam lr 0.001, constant, raw inputs), and prints both lines
# plus the per-step time ratio. Args: STEPS (10) BATCH (512); needs bench/setup-peer.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-10}"
B="${2:-512}"
make -s build/bin/fashion_mnist
[ -x bench/.venv/bin/python ] || bench/setup-peer.sh
ours=$(build/bin/fashion_mnist --steps "$N" --batch "$B" --lr 0.001 --schedule const --inputs raw --bn-recal 0 | grep '^steps ')
peer=$(bench/.venv/bin/python bench/tinygrad_fashion_mnist.py "$N" "$B" | grep '^tinygrad fashion_mnist:')
echo "tensord  fashion_mnist: $ours"
echo "$peer"
# tensord prints the mean of steps 2..N, tinygrad the median of steps 2..N (its step 2 is the TinyJit capture)
o=$(sed -E 's/.*then ([0-9.]+) s\/step.*/\1/' <<<"$ours")
p=$(sed -E 's/.*median ([0-9.]+) s\/step.*/\1/' <<<"$peer")
awk -v o="$o" -v p="$p" 'BEGIN { if (o > 0) printf "tinygrad / tensord time per step: %.2fx\n", p / o;
                                 else print "tinygrad / tensord time per step: n/a (need 2 or more steps)" }'
