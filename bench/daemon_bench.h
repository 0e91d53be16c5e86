/* daemon_bench.h: what the daemon benchmarks (daemon_rtt, daemon_throughput, soak) share:
 * starting the tensord binary of the same build directory on a temporary config and socket,
 * stopping it with SIGTERM, loading an MLP with its weights in the model.load message, reading
 * the stats and the daemon's RSS, an in-process nng REP echo server, and percentiles.
 * TSD_BENCH_DAEMON_WRAP (e.g. "heaptrack -o /tmp/ht"; valgrind cannot run the JIT kernels: AVX-512) runs the
 * daemon under that command. */
#ifndef TSD_DAEMON_BENCH_H
#define TSD_DAEMON_BENCH_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include <tensord/client.h>

static inline uint64_t db_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A running daemon: its pid, temporary directory and socket urls. It listens on both
 * transports: url is the one the bench's clients use, unix:// unless TSD_BENCH_TRANSPORT=nng;
 * nng_url is nng's ipc:// (for what needs nng itself, such as the size probe's relay). */
typedef struct db_daemon {
	pid_t pid;
	char dir[256];
	char url[336];
	char nng_url[320];
	char cfg[320];
	char log[320];
} db_daemon;

/* The directory of the running executable (where the build put tensord). */
static inline int db_exe_dir(char *out, size_t cap)
{
	ssize_t n = readlink("/proc/self/exe", out, cap - 1);
	if (n <= 0)
		return -1;
	out[n] = 0;
	char *slash = strrchr(out, '/');
	if (!slash)
		return -1;
	*slash = 0;
	return 0;
}

/* Start tensord with a config listening on DIR/tensord.sock (log_level warn, stderr into
 * DIR/tensord.log) plus `extra` (JSON object members without braces, e.g. "\"batch_max\": 32",
 * or ""). Waits until a client can connect and health answers ready. 0 or -1 (printed). */
static inline int db_daemon_start(db_daemon *d, const char *extra)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->dir, sizeof(d->dir), "/tmp/tsd-bench-XXXXXX");
	if (!mkdtemp(d->dir)) {
		perror("mkdtemp");
		return -1;
	}
	snprintf(d->nng_url, sizeof(d->nng_url), "ipc://%s/tensord-nng.sock", d->dir);
	const char *tr = getenv("TSD_BENCH_TRANSPORT");
	if (tr && !strcmp(tr, "nng"))
		snprintf(d->url, sizeof(d->url), "%s", d->nng_url);
	else
		snprintf(d->url, sizeof(d->url), "unix://%s/tensord.sock", d->dir);
	snprintf(d->cfg, sizeof(d->cfg), "%s/cfg.json", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/tensord.log", d->dir);
	FILE *f = fopen(d->cfg, "w");
	if (!f) {
		perror(d->cfg);
		return -1;
	}
	/* the Open Inference Protocol's port only when the bench asks for one */
	fprintf(f, "{\"listen\": [\"unix://%s/tensord.sock\", \"%s\"], \"log_level\": \"warn\", \"cache_dir\": \"%s/cache\"%s%s%s%s}\n",
		d->dir, d->nng_url, d->dir, extra && strstr(extra, "oip_http_listen") ? "" : ", \"oip_http_listen\": \"\"",
		extra && strstr(extra, "oip_grpc_listen") ? "" : ", \"oip_grpc_listen\": \"\"",
		extra && *extra ? ", " : "", extra ? extra : "");
	fclose(f);
	char exe[PATH_MAX];
	if (db_exe_dir(exe, sizeof(exe) - 16)) {
		fprintf(stderr, "cannot read /proc/self/exe\n");
		return -1;
	}
	strcat(exe, "/tensord");
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return -1;
	}
	if (pid == 0) {
		int fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0) {
			dup2(fd, 2);
			dup2(fd, 1);
			close(fd);
		}
		/* TSD_BENCH_DAEMON_WRAP: a command the daemon runs under (valgrind, heaptrack, perf) */
		const char *wrap = getenv("TSD_BENCH_DAEMON_WRAP");
		if (wrap && *wrap) {
			char cmd[1024];
			snprintf(cmd, sizeof(cmd), "exec %s \"$0\" --config \"$1\"", wrap);
			execl("/bin/sh", "sh", "-c", cmd, exe, d->cfg, (char *)NULL);
		}
		execl(exe, exe, "--config", d->cfg, (char *)NULL);
		_exit(127);
	}
	d->pid = pid;
	for (int i = 0; i < 600; i++) { /* 30 s */
		int wst;
		if (waitpid(pid, &wst, WNOHANG) == pid) {
			fprintf(stderr, "%s exited at start (status %d); its log: %s\n", exe, wst, d->log);
			d->pid = 0;
			return -1;
		}
		tsd_client *c = tsd_client_open(d->url, 2000, NULL, 0);
		if (c) {
			tsd_reply *r = NULL;
			bool ready = tsd_client_call_verb(c, "health", &r) == TSD_OK &&
				     cJSON_IsTrue(cJSON_GetObjectItem(tsd_reply_json(r), "ready"));
			tsd_reply_free(r);
			tsd_client_close(c);
			if (ready)
				return 0;
		}
		usleep(50000);
	}
	fprintf(stderr, "tensord did not become ready in 30 s; its log: %s\n", d->log);
	return -1;
}

