/* pool.h: a persistent worker pool that runs one range-split job on all cores: the calling
 * thread takes the first chunk, workers the rest, and the call returns when all are done. */
#ifndef BK_CPU_POOL_H
#define BK_CPU_POOL_H

#include <stdint.h>

typedef struct cpu_pool cpu_pool;
typedef void (*cpu_range_fn)(void *arg, int64_t start, int64_t end);

/* nthreads includes the caller; 1 means no workers. NULL on failure. */
cpu_pool *cpu_pool_create(int nthreads);
void cpu_pool_destroy(cpu_pool *p);
int cpu_pool_size(const cpu_pool *p);
/* Run fn over [0, n) split into at most `ways` contiguous chunks. */
void cpu_pool_run(cpu_pool *p, cpu_range_fn fn, void *arg, int64_t n, int ways);

#endif
