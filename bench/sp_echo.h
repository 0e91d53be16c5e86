/* sp_echo.h: the operating system's floor for a local round trip, as issue 26 measures it: a
 * socketpair between this process and a forked echo process, each message one frame of the
 * unix:// transport (u32 length + bytes), one blocking write and blocking reads per direction.
 * The child is forked without exec and runs only read/write on buffers made before the fork
 * (safe in a process with threads). Its CPU is read from /proc like the daemon's. */
#ifndef TSD_SP_ECHO_H
#define TSD_SP_ECHO_H

#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct db_sp_echo {
	pid_t pid;
	int fd;           /* this side of the pair */
	size_t req_bytes, rep_bytes;
	uint8_t *req, *rep; /* framed messages (prefix included) */
} db_sp_echo;

static inline int db_sp_full(int fd, void *p, size_t n, int rd)
{
	uint8_t *b = p;
	while (n) {
		ssize_t k = rd ? read(fd, b, n) : write(fd, b, n);
		if (k <= 0)
			return -1;
		b += k;
		n -= (size_t)k;
	}
	return 0;
}

/* One frame in: its prefix and body into buf (cap bytes). */
static inline int db_sp_read_frame(int fd, uint8_t *buf, size_t cap)
{
	uint32_t len;
	if (db_sp_full(fd, &len, 4, 1) || len > cap)
		return -1;
	return db_sp_full(fd, buf, len, 1);
}

/* Fork the echo: it answers each frame with rep_bytes of its own. 0 or -1. */
static inline int db_sp_echo_spawn(db_sp_echo *e, size_t req_bytes, size_t rep_bytes)
{
	int sv[2];
	memset(e, 0, sizeof(*e));
	e->req_bytes = req_bytes;
	e->rep_bytes = rep_bytes;
	e->req = calloc(1, req_bytes + 4);
	e->rep = calloc(1, rep_bytes + 4);
	if (!e->req || !e->rep || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -1;
	uint32_t a = (uint32_t)req_bytes, b = (uint32_t)rep_bytes;
	memcpy(e->req, &a, 4);
	memcpy(e->rep, &b, 4);
	memset(e->req + 4, 0x5a, req_bytes);
	memset(e->rep + 4, 0xa5, rep_bytes);
	e->pid = fork();
	if (e->pid < 0)
		return -1;
	if (e->pid == 0) {
		close(sv[0]);
		uint8_t *in = e->req + 4; /* the child's copy of the buffers */
		while (!db_sp_read_frame(sv[1], in, req_bytes) && !db_sp_full(sv[1], e->rep, rep_bytes + 4, 0))
			;
		_exit(0);
	}
	close(sv[1]);
	e->fd = sv[0];
	return 0;
}

/* One round trip: the request frame out, the reply frame in. 0 or -1. */
static inline int db_sp_echo_call(db_sp_echo *e)
{
	if (db_sp_full(e->fd, e->req, e->req_bytes + 4, 0))
		return -1;
	return db_sp_read_frame(e->fd, e->rep + 4, e->rep_bytes);
}

static inline void db_sp_echo_stop(db_sp_echo *e)
{
	if (e->fd > 0)
		close(e->fd);
	if (e->pid > 0) {
		kill(e->pid, SIGKILL);
		waitpid(e->pid, NULL, 0);
	}
	free(e->req);
	free(e->rep);
	memset(e, 0, sizeof(*e));
}

#endif
