#!/usr/bin/env bash
# Trains the beautiful_mnist conv net on Fashion-MNIST with tensord and with tinygrad's CPU backend, one after the
# other (tensord with tinygrad's hyperparameters: Adam lr 0.001, constant, raw inputs), and prints both lines
# plus the per-step time ratio; tensord once per x86-64 level the host runs (bench/cpu_levels.sh: its
# kernels built for the level, TENSORD_CPU_MARCH; LEVELS picks some). Args: STEPS (10) BATCH (512);
# needs bench/setup-peer.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-10}"
B="${2:-512}"
make -s build/bin/fashion_mnist
[ -x bench/.venv/bin/python ] || bench/setup-peer.sh
. bench/cpu_levels.sh
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores; levels: $LEVELS"
peer=$(bench/.venv/bin/python bench/tinygrad_fashion_mnist.py "$N" "$B" | grep '^tinygrad fashion_mnist:')
echo "$peer"
# tensord prints the mean of steps 2..N, tinygrad the median of steps 2..N (its step 2 is the TinyJit capture)
p=$(sed -E 's/.*median ([0-9.]+) s\/step.*/\1/' <<<"$peer")
for L in $LEVELS; do
	ours=$(TENSORD_CPU_MARCH="$L" build/bin/fashion_mnist --steps "$N" --batch "$B" --lr 0.001 --schedule const --inputs raw --bn-recal 0 | grep '^steps ')
	echo "tensord $L fashion_mnist: $ours"
	o=$(sed -E 's/.*then ([0-9.]+) s\/step.*/\1/' <<<"$ours")
	awk -v o="$o" -v p="$p" -v l="$L" 'BEGIN { if (o > 0) printf "tinygrad / tensord %s time per step: %.2fx\n", l, p / o;
	                                         else print "tinygrad / tensord time per step: n/a (need 2 or more steps)" }'
done
