/* capture.h: the launch recorder behind the JIT. While a context has a capture set, every
 * kernel launch is appended to it with the buffers it used (referenced), so the list can be
 * replayed later without building, scheduling or compiling anything. */
#ifndef ENG_CAPTURE_H
#define ENG_CAPTURE_H

#include "schedule/schedcache.h"

typedef struct eng_cap_launch {
	eng_schedcache_kernel k;                /* program, launch size, which buffers it writes */
	eng_buffer *buf[ENG_MAX_KERNEL_BUFS]; /* the buffers as captured (one reference each) */
	uint64_t assign;                /* bit i: buffer i is written in place by an assign */
} eng_cap_launch;

typedef struct eng_capture {
	eng_cap_launch *l;
	int n, cap;
} eng_capture;

/* Record one launch: buffer i is outs[i] where set (a written buffer), else nodes[i]->buf.
 * False on ENOMEM. */
bool eng_capture_add(eng_capture *c, const eng_schedcache_kernel *k, eng_node *const *nodes, eng_buffer *const *outs);
/* Drop the launches and their buffer references. */
void eng_capture_free(eng_capture *c);

#endif
