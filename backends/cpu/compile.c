/* compile.c: the CPU backend's compiler driver: writes generated C to a private temporary
 * directory, runs the system C compiler to build a shared object, and dlopens it. */
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

static const char *const cc_flags[] = {"-O3", "-march=native", "-fPIC", "-shared", "-fopenmp-simd",
				       "-ffp-contract=fast", "-fno-math-errno", "-fno-trapping-math",
				       "-w", NULL};

/* Read at most cap-1 bytes of a file into buf (NUL-terminated). */
static void slurp(const char *path, char *buf, size_t cap)
{
	buf[0] = 0;
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	size_t n = fread(buf, 1, cap - 1, f);
	buf[n] = 0;
	fclose(f);
}

static void so_release(cpu_so *so)
{
	if (so && --so->refs == 0) {
		dlclose(so->handle);
		free(so);
	}
}

void cpu_program_release(cpu_program *p)
{
	if (!p)
		return;
	so_release(p->so);
	free(p);
}

eng_status cpu_compile(cpu_dev *d, const char *src, int nkern, const char *const *names, bk_program **progs,
		       bk_err *err)
{
	const char *tmp = getenv("TMPDIR");
	char dir[512], cpath[600], sopath[600], logpath[600];
	snprintf(dir, sizeof(dir), "%s/tensord-cc-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		snprintf(err->msg, sizeof(err->msg), "cannot create a temporary directory: %s", strerror(errno));
		return ENG_EIO;
	}
	snprintf(cpath, sizeof(cpath), "%s/k.c", dir);
	snprintf(sopath, sizeof(sopath), "%s/k.so", dir);
	snprintf(logpath, sizeof(logpath), "%s/log", dir);
	eng_status st = ENG_OK;
	FILE *f = fopen(cpath, "w");
	if (!f || fputs(src, f) < 0 || fclose(f)) {
		if (f)
			fclose(f);
		snprintf(err->msg, sizeof(err->msg), "cannot write %s: %s", cpath, strerror(errno));
		st = ENG_EIO;
		goto out;
	}
	const char *argv[32];
	int argc = 0;
	argv[argc++] = d->cc;
	for (int i = 0; cc_flags[i]; i++)
		argv[argc++] = cc_flags[i];
	argv[argc++] = "-o";
	argv[argc++] = sopath;
	argv[argc++] = cpath;
	argv[argc++] = "-lm";
	argv[argc] = NULL;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	pid_t pid;
	int rc = posix_spawnp(&pid, d->cc, &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc) {
		snprintf(err->msg, sizeof(err->msg), "cannot run compiler '%s': %s", d->cc, strerror(rc));
		st = ENG_ECOMPILE;
		goto out;
	}
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		char log[3000];
		slurp(logpath, log, sizeof(log));
		snprintf(err->msg, sizeof(err->msg), "%s failed (status %d): %s", d->cc,
			 WIFEXITED(status) ? WEXITSTATUS(status) : -1, log);
		st = ENG_ECOMPILE;
		goto out;
	}
	void *h = dlopen(sopath, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(err->msg, sizeof(err->msg), "dlopen: %s", dlerror());
		st = ENG_ECOMPILE;
		goto out;
	}
	cpu_so *so = calloc(1, sizeof(*so));
	if (!so) {
		dlclose(h);
		snprintf(err->msg, sizeof(err->msg), "out of memory");
		st = ENG_ENOMEM;
		goto out;
	}
	so->handle = h;
	so->refs = 1; /* held by this function until the programs take theirs */
	int made = 0;
	for (int i = 0; i < nkern; i++) {
		cpu_program *p = calloc(1, sizeof(*p));
		void *fn = dlsym(h, names[i]);
		if (!p || !fn) {
			free(p);
			snprintf(err->msg, sizeof(err->msg), "kernel %s: %s", names[i], fn ? "out of memory" : "symbol not found");
			st = fn ? ENG_ENOMEM : ENG_ECOMPILE;
			break;
		}
		p->fn = (cpu_kernel_fn)fn;
		p->so = so;
		so->refs++;
		progs[i] = (bk_program *)p;
		made++;
	}
	if (st)
		for (int i = 0; i < made; i++) {
			cpu_program_release((cpu_program *)progs[i]);
			progs[i] = NULL;
		}
	so_release(so);
out:
	unlink(cpath);
	unlink(sopath);
	unlink(logpath);
	rmdir(dir);
	return st;
}
