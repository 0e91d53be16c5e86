/* test_client_live.c: the client library against the real tensord (suite `clientlive`, harness
 * in daemon_harness.h): threads sharing one client, hundreds of asynchronous calls in flight from
 * one thread (polled, waited for, called back, freed inside the callback, cancelled), reconnecting
 * after a restart and failing (never re-sending) a call whose daemon died, opening before the
 * daemon is there, and every typed verb. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tensord/verbs.h>
#include "daemon_harness.h"
#include "suites.h"

/* y = x W^T + b: x [-1,4], W [3,4], b [3], built with the graph builder. */
static float W[12], B[3];

static void fill(float *a, int n, unsigned seed)
{
	for (int i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		a[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
	}
}

static void lin_ref(const float *x, float *y)
{
	for (int o = 0; o < 3; o++) {
		double acc = B[o];
		for (int i = 0; i < 4; i++)
			acc += (double)x[i] * W[o * 4 + i];
		y[o] = (float)acc;
	}
}

static bool close3(const float *a, const float *b)
{
	for (int i = 0; i < 3; i++)
		if (!(fabsf(a[i] - b[i]) <= 1e-5f * (1 + fabsf(b[i]))))
			return false;
	return true;
}

static cJSON *lin_graph(void)
{
	tsd_graph *g = tsd_graph_create();
	int x = tsd_g_input(g, "x", TSD_F32, 2, (const int64_t[]){-1, 4});
	int w = tsd_g_param(g, "W", TSD_F32, 2, (const int64_t[]){3, 4});
	int b = tsd_g_param(g, "b", TSD_F32, 1, (const int64_t[]){3});
	tsd_graph_output(g, tsd_g_linear(g, x, w, b), "y");
	cJSON *j = tsd_graph_json(g);
	ck_assert_msg(j, "graph: %s", tsd_graph_error(g));
	tsd_graph_free(g);
	return j;
}

/* model.load of "lin" through tsd_model_load (weights in the message); train with sgd. */
static void load_lin(tsd_client *c, const char *train_json)
{
	fill(W, 12, 7);
	fill(B, 3, 8);
	cJSON *g = lin_graph(), *train = train_json ? cJSON_Parse(train_json) : NULL;
	tsd_tensor ws[2] = {DH_F32("W", W, 3, 4), DH_F32("b", B, 3)};
	tsd_batching bt = TSD_BATCHING_DEFAULT;
	bt.max = 8;
	bt.delay_us = 200;
	bt.buckets = (const int[]){1, 2, 4, 8};
	bt.nbuckets = 4;
	tsd_model_spec sp = {.name = "lin", .graph = g, .params = ws, .nparams = 2,
			     .inputs = (const char *const[]){"x"}, .ninputs = 1, .batching = &bt,
			     .train = train};
	tsd_reply *r;
	tsd_status s = tsd_model_load(c, &sp, &r);
	ck_assert_msg(s == TSD_OK, "model.load: %s: %s", tsd_status_name(s), tsd_client_message(c, r));
	tsd_reply_free(r);
	cJSON_Delete(g);
	cJSON_Delete(train);
}

/* x for request k: distinct per request, so a reply matched to the wrong call shows */
static void x_of(int k, float x[4])
{
	for (int i = 0; i < 4; i++)
		x[i] = (float)((k * 7 + i * 3) % 17) / 8.0f - 1.0f + (float)k * 1e-3f;
}

static bool infer_ok(tsd_reply *r, const float x[4], char *why, size_t cap)
{
	const tsd_tensor *y = r ? tsd_reply_find(r, "y") : NULL;
	float got[3], want[3];
	if (!y || y->dtype != TSD_F32 || y->nbytes != sizeof(got))
		return snprintf(why, cap, "no float32 [1,3] output y"), false;
	memcpy(got, y->data, sizeof(got));
	lin_ref(x, want);
	if (!close3(got, want))
		return snprintf(why, cap, "y = %g %g %g, want %g %g %g", got[0], got[1], got[2], want[0],
				want[1], want[2]), false;
	return true;
}

/* ---- threads sharing one client ---- */

#define NTHREADS 8
#define PER_THREAD 150

typedef struct worker {
	tsd_client *c;
	int t;
	int ok;
	char why[256];
} worker;

static void *worker_main(void *arg)
{
	worker *w = arg;
	for (int i = 0; i < PER_THREAD && !w->why[0]; i++) {
		int k = w->t * PER_THREAD + i;
		float x[4];
		x_of(k, x);
		tsd_tensor in = DH_F32("x", x, 1, 4);
		tsd_reply *r = NULL;
		tsd_status s;
		if (i % 10 == 3) { /* a failure of this thread's own: its message stays its own */
			s = tsd_client_call_text(w->c, "[1]", NULL, 0, &r);
			if (s != TSD_BAD_REQUEST || r || !strstr(tsd_client_error(w->c), "not a JSON object"))
				snprintf(w->why, sizeof(w->why), "bad header: %s, message '%s'",
					 tsd_status_name(s), tsd_client_error(w->c));
			continue;
		}
		s = tsd_infer(w->c, "lin", &in, 1, NULL, &r);
		if (s != TSD_OK)
			snprintf(w->why, sizeof(w->why), "infer %d: %s: %s", k, tsd_status_name(s),
				 tsd_client_message(w->c, r));
		else if (strcmp(tsd_client_error(w->c), ""))
			snprintf(w->why, sizeof(w->why), "an ok call left the message '%s'",
				 tsd_client_error(w->c));
		else if (infer_ok(r, x, w->why, sizeof(w->why)))
			w->ok++;
		tsd_reply_free(r);
	}
	return NULL;
}

START_TEST(t_threads)
{
	dh_daemon d = {0};
	dh_start(&d, NULL);
	tsd_client *c = dh_client(&d);
	load_lin(c, NULL);
	pthread_t th[NTHREADS];
	worker w[NTHREADS];
	for (int t = 0; t < NTHREADS; t++) {
		w[t] = (worker){.c = c, .t = t};
		ck_assert_int_eq(pthread_create(&th[t], NULL, worker_main, &w[t]), 0);
	}
	int ok = 0;
	for (int t = 0; t < NTHREADS; t++) {
		pthread_join(th[t], NULL);
		ck_assert_msg(!w[t].why[0], "thread %d: %s", t, w[t].why);
		ok += w[t].ok;
	}
	ck_assert_int_eq(ok, NTHREADS * (PER_THREAD - PER_THREAD / 10));
	tsd_client_close(c);
	dh_stop(&d);
}
END_TEST

/* ---- asynchronous calls from one thread ---- */

#define NASYNC 600

typedef struct async_ctx {
	atomic_int called;      /* callbacks run */
	atomic_int freed_ok;    /* calls freed inside their callback whose reply was right */
	atomic_int bad;         /* wrong replies seen in callbacks */
	float x[NASYNC][4];
} async_ctx;

static async_ctx actx;

static void on_done(tsd_call *call, void *arg)
{
	int k = (int)(intptr_t)arg;
	atomic_fetch_add(&actx.called, 1);
	if (k % 3 != 2)
		return; /* collected by the main thread */
	tsd_reply *r;
	char why[256];
	if (tsd_call_take(call, &r) == TSD_OK && infer_ok(r, actx.x[k], why, sizeof(why)))
		atomic_fetch_add(&actx.freed_ok, 1);
	else
		atomic_fetch_add(&actx.bad, 1);
	tsd_reply_free(r);
	tsd_call_free(call); /* inside its own callback: freed after it returns */
}

START_TEST(t_async)
{
	dh_daemon d = {0};
	dh_start(&d, "{\"client_inflight_max\": 4096}");
	tsd_client *c = dh_client(&d);
	load_lin(c, NULL);
	static tsd_call *calls[NASYNC];
	memset(&actx, 0, sizeof(actx));
	for (int k = 0; k < NASYNC; k++) {
		x_of(k, actx.x[k]);
		tsd_tensor in = DH_F32("x", actx.x[k], 1, 4);
		/* k % 3: 0 polled without a callback, 1 waited for with one, 2 freed in it */
		tsd_status s = tsd_infer_submit(c, "lin", &in, 1, NULL, k % 3 ? on_done : NULL,
						(void *)(intptr_t)k, &calls[k]);
		ck_assert_msg(s == TSD_OK, "submit %d: %s: %s", k, tsd_status_name(s), tsd_client_error(c));
		if (k % 3 == 2)
			calls[k] = NULL; /* the callback owns it */
	}
	/* poll the first kind until every one is done, then wait for the second */
	int pending = 1;
	for (int spins = 0; pending && spins < 30000; spins++) {
		pending = 0;
		for (int k = 0; k < NASYNC; k += 3)
			pending += !tsd_call_done(calls[k]);
		if (pending)
			usleep(1000);
	}
	ck_assert_int_eq(pending, 0);
	for (int k = 0; k < NASYNC; k++) {
		if (!calls[k])
			continue;
		ck_assert(tsd_call_wait(calls[k], 30000));
		tsd_reply *r;
		char why[256] = "";
		tsd_status s = tsd_call_take(calls[k], &r);
		ck_assert_msg(s == TSD_OK, "call %d: %s: %s", k, tsd_status_name(s), tsd_call_error(calls[k]));
		ck_assert_msg(infer_ok(r, actx.x[k], why, sizeof(why)), "call %d: %s", k, why);
		tsd_reply *again;
		ck_assert_int_eq(tsd_call_take(calls[k], &again), TSD_OK);
		ck_assert_ptr_null(again); /* taken once */
		tsd_reply_free(r);
		tsd_call_free(calls[k]);
	}
	for (int spins = 0; atomic_load(&actx.called) < 2 * NASYNC / 3 && spins < 5000; spins++)
		usleep(1000);
	ck_assert_int_eq(atomic_load(&actx.called), 2 * NASYNC / 3);
	ck_assert_int_eq(atomic_load(&actx.bad), 0);
	ck_assert_int_eq(atomic_load(&actx.freed_ok), NASYNC / 3);

	/* a cancelled call completes at once with cancelled (or its reply, if that came first) */
	tsd_call *k;
	float x[4] = {0};
	tsd_tensor in = DH_F32("x", x, 1, 4);
	ck_assert_int_eq(tsd_infer_submit(c, "lin", &in, 1, NULL, NULL, NULL, &k), TSD_OK);
	tsd_call_cancel(k);
	ck_assert(tsd_call_wait(k, 5000));
	tsd_status s = tsd_call_status(k);
	ck_assert_msg(s == TSD_CANCELLED || s == TSD_OK, "cancelled call: %s", tsd_status_name(s));
	tsd_call_free(k);
	/* a local failure: no call, no callback, the message on the thread */
	ck_assert_int_eq(tsd_client_submit(c, NULL, NULL, 0, on_done, NULL, &k),
			 TSD_BAD_REQUEST);
	ck_assert_ptr_null(k);
	ck_assert_msg(strstr(tsd_client_error(c), "not a JSON object"), "%s", tsd_client_error(c));
	/* freeing a call still in flight cancels it */
	ck_assert_int_eq(tsd_infer_submit(c, "lin", &in, 1, NULL, NULL, NULL, &k), TSD_OK);
	tsd_call_free(k);
	/* let the daemon's answer to it arrive before the socket closes: nng 1.5's nng_close of a
	 * REQ socket hung once (under TSan) when the two met, an nng bug (see dh_raw_close) */
	usleep(100000);
	tsd_client_close(c);
	dh_stop(&d);
}
END_TEST

/* ---- reconnecting ---- */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static tsd_status health(tsd_client *c)
{
	tsd_reply *r;
	tsd_status s = tsd_health(c, &r);
	tsd_reply_free(r);
	return s;
}

/* A synchronous call on its own thread: its status and its thread's message. */
typedef struct sync_call {
	tsd_client *c;
	tsd_status s;
	char msg[512];
} sync_call;

static void *sync_main(void *arg)
{
	sync_call *sc = arg;
	tsd_reply *r;
	sc->s = tsd_client_call_verb(sc->c, "model.list", &r);
	snprintf(sc->msg, sizeof(sc->msg), "%s", tsd_client_message(sc->c, r));
	tsd_reply_free(r);
	return NULL;
}

START_TEST(t_reconnect)
{
	dh_daemon d = {0};
	dh_start(&d, NULL);
	char err[256] = "";
	tsd_client *c = tsd_client_open(d.url, 3000, err, sizeof(err));
	ck_assert_msg(c, "open: %s", err);
	uint64_t n0;
	ck_assert_int_eq(health(c), TSD_OK);
	ck_assert(tsd_client_connected(c, &n0));

	/* stopped: a call waits for a connection until its timeout, then says so */
	dh_stop_keep(&d);
	double t0 = now_s();
	tsd_status s = health(c);
	ck_assert_msg(s == TSD_TIMEOUT, "health with no daemon: %s: %s", tsd_status_name(s),
		      tsd_client_error(c));
	ck_assert_msg(strstr(tsd_client_error(c), "no connection"), "%s", tsd_client_error(c));
	ck_assert_msg(now_s() - t0 < 6, "took %.1f s", now_s() - t0);

	/* a new daemon on the same address: the same client carries on */
	dh_start(&d, NULL);
	s = health(c);
	ck_assert_msg(s == TSD_OK, "health after the restart: %s: %s", tsd_status_name(s),
		      tsd_client_error(c));
	uint64_t n1;
	ck_assert(tsd_client_connected(c, &n1));
	ck_assert_msg(n1 > n0, "connections %llu then %llu", (unsigned long long)n0, (unsigned long long)n1);

	/* a daemon that dies with a call in flight: the call fails at once with the reason */
	ck_assert_int_eq(kill(d.pid, SIGSTOP), 0);
	tsd_call *k;
	cJSON *h = cJSON_Parse("{\"verb\":\"model.list\"}");
	ck_assert_int_eq(tsd_client_submit(c, h, NULL, 0, NULL, NULL, &k), TSD_OK);
	cJSON_Delete(h);
	sync_call sc = {.c = c};
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, sync_main, &sc), 0);
	usleep(200 * 1000); /* sent: the kernel holds them for the stopped daemon */
	ck_assert(!tsd_call_done(k));
	t0 = now_s();
	dh_kill(&d);
	ck_assert(tsd_call_wait(k, 2500));
	ck_assert_msg(now_s() - t0 < 2.5, "took %.1f s", now_s() - t0);
	ck_assert_msg(tsd_call_status(k) == TSD_SHUTTING_DOWN, "in flight: %s: %s",
		      tsd_status_name(tsd_call_status(k)), tsd_call_error(k));
	ck_assert_msg(strstr(tsd_call_error(k), "lost") && strstr(tsd_call_error(k), "not re-sent"),
		      "%s", tsd_call_error(k));
	tsd_call_free(k);
	pthread_join(th, NULL); /* the synchronous one the same */
	ck_assert_msg(sc.s == TSD_SHUTTING_DOWN && strstr(sc.msg, "not re-sent"), "sync call: %s: %s",
		      tsd_status_name(sc.s), sc.msg);
	ck_assert_msg(now_s() - t0 < 2.5, "took %.1f s", now_s() - t0);

	/* ... and neither is sent again to the next daemon */
	dh_start(&d, NULL);
	ck_assert_int_eq(health(c), TSD_OK);
	tsd_reply *r;
	ck_assert_int_eq(tsd_stats(c, &r), TSD_OK);
	const cJSON *req = cJSON_GetObjectItemCaseSensitive(tsd_reply_json(r), "requests");
	ck_assert_msg(cJSON_IsObject(req), "stats without requests");
	ck_assert_msg(!cJSON_GetObjectItemCaseSensitive(req, "model.list"),
		      "the lost model.list reached the new daemon");
	tsd_reply_free(r);
	tsd_client_close(c);
	dh_stop(&d);
}
END_TEST

