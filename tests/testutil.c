/* testutil.c: contexts, data generation and batched checking for the test suites
 * (see testutil.h). */
#include "testutil.h"

#include "backends/cuda/cudac.h"
#include "realize/realize.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tu_debug(void)
{
	const char *e = getenv("TENSORD_TEST_DEBUG");
	return e ? atoi(e) : 0;
}

const bk_target tu_cuda_target = {
	.dialect = &cuda_dialect,
	.parallelism = TU_CUDA_SMS * 1024,
	.reduce_group = CUDA_GROUP_SIZE,
	.vector_width = 0,
};

bool tu_cc_builds_here(const char *cc)
{
#if defined(__x86_64__)
	const char *arch = "#define __x86_64__ ";
#elif defined(__aarch64__)
	const char *arch = "#define __aarch64__ ";
#else
	const char *arch = NULL; /* another architecture: any compiler that runs */
#endif
	char cmd[512], line[512];
	snprintf(cmd, sizeof(cmd), "%s -dM -E -x c /dev/null 2>/dev/null", cc);
	FILE *p = popen(cmd, "r");
	if (!p)
		return false;
	bool lines = false, here = !arch;
	while (fgets(line, sizeof(line), p)) {
		lines = true;
		here |= arch && !strncmp(line, arch, strlen(arch));
	}
	return pclose(p) == 0 && lines && here;
}

int tu_kernel_ccs(const char *out[3])
{
	const char *cand[3] = {"gcc", "clang", getenv("CC")};
	int n = 0;
	for (int i = 0; i < 3; i++)
		if (cand[i] && *cand[i] &&
		    (i < 2 || (strcmp(cand[i], "gcc") && strcmp(cand[i], "clang"))) &&
		    tu_cc_builds_here(cand[i]))
			out[n++] = cand[i];
	return n;
}

/* $TENSORD_TEST_CUDA_KERNELS names a file: every kernel the context schedules is also rendered
 * for a CUDA GPU (the CUDA compile check, test_cudacompile.c) and appended to it. */
static void shadow_append(void *arg, const char *name, const char *src, const char *error)
{
	FILE *f = fopen((const char *)arg, "a");
	if (!f)
		return;
	if (src)
		fprintf(f, "KERNEL %s %zu\n%s\n", name, strlen(src), src);
	else
		fprintf(f, "ERROR %zu\n%s\n", strlen(error), error);
	fclose(f);
}

eng_ctx *tu_ctx_shadow(eng_ctx *ctx)
{
	const char *path = getenv("TENSORD_TEST_CUDA_KERNELS");
	if (ctx && path && *path)
		eng_realize_set_shadow(ctx, &tu_cuda_target, shadow_append, (void *)path);
	return ctx;
}

eng_ctx *tu_ctx(void)
{
	eng_ctx_opts o;
	char err[512] = "";
	eng_ctx_opts_default(&o);
	o.debug = tu_debug();
	o.no_disk_cache = true; /* compile counts must not depend on earlier runs */
	eng_ctx *ctx = eng_ctx_create(&o, err, sizeof(err));
	ck_assert_msg(ctx != NULL, "eng_ctx_create failed: %s", err);
	return tu_ctx_shadow(ctx);
}

/* Contexts of the running test, for the teardown after a failed assertion. check's fixtures take
 * no argument, so this file-level table is the only way to reach them. */
#define TU_MAX_CTX 16
static eng_ctx *tracked[TU_MAX_CTX];

eng_ctx *tu_ctx_track(eng_ctx *ctx)
{
	tu_ctx_shadow(ctx);
	for (int i = 0; ctx && i < TU_MAX_CTX; i++)
		if (!tracked[i]) {
			tracked[i] = ctx;
			return ctx;
		}
	return ctx; /* table full: untracked, only leaks if the test fails */
}

eng_ctx *tu_ctx_new(void)
{
	return tu_ctx_track(tu_ctx());
}

void tu_ctx_free(eng_ctx *ctx)
{
	for (int i = 0; i < TU_MAX_CTX; i++)
		if (tracked[i] == ctx)
			tracked[i] = NULL;
	eng_ctx_destroy(ctx);
}

static void free_tracked(void)
{
	for (int i = 0; i < TU_MAX_CTX; i++) {
		eng_ctx_destroy(tracked[i]);
		tracked[i] = NULL;
	}
}

uint64_t tu_next(tu_rng *r)
{
	r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
	return r->s >> 32;
}

