/* memlimit.c: the engine's default memory limit from the machine (memlimit.h): MemTotal, the
 * cgroup's limit (v2 or v1, found through /proc/self/cgroup and /proc/self/mounts), and the
 * fraction of the smaller the config asks for. */
#include "memlimit.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FILE_MAX (64 * 1024) /* bytes read of any of these files (mounts may be long) */
#define NO_LIMIT_V1 (UINT64_C(1) << 62) /* v1 writes "no limit" as a page-rounded 2^63 - 1 */

void dmn_mem_paths_default(dmn_mem_paths *p)
{
	p->meminfo = "/proc/meminfo";
	p->self_cgroup = "/proc/self/cgroup";
	p->mounts = "/proc/self/mounts";
}

/* The file's first FILE_MAX bytes, NUL-terminated, to free(); NULL when it cannot be read. */
static char *slurp(const char *path)
{
	FILE *f = path ? fopen(path, "re") : NULL;
	if (!f)
		return NULL;
	char *buf = malloc(FILE_MAX + 1);
	size_t n = buf ? fread(buf, 1, FILE_MAX, f) : 0;
	fclose(f);
	if (buf)
		buf[n] = 0;
	return buf;
}

static uint64_t read_meminfo(const char *path)
{
	char *t = slurp(path);
	if (!t)
		return 0;
	unsigned long long kb = 0;
	const char *p = strstr(t, "MemTotal:");
	if (!p || sscanf(p, "MemTotal: %llu kB", &kb) != 1)
		kb = 0;
	free(t);
	return (uint64_t)kb * 1024;
}

/* A limit file's value: "max" (v2) or a number past NO_LIMIT_V1 is no limit (0); *ok false
 * when the file is missing or holds neither. */
static uint64_t read_limit(const char *path, bool *ok)
{
	char *t = slurp(path);
	*ok = false;
	if (!t)
		return 0;
	uint64_t v = 0;
	char *end;
	if (!strncmp(t, "max", 3)) {
		*ok = true;
	} else {
		unsigned long long n = strtoull(t, &end, 10);
		if (end != t) {
			*ok = true;
			v = n >= NO_LIMIT_V1 ? 0 : (uint64_t)n;
		}
	}
	free(t);
	return v;
}

/* Whether the comma-separated list opts holds word. */
static bool has_word(const char *opts, const char *word)
{
	size_t wl = strlen(word);
	for (const char *p = opts; *p;) {
		size_t n = strcspn(p, ",");
		if (n == wl && !strncmp(p, word, wl))
			return true;
		p += n + (p[n] == ',');
	}
	return false;
}

/* The next line of the text at *cur, cut at its newline (*cur moves past it); NULL at the end. */
static char *next_line(char **cur)
{
	char *line = *cur;
	if (!line || !*line)
		return NULL;
	char *nl = strchr(line, '\n');
	*cur = nl ? nl + 1 : line + strlen(line);
	if (nl)
		*nl = 0;
	return line;
}

/* The mount point of the v2 hierarchy (v2 true) or of v1's memory controller, into mnt[cap];
 * false when mounts names none. */
static bool find_mount(const char *mounts, bool v2, char *mnt, size_t cap)
{
	char *t = slurp(mounts);
	bool found = false;
	for (char *cur = t, *line; !found && (line = next_line(&cur));) {
		char dev[256], dir[512], type[64], opts[1024];
		if (sscanf(line, "%255s %511s %63s %1023s", dev, dir, type, opts) != 4)
			continue;
		if (v2 ? !strcmp(type, "cgroup2") : !strcmp(type, "cgroup") && has_word(opts, "memory"))
			found = snprintf(mnt, cap, "%s", dir) < (int)cap;
	}
	free(t);
	return found;
}

/* The process's path in the v2 hierarchy ("0::/a/b") or in v1's memory one ("4:memory:/a/b",
 * "4:cpu,memory:/a/b"), into out[cap]. */
