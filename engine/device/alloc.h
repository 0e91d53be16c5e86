/* alloc.h: the caching allocator every device buffer goes through: freed blocks are kept by
 * size class and reused, the context's memory limit is checked before the backend is asked. */
#ifndef ENG_ALLOC_H
#define ENG_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "backends/backend.h"

/* Size classes: four per power of two from 64 bytes (64, 80, 96, 112, 128, 160, ...), so a
 * block is at most 25% larger than its request. */
#define ENG_ALLOC_CLASSES 232

typedef struct eng_free_blk eng_free_blk;

/* One device's allocator state: the cached (freed, not returned) blocks and the counters. */
typedef struct eng_alloc {
	eng_free_blk *cls[ENG_ALLOC_CLASSES]; /* per class, most recently freed first */
	eng_free_blk *newest, *oldest;        /* every cached block, by free time */
	uint64_t live, peak, cached;          /* bytes (class sizes) */
	uint64_t allocs, hits, bk_allocs, bk_frees;
} eng_alloc;

/* The class size a request of nbytes is served with, and its class index. */
size_t eng_alloc_class(size_t nbytes, int *cls);

#endif
