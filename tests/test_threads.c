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
#include <time.h>

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

/* ---- the shared pool: one per process, jobs from several threads at once ---- */

typedef struct count_job {
	int *hits; /* one counter per index; each chunk touches only its own range */
} count_job;

static void count_range(void *arg, int64_t s, int64_t e, int slot)
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

/* A job that records its calls: each index's count, each call's range and slot, whether two
 * calls ever ran in one slot at once, and a call made after cpu_pool_run returned. */
enum { REC_MAX_CALLS = CPU_POOL_MAX * CPU_POOL_CHUNKS, REC_MAX_N = 4096 };
typedef struct rec_job {
	int kind;          /* REC_KIND or REC_KIND_B: a call with another job's fn or arg is caught */
	int ways;          /* the slots fn may be given: [0, ways) */
	int slow_slot;     /* this slot's first call sleeps slow_us (-1: none) */
	int slow_us;
	int spin;          /* iterations of busy work per index (a longer call) */
	int over;          /* set (atomically) when cpu_pool_run has returned */
	int calls, bad_slot, shared_slot, late, slow_done;
	int busy[CPU_POOL_MAX]; /* calls running in each slot now */
	int hits[REC_MAX_N];
	int64_t start[REC_MAX_CALLS], end[REC_MAX_CALLS];
	int slot_of[REC_MAX_CALLS];
} rec_job;
#define REC_KIND 0x5ec0b
#define REC_KIND_B 0x5ec0c

static void rec_call(rec_job *j, int kind, int64_t s, int64_t e, int slot)
{
	if (j->kind != kind || __atomic_load_n(&j->over, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&j->late, 1, __ATOMIC_RELAXED);
		return;
	}
	if (slot < 0 || slot >= j->ways) {
		__atomic_store_n(&j->bad_slot, 1, __ATOMIC_RELAXED);
		return;
	}
	if (__atomic_fetch_add(&j->busy[slot], 1, __ATOMIC_ACQ_REL))
		__atomic_store_n(&j->shared_slot, 1, __ATOMIC_RELAXED);
	int c = __atomic_fetch_add(&j->calls, 1, __ATOMIC_RELAXED);
	if (c < REC_MAX_CALLS) {
		j->start[c] = s, j->end[c] = e, j->slot_of[c] = slot;
	}
	if (slot == j->slow_slot && !__atomic_exchange_n(&j->slow_done, 1, __ATOMIC_RELAXED)) {
		struct timespec ts = {0, (long)j->slow_us * 1000};
		nanosleep(&ts, NULL); /* a worker descheduled in its chunk */
	}
	volatile unsigned x = 0;
	for (int64_t i = s; i < e; i++) {
		for (int k = 0; k < j->spin; k++)
			x += (unsigned)k;
		__atomic_fetch_add(&j->hits[i], 1, __ATOMIC_RELAXED);
	}
	__atomic_fetch_sub(&j->busy[slot], 1, __ATOMIC_ACQ_REL);
}

/* Two functions for two kinds of job: one called with the other's arg is caught. */
static void rec_range(void *arg, int64_t s, int64_t e, int slot) { rec_call(arg, REC_KIND, s, e, slot); }
static void rec_range_b(void *arg, int64_t s, int64_t e, int slot) { rec_call(arg, REC_KIND_B, s, e, slot); }

/* The ways a job of n asked for ways gets on p (pool.h). */
static int ways_for(cpu_pool *p, int64_t n, int ways)
{
	int w = ways < cpu_pool_size(p) ? ways : cpu_pool_size(p);
	return n < w ? (int)n : w;
}

/* Run j over [0, n) asked for ways, then check it (a message into err, empty if all held):
 * every index once, the calls' ranges cutting [0, n) in order-independent contiguous pieces,
 * their count min(n, ways * CPU_POOL_CHUNKS), slots in range and never shared at once. */
