/* leftovers.c: what a killed daemon left behind, removed at start: model.save's temporary files
 * under models_dir ("<file>.tmp.<pid>.<tid>.<n>", engine/io/safetensors.c) and the CPU
 * compiler's scratch directories ("$TMPDIR/tensord-cc-<pid>-XXXXXX", backends/cpu/compile.c),
 * each only when it is ours (uid) and its pid is no longer alive. */
#include "leftovers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WALK_DEPTH 16         /* directory levels below models_dir looked into */
#define WALK_ENTRIES 100000   /* entries looked at, at most */

typedef struct walk {
	dmn_logger *log;
	uid_t uid;
	long entries;
	int removed;
} walk;

/* Whether the process that wrote a leftover is gone. Our own pid is a predecessor's (nothing
 * of ours runs yet at start); a pid alive, even another user's (EPERM), is left alone. */
static bool pid_gone(long pid)
{
	if (pid <= 0 || pid == (long)getpid())
		return pid > 0;
	return kill((pid_t)pid, 0) && errno == ESRCH;
}

/* Digits at *s up to stop (a char, or 0 for the end): their value, *s moved past stop; -1 when
 * there are none or something else follows. */
static long digits(const char **s, char stop)
{
	const char *p = *s;
	long v = 0;
	while (*p >= '0' && *p <= '9' && v < 1000000000L)
		v = v * 10 + (*p++ - '0');
	if (p == *s || *p != stop)
		return -1;
	*s = stop ? p + 1 : p;
	return v;
}

/* The pid of a save's temporary file name "<file>.safetensors.tmp.<pid>.<tid>.<n>", else -1. */
static long save_tmp_pid(const char *name)
{
	const char *t = NULL;
	for (const char *p = strstr(name, ".tmp."); p; p = strstr(p + 1, ".tmp."))
		t = p;
	/* model.save writes only names ending .safetensors */
	if (!t || t - name < 13 || strncmp(t - 12, ".safetensors", 12))
		return -1;
	const char *s = t + 5;
	long pid = digits(&s, '.');
	if (pid < 0 || digits(&s, '.') < 0 || digits(&s, 0) < 0)
		return -1;
	return pid;
}

/* dirfd (taken; rel its path under models_dir, for the log), depth levels down. */
static void walk_dir(walk *w, int dirfd, const char *rel, int depth)
{
	DIR *d = fdopendir(dirfd);
	if (!d) {
		close(dirfd);
		return;
	}
	for (struct dirent *e; (e = readdir(d));) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (++w->entries == WALK_ENTRIES) {
			dmn_log(w->log, DMN_LOG_WARN, "models_dir: more than %d entries; leftover temporary files past them "
				"are not looked for", WALK_ENTRIES);
		}
		if (w->entries >= WALK_ENTRIES)
			break;
		struct stat st;
		if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		char sub[4096];
		snprintf(sub, sizeof(sub), "%s%s%s", rel, rel[0] ? "/" : "", e->d_name);
		if (S_ISDIR(st.st_mode)) { /* never through a symbolic link */
			int fd = depth < WALK_DEPTH ? openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
			if (fd >= 0)
				walk_dir(w, fd, sub, depth + 1);
			continue;
		}
		long pid = S_ISREG(st.st_mode) && st.st_uid == w->uid ? save_tmp_pid(e->d_name) : -1;
		if (pid > 0 && pid_gone(pid) && !unlinkat(dirfd, e->d_name, 0)) {
			w->removed++;
			dmn_log(w->log, DMN_LOG_WARN, "models_dir: removed %s (%lld bytes), the temporary file of a save by "
				"pid %ld that did not finish", sub, (long long)st.st_size, pid);
		}
	}
	closedir(d);
}

/* The pid of a scratch directory name "tensord-cc-<pid>-XXXXXX", else -1. */
static long scratch_pid(const char *name)
{
	if (strncmp(name, "tensord-cc-", 11))
		return -1;
	const char *s = name + 11;
	long pid = digits(&s, '-');
	return pid >= 0 && strlen(s) == 6 ? pid : -1;
}

/* Every file in the directory name under tmpfd, then the directory. A compiler the dead daemon
 * started may still be writing there (it outlives its parent): a few tries, 20 ms apart. */
static bool remove_scratch(int tmpfd, const char *name)
{
	for (int attempt = 0; attempt < 5; attempt++) {
		if (attempt)
			usleep(20000);
		int fd = openat(tmpfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
		if (!d) {
			if (fd >= 0)
				close(fd);
			return false;
		}
		for (struct dirent *e; (e = readdir(d));)
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
				unlinkat(fd, e->d_name, 0); /* the compiler writes files only (k<n>.c, .so, .log) */
		closedir(d);
		if (!unlinkat(tmpfd, name, AT_REMOVEDIR))
			return true;
		if (errno != ENOTEMPTY)
			return false;
	}
	return false;
}

static void clean_scratch(walk *w)
{
	const char *tmp = getenv("TMPDIR");
	if (!tmp || !*tmp)
		tmp = "/tmp";
	int fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	for (struct dirent *e; (e = readdir(d));) {
		long pid = scratch_pid(e->d_name);
		struct stat st;
		if (pid <= 0 || fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISDIR(st.st_mode) ||
		    st.st_uid != w->uid || !pid_gone(pid))
			continue;
		if (remove_scratch(fd, e->d_name)) {
			w->removed++;
			dmn_log(w->log, DMN_LOG_WARN, "removed %s/%s, the compiler scratch directory of pid %ld that did not "
				"finish", tmp, e->d_name, pid);
		}
	}
	closedir(d);
}

int dmn_clean_leftovers(const dmn_config *cfg, dmn_logger *log)
{
	walk w = {.log = log, .uid = geteuid()};
	if (cfg->models_dir[0]) {
		int fd = open(cfg->models_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0)
			walk_dir(&w, fd, "", 0);
	}
	clean_scratch(&w);
	return w.removed;
}