/* a client opened before its daemon: waiting for it, or not at all */
START_TEST(t_connect_wait)
{
	dh_daemon d = {0};
	dh_prepare(&d); /* the address, no daemon yet */
	char err[256] = "";
	double t0 = now_s();
	ck_assert_ptr_null(tsd_client_open_wait(d.url, 3000, 300, err, sizeof(err)));
	ck_assert_msg(strstr(err, "within 300 ms"), "%s", err);
	ck_assert_msg(now_s() - t0 < 3, "took %.1f s", now_s() - t0);
	ck_assert_ptr_null(tsd_client_open(d.url, 3000, err, sizeof(err)));
	tsd_client *c = tsd_client_open_wait(d.url, 10000, -1, err, sizeof(err));
	ck_assert_msg(c, "open without waiting: %s", err);
	ck_assert(!tsd_client_connected(c, NULL));
	dh_start(&d, NULL);
	ck_assert_int_eq(health(c), TSD_OK);
	ck_assert(tsd_client_connected(c, NULL));
	tsd_client_close(c);
	c = tsd_client_open_wait(d.url, 3000, 5000, err, sizeof(err));
	ck_assert_msg(c, "open waiting: %s", err);
	ck_assert_int_eq(health(c), TSD_OK);
	tsd_client_close(c);
	dh_stop(&d);
}
END_TEST

