/* pool.h: the process's one pool of persistent worker threads, shared by every CPU device: a
 * job splits a kernel's range into chunks that the calling thread and the workers take in turn. */
#ifndef BK_CPU_POOL_H
#define BK_CPU_POOL_H

#include <stdint.h>

typedef struct cpu_pool cpu_pool;
/* One chunk [start, end) of a job, run by the thread of the job's slot `slot` (0: the caller,
 * 1..ways-1: a worker). A thread runs its chunks one after another, and no two threads of one
 * job share a slot, so per-slot memory (a kernel's scratch) is never used by two calls at once. */
typedef void (*cpu_range_fn)(void *arg, int64_t start, int64_t end, int slot);

/* The shared pool, reference counted: the first call starts it, and it grows so that it can
 * split a job nthreads ways (nthreads includes the caller; at most CPU_POOL_MAX). Every
 * successful call is paired with one cpu_pool_release; the last release joins the workers.
 * Safe from any thread. NULL on failure (out of memory). Growing waits for a running job. */
#define CPU_POOL_MAX 256
cpu_pool *cpu_pool_acquire(int nthreads);
void cpu_pool_release(cpu_pool *p);
/* Threads a job can use now, including the caller. */
int cpu_pool_size(cpu_pool *p);
/* Chunks a job is cut into per thread it may use (see cpu_pool_run). */
#define CPU_POOL_CHUNKS 4
/* Run fn over [0, n) and return when all of it is done. The range is cut into
 * min(n, ways * CPU_POOL_CHUNKS) contiguous chunks, in order, each given to exactly one call of
 * fn; the caller (slot 0) and up to ways - 1 workers (slots 1..ways-1) take them from a shared
 * counter, so whichever threads are running do the work and a worker that comes late finds
 * nothing left (the job never waits for a worker to check in, only for chunks taken to end).
 * Which thread runs a chunk varies from job to job: fn's results must not depend on it, nor
 * on the chunking (each index produces its own outputs; per-slot memory is scratch within one
 * call). Safe from any thread: one job runs on the workers at a time; a job submitted while
 * another runs (from another device's thread, or from inside a job) runs whole on its calling
 * thread as one call in slot 0 instead of waiting, so a submission never deadlocks and never
 * blocks behind a long kernel. */
void cpu_pool_run(cpu_pool *p, cpu_range_fn fn, void *arg, int64_t n, int ways);

#endif
