/* test_hostile_conn.c: hostile and careless clients on the nng transport (suite `hostileconn`,
 * issue 25; limits in docs/isolation/connections.md), each against a live daemon while another
 * client is served and timed: a client that pipelines and never reads its replies (health, and
 * infer with 256 KiB replies), a refused uid sending a 2 MiB garbage header (answered
 * unauthorised unparsed, then closed), more connections than peer_connections_max, close loops
 * with requests in flight followed by a SIGTERM that must finish within drain_seconds + 2 s, and
 * half-sent messages that stall. The misbehaving clients speak nng's SP framing over plain unix
 * sockets (8-byte handshake, then per message 0x01 + 8-byte big-endian length + the REQ's 4-byte
 * request id + the body: nng 1.5.2 src/sp/transport/ipc/ipc.c), so that nothing of nng's reads
 * or buffers for them. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "suites.h"

#define TINY_SPEC                                                                                        \
	"{\"name\":\"tiny\",\"graph\":{\"nodes\":[{\"id\":\"x\",\"op\":\"input\",\"dtype\":\"float32\",\"shape\":[-1,4]}," \
	"{\"id\":\"w\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[4]},"                               \
	"{\"id\":\"y\",\"op\":\"mul\",\"in\":[\"x\",\"w\"]}],\"outputs\":[\"y\"]}}"
#define BIG_ROWS 16384 /* the big model's fixed input: 256 KiB in, 256 KiB out */
#define BIG_SPEC                                                                                         \
	"{\"name\":\"big\",\"graph\":{\"nodes\":[{\"id\":\"x\",\"op\":\"input\",\"dtype\":\"float32\",\"shape\":[16384,4]}," \
	"{\"id\":\"w\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[4]},"                               \
	"{\"id\":\"y\",\"op\":\"mul\",\"in\":[\"x\",\"w\"]}],\"outputs\":[\"y\"]}}"

static const float tiny_w[4] = {1, -2, 0.5f, 4};

/* Sanitizer builds (CI runs suites under ASan and TSan): compute is 3-10x slower, so latency
 * bounds scale and the shutdown gets 2 s more; TSan's shadow memory makes RSS meaningless. */
#if defined(__SANITIZE_THREAD__)
#define SAN_SLOW 10.0
#define SAN_RSS false
#elif defined(__SANITIZE_ADDRESS__)
#define SAN_SLOW 3.0
#define SAN_RSS true
#else
#define SAN_SLOW 1.0
#define SAN_RSS true
#endif
#define P99_BOUND_MS (100.0 * SAN_SLOW)
#define EXIT_SLACK_MS (SAN_SLOW > 1.0 ? 4000.0 : 2000.0)

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void load_models(tsd_client *c, bool big)
{
	tsd_tensor w = DH_F32("w", tiny_w, 4);
	dh_load(c, TINY_SPEC, &w, 1);
	if (big)
		dh_load(c, BIG_SPEC, &w, 1);
}

/* ---- raw SP over a unix socket ---- */

/* Connect to d's socket and do the SP handshake (as a REQ peer); -1 when refused or closed. */
static int sp_connect(const dh_daemon *d)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert(fd >= 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", d->nng_url + strlen("ipc://"));
	ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect %s: %s", sa.sun_path,
		      strerror(errno));
	static const unsigned char hs[8] = {0, 'S', 'P', 0, 0x00, 0x30, 0, 0}; /* REQ0 */
	if (send(fd, hs, 8, MSG_NOSIGNAL) != 8) { /* closed at once (peer_connections_max) */
		close(fd);
		return -1;
	}
	unsigned char got[8];
	size_t n = 0;
	while (n < 8) {
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, 5000) != 1)
			break;
		ssize_t r = recv(fd, got + n, 8 - n, 0);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	if (n < 8) {
		close(fd);
		return -1;
	}
	ck_assert_msg(got[1] == 'S' && got[2] == 'P' && got[5] == 0x31, "not a REP peer");
	return fd;
}

static void put_be(unsigned char *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (unsigned char)(v >> (8 * (n - 1 - i)));
}

