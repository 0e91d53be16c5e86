/* compile.c: the CPU backend's compiler driver: writes generated C to a private temporary
 * directory, runs the system C compiler (several processes in parallel for big batches) to
 * build shared objects, and dlopens them. */
#include "cpu.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

const char *const cpu_cc_flags[] = {"-O3", "-fPIC", "-shared", "-fopenmp-simd",
				    "-ffp-contract=fast", "-fno-math-errno", "-fno-trapping-math",
				    "-w", NULL};

#define MAX_PARTS 16

/* Read at most cap-1 bytes of a file into buf (NUL-terminated). */
static void slurp(const char *path, char *buf, size_t cap)
{
	buf[0] = 0;
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	size_t n = fread(buf, 1, cap - 1, f);
	buf[n] = 0;
	fclose(f);
}

/* The whole file at path into *bytes (malloc'd) and *n; false on failure, errno set. */
static bool read_binary(const char *path, void **bytes, size_t *n)
{
	*bytes = NULL;
	FILE *f = fopen(path, "rbe");
	long size = -1;
	if (f && fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (*bytes = malloc(size ? (size_t)size : 1)) && fread(*bytes, 1, (size_t)size, f) == (size_t)size) {
		*n = (size_t)size;
		fclose(f);
		return true;
	}
	int e = errno;
	if (f)
		fclose(f);
	free(*bytes);
	*bytes = NULL;
	errno = e;
	return false;
}

static void so_release(cpu_so *so)
{
	if (so && --so->refs == 0) {
		dlclose(so->handle);
		free(so->bytes);
		free(so);
	}
}

/* A kernel's scratch size and, for a split reduction (see bk_target.split_scratch), its
 * finishing function, which needs a scratch size. */
static eng_status find_split(void *h, cpu_program *p, bk_err *err)
{
	char sym[320];
	snprintf(sym, sizeof(sym), "%s_fin", p->name);
	void *fin = dlsym(h, sym);
	snprintf(sym, sizeof(sym), "%s_scratch", p->name);
	const int64_t *scratch = dlsym(h, sym);
	if (fin && (!scratch || *scratch < 0 || *scratch > CPU_SPLIT_SCRATCH)) {
		snprintf(err->msg, sizeof(err->msg), "kernel %s: split reduction without a scratch size of at most %d bytes",
			 p->name, CPU_SPLIT_SCRATCH);
		return ENG_ECOMPILE;
	}
	if (scratch && (*scratch < 0 || *scratch > CPU_MAX_SCRATCH)) {
		snprintf(err->msg, sizeof(err->msg), "kernel %s: scratch of %lld bytes, at most %lld", p->name,
			 (long long)*scratch, (long long)CPU_MAX_SCRATCH);
		return ENG_ECOMPILE;
	}
	p->fin = (cpu_kernel_fn)fin;
	p->scratch = scratch ? *scratch : 0;
	return ENG_OK;
}

void cpu_program_release(cpu_program *p)
{
	if (!p)
		return;
	so_release(p->so);
	free(p->name);
	free(p);
}

typedef struct part {
	int first, count; /* kernels [first, first + count) */
	char c[600], so[600], log[600];
	pid_t pid;
	bool started;
	int status;
} part;

static eng_status write_source(const part *p, const char *prelude, const char *const *srcs, bk_err *err)
{
	FILE *f = fopen(p->c, "we"); /* e: not inherited by compilers other threads start */
	bool ok = f && fputs(prelude, f) >= 0;
	for (int i = p->first; ok && i < p->first + p->count; i++)
		ok = fputs("\n", f) >= 0 && fputs(srcs[i], f) >= 0;
	if (f && fclose(f))
		ok = false;
	if (!ok) {
		snprintf(err->msg, sizeof(err->msg), "cannot write %s: %s", p->c, strerror(errno));
		return ENG_EIO;
	}
	return ENG_OK;
}

static eng_status spawn_cc(cpu_dev *d, part *p, bk_err *err)
{
	const char *argv[32];
	int argc = 0;
	argv[argc++] = d->cc;
	for (int i = 0; cpu_cc_flags[i]; i++)
		argv[argc++] = cpu_cc_flags[i];
	argv[argc++] = d->march_flag;
	argv[argc++] = d->mtune_flag;
	if (d->width_flag)
		argv[argc++] = d->width_flag;
	argv[argc++] = "-o";
	argv[argc++] = p->so;
	argv[argc++] = p->c;
	argv[argc++] = "-lm";
	argv[argc] = NULL;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, p->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	int rc = posix_spawnp(&p->pid, d->cc, &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc) {
		snprintf(err->msg, sizeof(err->msg), "cannot run compiler '%s': %s", d->cc, strerror(rc));
		return ENG_ECOMPILE;
	}
	p->started = true;
	return ENG_OK;
}