/* SIGTERM, wait for the exit (its status returned: 0 clean), remove the temporary files. */
static inline int db_daemon_stop(db_daemon *d)
{
	int rc = -1;
	if (d->pid > 0) {
		kill(d->pid, SIGTERM);
		int wst = 0;
		pid_t w = 0;
		for (int i = 0; i < 300 && (w = waitpid(d->pid, &wst, WNOHANG)) == 0; i++) /* 30 s */
			usleep(100000);
		if (w == 0) {
			fprintf(stderr, "tensord (pid %d) did not exit 30 s after SIGTERM: killed\n", (int)d->pid);
			kill(d->pid, SIGKILL);
			waitpid(d->pid, &wst, 0);
			rc = 124;
		} else if (w == d->pid) {
			rc = WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
		}
		d->pid = 0;
	}
	if (rc) { /* its log, for the reason */
		char cmd[400];
		snprintf(cmd, sizeof(cmd), "tail -20 '%s' >&2", d->log);
		if (system(cmd) != 0)
			fprintf(stderr, "(no log in %s)\n", d->log);
	}
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->dir);
	if (d->dir[0] && system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", d->dir);
	return rc;
}

/* /proc/PID/what opened for reading, or NULL. */
static inline FILE *db_proc_open(pid_t pid, const char *what)
{
	char path[128];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what);
	return fopen(path, "r");
}

/* VmRSS of pid in KiB, -1 if unreadable. */
static inline long db_rss_kb(pid_t pid)
{
	char line[256];
	FILE *f = db_proc_open(pid, "status");
	if (!f)
		return -1;
	long kb = -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6)) {
			kb = strtol(line + 6, NULL, 10);
			break;
		}
	fclose(f);
	return kb;
}

/* CPU time (user + system) pid has used so far, in seconds; -1 if unreadable. */
static inline double db_cpu_s(pid_t pid)
{
	char buf[1024];
	FILE *f = db_proc_open(pid, "stat");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')'); /* the command may hold spaces */
	unsigned long ut, st;
	/* after ')': state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* Context switches (voluntary + involuntary) of every thread of pid so far; -1 if unreadable. */
static inline long db_ctxsw(pid_t pid)
{
	char path[96], line[256];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *dir = opendir(path);
	if (!dir)
		return -1;
	long n = 0;
	for (struct dirent *e; (e = readdir(dir));) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "task/%.16s/status", e->d_name);
		FILE *f = db_proc_open(pid, path);
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, "voluntary_ctxt_switches:", 24) || !strncmp(line, "nonvoluntary_ctxt_switches:", 27))
				n += strtol(strchr(line, ':') + 1, NULL, 10);
		fclose(f);
	}
	closedir(dir);
	return n;
}

/* Deterministic pseudo-random floats in [-scale, scale). */
static inline void db_fill(float *p, size_t n, uint32_t seed, float scale)
{
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		p[i] = ((float)(x >> 8) / 16777216.0f * 2 - 1) * scale;
	}
}

static inline cJSON *db_node(cJSON *nodes, const char *id, const char *op)
{
	cJSON *n = cJSON_CreateObject();
	cJSON_AddStringToObject(n, "id", id);
	cJSON_AddStringToObject(n, "op", op);
	cJSON_AddItemToArray(nodes, n);
	return n;
}

static inline cJSON *db_shape(int64_t a, int64_t b)
{
	cJSON *s = cJSON_CreateArray();
	cJSON_AddItemToArray(s, cJSON_CreateNumber((double)a));
	if (b >= 0)
		cJSON_AddItemToArray(s, cJSON_CreateNumber((double)b));
	return s;
}

