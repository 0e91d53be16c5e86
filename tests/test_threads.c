/* test_threads.c: contexts on several threads at once (engine.h's rule: one thread per context,
 * contexts independent): build, compile into one cold shared disk cache, realize, JIT-replay,
 * train (autograd, SGD) and save/load, checked against the reference; and the CPU backend's
 * shared worker pool. Run under ThreadSanitizer by `make tsan`. */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensord/io.h>
#include <tensord/jit.h>
#include <tensord/optim.h>
#include "backends/cpu/pool.h"
#include "testutil.h"

#define NTHREADS 4

typedef struct worker_job {
	int index;
	const char *dir; /* the shared disk cache and file directory */
	pthread_barrier_t *barrier;
	eng_stats stats;
	char err[1024]; /* empty when everything matched */
} worker_job;

/* Fail the job with a message (the first one is kept); false, for `return job_fail(...)`. */
static bool job_fail(worker_job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool job_fail(worker_job *j, const char *fmt, ...)
{
	if (!j->err[0]) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(j->err, sizeof(j->err), fmt, ap);
		va_end(ap);
	}
	return false;
}

/* A realized float32 tensor of random values in [lo, hi) (tu_rand asserts; threads must not). */
static eng_tensor *rand_f32(eng_ctx *ctx, tu_rng *r, int ndim, const int64_t *shape, double lo, double hi)
{
	int64_t n = 1;
	for (int i = 0; i < ndim; i++)
		n *= shape[i];
	float *v = malloc((size_t)n * sizeof(float));
	if (!v)
		return NULL;
	for (int64_t i = 0; i < n; i++)
		v[i] = (float)tu_real(r, lo, hi);
	eng_tensor *t = eng_from_data(ctx, ENG_F32, ndim, shape, v);
	free(v);
	return t;
}

/* Compare realized got with the reference of lazy want (same shape). */
static bool match_ref(worker_job *j, eng_tensor *got, eng_tensor *want, const char *what)
{
	ref_array w = {0}, g = {0};
	size_t nbytes = (size_t)eng_numel(got) * sizeof(float);
	float *raw = malloc(nbytes ? nbytes : 1);
	char msg[768] = "";
	bool ok = raw && ref_tensor(want, &w) && eng_tensor_read(got, raw, nbytes) == ENG_OK &&
		  ref_decode(ENG_F32, eng_ndim(got), eng_shape(got), raw, &g) &&
		  ref_match(&g, &w, 1e-4, 1e-5, msg, sizeof(msg));
	free(raw);
	ref_free(&w);
	ref_free(&g);
	return ok || job_fail(j, "thread %d: %s: %s %s", j->index, what, msg, eng_errmsg(eng_tensor_ctx(got)));
}

/* Graphs every thread builds alike (the same kernels compiled at once) and one of its own
 * shape (kernels no other thread has), plus an elementwise kernel big enough for the pool. */
static bool run_graphs(worker_job *j, eng_ctx *ctx)
{
	tu_rng r = {100 + (uint64_t)j->index};
	int64_t xs[2] = {16, 32}, ws[2] = {32, 24}, bs[1] = {24}, os[2] = {8 + j->index, 40}, big[1] = {1 << 16};
	eng_tensor *x = rand_f32(ctx, &r, 2, xs, -1, 1), *w = rand_f32(ctx, &r, 2, ws, -1, 1);
	eng_tensor *b = rand_f32(ctx, &r, 1, bs, -0.5, 0.5), *a = rand_f32(ctx, &r, 2, os, -2, 2);
	eng_tensor *p = rand_f32(ctx, &r, 1, big, -1, 1), *q = rand_f32(ctx, &r, 1, big, -1, 1);
	eng_tensor *y = eng_softmax(eng_relu(eng_add(eng_matmul(x, w), b)), -1);
	int ax = 1;
	eng_tensor *own = eng_sum(eng_mul(eng_exp(eng_mul(a, eng_full(ctx, ENG_F32, 0, NULL, 0.5))), a), &ax, 1, false);
	eng_tensor *triad = eng_add(p, eng_mul(q, eng_full(ctx, ENG_F32, 0, NULL, 3)));
	char msg[1024];
	eng_tensor *ts[] = {y, own, triad};
	return ref_compare_n(ts, 3, 1e-4, 1e-5, msg, sizeof(msg)) || job_fail(j, "thread %d: graphs: %s", j->index, msg);
}