int64_t tu_int(tu_rng *r, int64_t lo, int64_t hi)
{
	uint64_t span = (uint64_t)hi - (uint64_t)lo + 1;
	uint64_t x = (tu_next(r) << 32) | tu_next(r);
	return span ? (int64_t)((uint64_t)lo + x % span) : (int64_t)x;
}

double tu_real(tu_rng *r, double lo, double hi)
{
	return lo + (hi - lo) * (double)tu_next(r) / 4294967296.0;
}

void tu_store(eng_dtype dt, double v, void *dst)
{
	switch (dt) {
	case ENG_BOOL:
		*(uint8_t *)dst = v != 0;
		break;
	case ENG_U8:
		*(uint8_t *)dst = (uint8_t)(int64_t)v;
		break;
	case ENG_I32:
		*(int32_t *)dst = (int32_t)(int64_t)v;
		break;
	case ENG_I64: /* saturate: (int64_t)2^63 is undefined */
		*(int64_t *)dst = v >= 9223372036854775808.0	? INT64_MAX
				  : v <= -9223372036854775808.0 ? INT64_MIN
				  : isnan(v)			? 0
								: (int64_t)v;
		break;
	case ENG_F16:
		*(uint16_t *)dst = eng_f16_bits(v);
		break;
	default:
		*(float *)dst = (float)v;
		break;
	}
}

static int64_t numel_of(int ndim, const int64_t *shape)
{
	int64_t n = 1;
	for (int d = 0; d < ndim; d++)
		n *= shape[d];
	return n;
}

eng_tensor *tu_from_doubles(eng_ctx *ctx, eng_dtype dt, int ndim, const int64_t *shape,
			    const double *v)
{
	int64_t n = numel_of(ndim, shape);
	size_t isz = eng_dtype_size(dt);
	unsigned char *raw = malloc(n ? (size_t)n * isz : 1);
	ck_assert(raw != NULL);
	for (int64_t k = 0; k < n; k++)
		tu_store(dt, v[k], raw + (size_t)k * isz);
	eng_tensor *t = eng_from_data(ctx, dt, ndim, shape, raw);
	free(raw);
	return t;
}

eng_tensor *tu_rand(eng_ctx *ctx, tu_rng *r, eng_dtype dt, int ndim, const int64_t *shape,
		    double lo, double hi)
{
	int64_t n = numel_of(ndim, shape);
	double *v = malloc((n ? (size_t)n : 1) * sizeof(double));
	ck_assert(v != NULL);
	for (int64_t k = 0; k < n; k++) {
		if (dt == ENG_BOOL)
			v[k] = (double)tu_int(r, 0, 1);
		else if (eng_dtype_is_int(dt))
			v[k] = (double)tu_int(r, (int64_t)lo, (int64_t)hi);
		else
			v[k] = tu_real(r, lo, hi);
	}
	eng_tensor *t = tu_from_doubles(ctx, dt, ndim, shape, v);
	free(v);
	return t;
}

eng_tensor *tu_quant(eng_ctx *ctx, tu_rng *r, eng_dtype dt, int ndim, const int64_t *shape,
		     double lo, double hi, double q, double *vals)
{
	int64_t n = numel_of(ndim, shape);
	double *v = vals ? vals : malloc((n ? (size_t)n : 1) * sizeof(double));
	int64_t klo = (int64_t)ceil(lo / q), khi = (int64_t)floor(hi / q);
	ck_assert(v != NULL);
	for (int64_t k = 0; k < n; k++) {
		unsigned char tmp[8];
		ref_array one;
		int64_t s1 = 1;
		tu_store(dt, (double)tu_int(r, klo, khi) * q, tmp);
		ck_assert(ref_decode(dt, 1, &s1, tmp, &one));
		v[k] = ref_get(&one, 0);
		ref_free(&one);
	}
	eng_tensor *t = tu_from_doubles(ctx, dt, ndim, shape, v);
	if (!vals)
		free(v);
	return t;
}

double tu_tol(eng_dtype dt)
{
	return dt == ENG_F16 ? 4e-3 : dt == ENG_F32 ? 2e-6 : 0;
}

/* ---- batches ---- */

typedef struct tu_entry {
	eng_tensor *t;
	double rtol, atol;
	double *want; /* NULL: compare with the reference */
	int64_t nwant;
	char label[160];
	char build_err[256]; /* set when t is NULL */
} tu_entry;

struct tu_batch {
	eng_ctx *ctx;
	tu_entry *e;
	int n, cap;
};

