/* memlimit.h: the engine's default memory limit, derived from the machine: a fraction of the
 * smaller of MemTotal (/proc/meminfo) and the memory limit of the daemon's cgroup (v2
 * memory.max, v1 memory.limit_in_bytes, the tightest of its own and its ancestors'). */
#ifndef DMN_MEMLIMIT_H
#define DMN_MEMLIMIT_H

#include <stddef.h>
#include <stdint.h>

/* Where the figures are read from; tests point these at files of their own. */
typedef struct dmn_mem_paths {
	const char *meminfo;	 /* /proc/meminfo */
	const char *self_cgroup; /* /proc/self/cgroup: the process's cgroup per hierarchy */
	const char *mounts;	 /* /proc/self/mounts: where the cgroup hierarchies are mounted */
} dmn_mem_paths;

/* What the machine says. */
typedef struct dmn_mem_machine {
	uint64_t mem_total;	/* MemTotal in bytes; 0: unknown */
	uint64_t cgroup_limit;	/* bytes; 0: no limit ("max", v1's near-2^63) or no cgroup found */
	char cgroup_file[512];	/* the file the cgroup limit came from; "" when none */
} dmn_mem_machine;

/* The real paths above. */
void dmn_mem_paths_default(dmn_mem_paths *p);

/* Read what p names into out. Files that are missing or unreadable leave their figure 0; the
 * cgroup walk goes from the process's own cgroup up to the hierarchy's root and keeps the
 * smallest limit (a parent's limit binds its children). Never fails. */
void dmn_mem_machine_read(const dmn_mem_paths *p, dmn_mem_machine *out);

/* The effective limit: cfg_bytes when it is not 0; else fraction of the smaller of m's
 * MemTotal and cgroup limit (each ignored when 0), rounded down to a MiB; 0 (no limit) when
 * fraction is 0 or neither figure is known. why[whylen] says where the value came from, for
 * the start's log line ("configured", "0.5 x MemTotal 23.5 GiB", ...). */
uint64_t dmn_mem_limit(uint64_t cfg_bytes, double fraction, const dmn_mem_machine *m, char *why,
		       size_t whylen);

#endif
