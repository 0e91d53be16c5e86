/* pool.c: persistent worker threads for the CPU backend (see pool.h). Workers sleep on a
 * condition variable between jobs; a generation counter tells them a new job is posted. */
#include "pool.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

typedef struct worker {
	struct cpu_pool *pool;
	int index;
} worker;

struct cpu_pool {
	int n; /* threads including the caller */
	pthread_t *threads;
	worker *workers;
	pthread_mutex_t mu;
	pthread_cond_t work, done;
	uint64_t gen;
	int pending; /* workers still running the current job */
	bool quit;
	/* the current job */
	cpu_range_fn fn;
	void *arg;
	int64_t total;
	int ways;
};

static void chunk(int64_t n, int ways, int i, int64_t *s, int64_t *e)
{
	*s = n * i / ways;
	*e = n * (i + 1) / ways;
}

static void *worker_main(void *p)
{
	worker *w = p;
	cpu_pool *pool = w->pool;
	uint64_t seen = 0;
	pthread_mutex_lock(&pool->mu);
	for (;;) {
		while (pool->gen == seen && !pool->quit)
			pthread_cond_wait(&pool->work, &pool->mu);
		if (pool->quit)
			break;
		seen = pool->gen;
		int ways = pool->ways;
		cpu_range_fn fn = pool->fn;
		void *arg = pool->arg;
		int64_t total = pool->total;
		pthread_mutex_unlock(&pool->mu);
		if (w->index < ways) {
			int64_t s, e;
			chunk(total, ways, w->index, &s, &e);
			if (e > s)
				fn(arg, s, e);
		}
		pthread_mutex_lock(&pool->mu);
		if (--pool->pending == 0)
			pthread_cond_signal(&pool->done);
	}
	pthread_mutex_unlock(&pool->mu);
	return NULL;
}

cpu_pool *cpu_pool_create(int nthreads)
{
	cpu_pool *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->n = nthreads < 1 ? 1 : nthreads;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->done, NULL);
	if (p->n > 1) {
		p->threads = calloc(p->n - 1, sizeof(*p->threads));
		p->workers = calloc(p->n - 1, sizeof(*p->workers));
		if (!p->threads || !p->workers) {
			free(p->threads);
			free(p->workers);
			p->n = 1;
			return p;
		}
		for (int i = 0; i < p->n - 1; i++) {
			p->workers[i] = (worker){.pool = p, .index = i + 1};
			if (pthread_create(&p->threads[i], NULL, worker_main, &p->workers[i])) {
				p->n = i + 1; /* run with the threads we got */
				break;
			}
		}
	}
	return p;
}

void cpu_pool_destroy(cpu_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->quit = true;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; i < p->n - 1; i++)
		pthread_join(p->threads[i], NULL);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->done);
	free(p->threads);
	free(p->workers);
	free(p);
}

int cpu_pool_size(const cpu_pool *p) { return p->n; }

void cpu_pool_run(cpu_pool *p, cpu_range_fn fn, void *arg, int64_t n, int ways)
{
	if (ways > p->n)
		ways = p->n;
	if (ways > n)
		ways = (int)n;
	if (ways <= 1) {
		if (n > 0)
			fn(arg, 0, n);
		return;
	}
	pthread_mutex_lock(&p->mu);
	p->fn = fn;
	p->arg = arg;
	p->total = n;
	p->ways = ways;
	p->pending = p->n - 1;
	p->gen++;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
	int64_t s, e;
	chunk(n, ways, 0, &s, &e);
	fn(arg, s, e);
	pthread_mutex_lock(&p->mu);
	while (p->pending)
		pthread_cond_wait(&p->done, &p->mu);
	pthread_mutex_unlock(&p->mu);
}