tu_batch *tu_batch_new(eng_ctx *ctx)
{
	tu_batch *b = calloc(1, sizeof(*b));
	ck_assert(b != NULL);
	b->ctx = ctx;
	return b;
}

int tu_batch_size(const tu_batch *b)
{
	return b->n;
}

static tu_entry *batch_push(tu_batch *b, eng_tensor *t, double rtol, double atol, const char *fmt,
			    va_list ap)
{
	if (b->n == b->cap) {
		b->cap = b->cap ? 2 * b->cap : 64;
		b->e = realloc(b->e, (size_t)b->cap * sizeof(*b->e));
		ck_assert(b->e != NULL);
	}
	tu_entry *e = &b->e[b->n++];
	memset(e, 0, sizeof(*e));
	e->t = t;
	e->rtol = rtol;
	e->atol = atol;
	vsnprintf(e->label, sizeof(e->label), fmt, ap);
	if (!t)
		snprintf(e->build_err, sizeof(e->build_err), "%s", eng_errmsg(b->ctx));
	return e;
}

void tu_batch_ref(tu_batch *b, eng_tensor *t, double rtol, double atol, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	batch_push(b, t, rtol, atol, fmt, ap);
	va_end(ap);
}

void tu_batch_want(tu_batch *b, eng_tensor *t, const double *want, int64_t n, double rtol,
		   double atol, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	tu_entry *e = batch_push(b, t, rtol, atol, fmt, ap);
	va_end(ap);
	e->want = malloc((n ? (size_t)n : 1) * sizeof(double));
	ck_assert(e->want != NULL);
	memcpy(e->want, want, (size_t)n * sizeof(double));
	e->nwant = n;
}

/* The expected values of an entry as an array of t's dtype and shape. */
static bool entry_expected(const tu_entry *e, ref_array *out, char *msg, size_t len)
{
	if (!e->want) {
		if (!ref_tensor(e->t, out)) {
			snprintf(msg, len, "the reference cannot evaluate the graph");
			return false;
		}
		return true;
	}
	if (e->nwant != eng_numel(e->t)) {
		snprintf(msg, len, "expected %lld values, tensor has %lld", (long long)e->nwant,
			 (long long)eng_numel(e->t));
		return false;
	}
	eng_dtype dt = eng_tensor_dtype(e->t);
	size_t isz = eng_dtype_size(dt);
	unsigned char *raw = malloc(e->nwant ? (size_t)e->nwant * isz : 1);
	ck_assert(raw != NULL);
	for (int64_t k = 0; k < e->nwant; k++)
		tu_store(dt, e->want[k], raw + (size_t)k * isz);
	bool ok = ref_decode(dt, eng_ndim(e->t), eng_shape(e->t), raw, out);
	/* keep full double precision for float expectations: tolerance does the rest */
	if (ok && out->f)
		for (int64_t k = 0; k < e->nwant; k++)
			out->f[k] = e->want[k];
	free(raw);
	return ok;
}

static void msg_append(char *buf, size_t cap, size_t *used, int *nfail, const char *fmt, ...)
{
	va_list ap;
	(*nfail)++;
	if (*nfail > 12 || *used >= cap)
		return;
	va_start(ap, fmt);
	int w = vsnprintf(buf + *used, cap - *used, fmt, ap);
	va_end(ap);
	if (w > 0)
		*used += (size_t)w < cap - *used ? (size_t)w : cap - *used - 1;
}

