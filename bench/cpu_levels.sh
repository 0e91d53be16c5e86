# cpu_levels.sh (sourced by the compare scripts): the x86-64 levels this host can run kernels of
# (scripts/cpu_levels.sh), each with the OpenBLAS kernel of the same instruction set
# (OPENBLAS_CORETYPE): x86-64-v3 (AVX2, FMA) against Haswell, x86-64-v4 (AVX-512) against SkylakeX,
# and on request x86-64-v2 (SSE4.2) against Nehalem; elsewhere "native" against the kernel
# OpenBLAS picks. Default: v3 and v4 where the host has them; LEVELS="x86-64-v3" picks some.
if [ -z "${LEVELS:-}" ]; then
	LEVELS=$(scripts/cpu_levels.sh | sed 's/x86-64-v2 *//')
	[ -n "$LEVELS" ] || LEVELS=native
fi
# the OpenBLAS kernel of the same instruction set as a level ("" for the one OpenBLAS picks)
blas_core() {
	case "$1" in
	x86-64-v2) echo Nehalem ;;
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
