/* pool.c: the process's shared pool of persistent worker threads (see pool.h). A job is posted
 * as one 64-bit word, its generation and the next chunk to take; workers spin while kernels are
 * being launched and sleep on a condition variable otherwise. */
#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The job word: the job's generation in the high bits, the next chunk to take in the low
 * POOL_CHUNK_BITS (a job has at most CPU_POOL_MAX * CPU_POOL_CHUNKS chunks). A thread takes
 * chunk i of job g by a compare-and-swap from (g, i) to (g, i + 1): once the caller moves to
 * generation g + 1, no CAS expecting g can succeed, so a late worker never runs a chunk of a job
 * that is over, nor of a later job with the earlier job's fn and arg. 48 bits of generation
 * do not wrap in the life of a process. */
#define POOL_CHUNK_BITS 16
#define POOL_CHUNK_MASK ((UINT64_C(1) << POOL_CHUNK_BITS) - 1)
_Static_assert(CPU_POOL_MAX * CPU_POOL_CHUNKS <= POOL_CHUNK_MASK, "a job's chunks fit the job word");

/* How long a thread polls before it sleeps: a worker for the next job while kernels are being
 * launched (it spins until POOL_SPIN_NS have passed both since it finished its last chunk and
 * since the last launch of any kernel on the pool, split or not), the caller for the chunks it
 * waits on. Waking a sleeping thread on these virtual machines takes ~7-20 us (median) and up to
 * ~45 us (90th percentile), plus 2-9 us in the waker's signal call (a condition-variable
 * ping-pong, 2 vCPU Sapphire Rapids VM): polling about as long as a wake-up costs is the
 * ski-rental bound, never more than twice the better choice made in hindsight. A model's
 * kernels are launched microseconds apart (most run on the caller alone, small), so the workers
 * stay awake through a whole inference and catch each split kernel without a futex wake-up,
 * and an idle daemon stops burning cores 50 us after its last launch (it was 200 us after every
 * job). */
#define POOL_SPIN_NS 50000
/* A launch records its time only when the recorded one is older than this, so the caller
 * does not write the line the spinning workers read at every small kernel. */
#define POOL_STAMP_NS 2000
/* Polling threads give their core away (sched_yield) every this many pause hints (a few
 * microseconds): where the cores are shared (the daemon's loop thread, local clients, other
 * processes) the thread that has work runs instead of the one that waits, so a worker is less
 * often descheduled in the middle of a chunk the caller then waits on. With the kernel's chunks
 * taken dynamically a worker that yields too long only misses a job. On this VM with one busy
 * process beside it, ppocr-cls at batch 1 on 2 threads: p50 1.5-1.7 ms with it, 2.2-2.7 without
 * (bench/compare_pool.sh's kind of run, 3 rounds). */
#define POOL_YIELD_EVERY 64

typedef struct worker {
	struct cpu_pool *pool;
	int slot;      /* its slot in a job: 1.. (the caller is 0); jobs of fewer ways skip it */
	uint64_t seen; /* the generation it last handled, set before it starts */
} worker;

struct cpu_pool {
	/* the job word (above), and the current job's fields, written by the caller (holding
	 * run_mu) before it posts the word, read by the workers after they load it; atomic, since a
	 * late worker may read them while the next job's are written (it then fails to take a
	 * chunk, and drops what it read: pool_work). On a cache line of their own, with the word. */
	_Alignas(64) uint64_t job;
	cpu_range_fn fn;
	void *arg;
	int64_t total;
	int nchunks, ways;
	_Alignas(64) int finished; /* chunks of the current job that have ended */
	_Alignas(64) int64_t active_ns; /* the last launch, within POOL_STAMP_NS */
	int sleepers;			/* workers asleep on work, or deciding to (under mu) */
	int waiting;			/* the caller asleep on done, or deciding to (under mu) */
	bool quit;			/* set under mu, read atomically */
	int refs;		/* devices holding the pool (under shared_mu) */
	int n;			/* threads including the caller (changes under run_mu and mu) */
	pthread_mutex_t run_mu; /* held by the thread whose job is on the workers */
	pthread_mutex_t mu;	/* the sleeps and wake-ups */
	pthread_cond_t work, done;
	pthread_t threads[CPU_POOL_MAX];
	worker workers[CPU_POOL_MAX];
};

/* The one pool of the process: every CPU device of every context shares it, so contexts on
 * several threads do not start a pool each and oversubscribe the cores. A synchronised
 * process-wide resource: shared and its refs change only under shared_mu. */
static pthread_mutex_t shared_mu = PTHREAD_MUTEX_INITIALIZER;
static cpu_pool *shared;

static int64_t pool_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* One step of a polling loop (i counts them from 1): the spin-wait hint, and every
 * POOL_YIELD_EVERY steps the core given away; true on those steps (time to look at the clock). */
static bool pool_relax(int i)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield"); /* the spin-wait hint: lets the core's other thread run */
#endif
	if (i % POOL_YIELD_EVERY)
		return false;
	sched_yield();
	return true;
}