void tu_batch_check_at(tu_batch *b, const char *file, int line)
{
	size_t cap = 8192, used = 0;
	char *report = calloc(1, cap);
	int nfail = 0;
	ck_assert(report != NULL);
	ref_array *want = calloc(b->n ? (size_t)b->n : 1, sizeof(*want));
	bool *have = calloc(b->n ? (size_t)b->n : 1, sizeof(bool));
	eng_tensor **ts = calloc(b->n ? (size_t)b->n : 1, sizeof(*ts));
	int nts = 0;
	ck_assert(want && have && ts);
	char sub[768];
	/* expectations first: an assign changes its target's buffer when realized */
	for (int i = 0; i < b->n; i++) {
		tu_entry *e = &b->e[i];
		if (!e->t) {
			msg_append(report, cap, &used, &nfail, "\n  [%s] build failed: %s",
				   e->label, e->build_err);
			continue;
		}
		if (!entry_expected(e, &want[i], sub, sizeof(sub))) {
			msg_append(report, cap, &used, &nfail, "\n  [%s] %s", e->label, sub);
			continue;
		}
		have[i] = true;
		ts[nts++] = e->t;
	}
	if (nts && eng_realize(ts, nts) != ENG_OK) {
		msg_append(report, cap, &used, &nfail, "\n  batch realize of %d tensors failed: %s",
			   nts, eng_errmsg(b->ctx));
		eng_clear_error(b->ctx);
		/* find the culprits one by one */
		for (int i = 0; i < b->n; i++) {
			if (!have[i] || eng_realize(&b->e[i].t, 1) == ENG_OK)
				continue;
			msg_append(report, cap, &used, &nfail, "\n  [%s] realize failed: %s",
				   b->e[i].label, eng_errmsg(b->ctx));
			eng_clear_error(b->ctx);
			have[i] = false;
		}
	}
	for (int i = 0; i < b->n; i++) {
		tu_entry *e = &b->e[i];
		if (!have[i])
			continue;
		eng_dtype dt = eng_tensor_dtype(e->t);
		size_t nbytes = (size_t)eng_numel(e->t) * eng_dtype_size(dt);
		void *raw = malloc(nbytes ? nbytes : 1);
		ref_array got = {0};
		ck_assert(raw != NULL);
		if (eng_tensor_read(e->t, raw, nbytes) != ENG_OK) {
			msg_append(report, cap, &used, &nfail, "\n  [%s] read failed: %s", e->label,
				   eng_errmsg(b->ctx));
			eng_clear_error(b->ctx);
		} else if (!ref_decode(dt, eng_ndim(e->t), eng_shape(e->t), raw, &got)) {
			msg_append(report, cap, &used, &nfail, "\n  [%s] out of memory", e->label);
		} else if (!ref_match(&got, &want[i], e->rtol, e->atol, sub, sizeof(sub))) {
			msg_append(report, cap, &used, &nfail, "\n  [%s] %s%s", e->label,
				   e->want ? "(vs expected) " : "", sub);
		}
		ref_free(&got);
		free(raw);
	}
	int n = b->n;
	for (int i = 0; i < b->n; i++) {
		ref_free(&want[i]);
		free(b->e[i].want);
	}
	free(want);
	free(have);
	free(ts);
	free(b->e);
	free(b);
	if (nfail) {
		/* copy to the stack so the report is freed before the assertion jumps away */
		char msg[8192];
		snprintf(msg, sizeof(msg), "%s", report);
		free(report);
		ck_assert_msg(0, "%s:%d: %d of %d checks failed:%s%s", file, line, nfail, n, msg,
			      nfail > 12 ? "\n  ..." : "");
	}
	free(report);
}

Suite *tu_suite(const char *name, const TTest *const *tests, int n, int timeout)
{
	Suite *s = suite_create(name);
	TCase *tc = tcase_create(name);
	tcase_set_timeout(tc, timeout);
	tcase_add_checked_fixture(tc, NULL, free_tracked);
	for (int i = 0; i < n; i++)
		tcase_add_test(tc, tests[i]);
	suite_add_tcase(s, tc);
	return s;
}

double *tu_read(eng_tensor *t)
{
	ck_assert_msg(t != NULL, "tensor is NULL: %s", "build failed");
	eng_dtype dt = eng_tensor_dtype(t);
	int64_t n = eng_numel(t);
	size_t nbytes = (size_t)n * eng_dtype_size(dt);
	void *raw = malloc(nbytes ? nbytes : 1);
	double *v = malloc((n ? (size_t)n : 1) * sizeof(double));
	ref_array a = {0};
	ck_assert(raw && v);
	eng_status s = eng_tensor_read(t, raw, nbytes);
	if (s != ENG_OK) {
		char m[512];
		snprintf(m, sizeof(m), "%s", eng_errmsg(eng_tensor_ctx(t)));
		free(raw);
		free(v);
		ck_assert_msg(0, "read failed: %s", m);
	}
	ck_assert(ref_decode(dt, eng_ndim(t), eng_shape(t), raw, &a));
	for (int64_t k = 0; k < n; k++)
		v[k] = ref_get(&a, k);
	ref_free(&a);
	free(raw);
	return v;
}

size_t tu_read_seed(const char *dir, const char *name, void *buf, size_t cap)
{
	char path[256];
	snprintf(path, sizeof(path), "tests/fuzz/corpus/%s/%s", dir, name);
	FILE *f = fopen(path, "rb");
	ck_assert_msg(f, "%s: missing (run from the repository root)", path);
	size_t len = fread(buf, 1, cap, f);
	fclose(f);
	return len;
}
