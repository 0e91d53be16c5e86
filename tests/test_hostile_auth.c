/* test_hostile_auth.c: the bearer token of tcp:// (suite `hostileauth`, issue 25 finding 10,
 * docs/isolation/auth.md): the token's reading rules and constant-time compare; live daemons
 * with tcp_token_file (tcp without, with a wrong and with the right token; ipc unaffected; a
 * guessing connection closed; SIGHUP re-reads the file), the starts that must fail (a file
 * readable by others, tcp off loopback without a token), /metrics off loopback. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon_harness.h"
#include <nng/protocol/reqrep0/rep.h> /* needs nng.h first */
#include "protocol/token.h"
#include "suites.h"

#define TOKEN "s3cr3t-t0ken-for-tests-0123456789"
#define WRONG "not-the-token-but-just-as-long-xx"

static void write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	ck_assert_int_eq(chmod(path, mode), 0);
}


/* ---- the token's rules ---- */

START_TEST(t_token_eq)
{
	proto_token t;
	char err[256];
	ck_assert_int_eq(proto_token_set(&t, "0123456789abcdef", 16, "test", err, sizeof err), 0);
	ck_assert(proto_token_eq(&t, "0123456789abcdef", 16));
	ck_assert(!proto_token_eq(&t, "0123456789abcdeX", 16));
	ck_assert(!proto_token_eq(&t, "X123456789abcdef", 16));
	ck_assert(!proto_token_eq(&t, "0123456789abcde", 15));
	ck_assert(!proto_token_eq(&t, "0123456789abcdef0", 17));
	ck_assert(!proto_token_eq(&t, "", 0));
	proto_token_clear(&t);
	ck_assert(!proto_token_eq(&t, "", 0)); /* no token matches nothing */
	ck_assert_int_eq(proto_token_set(&t, "0123456789abcd\001f", 16, "test", err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "control character"));
}
END_TEST

START_TEST(t_token_file)
{
	char dir[] = "/tmp/tsd_auth_XXXXXX", path[256], err[512];
	proto_token t = {0};
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/token", dir);
	ck_assert_int_eq(proto_token_read(&t, path, err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, path));
	write_file(path, "0123456789abcdef  \nsecond line\n", 0600);
	ck_assert_int_eq(proto_token_read(&t, path, err, sizeof err), 0);
	ck_assert_uint_eq(t.len, 16);
	ck_assert_str_eq(t.text, "0123456789abcdef");
	write_file(path, "0123456789abcdef\n", 0604);
	ck_assert_int_eq(proto_token_read(&t, path, err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "others"));
	ck_assert_ptr_null(strstr(err, "0123456789abcdef")); /* never the token */
	write_file(path, "short\n", 0600);
	ck_assert_int_eq(proto_token_read(&t, path, err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "at least"));
	char *big = malloc(PROTO_TOKEN_MAX + 10);
	memset(big, 'a', PROTO_TOKEN_MAX + 5);
	big[PROTO_TOKEN_MAX + 5] = '\0';
	write_file(path, big, 0600);
	ck_assert_int_eq(proto_token_read(&t, path, err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "longer"));
	big[PROTO_TOKEN_MAX] = '\n'; /* exactly the limit */
	write_file(path, big, 0640);
	free(big);
	ck_assert_int_eq(proto_token_read(&t, path, err, sizeof err), 0);
	ck_assert_uint_eq(t.len, PROTO_TOKEN_MAX);
	ck_assert_str_eq(t.text + PROTO_TOKEN_MAX - 4, "aaaa");
	unlink(path);
	rmdir(dir);
}
END_TEST

/* The header the client library sends to url with the environment as it is: a REP socket
 * listening there receives one health request (the call then given up). */
static cJSON *header_sent(const char *url)
{
	nng_socket rep;
	ck_assert_int_eq(nng_rep0_open(&rep), 0);
	ck_assert_int_eq(nng_socket_set_ms(rep, NNG_OPT_RECVTIMEO, 10000), 0);
	int rv = nng_listen(rep, url, NULL, 0);
	ck_assert_msg(rv == 0, "listen %s: %s", url, nng_strerror(rv));
	char err[512] = "";
	tsd_client *c = tsd_client_open(url, 10000, err, sizeof err);
	ck_assert_msg(c, "open %s: %s", url, err);
	cJSON *h = cJSON_CreateObject();
	cJSON_AddStringToObject(h, "verb", "health");
	tsd_call *k = NULL;
	ck_assert_int_eq(tsd_client_submit(c, h, NULL, 0, NULL, NULL, &k), TSD_OK);
	cJSON_Delete(h);
	nng_msg *m = NULL;
	ck_assert_int_eq(nng_recvmsg(rep, &m, 0), 0);
	proto_msg pm;
	proto_err pe;
	ck_assert_int_eq(proto_decode(nng_msg_body(m), nng_msg_len(m), 1 << 20, PROTO_REQUEST, &pm, &pe), TSD_OK);
	cJSON *got = cJSON_Duplicate(pm.json, true);
	proto_msg_free(&pm);
	nng_msg_free(m);
	tsd_call_free(k);
	dh_client_close(c);
	dh_raw_close(rep);
	return got;
}