static void rec_run(cpu_pool *p, rec_job *j, int64_t n, int ways, bool kind_b, char *err, size_t errlen)
{
	int w = ways_for(p, n, ways);
	j->kind = kind_b ? REC_KIND_B : REC_KIND;
	j->ways = w > 1 ? w : 1;
	cpu_pool_run(p, kind_b ? rec_range_b : rec_range, j, n, ways);
	__atomic_store_n(&j->over, 1, __ATOMIC_RELEASE);
	int want = n == 0 ? 0 : w <= 1 ? 1 : (int)(n < (int64_t)w * CPU_POOL_CHUNKS ? n : (int64_t)w * CPU_POOL_CHUNKS);
	int calls = __atomic_load_n(&j->calls, __ATOMIC_ACQUIRE);
	err[0] = 0;
	if (j->bad_slot || j->shared_slot || j->late)
		snprintf(err, errlen, "n %lld ways %d: slot out of range %d, shared %d, call after the job %d", (long long)n,
			 ways, j->bad_slot, j->shared_slot, j->late);
	else if (calls != want && !(calls == 1 && j->start[0] == 0 && j->end[0] == n))
		/* one call over the whole range: the pool was busy with another thread's job */
		snprintf(err, errlen, "n %lld ways %d: %d calls, want %d", (long long)n, ways, calls, want);
	for (int64_t i = 0; i < n && !err[0]; i++)
		if (j->hits[i] != 1)
			snprintf(err, errlen, "n %lld ways %d: index %lld ran %d times", (long long)n, ways, (long long)i,
				 j->hits[i]);
	int64_t covered = 0;
	for (int c = 0; c < calls && !err[0]; c++) {
		if (j->end[c] <= j->start[c])
			snprintf(err, errlen, "n %lld ways %d: an empty call [%lld, %lld)", (long long)n, ways,
				 (long long)j->start[c], (long long)j->end[c]);
		covered += j->end[c] - j->start[c];
	}
	if (!err[0] && covered != n)
		snprintf(err, errlen, "n %lld ways %d: calls cover %lld indices", (long long)n, ways, (long long)covered);
}

/* More chunks than threads, each run exactly once, in every small and odd size. */
START_TEST(test_pool_chunks_run_once)
{
	cpu_pool *p = cpu_pool_acquire(3);
	ck_assert_ptr_nonnull(p);
	static const int64_t ns[] = {0, 1, 2, 3, 5, 11, 12, 13, 100, 1000, REC_MAX_N};
	rec_job *j = malloc(sizeof(*j));
	ck_assert_ptr_nonnull(j);
	char err[256];
	for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++)
		for (int ways = 1; ways <= 4; ways++) {
			memset(j, 0, sizeof(*j));
			j->slow_slot = -1;
			j->spin = 20;
			rec_run(p, j, ns[k], ways, false, err, sizeof(err));
			ck_assert_msg(!err[0], "%s", err);
		}
	free(j);
	cpu_pool_release(p);
}
END_TEST

/* A worker that stalls in its first chunk (descheduled, or slow): the job waits for that chunk
 * alone, the others' chunks are taken by whoever runs; coverage and slots hold, and while it
 * sleeps the caller and the other worker take the rest (it ran only that one chunk). */
START_TEST(test_pool_slow_worker)
{
	cpu_pool *p = cpu_pool_acquire(3);
	ck_assert_ptr_nonnull(p);
	rec_job *j = malloc(sizeof(*j));
	ck_assert_ptr_nonnull(j);
	char err[256];
	int stalled = 0, moved = 0;
	for (int round = 0; round < 20; round++) {
		memset(j, 0, sizeof(*j));
		j->slow_slot = 1 + round % 2;
		j->slow_us = 20000;
		j->spin = 100;
		rec_run(p, j, 1000, 3, false, err, sizeof(err));
		ck_assert_msg(!err[0], "round %d: %s", round, err);
		int slow_calls = 0;
		for (int c = 0; c < j->calls; c++)
			slow_calls += j->slot_of[c] == j->slow_slot;
		stalled += j->slow_done;
		moved += j->slow_done && slow_calls == 1 && j->calls > 1;
	}
	/* a worker that was never woken in time leaves no stalled round, and that is allowed */
	ck_assert_msg(!stalled || moved, "%d rounds stalled a worker, none went on without it", stalled);
	free(j);
	cpu_pool_release(p);
}
END_TEST