static inline void db_io(cJSON *n, const char *in0, const char *in1, const char *in2)
{
	cJSON *in = cJSON_CreateArray();
	cJSON_AddItemToArray(in, cJSON_CreateString(in0));
	if (in1)
		cJSON_AddItemToArray(in, cJSON_CreateString(in1));
	if (in2)
		cJSON_AddItemToArray(in, cJSON_CreateString(in2));
	cJSON_AddItemToObject(n, "in", in);
}

/* model.load of name: x[-1,nin] -> linear(nin->hid) -> relu -> linear(hid->nout) = y, weights
 * w1 [hid,nin], b1 [hid], w2 [nout,hid], b2 [nout] sent as tensors in the message. batching: a
 * JSON object text or NULL (the config's defaults). 0 or -1 (printed). */
static inline int db_load_mlp(tsd_client *c, const char *name, int nin, int hid, int nout, const char *batching)
{
	cJSON *h = cJSON_CreateObject();
	cJSON_AddStringToObject(h, "verb", "model.load");
	cJSON_AddStringToObject(h, "name", name);
	cJSON *g = cJSON_AddObjectToObject(h, "graph");
	cJSON *nodes = cJSON_AddArrayToObject(g, "nodes");
	cJSON *n = db_node(nodes, "x", "input");
	cJSON_AddStringToObject(n, "dtype", "float32");
	cJSON_AddItemToObject(n, "shape", db_shape(-1, nin));
	const struct { const char *id; int64_t a, b; } ps[] = {{"w1", hid, nin}, {"b1", hid, -1}, {"w2", nout, hid}, {"b2", nout, -1}};
	for (int i = 0; i < 4; i++) {
		n = db_node(nodes, ps[i].id, "param");
		cJSON_AddStringToObject(n, "dtype", "float32");
		cJSON_AddItemToObject(n, "shape", db_shape(ps[i].a, ps[i].b));
	}
	db_io(db_node(nodes, "h", "linear"), "x", "w1", "b1");
	db_io(db_node(nodes, "a", "relu"), "h", NULL, NULL);
	db_io(db_node(nodes, "y", "linear"), "a", "w2", "b2");
	cJSON *outs = cJSON_AddArrayToObject(g, "outputs");
	cJSON_AddItemToArray(outs, cJSON_CreateString("y"));
	if (batching)
		cJSON_AddItemToObject(h, "batching", cJSON_Parse(batching));
	tsd_tensor ts[4];
	float *bufs[4];
	int rc = 0;
	for (int i = 0; i < 4; i++) {
		size_t numel = (size_t)ps[i].a * (size_t)(ps[i].b < 0 ? 1 : ps[i].b);
		bufs[i] = malloc(numel * sizeof(float));
		if (!bufs[i]) {
			rc = -1;
			continue;
		}
		db_fill(bufs[i], numel, (uint32_t)i + 1, i % 2 ? 0.1f : 1.0f / (float)(ps[i].b > 0 ? ps[i].b : 1));
		ts[i] = (tsd_tensor){.name = ps[i].id, .dtype = TSD_F32, .ndim = ps[i].b < 0 ? 1 : 2, .data = bufs[i]};
		ts[i].shape[0] = ps[i].a;
		ts[i].shape[1] = ps[i].b;
	}
	tsd_reply *r = NULL;
	tsd_status st = rc ? TSD_OUT_OF_MEMORY : tsd_client_call(c, h, ts, 4, &r);
	if (st != TSD_OK) {
		fprintf(stderr, "model.load %s: %s: %s\n", name, tsd_status_name(st), tsd_client_message(c, r));
		rc = -1;
	}
	tsd_reply_free(r);
	for (int i = 0; i < 4; i++)
		free(bufs[i]);
	cJSON_Delete(h);
	return rc;
}

/* models.<name>.requests and .batches from stats. 0 or -1. */
static inline int db_model_counts(tsd_client *c, const char *name, double *requests, double *batches)
{
	tsd_reply *r = NULL;
	int rc = -1;
	if (tsd_client_call_verb(c, "stats", &r) == TSD_OK) {
		const cJSON *m = cJSON_GetObjectItem(cJSON_GetObjectItem(tsd_reply_json(r), "models"), name);
		const cJSON *rq = cJSON_GetObjectItem(m, "requests"), *b = cJSON_GetObjectItem(m, "batches");
		if (cJSON_IsNumber(rq) && cJSON_IsNumber(b)) {
			*requests = rq->valuedouble;
			*batches = b->valuedouble;
			rc = 0;
		}
	}
	tsd_reply_free(r);
	return rc;
}