typedef struct mlp {
	eng_tensor *w1, *b1, *w2;
} mlp;

static eng_tensor *mlp_forward(const mlp *m, const eng_tensor *x)
{
	return eng_softmax(eng_matmul(eng_relu(eng_add(eng_matmul(x, m->w1), m->b1)), m->w2), -1);
}

static eng_status mlp_fn(eng_ctx *ctx, eng_tensor *const *in, int nin, eng_tensor **out, int nout, void *user)
{
	out[0] = mlp_forward(user, in[0]);
	return out[0] ? ENG_OK : eng_error(ctx);
}

/* Four calls of a jitted MLP with batch `batch` (normal, capture, two replays), each checked
 * against the reference of the plain forward pass. */
static bool run_jit(worker_job *j, eng_ctx *ctx, int batch)
{
	tu_rng r = {7 + (uint64_t)j->index};
	int64_t s1[2] = {8, 16}, sb[1] = {16}, s2[2] = {16, 4}, xs[2] = {batch, 8};
	mlp m = {rand_f32(ctx, &r, 2, s1, -0.5, 0.5), rand_f32(ctx, &r, 1, sb, -0.1, 0.1),
		 rand_f32(ctx, &r, 2, s2, -0.5, 0.5)};
	if (!m.w1 || !m.b1 || !m.w2)
		return job_fail(j, "thread %d: jit weights: %s", j->index, eng_errmsg(ctx));
	eng_jit *jit = eng_jit_create(ctx, mlp_fn, &m, 1, 1, NULL);
	bool ok = jit || job_fail(j, "thread %d: jit create: %s", j->index, eng_errmsg(ctx));
	for (int call = 0; ok && call < 4; call++) {
		eng_scope_begin(ctx);
		eng_tensor *x = rand_f32(ctx, &r, 2, xs, -2, 2), *out[1];
		ok = (eng_jit_call(jit, &x, out) == ENG_OK ||
		      job_fail(j, "thread %d: jit call %d: %s", j->index, call, eng_errmsg(ctx))) &&
		     match_ref(j, out[0], mlp_forward(&m, x), "jit call");
		eng_scope_end(ctx);
	}
	eng_jit_info info;
	if (ok) {
		eng_jit_get_info(jit, &info);
		ok = info.replays == 2 || job_fail(j, "thread %d: %llu replays, want 2", j->index,
					       (unsigned long long)info.replays);
	}
	eng_jit_destroy(jit);
	return ok;
}

/* Three SGD steps (autograd, assigns, schedule-cache hits) on least squares, loss
 * mean((x w - t)^2), checked against the same steps computed here in double. */