/* Many short jobs back to back from several threads at once (a worker often wakes after its
 * job is over, and must then run nothing of it, nor of the next with this one's fn or arg);
 * every job checked as above, of two kinds in turn (fn and arg of one kind each), each thread's
 * jobs' records kept for BURST_RING jobs, so a call that comes after its job is caught there. */
enum { BURST_RING = 4 };
typedef struct burst {
	cpu_pool *pool;
	int index, jobs;
	char err[256];
} burst;

static void *burst_main(void *arg)
{
	burst *b = arg;
	rec_job *ring = calloc(BURST_RING, sizeof(*ring));
	if (!ring) {
		snprintf(b->err, sizeof(b->err), "out of memory");
		return NULL;
	}
	for (int k = 0; k < b->jobs + BURST_RING && !b->err[0]; k++) {
		rec_job *j = &ring[k % BURST_RING];
		if (k >= BURST_RING && __atomic_load_n(&j->late, __ATOMIC_ACQUIRE))
			snprintf(b->err, sizeof(b->err), "job %d: a call after it had ended", k - BURST_RING);
		if (k >= b->jobs)
			continue; /* the last jobs' records checked */
		memset(j, 0, sizeof(*j));
		j->slow_slot = -1;
		j->spin = k % 3 == 0 ? 50 : 0;
		int64_t n = 1 + (k * 7 + b->index) % 64;
		rec_run(b->pool, j, n, 2 + k % 3, k & 1, b->err, sizeof(b->err));
	}
	free(ring);
	return NULL;
}

START_TEST(test_pool_back_to_back)
{
	enum { NSUB = 3 };
	cpu_pool *p = cpu_pool_acquire(3);
	ck_assert_ptr_nonnull(p);
	burst b[NSUB];
	pthread_t th[NSUB];
	for (int i = 0; i < NSUB; i++) {
		b[i] = (burst){.pool = p, .index = i, .jobs = 1500};
		ck_assert_int_eq(pthread_create(&th[i], NULL, burst_main, &b[i]), 0);
	}
	for (int i = 0; i < NSUB; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < NSUB; i++)
		ck_assert_msg(!b[i].err[0], "thread %d: %s", i, b[i].err);
	cpu_pool_release(p);
}
END_TEST

/* ---- results do not depend on how a launch's range was cut ---- */

/* A job holding the pool's workers' turn: its caller's chunk waits until released, so jobs
 * posted meanwhile run whole on their own threads (one call each). */
typedef struct holder {
	cpu_pool *pool;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool holding, release;
} holder;

static void hold_range(void *arg, int64_t s, int64_t e, int slot)
{
	holder *h = arg;
	if (slot != 0)
		return;
	pthread_mutex_lock(&h->mu);
	h->holding = true;
	pthread_cond_broadcast(&h->cv);
	while (!h->release)
		pthread_cond_wait(&h->cv, &h->mu);
	pthread_mutex_unlock(&h->mu);
}

static void *hold_main(void *arg)
{
	holder *h = arg;
	cpu_pool_run(h->pool, hold_range, h, 64, cpu_pool_size(h->pool));
	return NULL;
}

/* A split sum, sums of long rows, a matmul with packed rows in heap scratch (more blocks than
 * threads) and a softmax over it, computed from the same inputs each time; out gets their
 * bytes. */
