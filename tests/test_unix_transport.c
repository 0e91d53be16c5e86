/* test_unix_transport.c: the daemon's unix:// transport (suite `unixtransport`, issue 26) against
 * a live daemon, with a raw AF_UNIX client written here (frames: u32 little-endian length + one
 * TSD1 message, docs/PROTOCOL.md "unix:// framing"): health and infer with ids matched, 32
 * requests pipelined on one connection, a refused uid, malformed frames (each answered or
 * closed, and the daemon serving the next connection), a frame with a descriptor attached, a
 * client leaving with requests in flight, one that never reads, max_pending, and close loops
 * then SIGTERM. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "suites.h"

#define TINY_SPEC                                                                                        \
	"{\"name\":\"tiny\",\"graph\":{\"nodes\":[{\"id\":\"x\",\"op\":\"input\",\"dtype\":\"float32\",\"shape\":[-1,4]}," \
	"{\"id\":\"w\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[4]},"                               \
	"{\"id\":\"y\",\"op\":\"mul\",\"in\":[\"x\",\"w\"]}],\"outputs\":[\"y\"]}}"
#define BIG_ROWS 16384 /* 256 KiB in, 256 KiB out */
#define BIG_SPEC                                                                                         \
	"{\"name\":\"big\",\"graph\":{\"nodes\":[{\"id\":\"x\",\"op\":\"input\",\"dtype\":\"float32\",\"shape\":[16384,4]}," \
	"{\"id\":\"w\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[4]},"                               \
	"{\"id\":\"y\",\"op\":\"mul\",\"in\":[\"x\",\"w\"]}],\"outputs\":[\"y\"]}}"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define EXIT_SLACK_MS 4000.0
#else
#define EXIT_SLACK_MS 2000.0
#endif

static const float tiny_w[4] = {1, -2, 0.5f, 4};

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void load_models(const dh_daemon *d, bool big)
{
	tsd_client *c = dh_client(d);
	tsd_tensor w = DH_F32("w", tiny_w, 4);
	dh_load(c, TINY_SPEC, &w, 1);
	if (big)
		dh_load(c, BIG_SPEC, &w, 1);
	dh_client_close(c);
}

/* ---- a raw unix:// client ---- */

static int ux_connect(const dh_daemon *d)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert(fd >= 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	ck_assert(strlen(d->unix_path) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, d->unix_path, strlen(d->unix_path) + 1);
	ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect %s: %s", sa.sun_path,
		      strerror(errno));
	struct timeval tv = {.tv_sec = 20};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return fd;
}

