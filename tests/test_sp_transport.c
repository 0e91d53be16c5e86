/* test_sp_transport.c: nng's SP wire protocol as the daemon's own transport serves it on ipc://
 * and tcp:// (suite `sptransport`; daemon/transport_stream.c): libtensord's nng REQ client over
 * tcp, the backtrace of a multi-hop request sent back whole, a handshake or a message that
 * stalls closed after frame_timeout_ms on both, half messages held to partial_bytes_max, and a
 * peer that is not a REQ or whose backtrace never ends closed. The raw clients write SP by hand
 * (nng 1.5 src/sp/transport/{ipc,tcp}: an 8-byte handshake, then per message [ipc: 0x01] + a
 * big-endian u64 length + the REQ's backtrace + the body). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
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

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A raw SP peer: its socket and whether it frames as ipc (a type byte first). */
typedef struct sp_peer {
	int fd;
	bool ipc;
} sp_peer;

/* Connect to url (ipc:// or tcp://127.0.0.1:P) without any handshake. */
static sp_peer sp_dial(const char *url)
{
	sp_peer p = {.fd = -1, .ipc = !strncmp(url, "ipc://", 6)};
	if (p.ipc) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", url + 6);
		p.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ck_assert_msg(connect(p.fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect %s: %s", url, strerror(errno));
	} else {
		struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
					 .sin_port = htons((uint16_t)atoi(strrchr(url, ':') + 1))};
		p.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ck_assert_msg(connect(p.fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect %s: %s", url, strerror(errno));
	}
	return p;
}

/* Send our handshake as protocol proto (0x30: a REQ) and check the daemon's (a REP). */
static void sp_hello(sp_peer p, int proto)
{
	unsigned char hs[8] = {0, 'S', 'P', 0, (unsigned char)(proto >> 8), (unsigned char)proto, 0, 0}, got[8];
	ck_assert(send(p.fd, hs, 8, MSG_NOSIGNAL) == 8);
	ck_assert_msg(dh_recv_all(p.fd, got, 8, 5000), "no handshake from the daemon");
	ck_assert_msg(!got[0] && got[1] == 'S' && got[2] == 'P' && !got[3] && !got[4] && got[5] == 0x31 && !got[6] &&
			      !got[7],
		      "the daemon's handshake is not a REP0's");
}

/* The first n bytes of an SP message of len bytes (prefix only). */
static size_t sp_prefix(sp_peer p, uint64_t len, unsigned char *out)
{
	size_t o = 0;
	if (p.ipc)
		out[o++] = 1;
	for (int i = 0; i < 8; i++)
		out[o++] = (unsigned char)(len >> (8 * (7 - i)));
	return o;
}

/* One message: the backtrace words (big-endian) then body; a small one in one write (the daemon
 * may refuse the frame from its backtrace and close before a second write could land). */
static void sp_send(sp_peer p, const uint32_t *bt, int nbt, const void *body, size_t len)
{
	unsigned char h[9 + 4 * 16 + 256];
	ck_assert(nbt <= 16);
	size_t o = sp_prefix(p, len + 4 * (size_t)nbt, h);
	for (int i = 0; i < nbt; i++)
		for (int k = 0; k < 4; k++)
			h[o++] = (unsigned char)(bt[i] >> (8 * (3 - k)));
	if (len && len <= 256) {
		memcpy(h + o, body, len);
		o += len;
		len = 0;
	}
	ck_assert(send(p.fd, h, o, MSG_NOSIGNAL) == (ssize_t)o);
	if (len)
		ck_assert(send(p.fd, body, len, MSG_NOSIGNAL) == (ssize_t)len);
}

/* One reply: its whole payload (backtrace + body, malloc'd, *len), or NULL. */
static unsigned char *sp_recv(sp_peer p, size_t *len, int timeout_ms)
{
	unsigned char h[9];
	size_t hl = p.ipc ? 9 : 8;
	if (!dh_recv_all(p.fd, h, hl, timeout_ms))
		return NULL;
	ck_assert(!p.ipc || h[0] == 1);
	uint64_t n = 0;
	for (size_t i = hl - 8; i < hl; i++)
		n = n << 8 | h[i];
	ck_assert(n < (1u << 24));
	unsigned char *b = malloc(n ? n : 1);
	ck_assert(b);
	if (!dh_recv_all(p.fd, b, n, timeout_ms)) {
		free(b);
		return NULL;
	}
	*len = n;
	return b;
}

/* Whether the daemon closes p within timeout_ms (anything before the end is read and dropped). */
static bool sp_closed(sp_peer p, int timeout_ms)
{
	unsigned char sink[4096];
	double until = now_ms() + timeout_ms;
	for (;;) {
		struct pollfd q = {p.fd, POLLIN, 0};
		int left = (int)(until - now_ms());
		if (left <= 0 || poll(&q, 1, left) != 1)
			return false;
		ssize_t r = recv(p.fd, sink, sizeof(sink), 0);
		if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN))
			return true;
	}
}

