/* test_client.c: the client library (clients/, include/tensord/client.h) against a fake daemon:
 * an in-process REP socket on an ipc:// address that decodes with the protocol library and
 * echoes tensors, fails, stalls, garbles or answers with another id on request. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include <tensord/client.h>
#include "protocol/message.h"
#include "suites.h"
#include "testutil.h"

#define TIMEOUT_MS 200

typedef struct fake {
	char dir[64];
	char url[128];
	nng_socket sock;
	pthread_t thread;
} fake;

static void *to_msg(void *arg, size_t size)
{
	nng_msg **m = arg;
	return nng_msg_alloc(m, size) ? NULL : nng_msg_body(*m);
}

/* The reply header to request m (decoded as st), by verb. */
static cJSON *answer_header(const proto_msg *m, tsd_status st, const char *why)
{
	if (st != TSD_OK)
		return proto_reply_header(NULL, st, why);
	if (!strcmp(m->verb, "fail"))
		return proto_reply_header(m, TSD_UNKNOWN_MODEL, "no model \"m\"");
	if (!strcmp(m->verb, "slow"))
		usleep(3 * TIMEOUT_MS * 1000);
	cJSON *h = proto_reply_header(m, TSD_OK, NULL);
	if (!strcmp(m->verb, "wrongid"))
		cJSON_ReplaceItemInObjectCaseSensitive(h, "id", cJSON_CreateNumber(999));
	if (!strcmp(m->verb, "hello")) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(m->json, "version");
		const cJSON *who = cJSON_GetObjectItemCaseSensitive(m->json, "client");
		if (!cJSON_IsNumber(v) || v->valuedouble != TSD_PROTOCOL_VERSION ||
		    !cJSON_IsString(who)) {
			cJSON_Delete(h);
			return proto_reply_header(m, TSD_VERSION_MISMATCH, "speak version 1");
		}
		cJSON_AddNumberToObject(h, "protocol", TSD_PROTOCOL_VERSION);
		cJSON_AddStringToObject(h, "daemon", "fake");
	}
	return h;
}

/* The fake daemon's answer to req: the request's tensors echoed back under the header. */
static nng_msg *answer(nng_msg *req)
{
	proto_msg *m = calloc(1, sizeof(*m));
	proto_err err = {0};
	nng_msg *rep = NULL;
	tsd_status st =
		proto_decode(nng_msg_body(req), nng_msg_len(req), 1 << 20, PROTO_REQUEST, m, &err);
	if (st == TSD_OK && !strcmp(m->verb, "garbage")) {
		if (!nng_msg_alloc(&rep, 0))
			nng_msg_append(rep, "nope", 4);
		proto_msg_free(m);
		free(m);
		return rep;
	}
	cJSON *h = answer_header(m, st, err.msg);
	proto_out outs[PROTO_MAX_TENSORS];
	for (int i = 0; st == TSD_OK && i < m->ntensors; i++)
		outs[i] = (proto_out){m->tensors[i].name, m->tensors[i].dtype, m->tensors[i].ndim,
				      m->tensors[i].shape, m->tensors[i].data};
	void *buf;
	size_t len;
	proto_encode(h, outs, st == TSD_OK ? m->ntensors : 0, 0, to_msg, &rep, &buf, &len, &err);
	cJSON_Delete(h);
	proto_msg_free(m);
	free(m);
	return rep;
}

static void *fake_main(void *arg)
{
	fake *f = arg;
	nng_msg *req, *rep;
	while (!nng_recvmsg(f->sock, &req, 0)) {
		rep = answer(req);
		nng_msg_free(req);
		if (rep && nng_sendmsg(f->sock, rep, 0))
			nng_msg_free(rep);
	}
	return NULL; /* the socket was closed */
}

static void fake_start(fake *f)
{
	strcpy(f->dir, "/tmp/tsd_client_XXXXXX");
	ck_assert(mkdtemp(f->dir));
	snprintf(f->url, sizeof(f->url), "ipc://%s/d.sock", f->dir);
	ck_assert_int_eq(nng_rep0_open(&f->sock), 0);
	ck_assert_int_eq(nng_listen(f->sock, f->url, NULL, 0), 0);
	ck_assert_int_eq(pthread_create(&f->thread, NULL, fake_main, f), 0);
}

