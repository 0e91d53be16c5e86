# cpu_levels.sh (sourced by the compare scripts): the x86-64 levels this host can run kernels of,
# each with the OpenBLAS kernel of the same instruction set (OPENBLAS_CORETYPE): x86-64-v3 (AVX2,
# FMA) against Haswell, x86-64-v4 (AVX-512) against SkylakeX; elsewhere "native" against the
# kernel OpenBLAS picks. LEVELS="x86-64-v3" (space-separated) picks some of them.
cpu_has() { grep -m1 -E '^(flags|Features)' /proc/cpuinfo | grep -qw "$1"; }
if [ -z "${LEVELS:-}" ]; then
	LEVELS=native
	if [ "$(uname -m)" = x86_64 ] && cpu_has avx2 && cpu_has fma; then
		LEVELS=x86-64-v3
		cpu_has avx512f && cpu_has avx512bw && cpu_has avx512dq && cpu_has avx512vl && LEVELS+=" x86-64-v4"
	fi
fi
# the OpenBLAS kernel of the same instruction set as a level ("" for the one OpenBLAS picks)
blas_core() {
	case "$1" in
	x86-64-v3) echo Haswell ;;
	x86-64-v4) echo SkylakeX ;;
	*) echo "" ;;
	esac
}
# run a peer command with OpenBLAS pinned to level $1's kernel (OPENBLAS_L2_SIZE unset with it)
with_blas_core() {
	local core
	core=$(blas_core "$1")
	shift
	if [ -n "$core" ]; then env -u OPENBLAS_L2_SIZE OPENBLAS_CORETYPE="$core" "$@"; else env -u OPENBLAS_L2_SIZE -u OPENBLAS_CORETYPE "$@"; fi
}