/* The library sends the token on tcp:// only; a token it cannot take fails the open. */
START_TEST(t_client_sends)
{
	char dir[] = "/tmp/tsd_auth_XXXXXX", path[256], ipc[300], tcp[64], err[512];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/token", dir);
	snprintf(ipc, sizeof ipc, "ipc://%s/s.sock", dir);
	write_file(path, TOKEN "\n", 0600);
	unsetenv("TENSORD_TOKEN");
	setenv("TENSORD_TOKEN_FILE", path, 1);
	snprintf(tcp, sizeof tcp, "tcp://127.0.0.1:%d", dh_free_port());
	cJSON *h = header_sent(tcp);
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(h, "token");
	ck_assert_msg(cJSON_IsString(t) && !strcmp(t->valuestring, TOKEN), "tcp: no token sent");
	cJSON_Delete(h);
	h = header_sent(ipc);
	ck_assert_msg(!cJSON_GetObjectItemCaseSensitive(h, "token"), "ipc: a token was sent");
	cJSON_Delete(h);
	unsetenv("TENSORD_TOKEN_FILE");
	setenv("TENSORD_TOKEN", WRONG, 1);
	snprintf(tcp, sizeof tcp, "tcp://127.0.0.1:%d", dh_free_port());
	h = header_sent(tcp);
	t = cJSON_GetObjectItemCaseSensitive(h, "token");
	ck_assert_msg(cJSON_IsString(t) && !strcmp(t->valuestring, WRONG), "tcp: TENSORD_TOKEN not sent");
	cJSON_Delete(h);
	/* refused before anything is sent: a file others can read, a short token */
	chmod(path, 0644);
	setenv("TENSORD_TOKEN_FILE", path, 1);
	ck_assert_ptr_null(tsd_client_open("tcp://127.0.0.1:1", 1000, err, sizeof err));
	ck_assert_msg(strstr(err, "accessible by others") && !strstr(err, TOKEN), "open: %s", err);
	unsetenv("TENSORD_TOKEN_FILE");
	setenv("TENSORD_TOKEN", "short", 1);
	ck_assert_ptr_null(tsd_client_open("tcp://127.0.0.1:1", 1000, err, sizeof err));
	ck_assert_msg(strstr(err, "TENSORD_TOKEN") && strstr(err, "at least"), "open: %s", err);
	unsetenv("TENSORD_TOKEN");
	unlink(path);
	rmdir(dir);
}
END_TEST

/* ---- live ---- */

/* d started with tcp on a free port of 127.0.0.1 (its url in tcp) and tcp_token_file (mode
 * 0600, holding TOKEN) in its directory, at path. */
static void start_with_token(dh_daemon *d, char *tcp, size_t tcplen, char *path, size_t pathlen)
{
	dh_prepare(d);
	snprintf(path, pathlen, "%s/token", d->dir);
	write_file(path, TOKEN "\n", 0600);
	snprintf(tcp, tcplen, "tcp://127.0.0.1:%d", dh_free_port());
	char extra[1024];
	snprintf(extra, sizeof extra, "{\"tcp_listen\":[\"%s\"],\"tcp_token_file\":\"%s\"}", tcp, path);
	dh_start(d, extra);
}

static tsd_client *open_tcp(const char *url)
{
	char err[512] = "";
	tsd_client *c = tsd_client_open(url, DH_TIMEOUT_MS, err, sizeof err);
	ck_assert_msg(c, "open %s: %s", url, err);
	return c;
}

/* model.list on c: want's status; the message holds needle (NULL: not looked at) and never a
 * token. (health needs no token: probes carry none.) */
static void expect_list(tsd_client *c, tsd_status want, const char *needle, const char *what)
{
	tsd_reply *r = NULL;
	tsd_status s = tsd_client_call_verb(c, "model.list", &r);
	const char *msg = tsd_client_message(c, r);
	msg = msg ? msg : "";
	ck_assert_msg(s == want, "%s: model.list %s (%s), want %s", what, tsd_status_name(s), msg, tsd_status_name(want));
	if (needle)
		ck_assert_msg(strstr(msg, needle), "%s: \"%s\" does not say \"%s\"", what, msg, needle);
	ck_assert_msg(!strstr(msg, TOKEN) && !strstr(msg, WRONG), "%s: the message echoes a token: %s", what, msg);
	tsd_reply_free(r);
}