/* All of buf written; false when the daemon closed (EPIPE, ECONNRESET). */
static bool ux_write(int fd, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

static void le32(unsigned char *b, uint32_t v)
{
	b[0] = (unsigned char)v;
	b[1] = (unsigned char)(v >> 8);
	b[2] = (unsigned char)(v >> 16);
	b[3] = (unsigned char)(v >> 24);
}

/* A request frame: header JSON text plus tensor x (NULL: none). The caller frees it. */
static nng_msg *req_msg(const char *json, const tsd_tensor *x)
{
	cJSON *h = cJSON_Parse(json);
	ck_assert_msg(h, "bad JSON %s", json);
	nng_msg *m = dh_encode(h, x, x ? 1 : 0);
	cJSON_Delete(h);
	return m;
}

static bool ux_send_msg(int fd, nng_msg *m)
{
	unsigned char pre[4];
	le32(pre, (uint32_t)nng_msg_len(m));
	bool ok = ux_write(fd, pre, 4) && ux_write(fd, nng_msg_body(m), nng_msg_len(m));
	nng_msg_free(m);
	return ok;
}

static bool ux_send_verb(int fd, int id, const char *verb)
{
	char js[128];
	snprintf(js, sizeof(js), "{\"id\":%d,\"verb\":\"%s\"}", id, verb);
	return ux_send_msg(fd, req_msg(js, NULL));
}

static bool ux_send_infer(int fd, int id, const char *model, const float *x, int64_t rows)
{
	char js[128];
	snprintf(js, sizeof(js), "{\"id\":%d,\"verb\":\"infer\",\"model\":\"%s\"}", id, model);
	tsd_tensor t = dh_f32("x", x, (const int64_t[]){rows, 4}, 2);
	return ux_send_msg(fd, req_msg(js, &t));
}

/* Exactly len bytes; 1, 0 at EOF or reset (closed), -1 on timeout. */
static int ux_read_all(int fd, void *buf, size_t len)
{
	unsigned char *p = buf;
	while (len) {
		ssize_t n = recv(fd, p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return -1;
		if (n <= 0)
			return 0;
		p += n;
		len -= (size_t)n;
	}
	return 1;
}

/* One reply frame decoded into *pm (its bytes kept in *keep, the caller frees both); its status,
 * or TSD_STATUS_COUNT when the connection closed or nothing came. */
static tsd_status ux_reply(int fd, proto_msg *pm, unsigned char **keep)
{
	unsigned char pre[4];
	memset(pm, 0, sizeof(*pm));
	*keep = NULL;
	if (ux_read_all(fd, pre, 4) != 1)
		return TSD_STATUS_COUNT;
	uint32_t len = (uint32_t)pre[0] | (uint32_t)pre[1] << 8 | (uint32_t)pre[2] << 16 | (uint32_t)pre[3] << 24;
	unsigned char *b = malloc(len ? len : 1);
	ck_assert(b);
	if (ux_read_all(fd, b, len) != 1) {
		free(b);
		return TSD_STATUS_COUNT;
	}
	proto_err e;
	tsd_status st = proto_decode(b, len, (size_t)1 << 30, PROTO_REPLY, pm, &e);
	ck_assert_msg(st == TSD_OK, "an undecodable reply: %s", e.msg);
	*keep = b;
	return pm->status;
}

/* One reply, its status and id checked; its error message into msg. */
static void ux_expect(int fd, tsd_status want, const char *id, char *msg, size_t msglen)
{
	proto_msg pm;
	unsigned char *keep;
	tsd_status st = ux_reply(fd, &pm, &keep);
	ck_assert_msg(st != TSD_STATUS_COUNT, "no reply (want %s)", tsd_status_name(want));
	ck_assert_msg(st == want, "status %s, want %s (%s)", tsd_status_name(st), tsd_status_name(want),
		      pm.error ? pm.error : "");
	if (id)
		ck_assert_str_eq(pm.id, id);
	else
		ck_assert_msg(!pm.id[0] || !strcmp(pm.id, "null"), "id %s, want null", pm.id);
	if (msg)
		snprintf(msg, msglen, "%s", pm.error ? pm.error : "");
	proto_msg_free(&pm);
	free(keep);
}

/* The daemon closes fd within ms (EOF or a reset on read). */
static void ux_expect_closed(int fd, double ms)
{
	double t0 = now_ms();
	unsigned char b[4096];
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int left = (int)(ms - (now_ms() - t0));
		ck_assert_msg(left > 0, "the daemon did not close the connection within %.0f ms", ms);
		if (poll(&p, 1, left) <= 0)
			continue;
		ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return;
	}
}

/* health on a new connection answers ok: the daemon still serves. */
static void health_ok(const dh_daemon *d)
{
	int fd = ux_connect(d);
	ck_assert(ux_send_verb(fd, 7, "health"));
	ux_expect(fd, TSD_OK, "7", NULL, 0);
	close(fd);
}

/* stats' number at path, over nng. */
static double stat_num(const dh_daemon *d, const char *path)
{
	tsd_client *c = dh_client_nng(d);
	double v = dh_stat(c, path);
	dh_client_close(c);
	return v;
}

/* Until stats' path equals want (at most ms). */
static void wait_stat(const dh_daemon *d, const char *path, double want, double ms)
{
	double t0 = now_ms(), v = NAN;
	while (now_ms() - t0 < ms) {
		if ((v = stat_num(d, path)) == want)
			return;
		usleep(20000);
	}
	ck_abort_msg("stats %s is %g, want %g", path, v, want);
}

/* ---- tests ---- */

START_TEST(t_health_infer)
{
	dh_daemon d = {0};
	dh_start(&d, NULL);
	load_models(&d, false);
	int fd = ux_connect(&d);
	ck_assert(ux_send_verb(fd, 41, "health"));
	ux_expect(fd, TSD_OK, "41", NULL, 0);
	const float x[8] = {1, 2, 3, 4, -1, -2, -3, -4};
	ck_assert(ux_send_infer(fd, 42, "tiny", x, 2));
	proto_msg pm;
	unsigned char *keep;
	ck_assert_int_eq(ux_reply(fd, &pm, &keep), TSD_OK);
	ck_assert_str_eq(pm.id, "42");
	ck_assert_int_eq(pm.ntensors, 1);
	ck_assert_int_eq((int)pm.tensors[0].nbytes, 32);
	const float *y = pm.tensors[0].data;
	for (int i = 0; i < 8; i++)
		ck_assert_float_eq_tol(y[i], x[i] * tiny_w[i % 4], 1e-6);
	proto_msg_free(&pm);
	free(keep);
	ck_assert_double_eq(stat_num(&d, "connections.unix.open"), 1);
	close(fd);
	wait_stat(&d, "connections.unix.open", 0, 5000);
	dh_stop(&d);
}
END_TEST

START_TEST(t_pipeline)
{
	dh_daemon d = {0};
	dh_start(&d, NULL);
	load_models(&d, false);
	int fd = ux_connect(&d);
	const float x[4] = {1, 2, 3, 4};
	/* infers (batched, on the executor) and health (answered on the loop) interleaved: replies
	 * come as they complete, each with its id */
	for (int i = 0; i < 32; i++)
		ck_assert(i % 4 == 3 ? ux_send_verb(fd, i, "health") : ux_send_infer(fd, i, "tiny", x, 1));
	int seen[32] = {0}, order[32];
	for (int k = 0; k < 32; k++) {
		proto_msg pm;
		unsigned char *keep;
		ck_assert_int_eq(ux_reply(fd, &pm, &keep), TSD_OK);
		int id = atoi(pm.id);
		ck_assert(id >= 0 && id < 32);
		ck_assert_msg(!seen[id]++, "id %d answered twice", id);
		order[k] = id;
		if (id % 4 != 3) {
			ck_assert_int_eq(pm.ntensors, 1);
			ck_assert_float_eq_tol(((const float *)pm.tensors[0].data)[3], 16.0f, 1e-6);
		}
		proto_msg_free(&pm);
		free(keep);
	}
	int out_of_order = 0;
	for (int k = 0; k < 32; k++)
		out_of_order += order[k] != k;
	fprintf(stderr, "unixtransport pipeline: %d of 32 replies out of request order\n", out_of_order);
	close(fd);
	dh_stop(&d);
}
END_TEST

/* max_pending 4: the transport stops reading past it and reads again as replies go; 32
 * pipelined requests on each of two connections are all answered */
START_TEST(t_pending_cap)
{
	dh_daemon d = {0};
	dh_start(&d, "{\"max_pending\": 4}");
	load_models(&d, false);
	const float x[4] = {1, 2, 3, 4};
	int fd[2] = {ux_connect(&d), ux_connect(&d)};
	for (int i = 0; i < 32; i++)
		for (int k = 0; k < 2; k++)
			ck_assert(ux_send_infer(fd[k], i, "tiny", x, 1));
	for (int k = 0; k < 2; k++) {
		int seen[32] = {0};
		for (int i = 0; i < 32; i++) {
			proto_msg pm;
			unsigned char *keep;
			ck_assert_int_eq(ux_reply(fd[k], &pm, &keep), TSD_OK);
			int id = atoi(pm.id);
			ck_assert(id >= 0 && id < 32 && !seen[id]++);
			proto_msg_free(&pm);
			free(keep);
		}
		close(fd[k]);
	}
	ck_assert_double_ge(stat_num(&d, "connections.unix.pending_waits"), 1);
	dh_stop(&d);
}
END_TEST

#define WIDE_SPEC                                                                                        \
	"{\"name\":\"wide\",\"graph\":{\"nodes\":[{\"id\":\"x\",\"op\":\"input\",\"dtype\":\"float32\",\"shape\":[-1,2048]}," \
	"{\"id\":\"w\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[2048]},"                               \
	"{\"id\":\"y\",\"op\":\"mul\",\"in\":[\"x\",\"w\"]}],\"outputs\":[\"y\"]}}"

/* partial_bytes_max 12000: a frame begun (~8.5 KB declared) holds the budget, so another
 * connection's frame of the same size waits unread until the first completes; then both are
 * answered */
START_TEST(t_partial_budget)
{
	dh_daemon d = {0};
	dh_start(&d, "{\"partial_bytes_max\": 12000}");
	static float w[2048], x[2048];
	for (int i = 0; i < 2048; i++)
		w[i] = x[i] = 1;
	tsd_client *c = dh_client(&d);
	tsd_tensor tw = DH_F32("w", w, 2048);
	dh_load(c, WIDE_SPEC, &tw, 1);
	dh_client_close(c);
	tsd_tensor tx = dh_f32("x", x, (const int64_t[]){1, 2048}, 2);
	nng_msg *ma = req_msg("{\"id\":1,\"verb\":\"infer\",\"model\":\"wide\"}", &tx);
	int a = ux_connect(&d), b = ux_connect(&d);
	unsigned char pre[4];
	le32(pre, (uint32_t)nng_msg_len(ma));
	ck_assert(ux_write(a, pre, 4) && ux_write(a, nng_msg_body(ma), 100));
	usleep(100000);
	ck_assert(ux_send_msg(b, req_msg("{\"id\":2,\"verb\":\"infer\",\"model\":\"wide\"}", &tx)));
	struct pollfd p = {.fd = b, .events = POLLIN};
	ck_assert_msg(poll(&p, 1, 400) == 0, "the second frame was read past partial_bytes_max");
	ck_assert_double_ge(stat_num(&d, "connections.unix.budget_waits"), 1);
	ck_assert(ux_write(a, (unsigned char *)nng_msg_body(ma) + 100, nng_msg_len(ma) - 100));
	nng_msg_free(ma);
	ux_expect(a, TSD_OK, "1", NULL, 0);
	ux_expect(b, TSD_OK, "2", NULL, 0);
	close(a);
	close(b);
	wait_stat(&d, "connections.unix.partial_bytes", 0, 5000);
	dh_stop(&d);
}
END_TEST

START_TEST(t_refused)
{
	dh_daemon d = {0};
	dh_start(&d, "{\"allowed_uids\": [4242424]}");
	ck_assert(d.refused);
	int fd = ux_connect(&d);
	ck_assert(ux_send_verb(fd, 5, "health"));
	ux_expect(fd, TSD_UNAUTHORISED, NULL, NULL, 0);
	ux_expect_closed(fd, 5000);
	close(fd);
	dh_stop(&d);
}
END_TEST

/* Raw bytes on a new connection: a reply with st (TSD_STATUS_COUNT: none expected), then the
 * connection closed; then another connection's health. */
static void bad_frame(const dh_daemon *d, const void *bytes, size_t len, tsd_status st, const char *needle)
{
	int fd = ux_connect(d);
	ux_write(fd, bytes, len); /* the daemon may close before it all went */
	if (st != TSD_STATUS_COUNT) {
		char msg[512];
		ux_expect(fd, st, NULL, msg, sizeof(msg));
		if (needle)
			ck_assert_msg(strstr(msg, needle), "error \"%s\" does not name %s", msg, needle);
	}
	ux_expect_closed(fd, 5000);
	close(fd);
	health_ok(d);
}

START_TEST(t_malformed)
{
	dh_daemon d = {0};
	dh_start(&d, "{\"max_message_bytes\": 1048576, \"max_header_bytes\": 4096}");
	unsigned char b[256];
	le32(b, 0);
	bad_frame(&d, b, 4, TSD_BAD_REQUEST, "frame length 0");
	le32(b, 3);
	memcpy(b + 4, "abc", 3);
	bad_frame(&d, b, 7, TSD_BAD_REQUEST, "frame length 3");
	le32(b, 2u << 20);
	bad_frame(&d, b, 4, TSD_TOO_LARGE, "max_message_bytes");
	/* a JSON length over max_header_bytes: refused on the prefix, the rest never read */
	le32(b, 100000);
	memcpy(b + 4, "TSD1", 4);
	le32(b + 8, 50000);
	bad_frame(&d, b, 12, TSD_TOO_LARGE, "max_header_bytes");
	/* garbage: not TSD1 */
	le32(b, 64);
	for (int i = 0; i < 64; i++)
		b[4 + i] = (unsigned char)(i * 37 + 11);
	bad_frame(&d, b, 68, TSD_BAD_REQUEST, "TSD1");
	/* an HTTP request: its first bytes read as a huge length */
	const char *http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	bad_frame(&d, http, strlen(http), TSD_TOO_LARGE, NULL);
	/* a TSD1 prefix with undecodable JSON: bad_request, id null, closed */
	const char *js = "{\"id\":1,\"verb\":";
	le32(b, (uint32_t)(8 + strlen(js)));
	memcpy(b + 4, "TSD1", 4);
	le32(b + 8, (uint32_t)strlen(js));
	memcpy(b + 12, js, strlen(js));
	bad_frame(&d, b, 12 + strlen(js), TSD_BAD_REQUEST, NULL);
	/* a half frame then a hang-up: nothing answered, its budget given back */
	int fd = ux_connect(&d);
	le32(b, 5000);
	memcpy(b + 4, "TSD1", 4);
	le32(b + 8, 20);
	ck_assert(ux_write(fd, b, 100));
	usleep(100000);
	ck_assert_double_eq(stat_num(&d, "connections.unix.partial_bytes"), 5000);
	close(fd);
	wait_stat(&d, "connections.unix.partial_bytes", 0, 5000);
	health_ok(&d);
	ck_assert_double_ge(stat_num(&d, "connections.unix.frames_refused"), 6); /* the bad JSON is the decoder's */
	dh_stop(&d);
}
END_TEST

START_TEST(t_half_silence)
{
	dh_daemon d = {0};
	dh_start(&d, "{\"frame_timeout_ms\": 300}");
	unsigned char b[16];
	/* only two bytes of the length, then a header's worth: both closed after frame_timeout_ms */
	for (int k = 0; k < 2; k++) {
		int fd = ux_connect(&d);
		le32(b, 5000);
		memcpy(b + 4, "TSD1", 4);
		le32(b + 8, 20);
		double t0 = now_ms();
		ck_assert(ux_write(fd, b, k ? 12 : 2));
		ux_expect_closed(fd, 10000);
		double dt = now_ms() - t0;
		ck_assert_msg(dt >= 250, "closed after %.0f ms, before frame_timeout_ms", dt);
		close(fd);
		health_ok(&d);
	}
	ck_assert_double_eq(stat_num(&d, "connections.unix.closed_frame_timeout"), 2);
	/* a connection that sends nothing at all is not timed: no frame begun */
	int idle = ux_connect(&d);
	usleep(700000);
	ck_assert(ux_send_verb(idle, 3, "health"));
	ux_expect(idle, TSD_OK, "3", NULL, 0);
	close(idle);
	dh_stop(&d);
}
END_TEST

START_TEST(t_fds)
{
	dh_daemon d = {0};
	dh_start(&d, NULL);
	int fd = ux_connect(&d);
	nng_msg *m = req_msg("{\"id\":\"with-fd\",\"verb\":\"health\"}", NULL);
	unsigned char pre[4];
	le32(pre, (uint32_t)nng_msg_len(m));
	int pfd[2];
	ck_assert_int_eq(pipe(pfd), 0);
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cm;
	memset(&cm, 0, sizeof(cm));
	struct iovec iov = {pre, 4};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof(cm.buf)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &pfd[0], sizeof(int));
	ck_assert_int_eq(sendmsg(fd, &mh, MSG_NOSIGNAL), 4);
	ck_assert(ux_write(fd, nng_msg_body(m), nng_msg_len(m)));
	nng_msg_free(m);
	char msg[256];
	ux_expect(fd, TSD_BAD_REQUEST, "with-fd", msg, sizeof(msg));
	ck_assert_msg(strstr(msg, "file descriptors"), "%s", msg);
	close(pfd[0]);
	/* the daemon closed its copy of the descriptor: the pipe's write end sees no reader */
	signal(SIGPIPE, SIG_IGN);
	double t0 = now_ms();
	while (write(pfd[1], "x", 1) == 1 && now_ms() - t0 < 5000)
		usleep(10000);
	ck_assert_int_eq(errno, EPIPE);
	close(pfd[1]);
	/* the stream is whole: the same connection goes on */
	ck_assert(ux_send_verb(fd, 8, "health"));
	ux_expect(fd, TSD_OK, "8", NULL, 0);
	close(fd);
	health_ok(&d);
	dh_stop(&d);
}
END_TEST