static void fake_stop(fake *f)
{
	char path[128];
	nng_close(f->sock);
	pthread_join(f->thread, NULL);
	snprintf(path, sizeof(path), "%s/d.sock", f->dir);
	unlink(path);
	rmdir(f->dir);
}

static tsd_client *open_ok(const fake *f)
{
	char err[256] = "";
	tsd_client *c = tsd_client_open(f->url, TIMEOUT_MS, err, sizeof(err));
	ck_assert_msg(c, "open %s: %s", f->url, err);
	return c;
}

/* A fake daemon started and a client connected to it. */
static tsd_client *fake_client(fake *f)
{
	fake_start(f);
	return open_ok(f);
}

static void fake_done(fake *f, tsd_client *c)
{
	tsd_client_close(c);
	fake_stop(f);
}

static cJSON *verb(const char *v)
{
	cJSON *h = cJSON_CreateObject();
	cJSON_AddStringToObject(h, "verb", v);
	return h;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

START_TEST(roundtrip_tensors)
{
	fake f;
	tsd_client *c = fake_client(&f);
	float x[6] = {1, -2, 3.5f, 4, 5, 6e-3f};
	int64_t k[4] = {-1, 0, 1, (int64_t)1 << 50};
	uint8_t b[3] = {1, 0, 1};
	tsd_tensor ts[4] = {
		{.name = "x", .dtype = TSD_F32, .ndim = 2, .shape = {2, 3}, .data = x},
		{.name = "k", .dtype = TSD_I64, .ndim = 1, .shape = {4}, .data = k},
		{.name = "b", .dtype = TSD_BOOL, .ndim = 3, .shape = {1, 3, 1}, .data = b},
		{.name = "empty", .dtype = TSD_F16, .ndim = 2, .shape = {0, 5}, .data = NULL},
	};
	cJSON *h = verb("echo");
	tsd_reply *r = NULL;
	tsd_status s = tsd_client_call(c, h, ts, 4, &r);
	ck_assert_msg(s == TSD_OK && r, "call: %s: %s", tsd_status_name(s),
		      tsd_client_message(c, r));
	ck_assert_int_eq(tsd_reply_status(r), TSD_OK);
	ck_assert_ptr_null(tsd_reply_error(r));
	ck_assert_int_eq(tsd_reply_ntensors(r), 4);
	for (int i = 0; i < 4; i++) {
		const tsd_tensor *t = tsd_reply_find(r, ts[i].name);
		ck_assert_msg(t, "no tensor %s in the reply", ts[i].name);
		ck_assert_int_eq(t->dtype, ts[i].dtype);
		ck_assert_int_eq(t->ndim, ts[i].ndim);
		size_t n = tsd_dtype_size(t->dtype);
		for (int d = 0; d < t->ndim; d++) {
			ck_assert_int_eq(t->shape[d], ts[i].shape[d]);
			n *= (size_t)t->shape[d];
		}
		ck_assert_uint_eq(t->nbytes, n);
		ck_assert_msg(!n || !memcmp(t->data, ts[i].data, n), "%s: bytes differ", t->name);
	}
	ck_assert_ptr_eq(tsd_reply_tensor(r, 0), tsd_reply_find(r, "x"));
	ck_assert_ptr_null(tsd_reply_tensor(r, 4));
	ck_assert_ptr_null(tsd_reply_find(r, "nope"));
	/* the reply's views outlive the client */
	tsd_client_close(c);
	ck_assert(!memcmp(tsd_reply_find(r, "x")->data, x, sizeof(x)));
	tsd_reply_free(r);
	cJSON_Delete(h);
	fake_stop(&f);
}
END_TEST

START_TEST(ids_echo)
{
	fake f;
	tsd_client *c = fake_client(&f);
	cJSON *h = verb("echo");
	tsd_reply *r;
	for (int i = 1; i <= 3; i++) { /* no id: 1, 2, 3 */
		ck_assert_int_eq(tsd_client_call(c, h, NULL, 0, &r), TSD_OK);
		const cJSON *id = cJSON_GetObjectItemCaseSensitive(tsd_reply_json(r), "id");
		ck_assert(cJSON_IsNumber(id));
		ck_assert_int_eq((int)id->valuedouble, i);
		tsd_reply_free(r);
	}
	ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(h, "id")); /* header not modified */
	cJSON_AddStringToObject(h, "id", "req-7");
	ck_assert_int_eq(tsd_client_call(c, h, NULL, 0, &r), TSD_OK);
	ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(tsd_reply_json(r), "id")->valuestring,
			 "req-7");
	tsd_reply_free(r);
	cJSON_ReplaceItemInObjectCaseSensitive(h, "id", cJSON_CreateNumber(1.5));
	ck_assert_int_eq(tsd_client_call(c, h, NULL, 0, &r), TSD_BAD_REQUEST);
	ck_assert_ptr_null(r);
	ck_assert_msg(strstr(tsd_client_error(c), "id"), "message: %s", tsd_client_error(c));
	cJSON_Delete(h);
	/* the header as text, and the reply's back as text */
	ck_assert_int_eq(tsd_client_call_text(c, "{\"verb\":\"echo\",\"id\":\"t-1\"}", NULL, 0, &r), TSD_OK);
	char *text = tsd_reply_text(r);
	ck_assert_msg(text && strstr(text, "\"id\":\"t-1\""), "reply text: %s", text ? text : "(null)");
	tsd_free(text);
	tsd_reply_free(r);
	ck_assert_int_eq(tsd_client_call_text(c, "[1,", NULL, 0, &r), TSD_BAD_REQUEST);
	ck_assert_ptr_null(r);
	ck_assert_msg(strstr(tsd_client_error(c), "not a JSON object"), "message: %s", tsd_client_error(c));
	fake_done(&f, c);
}
END_TEST

