#!/usr/bin/env bash
# cpu_levels.sh: prints the x86-64 levels (gcc's -march names) this host's CPU can run kernels of,
# lowest first (x86-64-v2, x86-64-v3, and x86-64-v4 where it has AVX-512), read from the CPU's
# feature flags; on another architecture "native". Used by tests/conformance.sh (each level's
# suites) and bench/cpu_levels.sh (each level against OpenBLAS).
set -euo pipefail
flags=$(grep -m1 -E '^(flags|Features)' /proc/cpuinfo 2>/dev/null || true)
has() { for f in "$@"; do grep -qw "$f" <<<"$flags" || return 1; done; }
if [ "$(uname -m)" != x86_64 ]; then
	echo native
	exit 0
fi
levels=""
has sse4_2 popcnt ssse3 && levels="x86-64-v2"
has sse4_2 popcnt ssse3 avx2 fma bmi2 f16c && levels+=" x86-64-v3"
has sse4_2 popcnt ssse3 avx2 fma bmi2 f16c avx512f avx512bw avx512dq avx512vl avx512cd && levels+=" x86-64-v4"
echo "${levels:-native}" | sed 's/^ //'