START_TEST(t_leave_inflight)
{
	dh_daemon d = {0};
	dh_start(&d, NULL);
	load_models(&d, true);
	static float x[BIG_ROWS * 4];
	for (int k = 0; k < 5; k++) {
		int fd = ux_connect(&d);
		for (int i = 0; i < 16; i++)
			ck_assert(ux_send_infer(fd, i, "big", x, BIG_ROWS));
		close(fd); /* with its requests in flight */
	}
	wait_stat(&d, "connections.unix.open", 0, 10000);
	health_ok(&d);
	const float one[4] = {1, 1, 1, 1};
	int fd = ux_connect(&d);
	ck_assert(ux_send_infer(fd, 99, "tiny", one, 1));
	ux_expect(fd, TSD_OK, "99", NULL, 0);
	close(fd);
	/* every request that arrived was answered or dropped: nothing is left held */
	double t0 = now_ms(), req = 0, done = -1;
	while (now_ms() - t0 < 20000) {
		tsd_client *c = dh_client(&d);
		req = dh_stat(c, "models.big.requests");
		done = dh_stat(c, "models.big.ok") + dh_stat(c, "models.big.cancelled") + dh_stat(c, "models.big.errors") +
		       dh_stat(c, "models.big.busy");
		dh_client_close(c);
		if (req == done)
			break;
		usleep(50000);
	}
	ck_assert_msg(req == done && req > 0, "big: %g requests, %g accounted for", req, done);
	double cancelled = stat_num(&d, "models.big.cancelled");
	fprintf(stderr, "unixtransport leave_inflight: %g of 80 big infers dropped (client gone)\n", cancelled);
	dh_stop(&d);
}
END_TEST

