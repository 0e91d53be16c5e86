/* pool.h: a persistent worker pool that runs one range-split job on all cores: the calling
 * thread takes the first chunk, workers the rest, and the call returns when all are done. */
#ifndef BK_CPU_POOL_H
#define BK_CPU_POOL_H

#include <stdint.h>

typedef struct bk_pool bk_pool;
typedef void (*bk_range_fn)(void *arg, int64_t start, int64_t end);

/* nthreads includes the caller; 1 means no workers. NULL on failure. */
bk_pool *bk_pool_create(int nthreads);
void bk_pool_destroy(bk_pool *p);
int bk_pool_size(const bk_pool *p);
/* Run fn over [0, n) split into at most `ways` contiguous chunks. */
void bk_pool_run(bk_pool *p, bk_range_fn fn, void *arg, int64_t n, int ways);

#endif
