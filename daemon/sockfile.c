/* sockfile.c: the ipc socket file's claim before nng listens on it (the runtime directory's
 * owner and mode, a lock beside the socket, a connect probe of a file already there) and its
 * removal at exit only when nobody listens on it. */
#include "sockfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* A connect to the socket file at path: 0 when something accepts, else the errno. */
static int probe(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path))
		return ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return errno;
	/* a Unix socket's connect does not wait: accepted (or queued) at once, or refused */
	int rv = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) ? errno : 0;
	close(fd);
	return rv == EAGAIN || rv == EINPROGRESS ? 0 : rv; /* a full backlog: someone listens */
}

/* The socket's directory: the daemon's uid's (or root's), writable by nobody else. */
static int check_dir(const char *path, char *err, size_t errlen)
{
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (!slash)
		return 0; /* config_check allows absolute paths only */
	slash[slash == dir] = 0; /* "/x.sock": the directory "/" */
	struct stat st;
	if (stat(dir, &st)) {
		snprintf(err, errlen, "listen %s: its directory %s: %s", path, dir, strerror(errno));
		return -1;
	}
	uid_t me = geteuid();
	if (st.st_uid != me && st.st_uid != 0) {
		snprintf(err, errlen,
			 "listen %s: its directory %s belongs to uid %u, not to this daemon's (%u) or root: another user "
			 "could replace the socket; use a directory of the daemon's own (e.g. the default ${RUNTIME_DIR})",
			 path, dir, (unsigned)st.st_uid, (unsigned)me);
		return -1;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(err, errlen,
			 "listen %s: its directory %s is writable by %s (mode %04o): another user could replace the "
			 "socket; make it 0750 (chmod go-w %s) or use a directory of the daemon's own",
			 path, dir, st.st_mode & S_IWOTH ? "others" : "its group", (unsigned)(st.st_mode & 07777), dir);
		return -1;
	}
	return 0;
}

/* "<path>.lock" locked for the process's life (the descriptor is never closed). */
static int lock_beside(const char *path, char *err, size_t errlen)
{
	char lock[4200];
	snprintf(lock, sizeof(lock), "%s.lock", path);
	int fd = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "listen %s: cannot open its lock file %s: %s", path, lock, strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		int e = errno;
		char who[32] = "";
		ssize_t n = pread(fd, who, sizeof(who) - 1, 0);
		who[n > 0 ? n : 0] = 0;
		who[strcspn(who, "\n")] = 0;
		close(fd);
		if (e == EWOULDBLOCK)
			snprintf(err, errlen,
				 "listen %s: another tensord (pid %s) serves this socket (it holds %s); stop it first, or "
				 "give this one another address",
				 path, who[0] ? who : "?", lock);
		else
			snprintf(err, errlen, "listen %s: cannot lock %s: %s", path, lock, strerror(e));
		return -1;
	}
	char pid[32];
	int n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) || pwrite(fd, pid, (size_t)n, 0) != n) {
		/* the pid is only for the message above: the lock is what counts */
	}
	return 0; /* fd stays open: the lock lasts until the process ends */
}

int dmn_sock_claim(const char *path, dmn_logger *log, char *err, size_t errlen)
{
	if (check_dir(path, err, errlen) || lock_beside(path, err, errlen))
		return -1;
	struct stat st;
	if (lstat(path, &st))
		return 0;
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(err, errlen, "listen %s: the path exists and is not a socket; remove it or choose another address",
			 path);
		return -1;
	}
	int e = probe(path);
	if (!e) {
		snprintf(err, errlen,
			 "listen %s: a daemon is listening on this socket already; stop it first, or give this one another "
			 "address",
			 path);
		return -1;
	}
	if (e != ECONNREFUSED) {
		snprintf(err, errlen, "listen %s: the socket file there cannot be probed (%s); remove it if no daemon uses it",
			 path, strerror(e));
		return -1;
	}
	if (unlink(path) && errno != ENOENT) {
		snprintf(err, errlen, "listen %s: cannot remove the stale socket file: %s", path, strerror(errno));
		return -1;
	}
	dmn_log(log, DMN_LOG_WARN, "listen %s: removed a stale socket file (no daemon listening on it)", path);
	return 0;
}

void dmn_sock_release(const char *path)
{
	struct stat st;
	if (!lstat(path, &st) && S_ISSOCK(st.st_mode) && probe(path) == ECONNREFUSED)
		unlink(path);
}