static nng_msg *encode(const char *json)
{
	cJSON *h = cJSON_Parse(json);
	ck_assert(h);
	nng_msg *m = dh_encode(h, NULL, 0);
	cJSON_Delete(h);
	return m;
}

/* d started with tcp on a free loopback port (its url in tcp) and extra config. */
static void start_tcp(dh_daemon *d, char *tcp, size_t tcplen, const char *extra)
{
	char cfg[512];
	snprintf(tcp, tcplen, "tcp://127.0.0.1:%d", dh_free_port());
	snprintf(cfg, sizeof(cfg), "{\"tcp_listen\":[\"%s\"]%s%s}", tcp, extra[0] ? "," : "", extra);
	dh_start(d, cfg);
}

static void wait_stat(tsd_client *c, const char *path, double want, int timeout_ms)
{
	double t0 = now_ms(), v;
	while ((v = dh_stat(c, path)) != want && now_ms() - t0 < timeout_ms)
		usleep(20000);
	ck_assert_msg(v == want, "%s is %.0f, want %.0f", path, v, want);
}

/* libtensord's nng client (REQ over tcp://) against the daemon's own SP server */
START_TEST(t_tcp_client)
{
	dh_daemon d = {0};
	char tcp[64];
	start_tcp(&d, tcp, sizeof(tcp), "");
	char err[256];
	tsd_client *c = tsd_client_open_wait(tcp, 10000, 5000, err, sizeof(err));
	ck_assert_msg(c, "tcp client: %s", err);
	const float w[4] = {1, -2, 0.5f, 4};
	tsd_tensor wt = DH_F32("w", w, 4);
	dh_load(c, TINY_SPEC, &wt, 1);
	for (int i = 0; i < 50; i++) {
		float x[8], y[8];
		for (int k = 0; k < 8; k++)
			x[k] = (float)(i * 8 + k);
		char why[256] = "";
		ck_assert_msg(dh_infer(c, "tiny", NULL, x, 2, 4, y, 8, why, sizeof(why)) == TSD_OK, "infer over tcp: %s", why);
		for (int k = 0; k < 8; k++)
			ck_assert_float_eq(y[k], x[k] * w[k % 4]);
	}
	ck_assert_double_ge(dh_stat(c, "connections.tcp.open"), 1);
	ck_assert_double_eq(dh_stat(c, "connections.tcp.frames_refused"), 0);
	tsd_client_close(c);
	dh_stop(&d);
}
END_TEST

/* a two-hop backtrace (a device's hop id, then the REQ's id) comes back whole with the reply */
START_TEST(t_backtrace)
{
	dh_daemon d = {0};
	char tcp[64];
	start_tcp(&d, tcp, sizeof(tcp), "");
	const char *urls[2] = {d.nng_url, tcp};
	nng_msg *m = encode("{\"id\":5,\"verb\":\"health\"}");
	for (int u = 0; u < 2; u++) {
		sp_peer p = sp_dial(urls[u]);
		sp_hello(p, 0x30);
		const uint32_t bt[2] = {0x00000007u, 0x80000009u};
		sp_send(p, bt, 2, nng_msg_body(m), nng_msg_len(m));
		size_t len;
		unsigned char *r = sp_recv(p, &len, 10000);
		ck_assert_msg(r, "%s: no reply", urls[u]);
		ck_assert_uint_gt(len, 8 + 8);
		static const unsigned char want[8] = {0, 0, 0, 7, 0x80, 0, 0, 9};
		ck_assert_msg(!memcmp(r, want, 8), "%s: the backtrace did not come back", urls[u]);
		proto_msg pm;
		proto_err e;
		memset(&pm, 0, sizeof(pm));
		ck_assert_int_eq(proto_decode(r + 8, len - 8, (size_t)1 << 24, PROTO_REPLY, &pm, &e), TSD_OK);
		ck_assert_int_eq(pm.status, TSD_OK);
		proto_msg_free(&pm);
		free(r);
		close(p.fd);
	}
	nng_msg_free(m);
	dh_stop(&d);
}
END_TEST

