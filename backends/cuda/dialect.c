/* dialect.c: the CUDA C dialect of the C-family renderer (kernels with buffer parameters, one
 * thread per parallel iteration, __shared__ reductions), its prelude and the target facts. */
#include "cudac.h"

#include <stdlib.h>
#include <string.h>

#include "util/strbuf.h"

/* Compiled by NVRTC with -default-device, so the helpers' `static inline` functions are device
 * functions. No headers: NVRTC has no include path here, and cuda_fp16.h is not needed. */
static const char prelude[] =
	"typedef int int32_t;\ntypedef unsigned int uint32_t;\ntypedef long long int64_t;\n"
	"typedef unsigned long long uint64_t;\ntypedef unsigned char uint8_t;\ntypedef unsigned short uint16_t;\n"
	BK_PRELUDE_INT_LIMITS
	/* exp2f, log2f, sinf, sqrtf and truncf are CUDA's own (precise: no -use_fast_math) */
	BK_PRELUDE_HELPERS
	"static inline int32_t eng_as_int32_t(float x) { return __float_as_int(x); }\n"
	"static inline float eng_as_float(int32_t x) { return __int_as_float(x); }\n"
	/* float16 as IEEE binary16 bits, converted by PTX's cvt (round to nearest even) */
	"static inline uint16_t eng_f2h(float x) { uint16_t h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(x)); return h; }\n"
	"static inline float eng_h2f(uint16_t h) { float x; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(x) : \"h\"(h)); return x; }\n"
	"static inline float eng_f16r(float x) { return eng_h2f(eng_f2h(x)); }\n"
	"static inline float eng_f16_load(int64_t i, const uint16_t *p) { return eng_h2f(p[i]); }\n"
	"static inline void eng_f16_store(float v, int64_t i, uint16_t *p) { p[i] = eng_f2h(v); }\n";

static const bk_ctypes cuda_types = {
	.compute = {[ENG_BOOL] = "bool", [ENG_U8] = "uint8_t", [ENG_I32] = "int32_t", [ENG_I64] = "int64_t",
		    [ENG_F16] = "float", [ENG_F32] = "float"},
	.storage = {[ENG_BOOL] = "uint8_t", [ENG_U8] = "uint8_t", [ENG_I32] = "int32_t", [ENG_I64] = "int64_t",
		    [ENG_F16] = "uint16_t", [ENG_F32] = "float"},
	.u32 = "uint32_t",
	.u64 = "uint64_t",
};

const bk_dialect cuda_dialect = {
	.kernel_prefix = "extern \"C\" __global__ void",
	.restrict_kw = "__restrict__",
	.types = &cuda_types,
	.buf_qual = "",
	.thread_idx = "((int64_t)blockIdx.x * blockDim.x + threadIdx.x)",
	.nan = "__int_as_float(0x7fc00000)", /* the quiet NaN the CPU and OpenCL make */
	.inf = "__int_as_float(0x7f800000)",
	.f16_round = "eng_f16r",
	.f16_load = "eng_f16_load",
	.f16_store = "eng_f16_store",
	.simd_pragma = "",
	.unroll_pragma = "#pragma unroll",
	.prelude = prelude,
	.local_id = "threadIdx.x",
	.local_qual = "__shared__",
	.barrier = "__syncthreads()",
	.group_idx = "(int64_t)blockIdx.x",
	.group_attr = "__launch_bounds__(",
	.group_attr_end = ")",
	.group_attr_inline = true,
};

void cuda_target_facts(int sms, bool reduce_groups, bk_target *out)
{
	long n = (long)(sms > 0 ? sms : 1) * 1024;
	out->dialect = &cuda_dialect;
	out->parallelism = n > (1 << 20) ? 1 << 20 : (int)n;
	out->reduce_group = reduce_groups ? CUDA_GROUP_SIZE : 0;
	out->vector_width = 0;
}

char *cuda_module_source(const char *const *srcs, int n)
{
	eng_strbuf sb;
	eng_strbuf_init(&sb);
	eng_strbuf_puts(&sb, prelude);
	for (int i = 0; i < n; i++) {
		eng_strbuf_puts(&sb, "\n");
		eng_strbuf_puts(&sb, srcs[i]);
	}
	char *s = sb.failed ? NULL : eng_strbuf_take(&sb);
	eng_strbuf_free(&sb);
	return s;
}
