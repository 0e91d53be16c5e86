/* realize.h: computing nodes (realize.c) and the per-device caches a realize consults
 * (devcaches.c). Engine-private. */
#ifndef ENG_REALIZE_H
#define ENG_REALIZE_H

#include "device/device.h"
#include "graph/node.h"

/* Realize nodes: copies between devices first, then each device's kernels; on return the
 * results are computed (one device sync at the end). */
eng_status eng_realize_nodes(eng_ctx *ctx, eng_node *const *nodes, int n);

/* Attach the program cache, the schedule cache (unless the context turns it off) and the disk
 * cache settings to a newly opened device; ENG_ENOMEM sets the context error. */
eng_status eng_device_caches_open(eng_device *d);
/* Free d's caches (its programs through the backend); d itself stays. */
void eng_device_caches_close(eng_device *d);

#endif