static void chunking_graphs(eng_ctx *ctx, const float *av, const float *bv, const float *xv, float *out, size_t n)
{
	int64_t sa[2] = {1200, 256}, sb[2] = {256, 384}, sx[1] = {1 << 21}, sr[2] = {4, 1 << 19};
	eng_scope_begin(ctx);
	eng_tensor *a = eng_from_data(ctx, ENG_F32, 2, sa, av), *b = eng_from_data(ctx, ENG_F32, 2, sb, bv);
	eng_tensor *x = eng_from_data(ctx, ENG_F32, 1, sx, xv);
	int ax = 1;
	eng_tensor *ts[4] = {eng_sum(x, NULL, 0, false), eng_sum(eng_reshape(x, 2, sr), &ax, 1, false), eng_matmul(a, b), NULL};
	ts[3] = eng_softmax(ts[2], -1);
	ck_assert_msg(eng_realize(ts, 4) == ENG_OK, "realize: %s", eng_errmsg(ctx));
	size_t off = 0;
	for (int i = 0; i < 4; i++) {
		size_t nb = (size_t)eng_numel(ts[i]) * sizeof(float);
		ck_assert_uint_le(off + nb / sizeof(float), n);
		ck_assert_int_eq(eng_tensor_read(ts[i], out + off, nb), ENG_OK);
		off += nb / sizeof(float);
	}
	eng_scope_end(ctx);
}

START_TEST(test_pool_chunking_keeps_results)
{
	eng_ctx_opts o;
	eng_ctx_opts_default(&o);
	o.debug = tu_debug();
	o.device = "CPU";
	o.backend_opts = "CPU.threads=3,CPU.cache_l1=4096,CPU.cache_l2=65536";
	char err[512];
	eng_ctx *ctx = eng_ctx_create(&o, err, sizeof(err));
	ck_assert_msg(ctx != NULL, "context: %s", err);
	tu_rng r = {77};
	size_t na = 1200 * 256, nbv = 256 * 384, nx = 1 << 21, nout = 1 + 4 + 2 * 1200 * 384;
	float *av = malloc(na * 4), *bv = malloc(nbv * 4), *xv = malloc(nx * 4);
	float *whole = malloc(nout * 4), *cut = malloc(nout * 4);
	ck_assert(av && bv && xv && whole && cut);
	for (size_t i = 0; i < na; i++)
		av[i] = (float)tu_real(&r, -1, 1);
	for (size_t i = 0; i < nbv; i++)
		bv[i] = (float)tu_real(&r, -1, 1);
	for (size_t i = 0; i < nx; i++)
		xv[i] = (float)tu_real(&r, -1, 1);
	chunking_graphs(ctx, av, bv, xv, cut, nout); /* compiles; chunks over the workers */
	/* with another job holding the workers, each launch is one call on this thread */
	holder h = {.pool = cpu_pool_acquire(3)};
	ck_assert_ptr_nonnull(h.pool);
	pthread_mutex_init(&h.mu, NULL);
	pthread_cond_init(&h.cv, NULL);
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, hold_main, &h), 0);
	pthread_mutex_lock(&h.mu);
	while (!h.holding)
		pthread_cond_wait(&h.cv, &h.mu);
	pthread_mutex_unlock(&h.mu);
	chunking_graphs(ctx, av, bv, xv, whole, nout);
	pthread_mutex_lock(&h.mu);
	h.release = true;
	pthread_cond_broadcast(&h.cv);
	pthread_mutex_unlock(&h.mu);
	pthread_join(th, NULL);
	ck_assert_msg(!memcmp(whole, cut, nout * 4), "a launch cut into chunks differs from one run whole");
	for (int round = 0; round < 3; round++) { /* chunks run by whichever threads come */
		chunking_graphs(ctx, av, bv, xv, cut, nout);
		ck_assert_msg(!memcmp(whole, cut, nout * 4), "round %d differs", round);
	}
	pthread_mutex_destroy(&h.mu);
	pthread_cond_destroy(&h.cv);
	cpu_pool_release(h.pool);
	free(av), free(bv), free(xv), free(whole), free(cut);
	eng_ctx_destroy(ctx);
}
END_TEST

Suite *threads_suite(void)
{
	const TTest *const tests[] = {test_contexts_on_threads, test_pool_is_shared, test_pool_chunks_run_once,
				      test_pool_slow_worker, test_pool_back_to_back, test_pool_chunking_keeps_results};
	return tu_suite("threads", tests, (int)(sizeof(tests) / sizeof(tests[0])), TU_TIMEOUT);
}
