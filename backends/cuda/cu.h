/* cu.h: internals of the CUDA backend shared by its files: the driver entry points loaded with
 * dlopen, the device, modules and programs, error mapping. Needs the toolkit's headers. */
#ifndef BK_CU_H
#define BK_CU_H

#include <cuda.h> /* types and constants only: libcuda is opened with dlopen, never linked */
#include <cudaTypedefs.h>
#include <stdbool.h>

#include "cudac.h"

/* The CUDA backend: CUDA C from the engine's C-family renderer, compiled to PTX by NVRTC and
 * loaded with cuModuleLoadData. libcuda.so.1 (the driver) is opened with dlopen when a device is
 * opened or listed, so tensord runs where it is absent: then, or with no GPU, both return
 * ENG_ENOTFOUND and a message. Buffer handles are CUdeviceptr values; a kernel takes its buffers
 * as pointers in order, then (int64 start, int64 end), and runs one thread per iteration of its
 * parallel loop (or one block per iteration when it reduces in work-groups). Work goes to one
 * stream of the device's primary context and is waited for once per realize. */

/* The driver entry points: field, the cudaTypedefs.h type, the exported symbol (the versioned
 * one cuda.h's macros name, so a 64-bit API is never mistaken for its 32-bit ancestor). */
#define CU_API_FUNCS(X) \
	X(Init, PFN_cuInit_v2000, "cuInit") \
	X(DriverGetVersion, PFN_cuDriverGetVersion_v2020, "cuDriverGetVersion") \
	X(DeviceGetCount, PFN_cuDeviceGetCount_v2000, "cuDeviceGetCount") \
	X(DeviceGet, PFN_cuDeviceGet_v2000, "cuDeviceGet") \
	X(DeviceGetName, PFN_cuDeviceGetName_v2000, "cuDeviceGetName") \
	X(DeviceGetAttribute, PFN_cuDeviceGetAttribute_v2000, "cuDeviceGetAttribute") \
	X(DeviceTotalMem, PFN_cuDeviceTotalMem_v3020, "cuDeviceTotalMem_v2") \
	X(PrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain_v7000, "cuDevicePrimaryCtxRetain") \
	X(PrimaryCtxRelease, PFN_cuDevicePrimaryCtxRelease_v11000, "cuDevicePrimaryCtxRelease_v2") \
	X(PrimaryCtxReset, PFN_cuDevicePrimaryCtxReset_v11000, "cuDevicePrimaryCtxReset_v2") \
	X(CtxSetCurrent, PFN_cuCtxSetCurrent_v4000, "cuCtxSetCurrent") \
	X(CtxSynchronize, PFN_cuCtxSynchronize_v2000, "cuCtxSynchronize") \
	X(StreamCreate, PFN_cuStreamCreate_v2000, "cuStreamCreate") \
	X(StreamDestroy, PFN_cuStreamDestroy_v4000, "cuStreamDestroy_v2") \
	X(StreamSynchronize, PFN_cuStreamSynchronize_v2000, "cuStreamSynchronize") \
	X(MemAlloc, PFN_cuMemAlloc_v3020, "cuMemAlloc_v2") \
	X(MemFree, PFN_cuMemFree_v3020, "cuMemFree_v2") \
	X(MemAllocHost, PFN_cuMemAllocHost_v3020, "cuMemAllocHost_v2") \
	X(MemFreeHost, PFN_cuMemFreeHost_v2000, "cuMemFreeHost") \
	X(MemcpyHtoDAsync, PFN_cuMemcpyHtoDAsync_v3020, "cuMemcpyHtoDAsync_v2") \
	X(MemcpyDtoHAsync, PFN_cuMemcpyDtoHAsync_v3020, "cuMemcpyDtoHAsync_v2") \
	X(ModuleLoadData, PFN_cuModuleLoadData_v2000, "cuModuleLoadData") \
	X(ModuleUnload, PFN_cuModuleUnload_v2000, "cuModuleUnload") \
	X(ModuleGetFunction, PFN_cuModuleGetFunction_v2000, "cuModuleGetFunction") \
	X(FuncGetAttribute, PFN_cuFuncGetAttribute_v2020, "cuFuncGetAttribute") \
	X(LaunchKernel, PFN_cuLaunchKernel_v4000, "cuLaunchKernel") \
	X(EventCreate, PFN_cuEventCreate_v2000, "cuEventCreate") \
	X(EventDestroy, PFN_cuEventDestroy_v4000, "cuEventDestroy_v2") \
	X(EventRecord, PFN_cuEventRecord_v2000, "cuEventRecord") \
	X(EventSynchronize, PFN_cuEventSynchronize_v2000, "cuEventSynchronize") \
	X(GetErrorName, PFN_cuGetErrorName_v6000, "cuGetErrorName")