static bool run_train(worker_job *j, eng_ctx *ctx)
{
	enum { N = 8, D = 4, STEPS = 3 };
	const double lr = 0.1;
	tu_rng r = {31 + (uint64_t)j->index};
	float xv[N * D], tv[N], wv[D];
	double w[D];
	for (int i = 0; i < N * D; i++)
		xv[i] = (float)tu_real(&r, -1, 1);
	for (int i = 0; i < N; i++)
		tv[i] = (float)tu_real(&r, -1, 1);
	for (int k = 0; k < D; k++)
		w[k] = wv[k] = (float)tu_real(&r, -0.5, 0.5);
	int64_t xs[2] = {N, D}, ts[2] = {N, 1}, ws[2] = {D, 1};
	eng_tensor *x = eng_from_data(ctx, ENG_F32, 2, xs, xv), *t = eng_from_data(ctx, ENG_F32, 2, ts, tv);
	eng_tensor *wt = eng_from_data(ctx, ENG_F32, 2, ws, wv);
	eng_optim_opts o;
	eng_optim_opts_default(&o, ENG_OPTIM_SGD);
	o.lr = lr;
	eng_optim *opt = wt && !eng_set_requires_grad(wt, true) ? eng_optim_create(ctx, &wt, 1, &o) : NULL;
	bool ok = opt || job_fail(j, "thread %d: optimizer: %s", j->index, eng_errmsg(ctx));
	for (int step = 0; ok && step < STEPS; step++) {
		eng_scope_begin(ctx);
		eng_tensor *d = eng_sub(eng_matmul(x, wt), t);
		eng_tensor *loss = eng_mul_s(eng_sum(eng_mul(d, d), NULL, 0, false), 1.0 / N);
		ok = (loss && eng_backward(loss) == ENG_OK && eng_optim_step(opt, &loss, 1) == ENG_OK) ||
		     job_fail(j, "thread %d: step %d: %s", j->index, step, eng_errmsg(ctx));
		eng_scope_end(ctx);
		double g[D] = {0};
		for (int i = 0; i < N; i++) {
			double e = -tv[i];
			for (int k = 0; k < D; k++)
				e += xv[i * D + k] * w[k];
			for (int k = 0; k < D; k++)
				g[k] += 2.0 / N * xv[i * D + k] * e;
		}
		for (int k = 0; k < D; k++)
			w[k] -= lr * g[k];
	}
	float got[D];
	ok = ok && (eng_tensor_read(wt, got, sizeof(got)) == ENG_OK ||
		    job_fail(j, "thread %d: read weights: %s", j->index, eng_errmsg(ctx)));
	for (int k = 0; ok && k < D; k++)
		ok = fabs(got[k] - w[k]) <= 1e-5 + 1e-4 * fabs(w[k]) ||
		     job_fail(j, "thread %d: weight %d after %d SGD steps: %g, want %g", j->index, k, STEPS, got[k], w[k]);
	eng_optim_destroy(opt);
	return ok;
}

/* Every thread saves the same tensor to one path at once (distinct temporary files, one
 * rename wins), then loads it back. */
static bool run_save_load(worker_job *j, eng_ctx *ctx)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/shared.safetensors", j->dir);
	float v[12];
	for (int i = 0; i < 12; i++)
		v[i] = (float)i / 4;
	int64_t s[2] = {3, 4};
	eng_named one = {"w", eng_from_data(ctx, ENG_F32, 2, s, v)};
	bool ok = eng_safetensors_save(ctx, path, &one, 1) == ENG_OK ||
		  job_fail(j, "thread %d: save: %s", j->index, eng_errmsg(ctx));
	pthread_barrier_wait(j->barrier); /* every thread, even one that failed: no deadlock */
	eng_named *got = NULL;
	int n = 0;
	float back[12];
	ok = ok && ((eng_safetensors_load(ctx, path, &got, &n) == ENG_OK && n == 1 &&
		     eng_tensor_read(got[0].t, back, sizeof(back)) == ENG_OK && !memcmp(back, v, sizeof(v))) ||
		    job_fail(j, "thread %d: load: %s", j->index, eng_errmsg(ctx)));
	eng_named_free(got, n);
	return ok;
}

