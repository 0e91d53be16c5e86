/* memplan.h: the JIT's memory planner. Given buffers with known lifetimes (the first and last
 * launch that use them), it assigns them to as few blocks as it can, sharing a block only
 * between buffers whose lifetimes do not overlap. */
#ifndef ENG_MEMPLAN_H
#define ENG_MEMPLAN_H

#include <stdbool.h>
#include <stddef.h>

typedef struct eng_mp_req {
	size_t nbytes;
	int first, last; /* launches [first, last] use it */
	int block;       /* out: the block it lives in */
} eng_mp_req;

/* Assign each request a block; block_size[b] (capacity n) receives each block's size.
 * Returns the number of blocks, or -1 on ENOMEM. */
int eng_memplan(eng_mp_req *reqs, int n, size_t *block_size);

/* True if no two requests sharing a block have overlapping lifetimes and every block is big
 * enough (a check for tests and debugging). */
bool eng_memplan_valid(const eng_mp_req *reqs, int n, const size_t *block_size, int nblocks);

#endif
