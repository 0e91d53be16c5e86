/* ocl.h: internals of the OpenCL backend ("ocl": one name for folder, header and prefix) shared by its files: the entry points loaded from the
 * ICD loader at run time, the device, compiled programs, error mapping. */
#ifndef BK_OCL_H
#define BK_OCL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h> /* types and constants only: libOpenCL is opened with dlopen, never linked */
#include <stdbool.h>

#include "backends/backend.h"

/* The OpenCL backend: OpenCL C from the engine's C-family renderer, built by the driver.
 * libOpenCL.so.1 (the ICD loader) is opened with dlopen when a device is opened or listed, so
 * tensord runs where it is absent: then, or with no device, both return ENG_ENOTFOUND and a
 * message. Buffer handles are cl_mem; a kernel takes its buffers as __global pointers in order,
 * then (long start, long end), and runs one work-item per iteration start..end-1 of its parallel
 * loop. Devices are numbered over all platforms in the loader's order: CL:1 is the second. */

/* The entry points the backend uses, resolved with dlsym. */
#define OCL_API_FUNCS(X) \
	X(clGetPlatformIDs) X(clGetPlatformInfo) X(clGetDeviceIDs) X(clGetDeviceInfo) X(clCreateContext) \
	X(clReleaseContext) X(clCreateCommandQueue) X(clReleaseCommandQueue) X(clCreateBuffer) \
	X(clReleaseMemObject) X(clEnqueueWriteBuffer) X(clEnqueueReadBuffer) X(clCreateProgramWithSource) \
	X(clCreateProgramWithBinary) X(clBuildProgram) X(clGetProgramBuildInfo) X(clGetProgramInfo) \
	X(clReleaseProgram) X(clCreateKernel) X(clReleaseKernel) X(clSetKernelArg) \
	X(clGetKernelWorkGroupInfo) X(clGetKernelInfo) X(clEnqueueNDRangeKernel) X(clFinish) \
	X(clGetEventProfilingInfo) X(clReleaseEvent)

typedef struct ocl_api {
	void *lib; /* dlopen handle of libOpenCL.so.1 */
#define OCL_API_FIELD(f) __typeof__(f) *f;
	OCL_API_FUNCS(OCL_API_FIELD)
#undef OCL_API_FIELD
} ocl_api;

/* Open the ICD loader and resolve every entry point; on failure api holds nothing to close. */
eng_status ocl_api_open(ocl_api *api, bk_err *err);
void ocl_api_close(ocl_api *api);

#define OCL_MAX_DEVICES 64
/* Threads of a work-group that splits a reduction (a kernel without a parallel loop, or each
 * row of a reduction with few rows; see eng_kernel_ir.group), combining them in local memory. */
#define OCL_GROUP_SIZE 64
/* Bytes of the device's scratch buffer for split reductions' partials (bk_target.split_scratch). */
#define OCL_SPLIT_SCRATCH 65536

/* Every device of every platform, platforms in the loader's order: up to OCL_MAX_DEVICES into
 * plats[i] / devs[i]; *n is how many. Zero devices is ENG_ENOTFOUND ("no OpenCL devices"). */
eng_status ocl_enumerate(const ocl_api *api, cl_platform_id *plats, cl_device_id *devs, int *n, bk_err *err);

/* A string property of a device or platform into out, truncated to cap (empty on failure). */
void ocl_device_str(const ocl_api *api, cl_device_id dev, cl_device_info what, char *out, size_t cap);
void ocl_platform_str(const ocl_api *api, cl_platform_id p, cl_platform_info what, char *out, size_t cap);

typedef struct ocl_dev {
	ocl_api api;
	cl_platform_id platform;
	cl_device_id device;
	cl_context context;
	cl_command_queue queue; /* in order; profiling on when debug >= 2 */
	int debug;
	char name[256];
	cl_ulong max_alloc;   /* CL_DEVICE_MAX_MEM_ALLOC_SIZE */
	size_t max_items;     /* CL_DEVICE_MAX_WORK_ITEM_SIZES[0] */
	cl_uint units;        /* CL_DEVICE_MAX_COMPUTE_UNITS */
	cl_uint vec_float;    /* CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT, or the vector_width option; <= 16 */
	int reduce_group;     /* OCL_GROUP_SIZE, or 0 with the option reduce_groups=0 */
	size_t min_group;     /* smallest work-group launches shrink to: 32 (a GPU's SIMD width), CPU 1 */
	bool exact_div;       /* CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT: built with the option that asks for it */
	bool failed;          /* a device-lost class error happened: every later call fails */
	char failmsg[512];
	cl_event last;        /* debug >= 2: the last launch, timed at synchronize (owned) */
	char last_name[128];
	char *cache_id;       /* made on first use (cache.c), owned */
	/* split reductions' partials, made on first use (the queue is in order: one launch at a
	 * time uses it) */
	cl_mem scratch;
} ocl_dev;