/* ---- every typed verb ---- */

START_TEST(t_verbs)
{
	dh_daemon d = {0};
	dh_start(&d, NULL);
	tsd_client *c = dh_client(&d);
	tsd_reply *r;
	tsd_status s;
#define OK(call)                                                                              \
	do {                                                                                  \
		s = (call);                                                                   \
		ck_assert_msg(s == TSD_OK, #call ": %s: %s", tsd_status_name(s),              \
			      tsd_client_message(c, r));                                      \
	} while (0)
	OK(tsd_hello(c, &r));
	ck_assert(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(tsd_reply_json(r), "protocol")));
	tsd_reply_free(r);
	OK(tsd_health(c, &r));
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(tsd_reply_json(r), "ready")));
	tsd_reply_free(r);

	load_lin(c, "{\"loss\":\"mse\",\"output\":\"y\",\"target\":\"t\","
		    "\"optimizer\":{\"kind\":\"sgd\",\"lr\":0.1}}");
	OK(tsd_model_list(c, &r));
	const cJSON *m = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(tsd_reply_json(r), "models"), 0);
	ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(m, "name")->valuestring, "lin");
	ck_assert_int_eq(cJSON_GetObjectItemCaseSensitive(m, "batch_max")->valueint, 8);
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "trainable")));
	tsd_reply_free(r);

	/* infer with every option; the id is echoed */
	float x[8];
	x_of(1, x);
	x_of(2, x + 4);
	tsd_tensor in = DH_F32("x", x, 2, 4);
	tsd_infer_opts o = {.priority = TSD_PRIORITY_REALTIME, .timeout_ms = 5000, .latest_only = true,
			    .id = "req-7"};
	OK(tsd_infer(c, "lin", &in, 1, &o, &r));
	ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(tsd_reply_json(r), "id")->valuestring, "req-7");
	const tsd_tensor *y = tsd_reply_find(r, "y");
	ck_assert(y && y->ndim == 2 && y->shape[0] == 2 && y->shape[1] == 3);
	float got[6], want[6];
	memcpy(got, y->data, sizeof(got));
	lin_ref(x, want);
	lin_ref(x + 4, want + 3);
	ck_assert(close3(got, want) && close3(got + 3, want + 3));
	tsd_reply_free(r);
	o.priority = (tsd_priority)9;
	ck_assert_int_eq(tsd_infer(c, "lin", &in, 1, &o, &r), TSD_BAD_REQUEST);
	ck_assert_ptr_null(r);

	/* realize of a builder graph: z = relu(a @ b + c) - 1 */
	tsd_graph *g = tsd_graph_create();
	int a = tsd_g_input(g, "a", TSD_F32, 2, (const int64_t[]){2, 3});
	int b = tsd_g_input(g, "b", TSD_F32, 2, (const int64_t[]){3, 2});
	int cc = tsd_g_param(g, "c", TSD_F32, 1, (const int64_t[]){2});
	int z = tsd_g_sub(g, tsd_g_relu(g, tsd_g_add(g, tsd_g_matmul(g, a, b), cc)), tsd_g_const(g, 1, TSD_F32));
	tsd_graph_output(g, z, "z");
	tsd_graph_output(g, tsd_g_sum(g, z, NULL, 0, false), "total");
	cJSON *gj = tsd_graph_json(g);
	ck_assert_msg(gj, "%s", tsd_graph_error(g));
	float av[6] = {1, 2, 3, 4, 5, 6}, bv[6] = {1, -1, 0.5f, 2, -1, 0}, cv[2] = {0.25f, -8};
	tsd_tensor rin[3] = {DH_F32("a", av, 2, 3), DH_F32("b", bv, 3, 2), DH_F32("c", cv, 2)};
	OK(tsd_realize(c, gj, rin, 3, 10000, &r));
	const tsd_tensor *zt = tsd_reply_find(r, "z"), *tt = tsd_reply_find(r, "total");
	ck_assert(zt && tt && zt->nbytes == 4 * sizeof(float) && tt->nbytes == sizeof(float));
	float zv[4], tv, zsum = 0;
	memcpy(zv, zt->data, sizeof(zv));
	memcpy(&tv, tt->data, sizeof(tv));
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 2; j++) {
			double acc = cv[j];
			for (int k = 0; k < 3; k++)
				acc += (double)av[i * 3 + k] * bv[k * 2 + j];
			float w = (float)(acc > 0 ? acc : 0) - 1;
			ck_assert_msg(fabsf(zv[i * 2 + j] - w) < 1e-5f, "z[%d][%d] = %g, want %g", i, j,
				      zv[i * 2 + j], w);
			zsum += w;
		}
	ck_assert_msg(fabsf(tv - zsum) < 1e-4f, "total %g, want %g", tv, zsum);
	tsd_reply_free(r);
	cJSON_Delete(gj);
	tsd_graph_free(g);

	/* train.step, then the weights saved in the reply and to a file */
	float t[3] = {1, 2, 3};
	tsd_tensor tin[2] = {DH_F32("x", x, 1, 4), DH_F32("t", t, 1, 3)};
	OK(tsd_train_step(c, "lin", tin, 2, 0.05, 10000, &r));
	ck_assert(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(tsd_reply_json(r), "loss")));
	ck_assert_int_eq(cJSON_GetObjectItemCaseSensitive(tsd_reply_json(r), "step")->valueint, 1);
	tsd_reply_free(r);
	OK(tsd_model_save(c, "lin", NULL, &r));
	const tsd_tensor *wt = tsd_reply_find(r, "W");
	ck_assert(wt && wt->nbytes == sizeof(W));
	ck_assert_msg(memcmp(wt->data, W, sizeof(W)), "train.step left W as it was");
	tsd_reply_free(r);
	OK(tsd_model_save(c, "lin", "lin-saved.safetensors", &r));
	ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(tsd_reply_json(r), "path")->valuestring,
			 "lin-saved.safetensors");
	tsd_reply_free(r);

	OK(tsd_stats(c, &r));
	ck_assert_msg(dh_num(tsd_reply_json(r), "requests.infer.ok") >= 1, "stats: no infer counted");
	tsd_reply_free(r);
	OK(tsd_model_unload(c, "lin", &r));
	tsd_reply_free(r);
	s = tsd_infer(c, "lin", &in, 1, NULL, &r);
	ck_assert_int_eq(s, TSD_UNKNOWN_MODEL);
	ck_assert_ptr_nonnull(r);
	ck_assert_msg(strstr(tsd_client_message(c, r), "lin"), "%s", tsd_client_message(c, r));
	tsd_reply_free(r);
	tsd_client_close(c);
	dh_stop(&d);
#undef OK
}
END_TEST

Suite *clientlive_suite(void)
{
	Suite *s = suite_create("clientlive");
	dh_add_test(s, "threads", t_threads, 90);
	dh_add_test(s, "async", t_async, 90);
	dh_add_test(s, "reconnect", t_reconnect, 90);
	dh_add_test(s, "connect_wait", t_connect_wait, 60);
	dh_add_test(s, "verbs", t_verbs, 90);
	return s;
}
