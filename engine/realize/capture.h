/* capture.h: the launch recorder behind the JIT. While a context has a capture set, every
 * kernel launch is appended to it with the buffers it used (referenced), so the list can be
 * replayed later without building, scheduling or compiling anything. */
#ifndef ENG_CAPTURE_H
#define ENG_CAPTURE_H

#include "schedule/schedcache.h"

typedef struct eng_cap_launch {
	eng_schedcache_kernel k;                /* program (pinned in dev's program cache), launch size, outputs */
	eng_device *dev;                        /* where it ran */
	eng_buffer *buf[ENG_MAX_KERNEL_BUFS]; /* the buffers as captured (one reference each) */
	uint64_t assign;                /* bit i: buffer i is written in place by an assign */
} eng_cap_launch;

typedef struct eng_capture {
	eng_cap_launch *l;
	int n, cap;
} eng_capture;

/* Record one launch on dev: buffer i is outs[i] where set (a written buffer), else
 * nodes[i]->buf; the program is pinned, so no bound or trim unloads it while the capture holds it.
 * False on ENOMEM. */
bool eng_capture_add(eng_capture *c, eng_device *dev, const eng_schedcache_kernel *k, eng_node *const *nodes,
		     eng_buffer *const *outs);
/* Drop the launches, their buffer references and their program pins. */
void eng_capture_free(eng_capture *c);

#endif