/* One cl_program built from a batch of kernels (or loaded from a binary), shared by the
 * kernels' programs. */
typedef struct ocl_module {
	cl_program prog;
	int refs;
	unsigned char *bin; /* the program binary, fetched on first program_blob (owned) */
	size_t nbin;
} ocl_module;

typedef struct ocl_prog {
	cl_kernel kernel;
	ocl_module *mod;
	char *name;   /* owned */
	cl_uint nargs; /* buffers (+ scratch for a split reduction) + (start, end) */
	size_t wg;    /* CL_KERNEL_WORK_GROUP_SIZE */
	size_t group; /* CL_KERNEL_COMPILE_WORK_GROUP_SIZE[0]: one group per iteration; 0: none */
	/* a split reduction's <name>_fin, enqueued after kernel as one work-group (or item); both
	 * take the device's scratch after the buffers (NULL: an ordinary kernel) */
	cl_kernel fin;
	size_t fin_group; /* fin's CL_KERNEL_COMPILE_WORK_GROUP_SIZE[0]: run as one group of it; 0: one item */
} ocl_prog;

/* The name of a CL error code ("CL_OUT_OF_RESOURCES"), or "CL error <n>" written to buf. */
const char *ocl_errname(cl_int rc, char *buf, size_t cap);
/* A failed call: err gets "what: NAME"; returns ENG_ENOMEM (out of resources or memory),
 * ENG_ECOMPILE (build failures, bad binaries) or ENG_EDEVICE. Device-lost class errors mark d
 * (may be NULL) failed. */
eng_status ocl_fail(ocl_dev *d, cl_int rc, const char *what, bk_err *err);
/* ENG_EDEVICE with the first failure's message once d has failed, else ENG_OK. */
eng_status ocl_alive(const ocl_dev *d, bk_err *err);

/* The OpenCL C dialect and the prelude every kernel is preceded by (dialect.c). */
extern const bk_dialect ocl_dialect;
const char *ocl_prelude(void);

/* Programs (program.c). The build options: precise maths (no -cl-fast-relaxed-math or
 * -cl-mad-enable), and correctly rounded float division and sqrt where the device offers them
 * (OpenCL otherwise allows 2.5 ulp, which moves round-half cases away from the CPU's results). */
const char *ocl_build_options(const ocl_dev *d);
eng_status ocl_compile(void *dev, const char *const *srcs, int nkern, const char *const *names, bk_program **progs,
		      bk_err *err);
void ocl_program_free(void *dev, bk_program *p);
eng_status ocl_launch(void *dev, bk_program *p, void *const *bufs, int nbufs, const bk_launch *l, bk_err *err);
/* Start filling progs[0..nkern): all NULL; ENG_EDEVICE if d has failed. */
eng_status ocl_progs_begin(const ocl_dev *d, bk_program **progs, int nkern, bk_err *err);
/* Build mod's program (already created, taken over: released on failure) and make programs for
 * names[0..nkern) sharing it into progs (all NULL on entry, see ocl_progs_begin). On failure no
 * program is left and err says why. */
eng_status ocl_build_kernels(ocl_dev *d, ocl_module *mod, const char *const *names, int nkern, bk_program **progs,
			    bk_err *err);

/* The disk-caching methods (cache.c). */
const char *ocl_cache_id(void *dev);
eng_status ocl_program_blob(void *dev, bk_program *p, const void **bytes, size_t *n, const char **symbol,
			   bk_err *err);
eng_status ocl_load(void *dev, const void *bytes, size_t n, const char *const *names, int nkern,
		   bk_program **progs, bk_err *err);

/* One line per device ("CL:<i> <name> | CPU/GPU | vendor | platform | version | driver |
 * compute units | global memory | max work-group | float vectors | fp16") into out (the
 * registry's list method). */
eng_status ocl_list(char *out, size_t len, int *ndevices, bk_err *err);

#endif