static bool find_cgroup(const char *self_cgroup, bool v2, char *out, size_t cap)
{
	char *t = slurp(self_cgroup);
	bool found = false;
	for (char *cur = t, *line; !found && (line = next_line(&cur));) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2 || c2[1] != '/')
			continue;
		*c1 = *c2 = 0; /* line: the hierarchy's id; c1 + 1: its controllers */
		const char *ctrls = c1 + 1;
		bool match = v2 ? !strcmp(line, "0") && !*ctrls : has_word(ctrls, "memory");
		if (match)
			found = snprintf(out, cap, "%s", c2 + 1) < (int)cap;
	}
	free(t);
	return found;
}

/* The smallest limit from the process's cgroup up to the root of one hierarchy; true when a
 * limit file was found at any level. */
static bool walk_limits(const dmn_mem_paths *p, bool v2, uint64_t *limit, char *file, size_t cap)
{
	char mnt[512], cg[1024], path[2048];
	if (!find_mount(p->mounts, v2, mnt, sizeof(mnt)) || !find_cgroup(p->self_cgroup, v2, cg, sizeof(cg)))
		return false;
	bool any = false;
	for (;;) {
		bool ok;
		size_t cl = strlen(cg);
		while (cl > 1 && cg[cl - 1] == '/')
			cg[--cl] = 0;
		snprintf(path, sizeof(path), "%s%s/%s", mnt, strcmp(cg, "/") ? cg : "",
			 v2 ? "memory.max" : "memory.limit_in_bytes");
		uint64_t v = read_limit(path, &ok);
		if (ok) {
			any = true;
			if (v && (!*limit || v < *limit)) {
				*limit = v;
				snprintf(file, cap, "%.*s", (int)(cap - 1), path);
			}
		}
		char *slash = strrchr(cg, '/');
		if (!slash || !strcmp(cg, "/"))
			break;
		slash[slash == cg] = 0; /* "/a/b" -> "/a", "/a" -> "/" */
	}
	return any;
}

void dmn_mem_machine_read(const dmn_mem_paths *p, dmn_mem_machine *out)
{
	memset(out, 0, sizeof(*out));
	out->mem_total = read_meminfo(p->meminfo);
	/* v2 first (the unified hierarchy); a hybrid system's v1 memory controller is the one that
	 * limits when v2 has no controller, so both are read and the smaller kept */
	walk_limits(p, true, &out->cgroup_limit, out->cgroup_file, sizeof(out->cgroup_file));
	walk_limits(p, false, &out->cgroup_limit, out->cgroup_file, sizeof(out->cgroup_file));
}

static void fmt_gib(char *out, size_t cap, uint64_t b)
{
	snprintf(out, cap, "%.2f GiB", (double)b / (double)(UINT64_C(1) << 30));
}

uint64_t dmn_mem_limit(uint64_t cfg_bytes, double fraction, const dmn_mem_machine *m, char *why,
		       size_t whylen)
{
	char a[32], b[32];
	if (cfg_bytes) {
		snprintf(why, whylen, "mem_limit_bytes");
		return cfg_bytes;
	}
	if (!(fraction > 0)) {
		snprintf(why, whylen, "none: mem_limit_fraction is 0");
		return 0;
	}
	uint64_t base = m->mem_total;
	bool cg = m->cgroup_limit && (!base || m->cgroup_limit < base);
	if (cg)
		base = m->cgroup_limit;
	if (!base) {
		snprintf(why, whylen, "none: neither MemTotal nor a cgroup limit could be read");
		return 0;
	}
	uint64_t v = (uint64_t)((double)base * (fraction < 1 ? fraction : 1));
	v &= ~((UINT64_C(1) << 20) - 1);
	if (!v)
		v = UINT64_C(1) << 20;
	fmt_gib(a, sizeof(a), base);
	fmt_gib(b, sizeof(b), m->mem_total);
	if (cg)
		snprintf(why, whylen, "mem_limit_fraction %g of the cgroup's limit %s (%s; MemTotal %s)", fraction, a,
			 m->cgroup_file, b);
	else
		snprintf(why, whylen, "mem_limit_fraction %g of MemTotal %s%s", fraction, a,
			 m->cgroup_limit ? "" : " (no cgroup limit)");
	return v;
}