static void *thread_main(void *p)
{
	worker_job *j = p;
	eng_ctx_opts o;
	eng_ctx_opts_default(&o);
	o.debug = tu_debug();
	o.cache_dir = j->dir;
	o.no_disk_cache = false;
	char err[512];
	eng_ctx *ctx = eng_ctx_create(&o, err, sizeof(err));
	if (!ctx)
		job_fail(j, "thread %d: context: %s", j->index, err);
	pthread_barrier_wait(j->barrier); /* start compiling together: the cache is cold */
	if (ctx && run_graphs(j, ctx) && run_jit(j, ctx, 5) && run_jit(j, ctx, 3 + j->index))
		run_train(j, ctx);
	bool saving = ctx && !j->err[0];
	pthread_barrier_wait(j->barrier);
	if (saving)
		run_save_load(j, ctx);
	else
		pthread_barrier_wait(j->barrier); /* run_save_load's */
	if (ctx) {
		eng_get_stats(ctx, &j->stats);
		eng_ctx_destroy(ctx);
	}
	return NULL;
}

/* One round: NTHREADS threads, a context each, all on dir. */
static void run_round(const char *dir, worker_job *jobs)
{
	pthread_barrier_t barrier;
	pthread_barrier_init(&barrier, NULL, NTHREADS);
	pthread_t th[NTHREADS];
	for (int i = 0; i < NTHREADS; i++) {
		jobs[i] = (worker_job){.index = i, .dir = dir, .barrier = &barrier};
		ck_assert_int_eq(pthread_create(&th[i], NULL, thread_main, &jobs[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&barrier);
	for (int i = 0; i < NTHREADS; i++)
		ck_assert_msg(!jobs[i].err[0], "%s", jobs[i].err);
}

START_TEST(test_contexts_on_threads)
{
	char dir[64];
	snprintf(dir, sizeof(dir), "/tmp/tensord-threads-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	worker_job jobs[NTHREADS];
	run_round(dir, jobs); /* cold: the same kernels compiled and stored at once */
	uint64_t compiled = 0;
	for (int i = 0; i < NTHREADS; i++)
		compiled += jobs[i].stats.compiles;
	ck_assert_uint_gt(compiled, 0);
	run_round(dir, jobs); /* warm: what the racing writers stored must load whole */
	for (int i = 0; i < NTHREADS; i++) {
		ck_assert_msg(jobs[i].stats.compiles == 0, "thread %d compiled %llu times with a warm cache", i,
			      (unsigned long long)jobs[i].stats.compiles);
		ck_assert_uint_gt(jobs[i].stats.disk_loads, 0);
	}
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* ---- the shared pool: one per process, jobs from two threads at once ---- */

typedef struct count_job {
	int *hits; /* one counter per index; each chunk touches only its own range */
} count_job;

static void count_range(void *arg, int64_t s, int64_t e)
{
	count_job *c = arg;
	for (int64_t i = s; i < e; i++)
		c->hits[i]++;
}

typedef struct submitter {
	cpu_pool *pool;
	int ways;
	bool ok;
} submitter;

static void *submit_main(void *p)
{
	submitter *s = p;
	enum { N = 1000 };
	int hits[N];
	s->ok = true;
	for (int round = 0; round < 200; round++) {
		memset(hits, 0, sizeof(hits));
		count_job c = {hits};
		cpu_pool_run(s->pool, count_range, &c, N, s->ways);
		for (int i = 0; i < N; i++)
			s->ok &= hits[i] == 1;
	}
	return NULL;
}

START_TEST(test_pool_is_shared)
{
	cpu_pool *a = cpu_pool_acquire(2), *b = cpu_pool_acquire(3);
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_eq(a, b);
	ck_assert_int_ge(cpu_pool_size(a), 3); /* grown to the larger request */
	submitter s[2] = {{a, 3, false}, {b, 2, false}};
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, submit_main, &s[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	ck_assert(s[0].ok && s[1].ok);
	cpu_pool_release(a);
	cpu_pool_release(b);
}
END_TEST

Suite *threads_suite(void)
{
	const TTest *const tests[] = {test_contexts_on_threads, test_pool_is_shared};
	return tu_suite("threads", tests, (int)(sizeof(tests) / sizeof(tests[0])), TU_TIMEOUT);
}