/* what is not an SP REQ peer, or a backtrace with no end within 8 hops: closed, counted */
START_TEST(t_refused_peers)
{
	dh_daemon d = {0};
	char tcp[64];
	start_tcp(&d, tcp, sizeof(tcp), "");
	tsd_client *c = dh_client(&d);
	const char *urls[2] = {d.nng_url, tcp};
	for (int u = 0; u < 2; u++) {
		sp_peer p = sp_dial(urls[u]);
		unsigned char got[8];
		static const unsigned char rep[8] = {0, 'S', 'P', 0, 0, 0x31, 0, 0}; /* a REP, not a REQ */
		ck_assert(send(p.fd, rep, 8, MSG_NOSIGNAL) == 8);
		ck_assert(dh_recv_all(p.fd, got, 8, 5000));
		ck_assert_msg(sp_closed(p, 5000), "%s: a REP peer was kept", urls[u]);
		close(p.fd);
		p = sp_dial(urls[u]);
		sp_hello(p, 0x30);
		uint32_t bt[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}; /* no word with the top bit */
		sp_send(p, bt, 9, "TSD1\0\0\0\0", 8);
		ck_assert_msg(sp_closed(p, 5000), "%s: a backtrace of 9 hops without an end was kept", urls[u]);
		close(p.fd);
	}
	wait_stat(c, "connections.ipc.frames_refused", 2, 5000);
	wait_stat(c, "connections.tcp.frames_refused", 2, 5000);
	float x[4] = {0}, y[4];
	char why[256] = "";
	ck_assert_int_eq(dh_infer(c, "nothing", NULL, x, 1, 4, y, 4, why, sizeof(why)), TSD_UNKNOWN_MODEL);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

/* a silent peer (no handshake) and a message that stalls half-way: both closed after
 * frame_timeout_ms, on ipc and on tcp, while another client is answered */
START_TEST(t_stalls_time_out)
{
	dh_daemon d = {0};
	char tcp[64];
	start_tcp(&d, tcp, sizeof(tcp), "\"frame_timeout_ms\":300");
	tsd_client *c = dh_client(&d);
	const char *urls[2] = {d.nng_url, tcp};
	sp_peer silent[2], half[2];
	for (int u = 0; u < 2; u++) {
		silent[u] = sp_dial(urls[u]);
		half[u] = sp_dial(urls[u]);
		sp_hello(half[u], 0x30);
		unsigned char h[9 + 4 + 100] = {0};
		size_t o = sp_prefix(half[u], 4 + 100000, h);
		h[o] = 0x80; /* the request id */
		o += 4;
		memcpy(h + o, "TSD1", 4);
		ck_assert(send(half[u].fd, h, o + 100, MSG_NOSIGNAL) == (ssize_t)(o + 100));
	}
	double t0 = now_ms();
	for (int u = 0; u < 2; u++) {
		ck_assert_msg(sp_closed(silent[u], 5000), "%s: a peer without a handshake was kept", urls[u]);
		ck_assert_msg(sp_closed(half[u], 5000), "%s: a stalled half message was kept", urls[u]);
		close(silent[u].fd);
		close(half[u].fd);
	}
	double took = now_ms() - t0;
	printf("sptransport: 2 silent and 2 half-sent connections (ipc, tcp) closed %.0f ms after they stalled "
	       "(frame_timeout_ms 300)\n", took);
	ck_assert_msg(took >= 200, "closed after %.0f ms, before frame_timeout_ms", took);
	ck_assert_double_eq(dh_stat(c, "connections.ipc.closed_frame_timeout"), 2);
	ck_assert_double_eq(dh_stat(c, "connections.tcp.closed_frame_timeout"), 2);
	ck_assert_double_eq(dh_stat(c, "connections.ipc.partial_bytes"), 0);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

/* partial_bytes_max holds across SP connections: of two 3 MiB messages begun under a 4 MiB
 * budget, one is received and the other waits, until the first one's peer goes */
START_TEST(t_partial_budget)
{
	dh_daemon d = {0};
	dh_start(&d, "{\"partial_bytes_max\":4194304}");
	tsd_client *c = dh_client(&d);
	const uint64_t body = 3u << 20;
	unsigned char *chunk = calloc(1, 1 << 20);
	ck_assert(chunk);
	memcpy(chunk, "TSD1", 4);
	sp_peer p[2];
	for (int i = 0; i < 2; i++) {
		p[i] = sp_dial(d.nng_url);
		sp_hello(p[i], 0x30);
		unsigned char h[13];
		size_t o = sp_prefix(p[i], body + 4, h);
		h[o] = 0x80;
		h[o + 1] = h[o + 2] = 0;
		h[o + 3] = (unsigned char)(i + 1);
		ck_assert(send(p[i].fd, h, o + 4, MSG_NOSIGNAL) == (ssize_t)(o + 4));
		ck_assert(send(p[i].fd, chunk, 1 << 20, MSG_NOSIGNAL) == 1 << 20);
	}
	wait_stat(c, "connections.ipc.partial_bytes", (double)body, 5000);
	ck_assert_double_ge(dh_stat(c, "connections.ipc.budget_waits"), 1);
	close(p[0].fd);
	/* the waiter is granted the budget: still one message's worth */
	usleep(200000);
	wait_stat(c, "connections.ipc.partial_bytes", (double)body, 5000);
	close(p[1].fd);
	wait_stat(c, "connections.ipc.partial_bytes", 0, 5000);
	free(chunk);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

Suite *sptransport_suite(void)
{
	Suite *s = suite_create("sptransport");
	dh_add_test(s, "tcp_client", t_tcp_client, 60);
	dh_add_test(s, "backtrace", t_backtrace, 60);
	dh_add_test(s, "refused_peers", t_refused_peers, 60);
	dh_add_test(s, "stalls_time_out", t_stalls_time_out, 60);
	dh_add_test(s, "partial_budget", t_partial_budget, 60);
	return s;
}