START_TEST(t_nonreader)
{
	dh_daemon d = {0};
	dh_start(&d, "{\"reply_timeout_ms\": 500, \"unsent_bytes_max\": 65536}");
	load_models(&d, true);
	static float x[BIG_ROWS * 4];
	int bad = ux_connect(&d);
	int rcv = 4096;
	setsockopt(bad, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	for (int i = 0; i < 24; i++)
		if (!ux_send_infer(bad, i, "big", x, BIG_ROWS))
			break;
	/* meanwhile another client is answered */
	int good = ux_connect(&d);
	const float one[4] = {1, 1, 1, 1};
	double t0 = now_ms();
	for (int i = 0; i < 20; i++) {
		ck_assert(ux_send_infer(good, 100 + i, "tiny", one, 1));
		char id[16];
		snprintf(id, sizeof(id), "%d", 100 + i);
		ux_expect(good, TSD_OK, id, NULL, 0);
		usleep(50000);
	}
	(void)t0;
	/* the non-reader was closed: a reply not taken within reply_timeout_ms */
	double waited = now_ms();
	while (stat_num(&d, "connections.unix.closed_reply_timeout") < 1 && now_ms() - waited < 10000)
		usleep(50000);
	ck_assert_double_ge(stat_num(&d, "connections.unix.closed_reply_timeout"), 1);
	close(bad);
	close(good);
	health_ok(&d);
	dh_stop(&d);
}
END_TEST

START_TEST(t_close_loops)
{
	dh_daemon d = {0};
	dh_start(&d, "{\"drain_seconds\": 2}");
	load_models(&d, false);
	const float x[4] = {1, 2, 3, 4};
	for (int k = 0; k < 200; k++) {
		int fd = ux_connect(&d);
		for (int i = 0; i < 8; i++)
			if (!(i % 3 ? ux_send_infer(fd, i, "tiny", x, 1) : ux_send_verb(fd, i, "health")))
				break;
		if (k % 2) { /* every other one reads a reply first */
			proto_msg pm;
			unsigned char *keep;
			ck_assert_int_eq(ux_reply(fd, &pm, &keep), TSD_OK);
			proto_msg_free(&pm);
			free(keep);
		}
		close(fd);
	}
	health_ok(&d);
	int fd = ux_connect(&d); /* one left open with requests in flight at the SIGTERM */
	for (int i = 0; i < 8; i++)
		ck_assert(ux_send_infer(fd, i, "tiny", x, 1));
	double t0 = now_ms();
	dh_stop(&d);
	double dt = now_ms() - t0;
	fprintf(stderr, "unixtransport close_loops: SIGTERM to exit %.0f ms\n", dt);
	ck_assert_msg(dt < 2000.0 + EXIT_SLACK_MS, "exit took %.0f ms (drain 2 s)", dt);
	close(fd);
}
END_TEST

Suite *unixtransport_suite(void)
{
	Suite *s = suite_create("unixtransport");
	dh_add_test(s, "health_infer", t_health_infer, 60);
	dh_add_test(s, "pipeline", t_pipeline, 60);
	dh_add_test(s, "pending_cap", t_pending_cap, 60);
	dh_add_test(s, "partial_budget", t_partial_budget, 60);
	dh_add_test(s, "refused", t_refused, 60);
	dh_add_test(s, "malformed", t_malformed, 120);
	dh_add_test(s, "half_silence", t_half_silence, 60);
	dh_add_test(s, "fds", t_fds, 60);
	dh_add_test(s, "leave_inflight", t_leave_inflight, 120);
	dh_add_test(s, "nonreader", t_nonreader, 120);
	dh_add_test(s, "close_loops", t_close_loops, 180);
	return s;
}