/* An infer request header: {"verb":"infer","model":name,"priority":prio}. Caller deletes. */
static inline cJSON *db_infer_header(const char *model, const char *prio)
{
	cJSON *h = cJSON_CreateObject();
	cJSON_AddStringToObject(h, "verb", "infer");
	cJSON_AddStringToObject(h, "model", model);
	if (prio)
		cJSON_AddStringToObject(h, "priority", prio);
	return h;
}

/* ---- an in-process nng REP echo server (the transport's own round trip) ---- */

typedef struct db_echo {
	nng_socket sock;
	pthread_t thread;
	size_t reply_bytes; /* replies of this size (0: the request itself) */
} db_echo;

static inline void *db_echo_main(void *arg)
{
	db_echo *e = arg;
	for (;;) {
		nng_msg *m;
		if (nng_recvmsg(e->sock, &m, 0))
			break;
		if (e->reply_bytes && nng_msg_realloc(m, e->reply_bytes)) {
			nng_msg_free(m);
			continue;
		}
		if (nng_sendmsg(e->sock, m, 0))
			nng_msg_free(m);
	}
	return NULL;
}

static inline int db_echo_start(db_echo *e, const char *url, size_t reply_bytes)
{
	int rv;
	e->reply_bytes = reply_bytes;
	if ((rv = nng_rep0_open(&e->sock)) || (rv = nng_listen(e->sock, url, NULL, 0))) {
		fprintf(stderr, "echo %s: %s\n", url, nng_strerror(rv));
		return -1;
	}
	return pthread_create(&e->thread, NULL, db_echo_main, e) ? -1 : 0;
}

static inline void db_echo_stop(db_echo *e)
{
	nng_close(e->sock);
	pthread_join(e->thread, NULL);
}

/* ---- the echo in a process of its own, as the daemon is: a round trip between two
 * processes pays for switching address spaces, one between two threads of a process does not.
 * The bench re-executes itself (fork then exec: nng must not run in a forked child) with
 * argv[1] DB_ECHO_ARG; its main calls db_echo_child_main first thing. ---- */

#define DB_ECHO_ARG "--db-echo-child"

typedef struct db_echo_proc {
	pid_t pid;
} db_echo_proc;

/* In main, before anything else: when this process is an echo child, serve and return its exit
 * code (>= 0); else -1. */
static inline int db_echo_child_main(int argc, char **argv)
{
	if (argc != 4 || strcmp(argv[1], DB_ECHO_ARG))
		return -1;
	db_echo e;
	if (db_echo_start(&e, argv[2], (size_t)strtoull(argv[3], NULL, 10)))
		return 1;
	pthread_join(e.thread, NULL); /* until the parent kills us */
	return 0;
}

/* Start an echo process listening on url, replying reply_bytes; waits until it answers. */
static inline int db_echo_spawn(db_echo_proc *e, const char *url, size_t reply_bytes)
{
	char exe[PATH_MAX], n[32];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (len <= 0)
		return -1;
	exe[len] = 0;
	snprintf(n, sizeof(n), "%zu", reply_bytes);
	e->pid = fork();
	if (e->pid < 0)
		return -1;
	if (e->pid == 0) {
		execl(exe, exe, DB_ECHO_ARG, url, n, (char *)NULL);
		_exit(127);
	}
	nng_socket s;
	if (nng_req0_open(&s))
		return -1;
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 200);
	int ok = 0;
	for (int i = 0; i < 100 && !ok; i++) { /* 10 s */
		nng_msg *m;
		if (nng_dial(s, url, NULL, 0)) {
			usleep(100000);
			continue;
		}
		ok = !nng_msg_alloc(&m, 8) && !nng_sendmsg(s, m, 0) && !nng_recvmsg(s, &m, 0);
		if (ok)
			nng_msg_free(m);
	}
	nng_close(s);
	if (!ok) {
		kill(e->pid, SIGKILL);
		waitpid(e->pid, NULL, 0);
		return -1;
	}
	return 0;
}

static inline void db_echo_kill(db_echo_proc *e)
{
	if (e->pid > 0) {
		kill(e->pid, SIGKILL);
		waitpid(e->pid, NULL, 0);
		e->pid = 0;
	}
}