START_TEST(daemon_error)
{
	fake f;
	tsd_client *c = fake_client(&f);
	tsd_reply *r;
	ck_assert_int_eq(tsd_client_call_verb(c, "fail", &r), TSD_UNKNOWN_MODEL);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(tsd_reply_status(r), TSD_UNKNOWN_MODEL);
	ck_assert_str_eq(tsd_reply_error(r), "no model \"m\"");
	ck_assert_str_eq(tsd_client_message(c, r), "no model \"m\"");
	tsd_reply_free(r);
	/* a request the daemon cannot decode: a null id, accepted since it is an error */
	cJSON *h = cJSON_CreateObject();
	ck_assert_int_eq(tsd_client_call(c, h, NULL, 0, &r), TSD_BAD_REQUEST);
	ck_assert_ptr_nonnull(r);
	ck_assert_msg(strstr(tsd_reply_error(r), "verb"), "message: %s", tsd_reply_error(r));
	tsd_reply_free(r);
	cJSON_Delete(h);
	fake_done(&f, c);
}
END_TEST

START_TEST(bad_replies)
{
	fake f;
	tsd_client *c = fake_client(&f);
	tsd_reply *r;
	ck_assert_int_eq(tsd_client_call_verb(c, "wrongid", &r), TSD_INTERNAL);
	ck_assert_ptr_null(r);
	ck_assert_msg(strstr(tsd_client_error(c), "id 999") &&
			      strstr(tsd_client_error(c), "request 1"),
		      "message: %s", tsd_client_error(c));
	ck_assert_int_eq(tsd_client_call_verb(c, "garbage", &r), TSD_BAD_REQUEST);
	ck_assert_ptr_null(r);
	ck_assert_msg(strstr(tsd_client_error(c), "undecodable reply"), "message: %s",
		      tsd_client_error(c));
	/* the client still works after both */
	ck_assert_int_eq(tsd_client_call_verb(c, "echo", &r), TSD_OK);
	ck_assert_str_eq(tsd_client_error(c), "");
	tsd_reply_free(r);
	fake_done(&f, c);
}
END_TEST

START_TEST(bad_requests)
{
	fake f;
	tsd_client *c = fake_client(&f);
	tsd_reply *r;
	cJSON *arr = cJSON_CreateArray();
	ck_assert_int_eq(tsd_client_call(c, arr, NULL, 0, &r), TSD_BAD_REQUEST);
	ck_assert_ptr_null(r);
	cJSON_Delete(arr);
	cJSON *h = verb("echo");
	tsd_tensor t = {
		.name = "x", .dtype = TSD_DTYPE_COUNT, .ndim = 1, .shape = {1}, .data = "a"};
	ck_assert_int_eq(tsd_client_call(c, h, &t, 1, &r), TSD_BAD_REQUEST);
	ck_assert_ptr_null(r);
	ck_assert_msg(strstr(tsd_client_error(c), "dtype"), "message: %s", tsd_client_error(c));
	ck_assert_int_eq(tsd_client_call(c, h, &t, PROTO_MAX_TENSORS + 1, &r), TSD_BAD_REQUEST);
	cJSON_Delete(h);
	fake_done(&f, c);
}
END_TEST

