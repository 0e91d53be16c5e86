/* dialect.c: the OpenCL C dialect of the C-family renderer: kernels with __global buffer
 * parameters and one work-item per parallel iteration, and the prelude of OpenCL helpers. */
#include "ocl.h"


static const char prelude[] =
	"typedef int int32_t;\ntypedef uint uint32_t;\ntypedef long int64_t;\ntypedef ulong uint64_t;\n"
	"typedef uchar uint8_t;\n"
	BK_PRELUDE_INT_LIMITS
	/* the precise built-ins (never native_*: results must match the CPU's) */
	"#define exp2f exp2\n#define log2f log2\n#define sinf sin\n#define sqrtf sqrt\n#define truncf trunc\n"
	BK_PRELUDE_HELPERS
	"static inline int32_t eng_as_int32_t(float x) { return as_int(x); }\n"
	"static inline float eng_as_float(int32_t x) { return as_float(x); }\n"
	/* float16 rounding without cl_khr_fp16: a round trip through half storage, to nearest even */
	"static inline float eng_f16r(float x) { ushort h; vstore_half_rte(x, 0, (half *)&h); "
	"return vload_half(0, (const half *)&h); }\n";

static const bk_ctypes ocl_types = {
	.compute = {[ENG_BOOL] = "bool", [ENG_U8] = "uchar", [ENG_I32] = "int", [ENG_I64] = "long",
		    [ENG_F16] = "float", [ENG_F32] = "float"},
	/* bool is no kernel pointer type; half only as a pointer (vload_half / vstore_half) */
	.storage = {[ENG_BOOL] = "uchar", [ENG_U8] = "uchar", [ENG_I32] = "int", [ENG_I64] = "long",
		    [ENG_F16] = "half", [ENG_F32] = "float"},
	.u32 = "uint",
	.u64 = "ulong",
};

const bk_dialect ocl_dialect = {
	.kernel_prefix = "__kernel void",
	.restrict_kw = "restrict",
	.types = &ocl_types,
	.buf_qual = "__global",
	.thread_idx = "(long)get_global_id(0)",
	.nan = "NAN",
	.inf = "INFINITY",
	.f16_round = "eng_f16r",
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

const char *ocl_prelude(void) { return ocl_dialect.prelude; }