eng_status cpu_load_so(const char *path, void *bytes, size_t n, const char *const *names, int nkern,
		       bk_program **progs, bk_err *err)
{
	for (int i = 0; i < nkern; i++)
		progs[i] = NULL;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		free(bytes);
		snprintf(err->msg, sizeof(err->msg), "dlopen: %s", dlerror());
		return ENG_ECOMPILE;
	}
	cpu_so *so = calloc(1, sizeof(*so));
	if (!so) {
		dlclose(h);
		free(bytes);
		snprintf(err->msg, sizeof(err->msg), "out of memory");
		return ENG_ENOMEM;
	}
	so->handle = h;
	so->refs = 1; /* held here until the programs take theirs */
	so->bytes = bytes;
	so->nbytes = n;
	eng_status st = ENG_OK;
	for (int i = 0; i < nkern; i++) {
		cpu_program *prog = calloc(1, sizeof(*prog));
		void *fn = dlsym(h, names[i]);
		char *name = prog && fn ? strdup(names[i]) : NULL;
		if (!name) {
			free(prog);
			snprintf(err->msg, sizeof(err->msg), "kernel %s: %s", names[i], fn ? "out of memory" : "symbol not found");
			st = fn ? ENG_ENOMEM : ENG_ECOMPILE;
			break;
		}
		prog->fn = (cpu_kernel_fn)fn;
		prog->so = so;
		prog->name = name;
		so->refs++;
		progs[i] = (bk_program *)prog;
		if ((st = find_split(h, prog, err)))
			break;
	}
	if (st)
		for (int i = 0; i < nkern; i++) {
			cpu_program_release((cpu_program *)progs[i]);
			progs[i] = NULL;
		}
	so_release(so);
	return st;
}

/* Load one part's shared object (keeping its bytes) and look up its kernels into progs. */
static eng_status load_part(const part *p, const char *const *names, bk_program **progs, bk_err *err)
{
	void *bytes;
	size_t n;
	if (!read_binary(p->so, &bytes, &n)) {
		snprintf(err->msg, sizeof(err->msg), "cannot read %s: %s", p->so, strerror(errno));
		return ENG_EIO;
	}
	return cpu_load_so(p->so, bytes, n, names + p->first, p->count, progs + p->first, err);
}

eng_status cpu_compile(cpu_dev *d, const char *prelude, const char *const *srcs, int nkern, const char *const *names,
		       bk_program **progs, bk_err *err)
{
	const char *tmp = getenv("TMPDIR");
	char dir[512];
	part parts[MAX_PARTS];
	/* one compiler per core, each with at least three kernels: a process costs ~40 ms */
	int nparts = nkern / 3;
	if (nparts > d->nthreads)
		nparts = d->nthreads;
	if (nparts > MAX_PARTS)
		nparts = MAX_PARTS;
	if (nparts < 1)
		nparts = 1;
	memset(parts, 0, sizeof(parts));
	for (int i = 0; i < nkern; i++)
		progs[i] = NULL;
	/* the pid in the name: a daemon that starts removes the scratch directories of dead ones */
	snprintf(dir, sizeof(dir), "%s/tensord-cc-%ld-XXXXXX", tmp && *tmp ? tmp : "/tmp", (long)getpid());
	if (!mkdtemp(dir)) {
		snprintf(err->msg, sizeof(err->msg), "cannot create a temporary directory: %s", strerror(errno));
		return ENG_EIO;
	}
	eng_status st = ENG_OK;
	for (int k = 0; k < nparts; k++) {
		part *p = &parts[k];
		p->first = (int)((long)nkern * k / nparts);
		p->count = (int)((long)nkern * (k + 1) / nparts) - p->first;
		snprintf(p->c, sizeof(p->c), "%s/k%d.c", dir, k);
		snprintf(p->so, sizeof(p->so), "%s/k%d.so", dir, k);
		snprintf(p->log, sizeof(p->log), "%s/k%d.log", dir, k);
		if (!st)
			st = write_source(p, prelude, srcs, err);
		if (!st)
			st = spawn_cc(d, p, err);
	}
	for (int k = 0; k < nparts; k++) {
		part *p = &parts[k];
		if (!p->started)
			continue;
		while (waitpid(p->pid, &p->status, 0) < 0 && errno == EINTR)
			;
		if (!st && (!WIFEXITED(p->status) || WEXITSTATUS(p->status))) {
			char log[3000];
			slurp(p->log, log, sizeof(log));
			snprintf(err->msg, sizeof(err->msg), "%s failed (status %d): %s", d->cc,
				 WIFEXITED(p->status) ? WEXITSTATUS(p->status) : -1, log);
			st = ENG_ECOMPILE;
		}
	}
	for (int k = 0; k < nparts && !st; k++)
		st = load_part(&parts[k], names, progs, err);
	if (st)
		for (int i = 0; i < nkern; i++) {
			cpu_program_release((cpu_program *)progs[i]);
			progs[i] = NULL;
		}
	for (int k = 0; k < nparts; k++) {
		unlink(parts[k].c);
		unlink(parts[k].so);
		unlink(parts[k].log);
	}
	rmdir(dir);
	return st;
}