/* Run chunk i of nchunks of [0, total) in slot, then count it ended; the thread that ends the
 * job's last chunk wakes the caller if it sleeps. After that count the job (arg) may be gone:
 * only the pool is touched. */
static void pool_chunk(cpu_pool *p, cpu_range_fn fn, void *arg, int64_t total, int nchunks, int i, int slot)
{
	int64_t s = total * i / nchunks, e = total * (i + 1) / nchunks;
	if (e > s)
		fn(arg, s, e, slot);
	/* seq_cst: with the caller's store of waiting and load of finished, one of the two sees
	 * the other's write, so the caller either sees the job done or is woken (no lost wake-up) */
	if (__atomic_add_fetch(&p->finished, 1, __ATOMIC_SEQ_CST) == nchunks &&
	    __atomic_load_n(&p->waiting, __ATOMIC_SEQ_CST)) {
		pthread_mutex_lock(&p->mu); /* the caller is in its wait, or sees finished first */
		pthread_mutex_unlock(&p->mu);
		pthread_cond_signal(&p->done);
	}
}

/* Take and run chunks of generation g until none is left; word is the job word as last read,
 * with an acquire load: it reads the caller's post of g or a CAS after it (which continues the
 * post's release sequence), so g's fields and the kernel's inputs are visible. The fields are
 * read once, after that load, and may belong to a later job if g is over by then; but then no
 * CAS expecting g succeeds. A successful CAS took a chunk of g, and the caller writes the next
 * job's fields only after it has seen that chunk's end counted, which this thread counts after
 * its reads: the reads happen before those writes and cannot see them. So fn and arg are always
 * g's when a chunk runs, and arg lives until the caller has seen every taken chunk end. */
static void pool_work(cpu_pool *p, uint64_t word, uint64_t g, int slot)
{
	cpu_range_fn fn = __atomic_load_n(&p->fn, __ATOMIC_ACQUIRE);
	void *arg = __atomic_load_n(&p->arg, __ATOMIC_ACQUIRE);
	int64_t total = __atomic_load_n(&p->total, __ATOMIC_ACQUIRE);
	int nchunks = __atomic_load_n(&p->nchunks, __ATOMIC_ACQUIRE);
	if (slot >= __atomic_load_n(&p->ways, __ATOMIC_ACQUIRE))
		return; /* not part of this job (or, read late, of a later one: g is over then) */
	while ((word >> POOL_CHUNK_BITS) == g && (word & POOL_CHUNK_MASK) < (uint64_t)nchunks)
		if (__atomic_compare_exchange_n(&p->job, &word, word + 1, true, __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE)) {
			pool_chunk(p, fn, arg, total, nchunks, (int)(word & POOL_CHUNK_MASK), slot);
			word = __atomic_load_n(&p->job, __ATOMIC_ACQUIRE);
		}
}

/* Wait until the job word's generation is not seen (or quit): poll while kernels are being
 * launched (POOL_SPIN_NS), then sleep. Returns the word (acquire: the job's fields are seen). */
static uint64_t pool_wait(cpu_pool *p, uint64_t seen, int64_t idle_ns)
{
	for (int i = 1;; i++) {
		uint64_t w = __atomic_load_n(&p->job, __ATOMIC_ACQUIRE);
		if (w >> POOL_CHUNK_BITS != seen)
			return w;
		if (pool_relax(i)) {
			int64_t last = __atomic_load_n(&p->active_ns, __ATOMIC_RELAXED);
			if (__atomic_load_n(&p->quit, __ATOMIC_RELAXED) ||
			    pool_now_ns() - (last > idle_ns ? last : idle_ns) > POOL_SPIN_NS)
				break;
		}
	}
	pthread_mutex_lock(&p->mu);
	/* seq_cst: with the poster's store of the word and load of sleepers (see cpu_pool_run) */
	__atomic_add_fetch(&p->sleepers, 1, __ATOMIC_SEQ_CST);
	uint64_t w;
	while ((w = __atomic_load_n(&p->job, __ATOMIC_SEQ_CST)) >> POOL_CHUNK_BITS == seen &&
	       !__atomic_load_n(&p->quit, __ATOMIC_RELAXED))
		pthread_cond_wait(&p->work, &p->mu);
	__atomic_sub_fetch(&p->sleepers, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&p->mu);
	return w;
}

static void *worker_main(void *arg)
{
	worker *w = arg;
	cpu_pool *p = w->pool;
	uint64_t seen = w->seen;
	int64_t idle = pool_now_ns();
	for (;;) {
		uint64_t word = pool_wait(p, seen, idle);
		if (__atomic_load_n(&p->quit, __ATOMIC_ACQUIRE))
			break;
		seen = word >> POOL_CHUNK_BITS;
		pool_work(p, word, seen, w->slot);
		idle = pool_now_ns();
	}
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
		*w = (worker){.pool = p, .slot = p->n, .seen = __atomic_load_n(&p->job, __ATOMIC_RELAXED) >> POOL_CHUNK_BITS};
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
	__atomic_store_n(&p->quit, true, __ATOMIC_RELEASE);
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

static cpu_pool *pool_new(void)
{
	size_t sz = (sizeof(cpu_pool) + 63) & ~(size_t)63;
	cpu_pool *p = aligned_alloc(64, sz); /* the job word and the counters on lines of their own */
	if (!p)
		return NULL;
	memset(p, 0, sz);
	p->n = 1;
	pthread_mutex_init(&p->run_mu, NULL);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->done, NULL);
	return p;
}