static void clear_env(void)
{
	unsetenv("TENSORD_TOKEN_FILE");
	unsetenv("TENSORD_TOKEN");
}

/* An identity-like linear model: y = x W^T + b, W [2,2], b [2]. */
#define ID_SPEC                                                                                          \
	"{\"name\":\"id\",\"graph\":{\"nodes\":[{\"id\":\"x\",\"op\":\"input\",\"dtype\":\"float32\",\"shape\":[-1,2]}," \
	"{\"id\":\"W\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[2,2]},"                           \
	"{\"id\":\"b\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[2]},"                              \
	"{\"id\":\"y\",\"op\":\"linear\",\"in\":[\"x\",\"W\",\"b\"]}],\"outputs\":[\"y\"]}}"

START_TEST(t_live_token)
{
	dh_daemon d = {0};
	char tcp[64], path[400];
	clear_env();
	start_with_token(&d, tcp, sizeof tcp, path, sizeof path);

	tsd_client *c = open_tcp(tcp); /* no token */
	expect_list(c, TSD_UNAUTHORISED, "token missing", "tcp without a token");
	tsd_reply *hr = NULL; /* health is answered without one: balancers' probes carry none */
	ck_assert_msg(tsd_client_call_verb(c, "health", &hr) == TSD_OK, "health without a token: %s",
		      tsd_client_message(c, hr));
	tsd_reply_free(hr);
	dh_client_close(c);

	setenv("TENSORD_TOKEN", WRONG, 1);
	c = open_tcp(tcp);
	expect_list(c, TSD_UNAUTHORISED, "token does not match", "tcp with a wrong token");
	dh_client_close(c);

	setenv("TENSORD_TOKEN_FILE", path, 1); /* the file wins over TENSORD_TOKEN */
	c = open_tcp(tcp);
	expect_list(c, TSD_OK, NULL, "tcp with the right token");
	float W[4] = {1, 0, 0, 2}, b[2] = {0.5f, -1}, x[4] = {1, 2, 3, 4}, got[4];
	tsd_tensor w[2] = {DH_F32("W", W, 2, 2), DH_F32("b", b, 2)};
	dh_load(c, ID_SPEC, w, 2);
	char why[256];
	tsd_status s = dh_infer(c, "id", NULL, x, 2, 2, got, 4, why, sizeof why);
	ck_assert_msg(s == TSD_OK, "infer over tcp: %s: %s", tsd_status_name(s), why);
	const float want[4] = {1.5f, 3, 3.5f, 7};
	for (int i = 0; i < 4; i++)
		ck_assert_msg(got[i] == want[i], "y[%d] = %g, want %g", i, got[i], want[i]);

	/* ipc: credentials only; the token is never sent there, a wrong one set changes nothing */
	setenv("TENSORD_TOKEN", WRONG, 1);
	unsetenv("TENSORD_TOKEN_FILE");
	tsd_client *ci = dh_client(&d);
	expect_list(ci, TSD_OK, NULL, "ipc");
	ck_assert_int_eq((int)dh_stat(ci, "connections.auth_refused"), 2);
	ck_assert_int_eq((int)dh_stat(ci, "rejected.unauthorised"), 2);

	/* SIGHUP reads the file again: the old token is refused, the new one taken */
	write_file(path, "the-rotated-token-0123456789\n", 0600);
	ck_assert_int_eq(kill(d.pid, SIGHUP), 0);
	int tries = 0;
	for (tsd_status st = TSD_OK; st == TSD_OK && tries < 500; tries++) { /* the old one, until refused */
		tsd_reply *r = NULL;
		st = tsd_client_call_verb(c, "model.list", &r);
		tsd_reply_free(r);
		if (st == TSD_OK)
			usleep(10000);
	}
	ck_assert_msg(tries < 500, "the old token still works 5 s after SIGHUP");
	dh_client_close(c);
	setenv("TENSORD_TOKEN", "the-rotated-token-0123456789", 1);
	c = open_tcp(tcp);
	expect_list(c, TSD_OK, NULL, "tcp with the rotated token");
	dh_client_close(c);

	ck_assert_msg(!dh_file_has(d.err_path, TOKEN) && !dh_file_has(d.err_path, "rotated-token"),
		      "the daemon's log holds the token");
	dh_client_close(ci);
	clear_env();
	dh_stop(&d);
}
END_TEST

