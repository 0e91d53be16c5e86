/* testutil.h: helpers shared by the check suites: contexts, deterministic pseudo-random data,
 * and batches of tensors realized together and checked against the reference or known values. */
#ifndef TEST_TESTUTIL_H
#define TEST_TESTUTIL_H

#include <check.h>
#include <stdbool.h>
#include <stdint.h>

#include <tensord/engine.h>
#include "ref_eval.h"

/* Read the committed fuzz seed tests/fuzz/corpus/<dir>/<name> (relative to the repository root,
 * where the suites run) into buf (cap bytes at most); fails the running test if it is missing.
 * Returns its length. */
size_t tu_read_seed(const char *dir, const char *name, void *buf, size_t cap);

/* Per-test time limit (seconds) for test cases that compile kernels. */
#define TU_TIMEOUT 120

/* The DEBUG level test contexts use: $TENSORD_TEST_DEBUG, else 0 (quiet), so e.g. every
 * kernel a suite generates can be printed with TENSORD_TEST_DEBUG=4. */
int tu_debug(void);

/* A context with opts.debug = tu_debug(); fails the running test if creation fails. The test
 * frees it with eng_ctx_destroy. */
eng_ctx *tu_ctx(void);


/* The same, tracked: if the test fails before tu_ctx_free, the suite's teardown frees it (with
 * CK_FORK=no a failed assertion jumps out of the test, so nothing after it runs). */
eng_ctx *tu_ctx_new(void);
/* Track a context made otherwise; returns ctx. */
eng_ctx *tu_ctx_track(eng_ctx *ctx);
/* Free a tracked context. */
void tu_ctx_free(eng_ctx *ctx);

/* Whether the C compiler cc runs here and builds code for this process's architecture (its
 * predefined macros name the one run_tests was built for), as the CPU backend's kernels need:
 * under qemu-user the host's gcc and clang run, but build for the host. */
bool tu_cc_builds_here(const char *cc);
/* The compilers a suite builds kernels with by name: gcc, clang and $CC, each once, those that
 * tu_cc_builds_here; their names (static or the environment's) into out, returns how many. */
int tu_kernel_ccs(const char *out[3]);

/* The CUDA target kernels are rendered for in the CUDA compile check: a GPU of 132 SMs (an
 * H100), as cuda_target_facts(132, true) states it (test_cudacompile.c checks that). */
#define TU_CUDA_SMS 132
extern const struct bk_target tu_cuda_target;
/* With $TENSORD_TEST_CUDA_KERNELS set (the CUDA compile check runs the suites so), every kernel
 * ctx schedules is also rendered for tu_cuda_target and appended to that file; tu_ctx and
 * tu_ctx_track do this, a suite that makes contexts otherwise calls it. Returns ctx. */
eng_ctx *tu_ctx_shadow(eng_ctx *ctx);

/* A tiny LCG (Knuth's MMIX constants): deterministic data independent of libc. */
typedef struct tu_rng {
	uint64_t s;
} tu_rng;
uint64_t tu_next(tu_rng *r);			   /* 32 random bits */
int64_t tu_int(tu_rng *r, int64_t lo, int64_t hi); /* uniform in [lo, hi] */
double tu_real(tu_rng *r, double lo, double hi);   /* uniform in [lo, hi) */

/* Store v into *dst as dtype dt (a C conversion: float rounding, integer truncation). */
void tu_store(eng_dtype dt, double v, void *dst);
/* A realized tensor holding v[0..numel) converted to dt. */
eng_tensor *tu_from_doubles(eng_ctx *ctx, eng_dtype dt, int ndim, const int64_t *shape,
			    const double *v);
/* A realized tensor with uniform values in [lo, hi] (integers for int dtypes, 0/1 for bool). */
eng_tensor *tu_rand(eng_ctx *ctx, tu_rng *r, eng_dtype dt, int ndim, const int64_t *shape,
		    double lo, double hi);
/* A realized tensor of random multiples of q in [lo, hi] (use q = 1 for integer dtypes); if vals
 * is non-NULL it receives the numel values as stored (after rounding to dt). */
eng_tensor *tu_quant(eng_ctx *ctx, tu_rng *r, eng_dtype dt, int ndim, const int64_t *shape,
		     double lo, double hi, double q, double *vals);
/* Default tolerance of float results of dtype dt after a few ops (0 for exact dtypes). */
double tu_tol(eng_dtype dt);

/* A batch of checks: tensors are collected, then realized with one eng_realize and compared,
 * each against the reference evaluator or an expected array. All failures are reported
 * together by one failed assertion. The batch holds no tensor references. */
typedef struct tu_batch tu_batch;
tu_batch *tu_batch_new(eng_ctx *ctx);
/* Check t (may be NULL: a failed build, reported with the context's error) against ref_eval. */
void tu_batch_ref(tu_batch *b, eng_tensor *t, double rtol, double atol, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* Check t against want[0..n) (n must equal numel; copied). */
void tu_batch_want(tu_batch *b, eng_tensor *t, const double *want, int64_t n, double rtol,
		   double atol, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
/* Realize everything, compare, free the batch; fails the test (naming file:line) on errors. */
#define tu_batch_check(b) tu_batch_check_at((b), __FILE__, __LINE__)
void tu_batch_check_at(tu_batch *b, const char *file, int line);
int tu_batch_size(const tu_batch *b);

/* A suite named name with one test case holding tests[0..n), each limited to timeout seconds;
 * its teardown frees the tracked contexts a failed test left behind. */
Suite *tu_suite(const char *name, const TTest *const *tests, int n, int timeout);

/* Read a realized tensor as doubles (caller frees); fails the test on error. */
double *tu_read(eng_tensor *t);

#endif
