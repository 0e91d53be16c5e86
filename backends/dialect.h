/* dialect.h: how a backend's kernels are written, stated as data: the C-family language's type
 * names, kernel signature, thread and work-group indices, float16 access, loop hints and the
 * prelude. The engine's renderer (engine/renderer/) reads it; a backend only fills it in. */
#ifndef BK_DIALECT_H
#define BK_DIALECT_H

#include <stdbool.h>

#include <tensord/eng_dtype.h>

/* Type names of one language, indexed by eng_dtype. */
typedef struct bk_ctypes {
	const char *compute[ENG_DTYPE_COUNT]; /* values in registers (float16 computes as float) */
	const char *storage[ENG_DTYPE_COUNT]; /* buffer elements (bool is stored as one byte) */
	const char *u32, *u64;                /* unsigned types of wrapping integer arithmetic */
} bk_ctypes;

/* A dialect. Fields marked "required" must be set ("" is allowed for pragmas); the optional
 * ones describe structure a language may lack. Programs are cached by their source text, so a
 * change here changes every kernel's cache key. */
typedef struct bk_dialect {
	const char *kernel_prefix; /* required: "void", "__kernel void", "extern \"C\" __global__ void" */
	const char *restrict_kw;   /* required: "restrict" or "__restrict__" */
	const bk_ctypes *types;   /* required */
	/* Non-NULL: each buffer i is a kernel parameter `BUF_QUAL [const] T *restrict b<i>`, then
	 * come (int64 start, int64 end); e.g. "__global", or "" for CUDA. NULL: the C form
	 * `(void *const *bufs, int64_t start, int64_t end)`. */
	const char *buf_qual;
	/* Non-NULL: one thread per iteration of the parallel loop, whose variable is
	 * `start + THREAD_IDX`, guarded by `< end`; e.g. "(long)get_global_id(0)". NULL: the
	 * parallel loop runs over [start, end). A kernel without a parallel loop runs as one thread. */
	const char *thread_idx;
	const char *nan, *inf; /* required: float specials, e.g. __builtin_nanf(""), INFINITY */
	/* Float16: a function rounding a float to float16 precision (required; defined by the
	 * prelude); load and store functions, called as LOAD(index, ptr) and STORE(value, index,
	 * ptr) (NULL: element access with casts), e.g. vload_half and vstore_half_rte. */
	const char *f16_round, *f16_load, *f16_store;
	/* Loop hints (required): simd_pragma before the wide tile loop and scalar reductions (e.g.
	 * "#pragma omp simd"), unroll_pragma before the other tile loops (e.g. "#pragma GCC unroll");
	 * "" emits none. Without simd hints the wide tile loop gets the unroll hint too. */
	const char *simd_pragma, *unroll_pragma;
	/* Required: the source every kernel is preceded by (types, helpers; see BK_PRELUDE_HELPERS). */
	const char *prelude;
	/* Work-groups, for kernels with ir->group > 1 (NULL: the dialect has none, and such a kernel
	 * is an error): the kernel runs as one group of ir->group threads, or one per iteration of
	 * its parallel loop (whose index is then GROUP_IDX). Untiled reductions have their
	 * outermost loop strided over the group (LOCAL_ID); the partial results meet in LOCAL_QUAL
	 * memory through a tree separated by BARRIER. The outermost store loop of a row is strided
	 * over the group too; a store outside one is made by thread 0 alone. The kernel is
	 * declared with GROUP_ATTR <size> GROUP_ATTR_END, so the launch finds the group size. */
	const char *local_id, *local_qual, *barrier, *group_idx, *group_attr, *group_attr_end;
	/* true: the group attribute stands between the kernel prefix and the name (CUDA's
	 * `extern "C" __global__ void __launch_bounds__(256) name(`); false: on the line before. */
	bool group_attr_inline;
} bk_dialect;

/* The integer limit macros a prelude defines (C99's names, for any dialect). */
#define BK_PRELUDE_INT_LIMITS \
	"#define INT64_C(c) c ## L\n#define INT32_MAX 2147483647\n#define INT32_MIN (-INT32_MAX - 1)\n" \
	"#define INT64_MAX 9223372036854775807L\n#define INT64_MIN (-INT64_MAX - 1)\n"

/* Helpers every prelude includes (integer division and modulo that never trap, saturating
 * float-to-int casts). Before them a prelude defines the types int32_t, uint32_t, int64_t,
 * uint64_t and uint8_t, BK_PRELUDE_INT_LIMITS, and exp2f, log2f, sinf, sqrtf and truncf
 * (precise, not native/fast variants); anywhere it defines the bit casts eng_as_int32_t(float)
 * and eng_as_float(int32_t), and the dialect's f16_round function if it names one. Kernels call
 * the helpers by the fixed-width names (eng_idiv_int32_t, eng_f2i_uint8_t, ...), whatever the
 * dialect's type names are. String literals, so a backend's prelude is built at compile time. */
#define BK_PRELUDE_HELPERS \
	"#define TSD_DIV(T, UT) \\\n" \
	"  static inline T eng_idiv_##T(T a, T b) { return b == 0 ? 0 : b == -1 ? (T)((UT)0 - (UT)a) : a / b; } \\\n" \
	"  static inline T eng_mod_##T(T a, T b) { return (b == 0 || b == -1) ? 0 : a % b; }\n" \
	"TSD_DIV(int32_t, uint32_t)\n" \
	"TSD_DIV(int64_t, uint64_t)\n" \
	"static inline uint8_t eng_idiv_uint8_t(uint8_t a, uint8_t b) { return b ? a / b : 0; }\n" \
	"static inline uint8_t eng_mod_uint8_t(uint8_t a, uint8_t b) { return b ? a % b : 0; }\n" \
	"static inline int32_t eng_f2i_int32_t(float x) { return x != x ? 0 : x >= 2147483647.0f ? INT32_MAX : x <= -2147483648.0f ? INT32_MIN : (int32_t)x; }\n" \
	"static inline int64_t eng_f2i_int64_t(float x) { return x != x ? 0 : x >= 9223372036854775807.0f ? INT64_MAX : x <= -9223372036854775808.0f ? INT64_MIN : (int64_t)x; }\n" \
	"static inline uint8_t eng_f2i_uint8_t(float x) { return x != x ? 0 : x >= 255.0f ? 255 : x <= 0.0f ? 0 : (uint8_t)x; }\n"

#endif