typedef struct cu_api {
	void *lib; /* dlopen handle of libcuda.so.1 */
#define CU_API_FIELD(f, type, sym) type f;
	CU_API_FUNCS(CU_API_FIELD)
#undef CU_API_FIELD
	/* optional (DEBUG>=2 times only): cuEventElapsedTime_v2 (drivers from 12.8), else the
	 * first version, same signature; NULL: launches are not timed */
	PFN_cuEventElapsedTime_v2000 EventElapsedTime;
} cu_api;

/* Open the driver, resolve every entry point and cuInit; on failure api holds nothing to close.
 * ENG_ENOTFOUND with a message when the driver or a GPU is absent. */
eng_status cu_api_open(cu_api *api, bk_err *err);
void cu_api_close(cu_api *api);

/* Buffers a launch passes at most (the engine's ENG_MAX_KERNEL_BUFS). */
#define CU_MAX_BUFS 64

/* Pinned staging for copies of at least CU_STAGE_MIN bytes: two halves of CU_STAGE_BYTES / 2,
 * so one is filled (or drained) while the other is in flight. */
#define CU_STAGE_BYTES (8u << 20)
#define CU_STAGE_MIN (256u << 10)

typedef struct cu_dev {
	cu_api api;
	CUdevice device;
	CUcontext ctx; /* the primary context, retained */
	CUstream stream;
	int ordinal, debug;
	char name[256];
	int cc_major, cc_minor, sms, max_block;
	size_t total_mem;
	int reduce_group; /* CUDA_GROUP_SIZE, or 0 with the option reduce_groups=0 */
	bool failed;      /* a sticky context error happened: every later call fails */
	char failmsg[512];
	unsigned char *stage; /* pinned, CU_STAGE_BYTES (NULL: copies from pageable memory) */
	CUevent stage_done[2]; /* the last copy through each half */
	bool stage_busy[2];
	CUevent t0, t1; /* debug >= 2: around the last launch, timed at synchronize */
	bool timing;
	char last_name[128];
	cuda_nvrtc *nvrtc; /* opened on the first compile */
	char nvrtc_err[512];
	char arch[16];  /* "sm_90" */
	char *cache_id; /* made on first use (cache.c), owned */
} cu_dev;

/* One CUmodule from a batch of kernels (or loaded from PTX), shared by its programs. */
typedef struct cu_module {
	CUmodule mod;
	int refs;
	char *ptx; /* NUL-terminated, n with the NUL (owned) */
	size_t nptx;
} cu_module;

typedef struct cu_prog {
	CUfunction fn;
	cu_module *mod;
	char *name;    /* owned */
	int nparams;   /* buffers + (start, end), from the PTX */
	int group;     /* .maxntid of a grouped kernel (__launch_bounds__): one block per iteration; 0: none */
	int max_block; /* CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK */
} cu_prog;

/* A failed driver call: err gets "what: NAME"; returns ENG_ENOMEM (out of memory),
 * ENG_ECOMPILE (bad PTX), ENG_ERANGE (a launch the kernel cannot make) or ENG_EDEVICE. Sticky
 * errors (a faulting kernel, a lost device) mark d (may be NULL) failed. */
eng_status cu_fail(cu_dev *d, CUresult rc, const char *what, bk_err *err);
/* Whether rc leaves a context unusable (every later call on it fails the same way). */
bool cu_sticky(CUresult rc);
/* ENG_EDEVICE once d has failed; else makes d's context current on this thread. */
eng_status cu_enter(cu_dev *d, bk_err *err);

/* Programs (program.c). */
eng_status cu_compile(void *dev, const char *const *srcs, int nkern, const char *const *names, bk_program **progs,
		      bk_err *err);
void cu_program_free(void *dev, bk_program *p);
eng_status cu_launch(void *dev, bk_program *p, void *const *bufs, int nbufs, const bk_launch *l, bk_err *err);
/* Load mod's PTX (mod->ptx, taken over: freed on failure) and make programs for names[0..nkern)
 * sharing it into progs (all set NULL first). On failure no program is left and err says why. */
eng_status cu_load_kernels(cu_dev *d, cu_module *mod, const char *const *names, int nkern, bk_program **progs,
			   bk_err *err);
/* d's NVRTC, opened on first use; NULL with the reason in err. */
const cuda_nvrtc *cu_nvrtc(cu_dev *d, bk_err *err);

/* The disk-caching methods (cache.c). */
const char *cu_cache_id(void *dev);
eng_status cu_program_blob(void *dev, bk_program *p, const void **bytes, size_t *n, const char **symbol,
			   bk_err *err);
eng_status cu_load(void *dev, const void *bytes, size_t n, const char *const *names, int nkern, bk_program **progs,
		   bk_err *err);

/* Copies (copy.c): blocking for the caller's memory (src may be reused, dst is filled on
 * return), through the pinned staging halves when large. */
eng_status cu_copy_in(void *dev, void *handle, size_t off, const void *src, size_t n, bk_err *err);
eng_status cu_copy_out(void *dev, void *handle, size_t off, void *dst, size_t n, bk_err *err);

#endif