START_TEST(no_daemon)
{
	char dir[] = "/tmp/tsd_client_XXXXXX", url[128], err[256] = "";
	ck_assert(mkdtemp(dir));
	snprintf(url, sizeof(url), "ipc://%s/absent.sock", dir);
	double t0 = now_s();
	tsd_client *c = tsd_client_open(url, TIMEOUT_MS, err, sizeof(err));
	ck_assert_ptr_null(c);
	ck_assert_msg(strstr(err, "cannot connect") && strstr(err, "absent.sock"), "message: %s",
		      err);
	ck_assert_msg(now_s() - t0 < 2.0, "took %.2f s", now_s() - t0);
	rmdir(dir);
	ck_assert_ptr_null(tsd_client_open("", TIMEOUT_MS, err, sizeof(err)));
	ck_assert_ptr_null(tsd_client_open("bogus://x", TIMEOUT_MS, NULL, 0));

	/* a daemon that goes away after the connect, and one that answers too late */
	fake f;
	fake_start(&f);
	c = open_ok(&f);
	tsd_reply *r;
	t0 = now_s();
	ck_assert_int_eq(tsd_client_call_verb(c, "slow", &r), TSD_TIMEOUT);
	ck_assert_ptr_null(r);
	ck_assert_msg(strstr(tsd_client_error(c), "no answer within 200 ms"), "message: %s",
		      tsd_client_error(c));
	ck_assert_msg(now_s() - t0 < 2.0, "took %.2f s", now_s() - t0);
	fake_stop(&f);
	t0 = now_s();
	tsd_status s = tsd_client_call_verb(c, "echo", &r);
	ck_assert_msg(s == TSD_TIMEOUT || s == TSD_INTERNAL, "status %s", tsd_status_name(s));
	ck_assert_ptr_null(r);
	ck_assert_msg(strstr(tsd_client_error(c), f.url), "message: %s", tsd_client_error(c));
	ck_assert_msg(now_s() - t0 < 2.0, "took %.2f s", now_s() - t0);
	tsd_client_close(c);
}
END_TEST

START_TEST(hello)
{
	fake f;
	tsd_client *c = fake_client(&f);
	tsd_reply *r;
	tsd_status s = tsd_client_hello(c, &r);
	ck_assert_msg(s == TSD_OK, "hello: %s: %s", tsd_status_name(s), tsd_client_message(c, r));
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(tsd_reply_json(r), "protocol");
	ck_assert(cJSON_IsNumber(p) && p->valuedouble == TSD_PROTOCOL_VERSION);
	ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(tsd_reply_json(r), "daemon")->valuestring,
			 "fake");
	tsd_reply_free(r);
	fake_done(&f, c);
}
END_TEST

START_TEST(default_url)
{
	char u[64];
	ck_assert(tsd_client_default_url("tcp://h:1", "/run/user/5", u, sizeof(u)));
	ck_assert_str_eq(u, "tcp://h:1");
	ck_assert(tsd_client_default_url("", "/run/user/5", u, sizeof(u)));
	ck_assert_str_eq(u, "unix:///run/user/5/tensord/tensord.sock");
	ck_assert(tsd_client_default_url(NULL, "relative", u, sizeof(u)));
	ck_assert_str_eq(u, "unix:///run/tensord/tensord.sock");
	ck_assert(tsd_client_default_url(NULL, NULL, u, sizeof(u)));
	ck_assert_str_eq(u, "unix:///run/tensord/tensord.sock");
	ck_assert(!tsd_client_default_url(NULL, NULL, u, 10));
}
END_TEST

Suite *client_suite(void)
{
	const TTest *const tests[] = {
		roundtrip_tensors, ids_echo,  daemon_error, bad_replies,
		bad_requests,	   no_daemon, hello,	    default_url,
	};
	return tu_suite("client", tests, (int)(sizeof(tests) / sizeof(tests[0])), 30);
}
