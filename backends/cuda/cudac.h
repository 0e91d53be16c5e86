/* cudac.h: the CUDA backend's parts that need no GPU and no toolkit headers: the CUDA C dialect,
 * the target facts a device states, and NVRTC compiling CUDA C to PTX (tests use these). */
#ifndef BK_CUDAC_H
#define BK_CUDAC_H

#include <stdbool.h>
#include <stddef.h>

#include "backends/backend.h"

/* Threads of a block that split a reduction (see eng_kernel_ir.group), combining partial results
 * in __shared__ memory; kernels written so are declared __launch_bounds__(CUDA_GROUP_SIZE). */
#define CUDA_GROUP_SIZE 256
/* Threads per block of the other kernels (one per parallel iteration). */
#define CUDA_BLOCK_SIZE 256

/* The CUDA C dialect (dialect.c): `extern "C" __global__` kernels, one thread per parallel
 * iteration, __shared__ reductions, float16 stored as 16-bit integers converted by inline PTX. */
extern const bk_dialect cuda_dialect;

/* What kernels are planned for on a device with sms multiprocessors: parallelism of 1024 threads
 * per SM (at least 1), work-group reductions of CUDA_GROUP_SIZE unless reduce_groups is false,
 * no vectors (NVIDIA GPUs prefer scalars). */
void cuda_target_facts(int sms, bool reduce_groups, bk_target *out);

/* The whole source NVRTC compiles for kernel sources srcs[0..n): the dialect's prelude, then
 * each kernel. A string owned by the caller (free), or NULL when out of memory. */
char *cuda_module_source(const char *const *srcs, int n);

/* NVRTC (nvrtc.c; only in builds with the CUDA toolkit: TSD_HAVE_CUDA). */
typedef struct cuda_nvrtc cuda_nvrtc;
/* Open the NVRTC library with dlopen ($CUDA_HOME/lib64, the loader's path, /usr/local/cuda);
 * *out is freed with cuda_nvrtc_close. ENG_ENOTFOUND with a message when it is absent. */
eng_status cuda_nvrtc_open(cuda_nvrtc **out, bk_err *err);
void cuda_nvrtc_close(cuda_nvrtc *nv);
/* "major.minor" of the NVRTC library opened. */
const char *cuda_nvrtc_version(const cuda_nvrtc *nv);
/* Compile the CUDA C source src (a whole module, see cuda_module_source) for arch ("sm_80",
 * "compute_90"): *ptx gets the NUL-terminated PTX (owned by the caller, free) and *n its length
 * with the NUL. ENG_ECOMPILE with NVRTC's log as the message; ENG_ENOMEM. Thread-safe. */
eng_status cuda_nvrtc_ptx(const cuda_nvrtc *nv, const char *src, const char *arch, char **ptx, size_t *n,
			  bk_err *err);

/* From the PTX of kernel name's entry: its parameter count (-1: no such entry) and its
 * .maxntid, the block size __launch_bounds__ fixed (a kernel grouped for reductions; 0: none).
 * The launch reads both so (program.c). */
void cuda_ptx_entry(const char *ptx, const char *name, int *nparams, int *maxntid);

#endif
