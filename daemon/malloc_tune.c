/* malloc_tune.c: the daemon's one malloc setting, glibc's per-thread cache (tcache) off. That
 * cache keeps up to 7 freed chunks of each of 64 sizes on every thread that frees; on the
 * daemon's ~16 threads (nng's, the loop, the executor, the CPU pool) it fills slowly as rarer
 * request kinds come by, which reads as RSS growth (+2.7% over a 1M-request soak, flat with the
 * cache off: docs/ARCHITECTURE.md, "Memory"). glibc reads it only at start, from
 * GLIBC_TUNABLES, so the daemon re-executes itself once with it set. An operator's own
 * glibc.malloc.tcache_count in GLIBC_TUNABLES is left alone. */
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TUNE "glibc.malloc.tcache_count=0"

void dmn_malloc_tune(char **argv)
{
	const char *cur = getenv("GLIBC_TUNABLES");
	if (cur && strstr(cur, "glibc.malloc.tcache_count"))
		return; /* already set: by us before the exec, or by the operator */
	char val[1024];
	int n = cur && cur[0] ? snprintf(val, sizeof(val), "%s:" TUNE, cur) : snprintf(val, sizeof(val), TUNE);
	if (n < 0 || (size_t)n >= sizeof(val) || setenv("GLIBC_TUNABLES", val, 1))
		return;
	execv("/proc/self/exe", argv);
	/* no /proc, or not allowed: run on with glibc's defaults */
	fprintf(stderr, "tensord: cannot re-execute with %s (%s); running with malloc's defaults\n", TUNE,
		strerror(errno));
	unsetenv("GLIBC_TUNABLES");
	if (cur)
		setenv("GLIBC_TUNABLES", cur, 1);
}
