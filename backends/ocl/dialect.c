/* render.c: the OpenCL C dialect of the C-family renderer: kernels with __global buffer
 * parameters and one work-item per parallel iteration, and the prelude of OpenCL helpers. */
#include "ocl.h"

#include <stdio.h>

#include "renderer/cstyle.h"

static const char prelude[] =
	"typedef int int32_t;\ntypedef uint uint32_t;\ntypedef long int64_t;\ntypedef ulong uint64_t;\n"
	"typedef uchar uint8_t;\n"
	ENG_CSTYLE_INT_LIMITS
	/* the precise built-ins (never native_*: results must match the CPU's) */
	"#define exp2f exp2\n#define log2f log2\n#define sinf sin\n#define sqrtf sqrt\n#define truncf trunc\n"
	ENG_CSTYLE_HELPERS
	"static inline int32_t tsd_as_int32_t(float x) { return as_int(x); }\n"
	"static inline float tsd_as_float(int32_t x) { return as_float(x); }\n"
	/* float16 rounding without cl_khr_fp16: a round trip through half storage, to nearest even */
	"static inline float tsd_f16r(float x) { ushort h; vstore_half_rte(x, 0, (half *)&h); "
	"return vload_half(0, (const half *)&h); }\n";

static const eng_ctypes cl_types = {
	.compute = {[ENG_BOOL] = "bool", [ENG_U8] = "uchar", [ENG_I32] = "int", [ENG_I64] = "long",
		    [ENG_F16] = "float", [ENG_F32] = "float"},
	/* bool is no kernel pointer type; half only as a pointer (vload_half / vstore_half) */
	.storage = {[ENG_BOOL] = "uchar", [ENG_U8] = "uchar", [ENG_I32] = "int", [ENG_I64] = "long",
		    [ENG_F16] = "half", [ENG_F32] = "float"},
	.u32 = "uint",
	.u64 = "ulong",
};

static const eng_cstyle cl_dialect = {
	.kernel_prefix = "__kernel void",
	.restrict_kw = "restrict",
	.types = &cl_types,
	.buf_qual = "__global",
	.thread_idx = "(long)get_global_id(0)",
	.nan = "NAN",
	.inf = "INFINITY",
	.f16_round = "tsd_f16r",
	.f16_load = "vload_half",
	.f16_store = "vstore_half_rte",
	.simd_pragma = "",
	.unroll_pragma = "#pragma unroll",
	.prelude = prelude,
	.local_id = "get_local_id(0)",
	.local_qual = "__local",
	.barrier = "barrier(CLK_LOCAL_MEM_FENCE)",
	.group_idx = "(long)get_group_id(0)",
	.group_attr = "__attribute__((reqd_work_group_size(",
	.group_attr_end = ", 1, 1)))",
};

const char *cl_prelude(void) { return eng_cstyle_prelude(&cl_dialect); }

eng_status cl_render(void *dev, const struct eng_kernel_ir *ir, const char *name, struct eng_strbuf *out,
		     bk_err *err)
{
	const cl_dev *d = dev;
	eng_cstyle dl = cl_dialect;
	dl.vector_width = (int)d->vec_float; /* as cl_vector_width tells the tile planner */
	eng_status s = eng_render_cstyle(&dl, ir, name, out);
	if (s == ENG_EINVAL)
		snprintf(err->msg, sizeof(err->msg), "kernel %s: work-groups of %d threads cannot be rendered", name,
			 ir->group);
	else if (s)
		snprintf(err->msg, sizeof(err->msg), "out of memory rendering %s", name);
	return s;
}