/* Write all of buf, waiting at most timeout_ms for room; 0, -1 when the peer closed, -2 when no
 * room came in time. */
static int write_all(int fd, const void *buf, size_t len, int timeout_ms)
{
	const unsigned char *b = buf;
	while (len) {
		ssize_t w = send(fd, b, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0) {
			b += w;
			len -= (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
		struct pollfd p = {fd, POLLOUT, 0};
		int n = poll(&p, 1, timeout_ms);
		if (n == 1 && (p.revents & (POLLERR | POLLHUP)))
			return -1;
		if (n != 1)
			return -2;
	}
	return 0;
}

/* One SP message: frame header, REQ request id, body. */
static int sp_send(int fd, uint32_t reqid, const void *body, size_t len, int timeout_ms)
{
	unsigned char h[13];
	h[0] = 1;
	put_be(h + 1, len + 4, 8);
	put_be(h + 9, reqid | 0x80000000u, 4);
	int rv = write_all(fd, h, sizeof(h), timeout_ms);
	return rv ? rv : write_all(fd, body, len, timeout_ms);
}


/* One reply (the body after the request id, malloc'd, *len its size), or NULL. */
static unsigned char *sp_recv(int fd, size_t *len, int timeout_ms)
{
	unsigned char h[9];
	if (!dh_recv_all(fd, h, 9, timeout_ms))
		return NULL;
	uint64_t n = 0;
	for (int i = 1; i < 9; i++)
		n = n << 8 | h[i];
	ck_assert_msg(h[0] == 1 && n >= 4 && n < (1u << 30), "a bad SP frame");
	unsigned char *b = malloc(n);
	ck_assert(b);
	if (!dh_recv_all(fd, b, n, timeout_ms)) {
		free(b);
		return NULL;
	}
	*len = n - 4;
	memmove(b, b + 4, n - 4);
	return b;
}

/* Whether the daemon closed fd within timeout_ms (what arrives before the end is discarded). */
static bool sp_closed(int fd, int timeout_ms)
{
	static unsigned char sink[1 << 16];
	double until = now_ms() + timeout_ms;
	for (;;) {
		struct pollfd p = {fd, POLLIN, 0};
		int left = (int)(until - now_ms());
		if (left <= 0 || poll(&p, 1, left) != 1)
			return false;
		ssize_t r = recv(fd, sink, sizeof(sink), 0);
		if (r == 0 || (r < 0 && errno == ECONNRESET))
			return true;
		if (r < 0 && errno != EINTR && errno != EAGAIN)
			return true;
	}
}

/* Whether the daemon closed fd within timeout_ms, seen without reading (reading would take
 * the replies it is waiting on). */
static bool sp_hung_up(int fd, int timeout_ms)
{
	struct pollfd p = {fd, POLLRDHUP, 0};
	return poll(&p, 1, timeout_ms) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* A connection the daemon keeps (retried while it closes them at once, e.g. while closed ones
 * are still counted against peer_connections_max), within timeout_ms. */
static int sp_connect_kept(const dh_daemon *d, int timeout_ms)
{
	double t0 = now_ms();
	for (;;) {
		int fd = sp_connect(d);
		if (fd >= 0 && !sp_hung_up(fd, 100))
			return fd;
		if (fd >= 0)
			close(fd);
		ck_assert_msg(now_ms() - t0 < timeout_ms, "no connection kept by the daemon within %d ms", timeout_ms);
		usleep(50000);
	}
}

/* A request's wire bytes (header JSON text, optional tensor x). */
static nng_msg *request(const char *json, const tsd_tensor *x)
{
	cJSON *h = cJSON_Parse(json);
	ck_assert_msg(h, "bad JSON %s", json);
	nng_msg *m = dh_encode(h, x, x ? 1 : 0);
	cJSON_Delete(h);
	return m;
}

/* The status of a reply body. */
static tsd_status reply_status(const unsigned char *b, size_t len, char *msg, size_t msglen)
{
	proto_msg pm;
	proto_err e;
	memset(&pm, 0, sizeof(pm));
	tsd_status st = proto_decode(b, len, (size_t)1 << 30, PROTO_REPLY, &pm, &e);
	ck_assert_msg(st == TSD_OK, "a reply that does not decode: %s", e.msg);
	const cJSON *er = cJSON_GetObjectItemCaseSensitive(pm.json, "error");
	snprintf(msg, msglen, "%s", cJSON_IsString(er) ? er->valuestring : "");
	st = pm.status;
	proto_msg_free(&pm);
	return st;
}

/* ---- the timed client ---- */

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* n calls on c, alternating tiny infers and health; every one must be ok; returns the p99 (ms)
 * and prints the figures. */
static double timed_calls(tsd_client *c, int n, const char *what)
{
	double *lat = calloc((size_t)n, sizeof(double));
	ck_assert(lat);
	float x[8] = {1, 2, 3, 4, -1, -2, -3, -4}, y[8];
	char why[256];
	for (int i = 0; i < n; i++) {
		double t0 = now_ms();
		if (i % 2) {
			tsd_reply *r = NULL;
			tsd_status s = tsd_client_call_verb(c, "health", &r);
			ck_assert_msg(s == TSD_OK, "%s: health %d: %s", what, i, tsd_status_name(s));
			tsd_reply_free(r);
		} else {
			tsd_status s = dh_infer(c, "tiny", NULL, x, 2, 4, y, 8, why, sizeof(why));
			ck_assert_msg(s == TSD_OK, "%s: infer %d: %s: %s", what, i, tsd_status_name(s), why);
			for (int k = 0; k < 8; k++)
				ck_assert_msg(y[k] == x[k] * tiny_w[k % 4], "%s: infer %d: y[%d] = %g", what, i, k, y[k]);
		}
		lat[i] = now_ms() - t0;
	}
	qsort(lat, (size_t)n, sizeof(double), cmp_d);
	double p50 = lat[n / 2], p99 = lat[(n * 99) / 100], max = lat[n - 1];
	printf("hostileconn: %s: %d calls, p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", what, n, p50, p99, max);
	fflush(stdout);
	free(lat);
	return p99;
}

/* ---- a client that pipelines and never reads ---- */

typedef struct flooder {
	const dh_daemon *d;
	nng_msg *req;       /* what it sends */
	atomic_bool stop;
	int conns, closed;  /* connections made; closed by the daemon */
	long sent;
} flooder;

/* Connect, pipeline req until the daemon closes the connection, again, until stop. */
static void *flood_main(void *arg)
{
	flooder *f = arg;
	const void *b = nng_msg_body(f->req);
	size_t len = nng_msg_len(f->req);
	while (!atomic_load(&f->stop)) {
		int fd = sp_connect(f->d);
		if (fd < 0)
			continue;
		f->conns++;
		for (uint32_t id = 1; !atomic_load(&f->stop); id++) {
			int rv = sp_send(fd, id, b, len, 100);
			if (rv == -1) { /* closed by the daemon */
				f->closed++;
				break;
			}
			f->sent += rv == 0; /* -2: no room for now (a message may be cut: fine, hostile) */
		}
		close(fd);
	}
	return NULL;
}

static void nonreader(const char *req_json, bool big)
{
	dh_daemon d = {0};
	dh_start(&d, "{\"reply_timeout_ms\":1000}");
	tsd_client *c = dh_client_nng(&d);
	load_models(c, big);
	static float bx[BIG_ROWS * 4];
	tsd_tensor x = DH_F32("x", bx, BIG_ROWS, 4);
	flooder f = {.d = &d, .req = request(req_json, big ? &x : NULL)};
	atomic_init(&f.stop, false);
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, flood_main, &f), 0);
	usleep(300000); /* let it fill its socket */
	double p99 = timed_calls(c, 240, big ? "another client while one pipelines infer (256 KiB replies), never reading"
					     : "another client while one pipelines health, never reading");
	atomic_store(&f.stop, true);
	pthread_join(th, NULL);
	nng_msg_free(f.req);
	cJSON *st = dh_call_json(c, "stats");
	double timeouts = dh_num(st, "connections.closed_reply_timeout"), flood = dh_num(st, "connections.closed_flood");
	cJSON_Delete(st);
	printf("hostileconn: the non-reader: %d connections, %d closed by the daemon, %ld requests sent; "
	       "closed_reply_timeout %.0f, closed_flood %.0f\n", f.conns, f.closed, f.sent, timeouts, flood);
	fflush(stdout);
	ck_assert_msg(f.closed >= 1, "the non-reading client's connection was never closed");
	ck_assert_msg(timeouts + flood >= 1, "stats count no closed non-reader (reply_timeout %.0f, flood %.0f)", timeouts,
		      flood);
	ck_assert_msg(p99 < P99_BOUND_MS, "p99 %.2f ms while another client does not read (bound %.0f ms)", p99,
		      P99_BOUND_MS);
	dh_client_close(c);
	dh_stop(&d);
}

START_TEST(t_nonreader_health)
{
	nonreader("{\"id\":1,\"verb\":\"health\"}", false);
}
END_TEST

START_TEST(t_nonreader_infer)
{
	nonreader("{\"id\":1,\"verb\":\"infer\",\"model\":\"big\"}", true);
}
END_TEST

/* A reply's stalled delivery alone (one request, a reply larger than the socket holds, never
 * read, then many pipelined): the reply timeout closes it though nothing else arrives. */
START_TEST(t_reply_timeout)
{
	dh_daemon d = {0};
	dh_start(&d, "{\"reply_timeout_ms\":300,\"client_inflight_max\":4096}");
	tsd_client *c = dh_client_nng(&d);
	load_models(c, true);
	static float bx[BIG_ROWS * 4];
	tsd_tensor x = DH_F32("x", bx, BIG_ROWS, 4);
	nng_msg *m = request("{\"id\":1,\"verb\":\"infer\",\"model\":\"big\"}", &x);
	int fd = sp_connect(&d);
	ck_assert(fd >= 0);
	/* 40 x 256 KiB replies: far more than the socket buffers; the cap is out of the way */
	uint32_t i = 1;
	for (; i <= 40; i++)
		if (sp_send(fd, i, nng_msg_body(m), nng_msg_len(m), 2000))
			break;
	nng_msg_free(m);
	double t0 = now_ms();
	ck_assert_msg(sp_hung_up(fd, 10000), "a connection whose replies are not taken was not closed");
	printf("hostileconn: 40 infers with 256 KiB replies, none read: closed after %.0f ms (reply_timeout_ms 300)\n",
	       now_ms() - t0);
	close(fd);
	ck_assert_int_eq((int)dh_stat(c, "connections.closed_reply_timeout"), 1);
	timed_calls(c, 20, "after a reply timeout");
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

/* ---- a refused uid: answered unauthorised before any parsing, then closed ---- */

START_TEST(t_refused_unparsed)
{
	dh_daemon d = {0};
	char cfg[128];
	snprintf(cfg, sizeof(cfg), "{\"allowed_uids\":[%u]}", (unsigned)getuid() + 12345u);
	dh_start(&d, cfg);
	ck_assert(d.refused);
	/* "TSD1", a 2 MiB JSON length, 2 MiB of garbage where the JSON would be */
	size_t jl = (size_t)2 << 20, len = 8 + jl;
	unsigned char *b = malloc(len);
	ck_assert(b);
	memcpy(b, "TSD1", 4);
	for (int i = 0; i < 4; i++)
		b[4 + i] = (unsigned char)(jl >> (8 * i));
	memset(b + 8, '{', jl);
	for (int round = 0; round < 3; round++) {
		int fd = sp_connect(&d);
		ck_assert(fd >= 0);
		int rv = sp_send(fd, 1, b, len, 20000);
		ck_assert_msg(rv == 0, "round %d: sending the 2 MiB request: %s", round, rv == -1 ? "closed" : "no room for 20 s");
		/* pipelined after it in one write (so they wait in the socket together, whatever the
		 * daemon's speed: sent one by one, each could be answered before the next came, which
		 * is the one-at-a-time case): never answered, never queued */
		unsigned char *many = malloc(48 * (13 + 64));
		ck_assert(many);
		for (uint32_t i = 2; i < 50; i++) {
			unsigned char *f = many + (i - 2) * (13 + 64);
			f[0] = 1;
			put_be(f + 1, 64 + 4, 8);
			put_be(f + 9, i | 0x80000000u, 4);
			memcpy(f + 13, b, 64);
		}
		write_all(fd, many, 48 * (13 + 64), 2000); /* the daemon may close before it takes them all */
		free(many);
		/* answers (unauthorised, never bad_request: nothing parsed) until the daemon closes
		 * the connection; not all of them */
		int answers = 0;
		size_t rl;
		unsigned char *r;
		while ((r = sp_recv(fd, &rl, 10000))) {
			char msg[256];
			tsd_status st = reply_status(r, rl, msg, sizeof(msg));
			free(r);
			ck_assert_msg(st == TSD_UNAUTHORISED, "round %d: %s (%s), want unauthorised without parsing", round,
				      tsd_status_name(st), msg);
			ck_assert_msg(strstr(msg, "allowed_uids"), "round %d: message %s", round, msg);
			answers++;
		}
		ck_assert_msg(sp_closed(fd, 5000), "round %d: a refused peer's connection stayed open", round);
		printf("hostileconn: refused peer, round %d: 49 requests pipelined (the first with a 2 MiB garbage header): "
		       "%d answered unauthorised, then closed\n", round, answers);
		fflush(stdout);
		/* the first is answered (and, when the daemon read it before the rest, one more); the
		 * next seen while one is held closes the connection, and the rest are dropped */
		ck_assert_msg(answers < 49, "round %d: %d answers to a refused peer's 49 requests", round, answers);
		close(fd);
	}
	free(b);
	dh_stop(&d);
}
END_TEST

/* ---- more connections than peer_connections_max ---- */

static double raw_stat(int fd, const char *path)
{
	nng_msg *m = request("{\"id\":9,\"verb\":\"stats\"}", NULL);
	ck_assert_int_eq(sp_send(fd, 9, nng_msg_body(m), nng_msg_len(m), 5000), 0);
	nng_msg_free(m);
	size_t len;
	unsigned char *r = sp_recv(fd, &len, 10000);
	ck_assert_msg(r, "no stats reply");
	proto_msg pm;
	proto_err e;
	memset(&pm, 0, sizeof(pm));
	ck_assert_int_eq(proto_decode(r, len, (size_t)1 << 30, PROTO_REPLY, &pm, &e), TSD_OK);
	double v = dh_num(pm.json, path);
	proto_msg_free(&pm);
	free(r);
	return v;
}

static void raw_health(int fd, const char *what)
{
	nng_msg *m = request("{\"id\":3,\"verb\":\"health\"}", NULL);
	ck_assert_msg(sp_send(fd, 3, nng_msg_body(m), nng_msg_len(m), 5000) == 0, "%s: send failed", what);
	nng_msg_free(m);
	size_t len;
	unsigned char *r = sp_recv(fd, &len, 10000);
	ck_assert_msg(r, "%s: no health reply", what);
	char msg[256];
	ck_assert_msg(reply_status(r, len, msg, sizeof(msg)) == TSD_OK, "%s: health: %s", what, msg);
	free(r);
}

/* Until the daemon counts at most n connections open (stats over fd). */
static void wait_open(int fd, int n)
{
	double t0 = now_ms(), open = 0;
	while ((open = raw_stat(fd, "connections.open")) > n && now_ms() - t0 < 10000)
		usleep(20000);
	ck_assert_msg(open <= n, "%.0f connections open, want at most %d", open, n);
}

START_TEST(t_peer_cap)
{
	enum { CAP = 4, EXTRA = 3 };
	dh_daemon d = {0};
	dh_start(&d, "{\"peer_connections_max\":4}");
	int fds[CAP];
	fds[0] = sp_connect(&d);
	ck_assert(fds[0] >= 0);
	wait_open(fds[0], 1); /* the harness's start-up client has gone */
	char what[64];
	for (int i = 1; i < CAP; i++) {
		fds[i] = sp_connect(&d);
		ck_assert(fds[i] >= 0);
		/* answered: the daemon has added it (the handshake returns before that) */
		snprintf(what, sizeof(what), "connection %d of %d", i + 1, CAP);
		raw_health(fds[i], what);
	}
	for (int i = 0; i < EXTRA; i++) {
		int fd = sp_connect(&d);
		ck_assert_msg(fd < 0 || sp_closed(fd, 5000), "connection %d past peer_connections_max stayed open", CAP + i);
		if (fd >= 0)
			close(fd);
	}
	for (int i = 0; i < CAP; i++) {
		snprintf(what, sizeof(what), "connection %d of %d", i + 1, CAP);
		raw_health(fds[i], what);
	}
	ck_assert_int_eq((int)raw_stat(fds[0], "connections.refused_peer_cap"), EXTRA);
	ck_assert_int_eq((int)raw_stat(fds[0], "connections.open"), CAP);
	/* one closes: room for one more */
	close(fds[CAP - 1]);
	wait_open(fds[0], CAP - 1);
	fds[CAP - 1] = sp_connect(&d);
	ck_assert(fds[CAP - 1] >= 0);
	raw_health(fds[CAP - 1], "a connection after one closed");
	for (int i = 0; i < CAP; i++)
		close(fds[i]);
	dh_stop(&d);
}
END_TEST

/* ---- close loops with requests in flight, then SIGTERM ---- */

START_TEST(t_close_loops)
{
	/* CI: 3 rounds of 320; the figure by hand: HOSTILE_CLOSE_ROUNDS=20 HOSTILE_CLOSE_LOOPS=600 */
	enum { PER = 6, DRAIN_S = 1 };
	const char *er = getenv("HOSTILE_CLOSE_ROUNDS"), *el = getenv("HOSTILE_CLOSE_LOOPS");
	const int ROUNDS = er && atoi(er) > 0 ? atoi(er) : 3, LOOPS = el && atoi(el) > 0 ? atoi(el) : 320;
	static float bx[BIG_ROWS * 4];
	tsd_tensor x = DH_F32("x", bx, BIG_ROWS, 4);
	nng_msg *h = request("{\"id\":1,\"verb\":\"health\"}", NULL);
	nng_msg *inf = request("{\"id\":2,\"verb\":\"infer\",\"model\":\"big\"}", &x);
	for (int round = 0; round < ROUNDS; round++) {
		dh_daemon d = {0};
		/* no connection cap: connections leaked by nng (below) must not lock us out */
		dh_start(&d, "{\"drain_seconds\":1,\"peer_connections_max\":0}");
		tsd_client *c = dh_client_nng(&d);
		load_models(c, true);
		dh_client_close(c);
		for (int i = 0; i < LOOPS; i++) {
			int fd = sp_connect(&d);
			ck_assert(fd >= 0);
			for (uint32_t k = 1; k <= PER; k++) {
				nng_msg *m = k % 3 ? h : inf;
				if (sp_send(fd, k, nng_msg_body(m), nng_msg_len(m), 1000))
					break;
			}
			if (i % 2) /* half with a partly sent message as well */
				sp_send(fd, 99, nng_msg_body(inf), nng_msg_len(inf) / 2, 100);
			close(fd);
		}
		/* still serving, and the closed connections are gone */
		double tc = now_ms();
		int fd = sp_connect_kept(&d, 10000);
		printf("hostileconn: round %d: a new connection kept after %.0f ms\n", round, now_ms() - tc);
		raw_health(fd, "after the close loops");
		/* Debian's nng 1.5.2 now and then never reaps a pipe closed with a receive pending
		 * (its reaper waits on rep0's receive aio left on the ipc pipe's queue), and every
		 * pipe closed after it stays open: counted, not asserted (docs/isolation/connections.md) */
		double t1 = now_ms(), open;
		while ((open = raw_stat(fd, "connections.open")) > 1 && now_ms() - t1 < 2000)
			usleep(20000);
		printf("hostileconn: round %d: %.0f connections still open 2 s after %d closed\n", round, open - 1, LOOPS);
		/* one more with requests in flight as the signal comes */
		for (uint32_t k = 1; k <= PER; k++)
			sp_send(fd, k, nng_msg_body(inf), nng_msg_len(inf), 1000);
		double t0 = now_ms();
		dh_stop(&d);
		double took = now_ms() - t0;
		close(fd);
		printf("hostileconn: round %d: %d close loops, SIGTERM to exit %.0f ms (drain_seconds %d)\n", round, LOOPS,
		       took, DRAIN_S);
		ck_assert_msg(took < DRAIN_S * 1000.0 + EXIT_SLACK_MS, "round %d: exit took %.0f ms after SIGTERM, bound %.1f s",
			      round, took, DRAIN_S + EXIT_SLACK_MS / 1000.0);
	}
	nng_msg_free(h);
	nng_msg_free(inf);
}
END_TEST

/* ---- half-sent messages that stall ---- */

static long rss_bytes(tsd_client *c)
{
	return (long)dh_stat(c, "process.rss_bytes");
}

START_TEST(t_half_messages)
{
	enum { CAP = 8, STALLERS = 24 };
	const size_t sent = (size_t)16 << 20, announced = (size_t)64 << 20;
	dh_daemon d = {0};
	dh_start(&d, "{\"peer_connections_max\":8}");
	tsd_client *c = dh_client_nng(&d);
	load_models(c, false);
	/* the harness's start-up client gone: ours is the only connection */
	double t0 = now_ms();
	while (dh_stat(c, "connections.open") > 1 && now_ms() - t0 < 10000)
		usleep(20000);
	long rss0 = rss_bytes(c);
	unsigned char *junk = calloc(1, sent);
	ck_assert(junk);
	memset(junk, 'j', sent);
	int fds[STALLERS], open = 0;
	for (int i = 0; i < STALLERS; i++) {
		fds[i] = sp_connect(&d);
		if (fds[i] < 0)
			continue;
		unsigned char hd[13] = {1};
		put_be(hd + 1, announced + 4, 8);
		put_be(hd + 9, 0x80000001u, 4);
		if (write_all(fds[i], hd, sizeof(hd), 2000) || write_all(fds[i], junk, sent, 2000)) {
			close(fds[i]);
			fds[i] = -1;
			continue;
		}
		open++;
	}
	free(junk);
	usleep(200000);
	long rss1 = rss_bytes(c);
	double p99 = timed_calls(c, 200, "another client while half messages stall");
	long grown = rss1 - rss0, bound = (long)(CAP - 1) * (long)sent + (64l << 20);
	printf("hostileconn: %d of %d stalling connections kept, each %zu MiB into %zu MiB: RSS +%ld MiB (bound %ld MiB)\n",
	       open, STALLERS, sent >> 20, announced >> 20, grown >> 20, bound >> 20);
	ck_assert_msg(open <= CAP - 1, "%d stalling connections accepted past peer_connections_max %d", open, CAP);
	ck_assert_msg(!SAN_RSS || grown < bound, "RSS grew %ld MiB with half messages stalled, bound %ld MiB", grown >> 20, bound >> 20);
	ck_assert_msg(p99 < P99_BOUND_MS, "p99 %.2f ms while half messages stall (bound %.0f ms)", p99, P99_BOUND_MS);
	for (int i = 0; i < STALLERS; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

Suite *hostileconn_suite(void)
{
	Suite *s = suite_create("hostileconn");
	dh_add_test(s, "nonreader_health", t_nonreader_health, 120);
	dh_add_test(s, "nonreader_infer", t_nonreader_infer, 120);
	dh_add_test(s, "reply_timeout", t_reply_timeout, 60);
	dh_add_test(s, "refused_unparsed", t_refused_unparsed, 60);
	dh_add_test(s, "peer_cap", t_peer_cap, 60);
	dh_add_test(s, "close_loops", t_close_loops, 120);
	dh_add_test(s, "half_messages", t_half_messages, 60);
	return s;
}