cpu_pool *cpu_pool_acquire(int nthreads)
{
	pthread_mutex_lock(&shared_mu);
	if (!shared)
		shared = pool_new();
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

/* Wait until every chunk of the job (nchunks) has ended: poll, then sleep on done. */
static void pool_join(cpu_pool *p, int nchunks)
{
	int64_t until = pool_now_ns() + POOL_SPIN_NS;
	for (int i = 1; __atomic_load_n(&p->finished, __ATOMIC_ACQUIRE) != nchunks; i++) {
		if (pool_relax(i) && pool_now_ns() > until) {
			pthread_mutex_lock(&p->mu);
			__atomic_store_n(&p->waiting, 1, __ATOMIC_SEQ_CST);
			while (__atomic_load_n(&p->finished, __ATOMIC_SEQ_CST) != nchunks)
				pthread_cond_wait(&p->done, &p->mu);
			__atomic_store_n(&p->waiting, 0, __ATOMIC_RELAXED);
			pthread_mutex_unlock(&p->mu);
			break;
		}
	}
}

void cpu_pool_run(cpu_pool *p, cpu_range_fn fn, void *arg, int64_t n, int ways)
{
	int64_t now = pool_now_ns(); /* a launch: workers keep polling (POOL_SPIN_NS) */
	if (now - __atomic_load_n(&p->active_ns, __ATOMIC_RELAXED) > POOL_STAMP_NS)
		__atomic_store_n(&p->active_ns, now, __ATOMIC_RELAXED);
	if (ways > n)
		ways = (int)n;
	/* busy with another thread's job (or called from inside one): run here, whole; p->n
	 * changes only under run_mu, held from here on */
	if (ways <= 1 || pthread_mutex_trylock(&p->run_mu)) {
		if (n > 0)
			fn(arg, 0, n, 0);
		return;
	}
	if (ways > p->n)
		ways = p->n;
	if (ways <= 1) {
		pthread_mutex_unlock(&p->run_mu);
		fn(arg, 0, n, 0);
		return;
	}
	int nchunks = (int)(n < (int64_t)ways * CPU_POOL_CHUNKS ? n : (int64_t)ways * CPU_POOL_CHUNKS);
	/* only run_mu's holder changes the generation; every chunk of the last job has ended, so
	 * no worker reads these fields but to drop them */
	uint64_t g = (__atomic_load_n(&p->job, __ATOMIC_RELAXED) >> POOL_CHUNK_BITS) + 1;
	__atomic_store_n(&p->fn, fn, __ATOMIC_RELEASE);
	__atomic_store_n(&p->arg, arg, __ATOMIC_RELEASE);
	__atomic_store_n(&p->total, n, __ATOMIC_RELEASE);
	__atomic_store_n(&p->nchunks, nchunks, __ATOMIC_RELEASE);
	__atomic_store_n(&p->ways, ways, __ATOMIC_RELEASE);
	__atomic_store_n(&p->finished, 0, __ATOMIC_RELAXED);
	/* posted with chunk 0 taken, the caller's: release for the fields above and the inputs;
	 * seq_cst against a worker's increment of sleepers then load of the word (pool_wait):
	 * either it sees this job, or this sees it (going) asleep and wakes it */
	uint64_t word = g << POOL_CHUNK_BITS | 1;
	__atomic_store_n(&p->job, word, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&p->sleepers, __ATOMIC_SEQ_CST)) {
		pthread_mutex_lock(&p->mu); /* a sleeper is in its wait, or sees the word first */
		pthread_mutex_unlock(&p->mu);
		pthread_cond_broadcast(&p->work);
	}
	pool_chunk(p, fn, arg, n, nchunks, 0, 0);
	pool_work(p, __atomic_load_n(&p->job, __ATOMIC_ACQUIRE), g, 0);
	pool_join(p, nchunks); /* the chunks workers took; then no thread touches arg */
	/* closed: no chunk index is below any job's count. A late worker holding this generation's
	 * word may read the next job's fields (a larger nchunks) before its CAS; without this it
	 * could take chunk nchunks of a job that is over (seen in make asan: a job's chunks counted
	 * 13 of 12, its caller waiting for ever). The next job's fields are stored with release and
	 * read with acquire after this store, so such a CAS reads this word or a later one and fails. */
	__atomic_store_n(&p->job, g << POOL_CHUNK_BITS | POOL_CHUNK_MASK, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&p->run_mu);
}
