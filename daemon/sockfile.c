/* sockfile.c: the ipc socket file's claim before nng listens on it (the runtime directory's
 * owner and mode, a lock beside the socket, a look for a listener on a file already there) and
 * its removal at exit only by the daemon holding the lock. */
#include "sockfile.h"
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* Whether a socket bound to path listens, read from /proc/net/unix (this network namespace):
 * 1 yes, 0 no, -1 unknown. Passive on purpose: with nng 1.5.2 a connection that closes during
 * the SP handshake stops the listener accepting for good (nanomsg/nng#1518, fixed in 1.6.0), so
 * a connect probe would break a live daemon it finds. */
static int listening(const char *path)
{
	FILE *f = fopen("/proc/net/unix", "r");
	if (!f)
		return -1;
	char line[4400];
	int found = 0;
	if (!fgets(line, sizeof(line), f)) { /* the header */
		fclose(f);
		return -1;
	}
	while (!found && fgets(line, sizeof(line), f)) {
		/* "Num: RefCount Protocol Flags Type St Inode Path": __SO_ACCEPTCON (0x10000) in Flags */
		unsigned long flags;
		int at = 0;
		if (sscanf(line, "%*s %*s %*s %lx %*s %*s %*s %n", &flags, &at) != 1 || !at || !(flags & 0x10000))
			continue;
		char *p = line + at;
		p[strcspn(p, "\n")] = 0;
		found = !strcmp(p, path);
	}
	fclose(f);
	return found;
}

/* Whether something listens on the socket file at path: 0 yes, else the errno (ECONNREFUSED:
 * nobody). A connect only where /proc/net/unix cannot be read. */
static int probe(const char *path)
{
	int l = listening(path);
	if (l >= 0)
		return l ? 0 : ECONNREFUSED;
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

/* Whether gid is the daemon's own group with no other member listed: a user-private group
 * (umask 002 makes directories group-writable), whose write permission gives nobody else
 * access. (Users with gid as their primary group are not in its member list: a shared primary
 * group should not own the runtime directory.) */
static bool own_group(gid_t gid)
{
	if (gid != getegid())
		return false;
	char buf[16384];
	struct group g, *gp = NULL;
	if (getgrgid_r(gid, &g, buf, sizeof(buf), &gp) || !gp)
		return false;
	struct passwd pw, *pp = NULL;
	char pbuf[16384];
	if (getpwuid_r(geteuid(), &pw, pbuf, sizeof(pbuf), &pp) || !pp)
		return false;
	for (char **m = gp->gr_mem; *m; m++)
		if (strcmp(*m, pp->pw_name))
			return false;
	return true;
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
	if ((st.st_mode & S_IWOTH) || ((st.st_mode & S_IWGRP) && !own_group(st.st_gid))) {
		snprintf(err, errlen,
			 "listen %s: its directory %s is writable by %s (mode %04o): another user could replace the "
			 "socket; make it 0750 (chmod go-w %s) or use a directory of the daemon's own",
			 path, dir, st.st_mode & S_IWOTH ? "others" : "its group", (unsigned)(st.st_mode & 07777), dir);
		return -1;
	}
	return 0;
}

/* "<path>.lock" locked, our pid written in it: its descriptor (never closed once the claim
 * succeeded), or -1 and err. */
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
		/* the pid serves messages and dmn_sock_release; the lock is what counts */
	}
	return fd;
}

/* A claim that failed after locking: the lock given back, with no pid in it. */
static int unlock(int fd)
{
	if (ftruncate(fd, 0)) {
		/* the pid stays: dmn_sock_release would remove the socket file of whoever listens */
	}
	close(fd);
	return -1;
}

int dmn_sock_claim(const char *path, dmn_logger *log, char *err, size_t errlen)
{
	int lock;
	if (check_dir(path, err, errlen) || (lock = lock_beside(path, err, errlen)) < 0)
		return -1;
	/* from here the lock's descriptor stays open for the process's life when the claim holds */
	struct stat st;
	if (lstat(path, &st))
		return 0;
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(err, errlen, "listen %s: the path exists and is not a socket; remove it or choose another address",
			 path);
		return unlock(lock);
	}
	int e = probe(path);
	if (!e) {
		snprintf(err, errlen,
			 "listen %s: a daemon is listening on this socket already; stop it first, or give this one another "
			 "address",
			 path);
		return unlock(lock);
	}
	if (e != ECONNREFUSED) {
		snprintf(err, errlen, "listen %s: the socket file there cannot be probed (%s); remove it if no daemon uses it",
			 path, strerror(e));
		return unlock(lock);
	}
	if (unlink(path) && errno != ENOENT) {
		snprintf(err, errlen, "listen %s: cannot remove the stale socket file: %s", path, strerror(errno));
		return unlock(lock);
	}
	dmn_log(log, DMN_LOG_WARN, "listen %s: removed a stale socket file (no daemon listening on it)", path);
	return 0;
}

void dmn_sock_release(const char *path)
{
	/* ours only if this process holds the lock (its pid in the lock file, written once locked):
	 * a daemon whose claim failed leaves the live daemon's socket alone */
	char lock[4200], who[32] = "";
	snprintf(lock, sizeof(lock), "%s.lock", path);
	int fd = open(lock, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t n = fd >= 0 ? pread(fd, who, sizeof(who) - 1, 0) : -1;
	if (fd >= 0)
		close(fd);
	who[n > 0 ? n : 0] = 0;
	struct stat st;
	if (atol(who) == (long)getpid() && !lstat(path, &st) && S_ISSOCK(st.st_mode))
		unlink(path);
}

int dmn_sock_make_dirs(const char *path)
{
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s", path);
	char *slash = strrchr(buf, '/');
	if (!slash || slash == buf)
		return 0;
	*slash = 0;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0750) && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(buf, 0750) && errno != EEXIST ? -1 : 0;
}

int dmn_tcp_listen(const char *url, int *port, char *err, size_t errlen)
{
	char host[256], pstr[16];
	if (!dmn_cfg_url_hostport(url, host, sizeof(host), pstr, sizeof(pstr))) {
		snprintf(err, errlen, "listen %s: not HOST:PORT", url);
		return -1;
	}
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
			*ai = NULL;
	int gr = getaddrinfo(!strcmp(host, "*") ? NULL : host, pstr, &hints, &ai);
	if (gr) {
		snprintf(err, errlen, "listen %s: %s", url, gai_strerror(gr));
		return -1;
	}
	int fd = -1, e = 0;
	for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
		int s = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol), one = 1;
		if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) || bind(s, a->ai_addr, a->ai_addrlen) ||
		    listen(s, SOMAXCONN)) {
			e = errno;
			if (s >= 0)
				close(s);
			continue;
		}
		fd = s;
	}
	freeaddrinfo(ai);
	if (fd < 0) {
		snprintf(err, errlen, "listen %s: %s", url, strerror(e ? e : EADDRNOTAVAIL));
		return -1;
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (port && !getsockname(fd, (struct sockaddr *)&ss, &sl))
		*port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
						      : ((struct sockaddr_in6 *)&ss)->sin6_port);
	return fd;
}
