/* pool.c: the process's shared pool of persistent worker threads (see pool.h). Workers sleep on
 * a condition variable between jobs; a generation counter tells them a new job is posted. */
#include "pool.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

typedef struct worker {
	struct cpu_pool *pool;
	int index;     /* its chunk of a job: 1.. (the caller takes chunk 0) */
	uint64_t seen; /* the generation it last ran, set before it starts */
} worker;

struct cpu_pool {
	int refs;		/* devices holding the pool (under shared_mu) */
	int n;			/* threads including the caller (changes under run_mu and mu) */
	pthread_mutex_t run_mu; /* held by the thread whose job is on the workers */
	pthread_mutex_t mu;	/* the job fields and the generation */
	pthread_cond_t work, done;
	uint64_t gen; /* written atomically under mu, polled without it */
	uint64_t pending; /* workers still running the current job (written atomically) */
	bool quit;
	/* the current job */
	cpu_range_fn fn;
	void *arg;
	int64_t total;
	int ways;
	pthread_t threads[CPU_POOL_MAX];
	worker workers[CPU_POOL_MAX];
};

/* The one pool of the process: every CPU device of every context shares it, so contexts on
 * several threads do not start a pool each and oversubscribe the cores. A synchronised
 * process-wide resource: shared and its refs change only under shared_mu. */
static pthread_mutex_t shared_mu = PTHREAD_MUTEX_INITIALIZER;
static cpu_pool *shared;

static void chunk(int64_t n, int ways, int i, int64_t *s, int64_t *e)
{
	*s = n * i / ways;
	*e = n * (i + 1) / ways;
}

/* Waking a sleeping thread costs tens of microseconds on virtual machines, as much as a small
 * kernel: a worker polls for the next job (and the caller for the end of its job) this long
 * before it sleeps, as BLAS pools do. */
#define POOL_SPIN_NS 200000

static int64_t pool_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Poll until (*v == x) == until_eq, or POOL_SPIN_NS pass (called without the lock; *v is
 * written atomically). */
static void pool_spin(const uint64_t *v, uint64_t x, bool until_eq)
{
	int64_t until = pool_now_ns() + POOL_SPIN_NS;
	for (int i = 0; (__atomic_load_n(v, __ATOMIC_ACQUIRE) == x) != until_eq; i++) {
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#elif defined(__aarch64__)
		__asm__ volatile("yield"); /* the spin-wait hint: lets the core's other thread run */
#endif
		if ((i & 63) == 63 && pool_now_ns() > until)
			break;
	}
}

static void *worker_main(void *p)
{
	worker *w = p;
	cpu_pool *pool = w->pool;
	uint64_t seen = w->seen;
	pthread_mutex_lock(&pool->mu);
	for (;;) {
		if (pool->gen == seen && !pool->quit) {
			pthread_mutex_unlock(&pool->mu);
			pool_spin(&pool->gen, seen, false);
			pthread_mutex_lock(&pool->mu);
		}
		while (pool->gen == seen && !pool->quit)
			pthread_cond_wait(&pool->work, &pool->mu);
		if (pool->quit)
			break;
		seen = pool->gen;
		int ways = pool->ways;
		if (w->index >= ways)
			continue; /* not part of this job (the caller does not wait for it) */
		cpu_range_fn fn = pool->fn;
		void *arg = pool->arg;
		int64_t total = pool->total;
		pthread_mutex_unlock(&pool->mu);
		int64_t s, e;
		chunk(total, ways, w->index, &s, &e);
		if (e > s)
			fn(arg, s, e);
		pthread_mutex_lock(&pool->mu);
		if (__atomic_sub_fetch(&pool->pending, 1, __ATOMIC_RELEASE) == 0)
			pthread_cond_signal(&pool->done);
	}
	pthread_mutex_unlock(&pool->mu);
	return NULL;
}

/* Start workers until the pool has nthreads threads (or thread creation fails: it then runs
 * with those it has). Waits for a running job, so workers never join one halfway. */
static void pool_grow(cpu_pool *p, int nthreads)
{
	if (nthreads > CPU_POOL_MAX)
		nthreads = CPU_POOL_MAX;
	pthread_mutex_lock(&p->run_mu);
	pthread_mutex_lock(&p->mu);
	while (p->n < nthreads) {
		worker *w = &p->workers[p->n - 1];
		*w = (worker){.pool = p, .index = p->n, .seen = p->gen};
		if (pthread_create(&p->threads[p->n - 1], NULL, worker_main, w))
			break;
		p->n++;
	}
	pthread_mutex_unlock(&p->mu);
	pthread_mutex_unlock(&p->run_mu);
}

static void pool_destroy(cpu_pool *p)
{
	pthread_mutex_lock(&p->mu);
	p->quit = true;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; i < p->n - 1; i++)
		pthread_join(p->threads[i], NULL);
	pthread_mutex_destroy(&p->run_mu);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->done);
	free(p);
}

cpu_pool *cpu_pool_acquire(int nthreads)
{
	pthread_mutex_lock(&shared_mu);
	if (!shared && (shared = calloc(1, sizeof(*shared)))) {
		shared->n = 1;
		pthread_mutex_init(&shared->run_mu, NULL);
		pthread_mutex_init(&shared->mu, NULL);
		pthread_cond_init(&shared->work, NULL);
		pthread_cond_init(&shared->done, NULL);
	}
	cpu_pool *p = shared;
	if (p) {
		pool_grow(p, nthreads);
		p->refs++;
	}
	pthread_mutex_unlock(&shared_mu);
	return p;
}

void cpu_pool_release(cpu_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&shared_mu);
	if (--p->refs == 0) {
		shared = NULL;
		pool_destroy(p); /* no device is left to post a job */
	}
	pthread_mutex_unlock(&shared_mu);
}

int cpu_pool_size(cpu_pool *p)
{
	pthread_mutex_lock(&p->mu);
	int n = p->n;
	pthread_mutex_unlock(&p->mu);
	return n;
}

void cpu_pool_run(cpu_pool *p, cpu_range_fn fn, void *arg, int64_t n, int ways)
{
	if (ways > n)
		ways = (int)n;
	/* busy with another thread's job (or called from inside one): run here, whole */
	if (ways <= 1 || pthread_mutex_trylock(&p->run_mu)) {
		if (n > 0)
			fn(arg, 0, n);
		return;
	}
	pthread_mutex_lock(&p->mu);
	if (ways > p->n)
		ways = p->n;
	if (ways <= 1) {
		pthread_mutex_unlock(&p->mu);
		pthread_mutex_unlock(&p->run_mu);
		fn(arg, 0, n);
		return;
	}
	p->fn = fn;
	p->arg = arg;
	p->total = n;
	p->ways = ways;
	__atomic_store_n(&p->pending, (uint64_t)(ways - 1), __ATOMIC_RELAXED);
	__atomic_store_n(&p->gen, p->gen + 1, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
	int64_t s, e;
	chunk(n, ways, 0, &s, &e);
	fn(arg, s, e);
	pool_spin(&p->pending, 0, true);
	pthread_mutex_lock(&p->mu);
	while (p->pending)
		pthread_cond_wait(&p->done, &p->mu);
	pthread_mutex_unlock(&p->mu);
	pthread_mutex_unlock(&p->run_mu);
}
