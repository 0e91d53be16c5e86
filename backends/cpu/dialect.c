/* dialect.c: the CPU backend's dialect of the C-family renderer: C11 kernels taking
 * (void *const *bufs, int64_t start, int64_t end), and the prelude they are compiled with. */
#include "cpu.h"

static const char c_prelude[] =
	/* no system headers: parsing them costs more than compiling a small kernel */
	"typedef __INT32_TYPE__ int32_t;\ntypedef __UINT32_TYPE__ uint32_t;\n"
	"typedef __INT64_TYPE__ int64_t;\ntypedef __UINT64_TYPE__ uint64_t;\ntypedef __UINT8_TYPE__ uint8_t;\n"
	BK_PRELUDE_INT_LIMITS
	"#define exp2f __builtin_exp2f\n#define log2f __builtin_log2f\n#define sinf __builtin_sinf\n"
	"#define sqrtf __builtin_sqrtf\n#define truncf __builtin_truncf\n#define memcpy __builtin_memcpy\n"
	BK_PRELUDE_HELPERS
	"static inline int32_t eng_as_int32_t(float x) { int32_t r; memcpy(&r, &x, 4); return r; }\n"
	"static inline float eng_as_float(int32_t x) { float r; memcpy(&r, &x, 4); return r; }\n"
	/* float16 rounding the compiler cannot fold into a neighbouring multiply-add (with
	 * -ffp-contract=fast and AVX512-FP16, gcc would fuse a*b+c into one float16 FMA and skip
	 * the rounding after the multiply) */
	"static inline float eng_f16r(float x)\n{\n  float r = (float)(_Float16)x;\n"
	"#if defined(__x86_64__)\n  __asm__(\"\" : \"+x\"(r));\n"
	"#elif defined(__aarch64__)\n  __asm__(\"\" : \"+w\"(r));\n"
	"#else\n  volatile float v = r;\n  r = v;\n#endif\n  return r;\n}\n";

static const bk_ctypes c_types = {
	.compute = {[ENG_BOOL] = "_Bool", [ENG_U8] = "uint8_t", [ENG_I32] = "int32_t", [ENG_I64] = "int64_t",
		    [ENG_F16] = "float", [ENG_F32] = "float"},
	.storage = {[ENG_BOOL] = "uint8_t", [ENG_U8] = "uint8_t", [ENG_I32] = "int32_t", [ENG_I64] = "int64_t",
		    [ENG_F16] = "_Float16", [ENG_F32] = "float"},
	.u32 = "uint32_t",
	.u64 = "uint64_t",
};

const bk_dialect cpu_dialect = {
	.kernel_prefix = "void",
	.restrict_kw = "restrict",
	.types = &c_types,
	.nan = "__builtin_nanf(\"\")",
	.inf = "__builtin_inff()",
	.f16_round = "eng_f16r",
	.simd_pragma = "#pragma omp simd",
	.unroll_pragma = "#pragma GCC unroll",
	.prelude = c_prelude,
};
