/* cache.c: the CPU backend's disk-caching methods: the identity of the compiled code (compiler,
 * flags, CPU), a program's shared object bytes, and loading shared objects back from bytes. */
#include "cpu.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/hash.h"
#include "util/strbuf.h"

/* The compiler's file after PATH lookup and symbolic links (cc -> gcc-12), or cc itself. */
static void cc_path(const char *cc, char *out, size_t cap)
{
	char cand[PATH_MAX], real[PATH_MAX];
	snprintf(cand, sizeof(cand), "%s", cc);
	const char *path = getenv("PATH");
	if (!strchr(cc, '/') && path)
		for (const char *s = path; *s;) {
			size_t len = strcspn(s, ":");
			snprintf(cand, sizeof(cand), "%.*s/%s", (int)len, s, cc);
			if (len && access(cand, X_OK) == 0)
				break;
			snprintf(cand, sizeof(cand), "%s", cc);
			s += len + (s[len] == ':');
		}
	snprintf(out, cap, "%s", realpath(cand, real) ? real : cc);
}

/* The first line of `cc --version` (empty if the compiler cannot be run). */
static void cc_version(const char *cc, char *out, size_t cap)
{
	char *const argv[] = {(char *)cc, "--version", NULL};
	int status;
	if (cpu_run_output(argv, false, out, cap, &status) != 0)
		out[0] = 0;
	out[strcspn(out, "\n")] = 0;
}

/* The CPU's model name and a hash of its feature flags (-march=native depends on them; a named
 * march builds the same code on every machine, which may share the cache). */
static void cpu_identity(eng_strbuf *sb)
{
	FILE *f = fopen("/proc/cpuinfo", "re");
	char *line = NULL, *model = NULL;
	size_t cap = 0;
	uint64_t flags = 0;
	while (f && getline(&line, &cap, f) > 0 && (!model || !flags)) {
		char *colon = strchr(line, ':');
		if (!colon)
			continue;
		line[strcspn(line, "\n")] = 0;
		if (!model && !strncmp(line, "model name", 10))
			model = strdup(colon + 1 + (colon[1] == ' '));
		else if (!flags && (!strncmp(line, "flags", 5) || !strncmp(line, "Features", 8)))
			flags = eng_hash_str(colon + 1);
	}
	if (f)
		fclose(f);
	eng_strbuf_printf(sb, " cpu=%s cpuflags=%016llx", model ? model : "?", (unsigned long long)flags);
	free(line);
	free(model);
}

const char *cpu_cache_id(void *dev)
{
	cpu_dev *d = dev;
	if (d->cache_id)
		return d->cache_id;
	char path[PATH_MAX], version[512];
	cc_path(d->cc, path, sizeof(path));
	cc_version(d->cc, version, sizeof(version));
	eng_strbuf sb;
	eng_strbuf_init(&sb);
	eng_strbuf_printf(&sb, "cpu-abi%d cc=%s (%s) flags=", BK_ABI_VERSION, path, version[0] ? version : d->cc);
	for (int i = 0; cpu_cc_flags[i]; i++)
		eng_strbuf_printf(&sb, "%s%s", i ? " " : "", cpu_cc_flags[i]);
	eng_strbuf_printf(&sb, " %s %s%s%s isa=%s", d->march_flag, d->mtune_flag, d->width_flag ? " " : "",
			  d->width_flag ? d->width_flag : "", d->isa.name);
	if (!strcmp(d->march, "native") || !strcmp(d->mtune, "native")) /* native's code follows the CPU it runs on */
		cpu_identity(&sb);
	eng_strbuf_printf(&sb, " prelude=%016llx", (unsigned long long)eng_hash_str(cpu_prelude()));
	/* out of memory: no identity, so nothing is cached (an empty id would match anything) */
	d->cache_id = sb.failed ? NULL : eng_strbuf_take(&sb);
	eng_strbuf_free(&sb);
	return d->cache_id ? d->cache_id : "";
}

eng_status cpu_program_blob(void *dev, bk_program *prog, const void **bytes, size_t *n, const char **symbol,
			    bk_err *err)
{
	cpu_program *p = (cpu_program *)prog;
	*bytes = p->so->bytes;
	*n = p->so->nbytes;
	*symbol = p->name;
	return ENG_OK;
}

eng_status cpu_load(void *dev, const void *bytes, size_t n, const char *const *names, int nkern,
		    bk_program **progs, bk_err *err)
{
	for (int i = 0; i < nkern; i++)
		progs[i] = NULL;
	const char *tmp = getenv("TMPDIR");
	char path[1024];
	snprintf(path, sizeof(path), "%.900s/tensord-so-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	void *copy = malloc(n ? n : 1);
	int fd = copy ? mkostemp(path, O_CLOEXEC) : -1;
	if (fd < 0) {
		snprintf(err->msg, sizeof(err->msg), "cannot create a temporary file %s: %s", path,
			 copy ? strerror(errno) : "out of memory");
		free(copy);
		return copy ? ENG_EIO : ENG_ENOMEM;
	}
	memcpy(copy, bytes, n);
	FILE *f = fdopen(fd, "wb");
	bool ok = f && fwrite(bytes, 1, n, f) == n;
	int werr = errno;
	if (f ? fclose(f) != 0 : close(fd) != 0) {
		werr = ok ? errno : werr;
		ok = false;
	}
	if (!ok) {
		unlink(path);
		free(copy);
		snprintf(err->msg, sizeof(err->msg), "cannot write %s: %s", path, strerror(werr));
		return ENG_EIO;
	}
	eng_status st = cpu_load_so(path, copy, n, names, nkern, progs, err);
	unlink(path); /* the mapping stays valid; nothing is left on disk */
	return st;
}
