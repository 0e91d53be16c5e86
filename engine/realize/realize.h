/* realize.h: computing nodes (realize.c) and the per-device caches a realize consults
 * (devcaches.c). Engine-private. */
#ifndef ENG_REALIZE_H
#define ENG_REALIZE_H

#include "device/device.h"
#include "graph/node.h"

/* Realize nodes: copies between devices first, then each device's kernels; on return the
 * results are computed (one device sync at the end). */
eng_status eng_realize_nodes(eng_ctx *ctx, eng_node *const *nodes, int n);

/* A second target every kernel a realize schedules is also planned and rendered for, without
 * running it: the CUDA compile check renders the conformance suites' kernels in the CUDA dialect
 * while the context's own device computes. fn(arg, name, src, NULL) for each kernel, or
 * fn(arg, NULL, NULL, message) when the graph could not be scheduled or rendered for t.
 * Schedule-cache hits and JIT replays are not rendered again (their kernels were, the first
 * time). t (NULL: off) must outlive the context's use of it. */
typedef void (*eng_shadow_fn)(void *arg, const char *name, const char *src, const char *error);
void eng_realize_set_shadow(eng_ctx *ctx, const bk_target *t, eng_shadow_fn fn, void *arg);
/* Schedule and render nodes for the shadow target (shadow.c); errors go to the shadow's fn,
 * never into the context. */
void eng_realize_shadow(eng_ctx *ctx, eng_node *const *nodes, int n);

/* Attach the program cache, the schedule cache (unless the context turns it off) and the disk
 * cache settings to a newly opened device; ENG_ENOMEM sets the context error. */
eng_status eng_device_caches_open(eng_device *d);
/* Programs a device keeps when eng_ctx_opts.prog_cache_max is 0. */
#define ENG_PROGCACHE_DEFAULT_MAX 1024
/* Unload d's least recently used programs past the context's bound (those a schedule-cache
 * entry or a capture pins stay). Called after a realize, never inside one: programs fetched for
 * the realize in progress must stay loaded until it launches them. */
void eng_device_caches_bound(eng_device *d);
/* eng_trim for one device (what: ENG_TRIM_* bits); the device memory given back, in bytes. */
uint64_t eng_device_caches_trim(eng_device *d, unsigned what);
/* Free d's caches (its programs through the backend); d itself stays. */
void eng_device_caches_close(eng_device *d);

#endif