/* DMN_TOKEN_TRIES (3) wrong tokens answered on one connection; the next request closes it. */
START_TEST(t_guessing_closed)
{
	dh_daemon d = {0};
	char tcp[64], path[400];
	clear_env();
	start_with_token(&d, tcp, sizeof tcp, path, sizeof path);
	setenv("TENSORD_TOKEN", WRONG, 1);
	tsd_client *c = open_tcp(tcp);
	for (int i = 0; i < 3; i++)
		expect_list(c, TSD_UNAUTHORISED, "token does not match", "a guess");
	tsd_reply *r = NULL;
	tsd_status s = tsd_client_call_verb(c, "model.list", &r);
	ck_assert_msg(s == TSD_SHUTTING_DOWN && !r, "the 4th guess: %s (%s), want the connection closed",
		      tsd_status_name(s), tsd_client_message(c, r));
	tsd_reply_free(r);
	dh_client_close(c);
	clear_env();
	tsd_client *ci = dh_client(&d);
	ck_assert_int_eq((int)dh_stat(ci, "connections.closed_token"), 1);
	ck_assert_int_eq((int)dh_stat(ci, "connections.auth_refused"), 4);
	ck_assert_msg(dh_file_has(d.err_path, "without the right token"), "the closing was not logged");
	dh_client_close(ci);
	dh_stop(&d);
}
END_TEST

/* Starts that must fail: a token file readable by others; tcp off loopback with no token file. */
START_TEST(t_start_refused)
{
	dh_daemon d = {0};
	char path[400], err2[400], extra[1024];
	dh_prepare(&d);
	snprintf(path, sizeof path, "%s/token", d.dir);
	snprintf(err2, sizeof err2, "%s/stderr2", d.dir);
	write_file(path, TOKEN "\n", 0644);
	snprintf(extra, sizeof extra, "{\"tcp_listen\":[\"tcp://127.0.0.1:%d\"],\"tcp_token_file\":\"%s\"}", dh_free_port(),
		 path);
	dh_write_config(&d, extra);
	dh_expect_start_fails(&d, err2, path, "a token file of mode 0644");
	ck_assert_msg(dh_file_has(err2, "accessible by others"), "the refusal does not say why");
	ck_assert_msg(!dh_file_has(err2, TOKEN), "the refusal shows the token");
	snprintf(extra, sizeof extra, "{\"tcp_listen\":[\"tcp://0.0.0.0:%d\"],\"tcp_allow_remote\":true}", dh_free_port());
	dh_write_config(&d, extra);
	dh_expect_start_fails(&d, err2, "tcp_token_file", "tcp on 0.0.0.0 without a token file");
	ck_assert_msg(dh_file_has(err2, "tcp_allow_remote"), "the refusal does not name tcp_allow_remote");
	/* loopback tcp needs no token file; a relative one is refused */
	snprintf(extra, sizeof extra, "{\"tcp_listen\":[\"tcp://127.0.0.1:%d\"],\"tcp_token_file\":\"token\"}",
		 dh_free_port());
	dh_write_config(&d, extra);
	dh_expect_start_fails(&d, err2, "absolute", "a relative tcp_token_file");
}
END_TEST

/* The status code of GET path on 127.0.0.1:port (HTTP/1.0), or -1. */
static int http_get(int port, const char *path)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	char req[256], buf[64] = "";
	int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", path);
	int code = -1;
	if (write(fd, req, (size_t)n) == n && read(fd, buf, sizeof buf - 1) > 12)
		sscanf(buf, "HTTP/1.%*d %d", &code);
	close(fd);
	return code;
}

/* http_listen on 0.0.0.0: /metrics 403 unless metrics_remote; /healthz served either way. */
START_TEST(t_metrics_remote)
{
	for (int remote = 0; remote < 2; remote++) {
		dh_daemon d = {0};
		char extra[256];
		int port = dh_free_port();
		snprintf(extra, sizeof extra,
			 "{\"http_listen\":\"http://0.0.0.0:%d\",\"tcp_allow_remote\":true,\"metrics_remote\":%s}", port,
			 remote ? "true" : "false");
		dh_start(&d, extra);
		int m = http_get(port, "/metrics"), h = http_get(port, "/healthz");
		ck_assert_msg(m == (remote ? 200 : 403), "metrics_remote %d: /metrics answered %d", remote, m);
		ck_assert_msg(h == 200, "metrics_remote %d: /healthz answered %d", remote, h);
		dh_stop(&d);
	}
}
END_TEST

Suite *hostileauth_suite(void)
{
	Suite *s = suite_create("hostileauth");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, t_token_eq);
	tcase_add_test(tc, t_token_file);
	tcase_add_test(tc, t_client_sends);
	suite_add_tcase(s, tc);
	dh_add_test(s, "live_token", t_live_token, 120);
	dh_add_test(s, "guessing_closed", t_guessing_closed, 120);
	dh_add_test(s, "start_refused", t_start_refused, 180);
	dh_add_test(s, "metrics_remote", t_metrics_remote, 120);
	return s;
}
