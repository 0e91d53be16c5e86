/* pool.h: the process's one pool of persistent worker threads, shared by every CPU device: a
 * job splits a kernel's range over the calling thread (first chunk) and the workers. */
#ifndef BK_CPU_POOL_H
#define BK_CPU_POOL_H

#include <stdint.h>

typedef struct cpu_pool cpu_pool;
typedef void (*cpu_range_fn)(void *arg, int64_t start, int64_t end);

/* The shared pool, reference counted: the first call starts it, and it grows so that it can
 * split a job nthreads ways (nthreads includes the caller; at most CPU_POOL_MAX). Every
 * successful call is paired with one cpu_pool_release; the last release joins the workers.
 * Safe from any thread. NULL on failure (out of memory). Growing waits for a running job. */
#define CPU_POOL_MAX 256
cpu_pool *cpu_pool_acquire(int nthreads);
void cpu_pool_release(cpu_pool *p);
/* Threads a job can use now, including the caller. */
int cpu_pool_size(cpu_pool *p);
/* Run fn over [0, n) split into at most `ways` contiguous chunks (fn is called once per chunk,
 * so at most `ways` times) and return when all are done.
 * Safe from any thread: one job runs on the workers at a time; a job submitted while another
 * runs (from another device's thread, or from inside a job) runs whole on its calling thread
 * instead of waiting, so a submission never deadlocks and never blocks behind a long kernel. */
void cpu_pool_run(cpu_pool *p, cpu_range_fn fn, void *arg, int64_t n, int ways);

#endif
