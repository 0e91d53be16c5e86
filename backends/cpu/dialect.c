/* dialect.c: the CPU backend's dialect of the C-family renderer: C11 kernels taking
 * (void *const *bufs, int64_t start, int64_t end), and the prelude they are compiled with. */
#include "cpu.h"

static const char c_prelude[] =
	/* no system headers: parsing them costs more than compiling a small kernel */
	"typedef __INT32_TYPE__ int32_t;\ntypedef __UINT32_TYPE__ uint32_t;\n"
	"typedef __INT64_TYPE__ int64_t;\ntypedef __UINT64_TYPE__ uint64_t;\ntypedef __UINT8_TYPE__ uint8_t;\n"
	BK_PRELUDE_INT_LIMITS
	"#define sinf __builtin_sinf\n"
	"#define sqrtf __builtin_sqrtf\n#define truncf __builtin_truncf\n#define memcpy __builtin_memcpy\n"
	BK_PRELUDE_HELPERS
	"static inline int32_t eng_as_int32_t(float x) { int32_t r; memcpy(&r, &x, 4); return r; }\n"
	"static inline float eng_as_float(int32_t x) { float r; memcpy(&r, &x, 4); return r; }\n"
	/* exp2 and log2 in arithmetic the loop vectorizer can widen (libm's are calls, one lane at a
	 * time: a sigmoid or softmax ran scalar). exp2: x = n + f, |f| <= 1/2, 2^f by a degree-6
	 * polynomial (fitted, relative error 1e-7 in float arithmetic), 2^n as two exponent fields so
	 * that results down to the subnormals and up to overflow (x >= 128: inf) scale in one rounding.
	 * log2: x = 2^e m, m in [sqrt(1/2), sqrt(2)), log2 m = t P(t^2) with t = (m-1)/(m+1)
	 * (atanh's series to t^9: relative error 2e-9); subnormals scaled by 2^23 first. NaN in, NaN
	 * out; log2 of 0 is -inf, of a negative NaN, of inf inf. */
	"static inline float eng_exp2f(float x)\n{\n"
	"  float c = x < -150.0f ? -150.0f : x > 128.0f ? 128.0f : x;\n"
	"  float r = (c + 12582912.0f) - 12582912.0f; /* round to nearest: 1.5 * 2^23 */\n"
	"  float f = c - r;\n"
	"  int32_t n = (int32_t)r, n1 = n >> 1, n2 = n - n1;\n"
	"  float p = 1.535336196e-04f;\n"
	"  p = p * f + 1.339887385e-03f;\n  p = p * f + 9.618436918e-03f;\n  p = p * f + 5.550332367e-02f;\n"
	"  p = p * f + 2.402264774e-01f;\n  p = p * f + 6.931471825e-01f;\n  p = p * f + 1.0f;\n"
	"  p = p * eng_as_float((n1 + 127) << 23) * eng_as_float((n2 + 127) << 23);\n"
	"  return x != x ? x : p;\n}\n"
	"static inline float eng_log2f(float x)\n{\n"
	"  _Bool sub = x < 1.17549435e-38f;\n"
	"  int32_t u = eng_as_int32_t(sub ? x * 8388608.0f : x);\n"
	"  int32_t e = ((u >> 23) & 0xff) - (sub ? 150 : 127);\n"
	"  float m = eng_as_float((u & 0x007fffff) | 0x3f800000);\n"
	"  _Bool big = m > 1.41421356f;\n"
	"  m = big ? m * 0.5f : m;\n"
	"  float t = (m - 1.0f) / (m + 1.0f), t2 = t * t;\n"
	"  float p = 0.320598898f; /* 2/ln2 times 1/9, 1/7, 1/5, 1/3, 1 */\n"
	"  p = p * t2 + 0.412198583f;\n  p = p * t2 + 0.577078016f;\n  p = p * t2 + 0.961796694f;\n"
	"  p = p * t2 + 2.885390082f;\n"
	"  float r = (float)(e + big) + t * p;\n"
	"  return x != x ? x : x < 0.0f ? __builtin_nanf(\"\") : x == 0.0f ? -__builtin_inff() : x == __builtin_inff() ? x : r;\n}\n"
	"#define exp2f eng_exp2f\n#define log2f eng_log2f\n"
	/* float16 is stored as IEEE binary16 bits (uint16_t), never as _Float16, which clang
	 * accepts only on CPUs with AVX512-FP16: conversions with round to nearest even, by F16C
	 * (every AVX-512 x86-64 has it; -march=native turns it on) or by bit arithmetic. A value
	 * rounded to float16 goes through the conversions, so the compiler cannot contract the
	 * rounding away into a neighbouring multiply-add. */
	"typedef __UINT16_TYPE__ uint16_t;\n"
	"#if defined(__F16C__)\n"
	"typedef float eng_v4sf __attribute__((vector_size(16)));\n"
	"typedef short eng_v8hi __attribute__((vector_size(16)));\n"
	"static inline uint16_t eng_f2h(float x) { eng_v8hi r = __builtin_ia32_vcvtps2ph((eng_v4sf){x, 0, 0, 0}, 0); return (uint16_t)r[0]; }\n"
	"static inline float eng_h2f(uint16_t h) { eng_v4sf r = __builtin_ia32_vcvtph2ps((eng_v8hi){(short)h, 0, 0, 0, 0, 0, 0, 0}); return r[0]; }\n"
	"#else\n"
	"static inline uint16_t eng_f2h(float x)\n{\n"
	"  uint32_t u, r;\n  memcpy(&u, &x, 4);\n"
	"  uint32_t sign = (u >> 16) & 0x8000u;\n  u &= 0x7fffffffu;\n"
	"  if (u > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((u >> 13) & 0x3ffu)); /* NaN, quiet */\n"
	"  if (u >= 0x47800000u) return (uint16_t)(sign | 0x7c00u); /* >= 65536 and Inf: Inf */\n"
	"  if (u < 0x38800000u) { /* below 2^-14: subnormal or zero; the add rounds to nearest even */\n"
	"    float f;\n    memcpy(&f, &u, 4);\n    f += 0.5f;\n    memcpy(&r, &f, 4);\n    return (uint16_t)(sign | (r - 0x3f000000u));\n  }\n"
	"  r = u + 0xc8000fffu + ((u >> 13) & 1u); /* rebias the exponent, round to nearest even */\n"
	"  return (uint16_t)(sign | (r >> 13));\n}\n"
	"static inline float eng_h2f(uint16_t h)\n{\n"
	"  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;\n"
	"  float f;\n"
	"  if (e == 0x1fu)\n    u = sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0); /* NaN: quiet, as F16C */\n"
	"  else if (e)\n    u = sign | ((e + 112u) << 23) | (m << 13);\n"
	"  else {\n    f = (float)m * 5.9604644775390625e-08f; /* m * 2^-24, exact */\n    memcpy(&u, &f, 4);\n    u |= sign;\n  }\n"
	"  memcpy(&f, &u, 4);\n  return f;\n}\n"
	"#endif\n"
	"static inline float eng_f16r(float x) { return eng_h2f(eng_f2h(x)); }\n"
	"static inline float eng_f16_load(int64_t i, const uint16_t *p) { return eng_h2f(p[i]); }\n"
	"static inline void eng_f16_store(float v, int64_t i, uint16_t *p) { p[i] = eng_f2h(v); }\n";

static const bk_ctypes c_types = {
	.compute = {[ENG_BOOL] = "_Bool", [ENG_U8] = "uint8_t", [ENG_I32] = "int32_t", [ENG_I64] = "int64_t",
		    [ENG_F16] = "float", [ENG_F32] = "float"},
	.storage = {[ENG_BOOL] = "uint8_t", [ENG_U8] = "uint8_t", [ENG_I32] = "int32_t", [ENG_I64] = "int64_t",
		    [ENG_F16] = "uint16_t", [ENG_F32] = "float"},
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
	.f16_load = "eng_f16_load",
	.f16_store = "eng_f16_store",
	.simd_pragma = "#pragma omp simd",
	.unroll_pragma = "#pragma GCC unroll",
	.prelude = c_prelude,
};

const char *cpu_prelude(void) { return cpu_dialect.prelude; }
