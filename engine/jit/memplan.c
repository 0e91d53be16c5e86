/* memplan.c: greedy interval assignment for the JIT's intermediate buffers: requests in order
 * of first use take the smallest free block that fits (else the largest free one, grown, else
 * a new block); a block is free once its occupant's last use has passed. */
#include "memplan.h"

#include <stdlib.h>

static bool before(const eng_mp_req *x, int ix, const eng_mp_req *y, int iy)
{
	if (x->first != y->first)
		return x->first < y->first;
	if (x->nbytes != y->nbytes)
		return x->nbytes > y->nbytes;
	return ix < iy;
}

int eng_memplan(eng_mp_req *reqs, int n, size_t *block_size)
{
	int *order = malloc((n ? n : 1) * sizeof(int)), *busy = malloc((n ? n : 1) * sizeof(int));
	if (!order || !busy) {
		free(order);
		free(busy);
		return -1;
	}
	for (int i = 0; i < n; i++) { /* insertion sort: a step has at most a few hundred */
		int j = i;
		while (j > 0 && before(&reqs[i], i, &reqs[order[j - 1]], order[j - 1])) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = i;
	}
	int nb = 0;
	for (int k = 0; k < n; k++) {
		eng_mp_req *r = &reqs[order[k]];
		int fit = -1, big = -1;
		for (int b = 0; b < nb; b++) {
			if (busy[b] >= r->first)
				continue; /* its occupant is still live */
			if (block_size[b] >= r->nbytes && (fit < 0 || block_size[b] < block_size[fit]))
				fit = b;
			if (big < 0 || block_size[b] > block_size[big])
				big = b;
		}
		int b = fit >= 0 ? fit : big;
		if (b < 0) {
			b = nb++;
			block_size[b] = 0;
		}
		if (block_size[b] < r->nbytes)
			block_size[b] = r->nbytes;
		busy[b] = r->last;
		r->block = b;
	}
	free(order);
	free(busy);
	return nb;
}

bool eng_memplan_valid(const eng_mp_req *reqs, int n, const size_t *block_size, int nblocks)
{
	for (int i = 0; i < n; i++) {
		if (reqs[i].block < 0 || reqs[i].block >= nblocks || block_size[reqs[i].block] < reqs[i].nbytes)
			return false;
		for (int j = i + 1; j < n; j++)
			if (reqs[i].block == reqs[j].block && reqs[i].first <= reqs[j].last &&
			    reqs[j].first <= reqs[i].last)
				return false;
	}
	return true;
}
