/* schedcache.h: the schedule cache. A realize whose graph has the same structure as an earlier
 * one (ops, dtypes, shapes, constants and wiring; the buffers it reads may be others) reuses
 * that realize's kernel list and compiled programs, skipping scheduling, lowering, rendering
 * and compiling. Graphs are compared by a canonical walk that numbers their nodes, so a cached
 * kernel names its buffers by node number and is bound to the new graph's nodes. */
#ifndef ENG_SCHEDCACHE_H
#define ENG_SCHEDCACHE_H

#include "device/device.h"
#include "codegen/kernel.h"
#include "graph/nodeset.h"

/* A graph in canonical form. nodes.list[i] is node number i: realized nodes (those holding a
 * buffer) are leaves; sources come before their users. words describes the structure. */
typedef struct eng_schedcache_walk {
	eng_nodeset nodes;
	int64_t *words;
	size_t nw, capw;
	uint64_t hash;
} eng_schedcache_walk;

/* Number the graph under nodes[0..n) and describe it. False on ENOMEM. */
bool eng_schedcache_walk_build(eng_schedcache_walk *w, eng_node *const *nodes, int n);
void eng_schedcache_walk_free(eng_schedcache_walk *w);

/* One kernel launch, its buffers named by node number. */
typedef struct eng_schedcache_kernel {
	bk_program *prog; /* owned by the device's program cache; pinned there (pin_fn) while an entry holds it */
	char name[96];
	int nbufs;
	int node[ENG_MAX_KERNEL_BUFS];
	uint64_t outputs; /* bit i: buffer i is written */
	int64_t nparallel;
	double cost, flops, bytes;
} eng_schedcache_kernel;

typedef struct eng_schedcache_entry eng_schedcache_entry;
typedef struct eng_schedcache eng_schedcache;

/* Told (delta +1) about every program of an entry kept, and (delta -1) of one dropped, so the
 * owner of the programs (the realize layer's program cache) never unloads one an entry names. */
typedef void (*eng_schedcache_pin_fn)(void *arg, const bk_program *prog, int delta);

/* A cache holding at most max_bytes of descriptions (0: a default of 64 MiB); pin (may be NULL)
 * is called with arg as entries come and go. */
eng_schedcache *eng_schedcache_create(size_t max_bytes, eng_schedcache_pin_fn pin, void *arg);
void eng_schedcache_destroy(eng_schedcache *c);
/* Drop every entry (their programs are unpinned); returns how many went. */
int eng_schedcache_clear(eng_schedcache *c);

/* Drop the least recently used entry (its programs are unpinned); false when there is none.
 * The program cache's bound calls it while pinned programs alone pass the bound. */
bool eng_schedcache_evict_lru(eng_schedcache *c);

/* The entry for a graph of w's structure, or NULL. Valid until the next insert. */
const eng_schedcache_entry *eng_schedcache_lookup(eng_schedcache *c, const eng_schedcache_walk *w);
const eng_schedcache_kernel *eng_schedcache_kernels(const eng_schedcache_entry *e, int *n);
const int *eng_schedcache_empty(const eng_schedcache_entry *e, int *n); /* zero-element nodes to give buffers */

/* Remember the kernels (and empty nodes) that realized w's graph. False on ENOMEM. */
bool eng_schedcache_insert(eng_schedcache *c, const eng_schedcache_walk *w, const eng_schedcache_kernel *ks, int nk, const int *empty,
		   int nempty);

#endif
