/* matmul_blas: a float32 matmul (N x N, or MxKxN with a trailing t for x @ w.T) through the
 * engine and through an OpenBLAS library (numpy's bundled one, bench/compare_blas.sh), call by
 * call in one process: each pair runs both on the same inputs (in alternating order) and the
 * ratio of their times is taken per pair, so the host's speed changes, which move both alike,
 * cancel. Prints the median ratio and its quartiles.
 * Usage: bench_matmul_blas LIBOPENBLAS [N | MxKxN[t]] [pairs] [threads]. OpenBLAS's threads spin for a
 * while after a call and would take the cores from the engine's next one: run it with
 * OPENBLAS_THREAD_TIMEOUT=4 (they sleep at once; a wake-up is ~0.1 ms, nothing at N >= 1024). */
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include "bench.h"
#include "matmul_shape.h"

/* cblas_sgemm, with 64-bit integers (numpy's scipy_openblas64_) or 32-bit ones */
typedef void (*sgemm64_fn)(int, int, int, int64_t, int64_t, int64_t, float, const float *, int64_t,
			   const float *, int64_t, float, float *, int64_t);
typedef void (*sgemm32_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int,
			   float, float *, int);
typedef void (*threads_fn)(int);

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };

typedef struct blas {
	sgemm64_fn s64;
	sgemm32_fn s32;
} blas;

/* z = x @ y, y stored k x n (or n x k and transposed: s->wt) */
static void blas_matmul(const blas *b, const mm_shape *s, const float *x, const float *y, float *z)
{
	int tb = s->wt ? TRANS : NO_TRANS;
	int64_t ldb = s->wt ? s->k : s->n;
	if (b->s64)
		b->s64(ROW_MAJOR, NO_TRANS, tb, s->m, s->n, s->k, 1.0f, x, s->k, y, ldb, 0.0f, z, s->n);
	else
		b->s32(ROW_MAJOR, NO_TRANS, tb, (int)s->m, (int)s->n, (int)s->k, 1.0f, x, (int)s->k, y, (int)ldb, 0.0f, z,
		       (int)s->n);
}

typedef struct operands {
	eng_tensor *a, *b;
	bool wt;
} operands;

/* The engine's matmul of the (realized) operands, lazy. */
static eng_tensor *product(eng_ctx *ctx, void *arg)
{
	(void)ctx;
	const operands *o = arg;
	return eng_matmul(o->a, o->wt ? eng_transpose(o->b, 0, 1) : o->b);
}

int main(int argc, char **argv)
{
	const char *arg = argc > 2 ? argv[2] : "2048";
	mm_shape sh;
	int pairs = argc > 3 ? atoi(argv[3]) : 15, threads = argc > 4 ? atoi(argv[4]) : 2;
	if (argc < 2 || !mm_shape_parse(arg, &sh) || pairs < 3 || pairs > 1000 || threads < 1 || threads > 1024) {
		fprintf(stderr, "usage: bench_matmul_blas LIBOPENBLAS [N | MxKxN[t]] [pairs] [threads]\n");
		return 2;
	}
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	blas bl = {0};
	threads_fn set_threads = NULL;
	if (h) {
		bl.s64 = (sgemm64_fn)dlsym(h, "scipy_cblas_sgemm64_");
		bl.s32 = bl.s64 ? NULL : (sgemm32_fn)dlsym(h, "cblas_sgemm");
		set_threads = (threads_fn)dlsym(h, bl.s64 ? "scipy_openblas_set_num_threads64_" : "openblas_set_num_threads");
	}
	if (!bl.s64 && !bl.s32) {
		fprintf(stderr, "bench_matmul_blas: no cblas_sgemm in %s: %s\n", argv[1], h ? "" : dlerror());
		return 1;
	}
	if (set_threads)
		set_threads(threads);
	char err[256];
	eng_ctx *ctx = eng_ctx_create(NULL, err, sizeof(err));
	if (!ctx) {
		fprintf(stderr, "bench_matmul_blas: %s\n", err);
		return 1;
	}
	size_t xbytes = (size_t)(sh.m * sh.k) * sizeof(float), ybytes = (size_t)(sh.k * sh.n) * sizeof(float);
	size_t bytes = (size_t)(sh.m * sh.n) * sizeof(float);
	float *x = malloc(xbytes), *y = malloc(ybytes), *z = malloc(bytes), *e = malloc(bytes);
	double *te = calloc(pairs, sizeof(double)), *tb = calloc(pairs, sizeof(double)), *q = calloc(pairs, sizeof(double));
	int64_t sa[2] = {sh.m, sh.k}, sb[2] = {sh.k, sh.n}, sbt[2] = {sh.n, sh.k};
	eng_tensor *a = eng_contiguous(eng_rand(ctx, ENG_F32, 2, sa));
	eng_tensor *b = eng_contiguous(eng_rand(ctx, ENG_F32, 2, sh.wt ? sbt : sb));
	eng_tensor *ab[2] = {a, b};
	if (!x || !y || !z || !e || !te || !tb || !q || !a || !b || eng_realize(ab, 2) || eng_tensor_read(a, x, xbytes) ||
	    eng_tensor_read(b, y, ybytes)) {
		fprintf(stderr, "bench_matmul_blas: %s\n", eng_errmsg(ctx));
		return 1;
	}
	operands ops = {a, b, sh.wt};
	double warm;
	int bad = bench_realize_once(ctx, "bench_matmul_blas", product, &ops, e, bytes, &warm, NULL); /* compile, allocate */
	blas_matmul(&bl, &sh, x, y, z);
	for (int p = 0; p < pairs && !bad; p++) {
		for (int k = 0; k < 2; k++) {
			if ((p + k) % 2 == 0) {
				bad = bad || bench_realize_once(ctx, "bench_matmul_blas", product, &ops, e, bytes, &te[p], NULL);
			} else {
				double t0 = bench_now_ms();
				blas_matmul(&bl, &sh, x, y, z);
				tb[p] = bench_now_ms() - t0;
			}
		}
		q[p] = te[p] / tb[p];
	}
	double worst = 0; /* the two results agree */
	for (int64_t i = 0; i < sh.m * sh.n && !bad; i += 97) {
		double d = (double)e[i] - z[i];
		d = d < 0 ? -d : d;
		worst = d > worst ? d : worst;
	}
	if (bad || worst > 1e-3 * (double)sh.k) {
		if (!bad)
			fprintf(stderr, "bench_matmul_blas: the results differ\n");
		return 1;
	}
	bench_sort(te, pairs);
	bench_sort(tb, pairs);
	bench_sort(q, pairs);
	printf("matmul %s, %d pairs: tensord median %.3f ms, OpenBLAS median %.3f ms; tensord / OpenBLAS per pair: "
	       "median %.3fx (quartiles %.3f..%.3f)\n",
	       arg, pairs, te[pairs / 2], tb[pairs / 2], q[pairs / 2], q[pairs / 4], q[3 * pairs / 4]);
	free(x), free(y), free(z), free(e), free(te), free(tb), free(q);
	eng_ctx_destroy(ctx);
	return 0;
}