/* ---- the real message sizes: one call relayed through an in-process REQ/REP proxy ---- */

typedef struct db_probe {
	nng_socket rep, req;
	int ux; /* the onward leg when the daemon's url is unix:// (else -1) */
	size_t req_bytes, rep_bytes;
} db_probe;

/* n bytes to or from fd, whole. */
static inline int db_fd_full(int fd, void *buf, size_t n, bool rd)
{
	for (uint8_t *b = buf; n;) {
		ssize_t k = rd ? read(fd, b, n) : write(fd, b, n);
		if (k <= 0)
			return -1;
		b += k;
		n -= (size_t)k;
	}
	return 0;
}

/* The relay's onward leg over unix:// (p->ux, connected): m's bytes as one frame out, the
 * reply's frame back into a new message. */
static inline nng_msg *db_probe_unix(int fd, nng_msg *m)
{
	uint32_t len = (uint32_t)nng_msg_len(m);
	nng_msg *r = NULL;
	int bad = db_fd_full(fd, &len, 4, false) || db_fd_full(fd, nng_msg_body(m), nng_msg_len(m), false) ||
		  db_fd_full(fd, &len, 4, true) || nng_msg_alloc(&r, len) || db_fd_full(fd, nng_msg_body(r), len, true);
	nng_msg_free(m);
	if (bad && r) {
		nng_msg_free(r);
		r = NULL;
	}
	return r;
}

static inline void *db_probe_main(void *arg)
{
	db_probe *p = arg;
	nng_msg *m;
	if (nng_recvmsg(p->rep, &m, 0))
		return NULL;
	p->req_bytes = nng_msg_len(m);
	if (p->ux >= 0) {
		if (!(m = db_probe_unix(p->ux, m)))
			return NULL;
	} else if (nng_sendmsg(p->req, m, 0) || nng_recvmsg(p->req, &m, 0)) {
		return NULL;
	}
	p->rep_bytes = nng_msg_len(m);
	if (nng_sendmsg(p->rep, m, 0))
		nng_msg_free(m);
	return NULL;
}

/* Send header + ts through a proxy at probe_url to the daemon at url; the encoded request's and
 * reply's sizes into *req, *rep. 0 or -1. */
static inline int db_probe_sizes(const char *url, const char *probe_url, const cJSON *header,
				 const tsd_tensor *ts, int n, size_t *req, size_t *rep)
{
	db_probe p = {.ux = -1};
	pthread_t th;
	int rv;
	if (!strncmp(url, "unix://", 7)) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		size_t plen = strlen(url + 7);
		if (plen >= sizeof(sa.sun_path)) {
			fprintf(stderr, "probe: %s: path too long\n", url);
			return -1;
		}
		memcpy(sa.sun_path, url + 7, plen + 1);
		p.ux = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (p.ux < 0 || connect(p.ux, (struct sockaddr *)&sa, sizeof(sa))) {
			perror("probe: unix connect");
			return -1;
		}
	}
	if ((rv = nng_rep0_open(&p.rep)) || (rv = nng_listen(p.rep, probe_url, NULL, 0)) ||
	    (rv = nng_req0_open(&p.req)) || (p.ux < 0 && (rv = nng_dial(p.req, url, NULL, 0)))) {
		fprintf(stderr, "probe: %s\n", nng_strerror(rv));
		return -1;
	}
	pthread_create(&th, NULL, db_probe_main, &p);
	tsd_client *c = tsd_client_open(probe_url, 10000, NULL, 0);
	tsd_reply *r = NULL;
	tsd_status st = c ? tsd_client_call(c, header, ts, n, &r) : TSD_INTERNAL;
	tsd_reply_free(r);
	tsd_client_close(c);
	pthread_join(th, NULL);
	nng_close(p.rep);
	nng_close(p.req);
	if (p.ux >= 0)
		close(p.ux);
	*req = p.req_bytes;
	*rep = p.rep_bytes;
	return st == TSD_OK && p.req_bytes && p.rep_bytes ? 0 : -1;
}

/* ---- percentiles ---- */

static inline int db_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* t sorted ascending: the p-quantile (0..1), nearest rank. */
static inline uint64_t db_pct(const uint64_t *t, size_t n, double p)
{
	size_t i = (size_t)(p * (double)n);
	return t[i < n ? i : n - 1];
}

#endif
