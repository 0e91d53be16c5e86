/* test_daemon.c: integration tests of the real tensord (suite `daemon`, harness in
 * daemon_harness.h): models loaded from messages, infer checked against host references,
 * realize sharing compiled kernels between clients, training and its visibility to infers,
 * concurrent clients and batching, priorities, timeouts, busy, latest_only, uid refusal, hot
 * reload on SIGHUP and the SIGTERM drain. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "suites.h"

#define TOL 1e-5f

/* ---- models and their host references ---- */

/* y = x W^T + b: x [-1,4], W [3,4], b [3]; trainable with mse on target t. */
#define LIN_GRAPH                                                                                        \
	"\"graph\":{\"nodes\":[{\"id\":\"x\",\"op\":\"input\",\"dtype\":\"float32\",\"shape\":[-1,4]},"     \
	"{\"id\":\"W\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[3,4]},"                            \
	"{\"id\":\"b\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[3]},"                              \
	"{\"id\":\"y\",\"op\":\"linear\",\"in\":[\"x\",\"W\",\"b\"]}],\"outputs\":[\"y\"]}"
#define LIN_TRAIN "\"train\":{\"loss\":\"mse\",\"output\":\"y\",\"target\":\"t\",\"optimizer\":{\"kind\":\"sgd\",\"lr\":0.1}}"
#define LIN_SPEC                                                                                         \
	"{\"name\":\"lin\"," LIN_GRAPH ",\"batching\":{\"max\":8,\"delay_us\":3000,\"buckets\":[1,2,4,8]}," LIN_TRAIN "}"

/* A two-layer MLP: x [-1,4] -> linear(w1 [8,4], b1) -> relu -> linear(w2 [2,8]). */
#define MLP_SPEC                                                                                         \
	"{\"name\":\"mlp\",\"graph\":{\"nodes\":[{\"id\":\"x\",\"op\":\"input\",\"dtype\":\"float32\",\"shape\":[-1,4]}," \
	"{\"id\":\"w1\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[8,4]},"                           \
	"{\"id\":\"b1\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[8]},"                             \
	"{\"id\":\"w2\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[2,8]},"                           \
	"{\"id\":\"h\",\"op\":\"linear\",\"in\":[\"x\",\"w1\",\"b1\"]},"                                    \
	"{\"id\":\"a\",\"op\":\"relu\",\"in\":[\"h\"]},"                                                    \
	"{\"id\":\"y\",\"op\":\"linear\",\"in\":[\"a\",\"w2\"]}],\"outputs\":[\"y\"]}}"

/* A slow unbatched model: x [HR,HC] through three tanh(matmul) layers of W [HC,HC]. */
#define HR 128
#define HC 512
#define HEAVY_SPEC                                                                                       \
	"{\"name\":\"heavy\",\"graph\":{\"nodes\":[{\"id\":\"x\",\"op\":\"input\",\"dtype\":\"float32\",\"shape\":[128,512]}," \
	"{\"id\":\"W\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[512,512]},"                        \
	"{\"id\":\"h1\",\"op\":\"matmul\",\"in\":[\"x\",\"W\"]},{\"id\":\"a1\",\"op\":\"tanh\",\"in\":[\"h1\"]}," \
	"{\"id\":\"h2\",\"op\":\"matmul\",\"in\":[\"a1\",\"W\"]},{\"id\":\"a2\",\"op\":\"tanh\",\"in\":[\"h2\"]}," \
	"{\"id\":\"h3\",\"op\":\"matmul\",\"in\":[\"a2\",\"W\"]},{\"id\":\"y\",\"op\":\"tanh\",\"in\":[\"h3\"]}]," \
	"\"outputs\":[\"y\"]}}"

static float frand(unsigned *seed)
{
	*seed = *seed * 1103515245u + 12345u;
	return (float)((*seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static void fill(float *a, int n, unsigned seed, float scale)
{
	for (int i = 0; i < n; i++)
		a[i] = scale * frand(&seed);
}

/* y[r][o] = b[o] + sum_i x[r][i] w[o][i] */
static void linear_ref(const float *x, int rows, int in, const float *w, const float *b, int out, float *y)
{
	for (int r = 0; r < rows; r++)
		for (int o = 0; o < out; o++) {
			double acc = b ? b[o] : 0;
			for (int i = 0; i < in; i++)
				acc += (double)x[r * in + i] * w[o * in + i];
			y[r * out + o] = (float)acc;
		}
}

static bool close_to(const float *a, const float *b, int n, float tol)
{
	for (int i = 0; i < n; i++)
		if (!(fabsf(a[i] - b[i]) <= tol * (1 + fabsf(b[i]))))
			return false;
	return true;
}

static void assert_close(const float *got, const float *want, int n, const char *what)
{
	for (int i = 0; i < n; i++)
		ck_assert_msg(fabsf(got[i] - want[i]) <= TOL * (1 + fabsf(want[i])), "%s[%d]: %g, want %g", what, i,
			      got[i], want[i]);
}

static float linW[12], linB[3];

static void load_lin(tsd_client *c)
{
	fill(linW, 12, 7, 0.5f);
	fill(linB, 3, 8, 0.5f);
	tsd_tensor w[2] = {DH_F32("W", linW, 3, 4), DH_F32("b", linB, 3)};
	dh_load(c, LIN_SPEC, w, 2);
}

static float heavyW[HC * HC];

static void load_heavy(tsd_client *c)
{
	fill(heavyW, HC * HC, 99, 0.08f);
	tsd_tensor w = DH_F32("W", heavyW, HC, HC);
	dh_load(c, HEAVY_SPEC, &w, 1);
}

static void heavy_ref(const float *x, float *y)
{
	static float a[HR * HC], h[HR * HC];
	memcpy(a, x, sizeof(a));
	for (int l = 0; l < 3; l++) {
		for (int r = 0; r < HR; r++)
			for (int o = 0; o < HC; o++) {
				double acc = 0;
				for (int i = 0; i < HC; i++)
					acc += (double)a[r * HC + i] * heavyW[i * HC + o];
				h[r * HC + o] = (float)tanh(acc);
			}
		memcpy(a, h, sizeof(a));
	}
	memcpy(y, a, sizeof(a));
}

static float heavyX[HR * HC];

/* An infer request for heavy with header fields extra (may be NULL). */
static nng_msg *heavy_msg(const char *id, const char *prio, int timeout_ms, bool latest)
{
	cJSON *h = cJSON_CreateObject();
	cJSON_AddStringToObject(h, "id", id);
	cJSON_AddStringToObject(h, "verb", "infer");
	cJSON_AddStringToObject(h, "model", "heavy");
	if (prio)
		cJSON_AddStringToObject(h, "priority", prio);
	if (timeout_ms)
		cJSON_AddNumberToObject(h, "timeout_ms", timeout_ms);
	if (latest)
		cJSON_AddTrueToObject(h, "latest_only");
	tsd_tensor t = DH_F32("x", heavyX, HR, HC);
	nng_msg *m = dh_encode(h, &t, 1);
	cJSON_Delete(h);
	return m;
}

static const cJSON *jget(const cJSON *j, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, k);
	ck_assert_msg(v, "no field %s", k);
	return v;
}

static void assert_int_array(const cJSON *a, const int *want, int n, const char *what)
{
	ck_assert_msg(cJSON_IsArray(a) && cJSON_GetArraySize(a) == n, "%s: not an array of %d", what, n);
	for (int i = 0; i < n; i++)
		ck_assert_msg(cJSON_GetArrayItem(a, i)->valuedouble == want[i], "%s[%d]: %g, want %d", what, i,
			      cJSON_GetArrayItem(a, i)->valuedouble, want[i]);
}

/* ---- load, infer, list, unload ---- */

/* Load MLP_SPEC as "mlp" with seeded weights; x: 3 rows of 4 inputs, y: their 3 rows of 2
 * outputs computed on the host. */
static void load_mlp(tsd_client *c, float x[12], float y[6])
{
	float w1[32], b1[8], w2[16], h[24];
	fill(w1, 32, 1, 0.7f);
	fill(b1, 8, 2, 0.3f);
	fill(w2, 16, 3, 0.7f);
	fill(x, 12, 4, 2.0f);
	tsd_tensor ws[3] = {DH_F32("w1", w1, 8, 4), DH_F32("b1", b1, 8), DH_F32("w2", w2, 2, 8)};
	dh_load(c, MLP_SPEC, ws, 3);
	linear_ref(x, 3, 4, w1, b1, 8, h);
	for (int i = 0; i < 24; i++)
		h[i] = h[i] > 0 ? h[i] : 0;
	linear_ref(h, 3, 8, w2, NULL, 2, y);
}

START_TEST(t_load_infer_unload)
{
	dh_daemon d = {0};
	dh_start(&d, NULL);
	tsd_client *c = dh_client(&d);
	float x[12], y[6], got[6];
	load_mlp(c, x, y);
	char why[256];
	tsd_status s = dh_infer(c, "mlp", NULL, x, 3, 4, got, 6, why, sizeof(why));
	ck_assert_msg(s == TSD_OK, "infer: %s: %s", tsd_status_name(s), why);
	assert_close(got, y, 6, "mlp y");
	/* one row at a time gives the same rows */
	for (int r = 0; r < 3; r++) {
		s = dh_infer(c, "mlp", "{\"priority\":\"realtime\"}", x + 4 * r, 1, 4, got, 2, why, sizeof(why));
		ck_assert_msg(s == TSD_OK, "infer row %d: %s: %s", r, tsd_status_name(s), why);
		assert_close(got, y + 2 * r, 2, "mlp row");
	}

	/* the executor sends a batch's replies before the job is back on the loop, where the
	 * model's counters are kept: the fourth may be counted just after its reply arrived */
	cJSON *l = dh_call_json(c, "model.list");
	for (int tries = 0; tries < 200 && (int)dh_num(cJSON_GetArrayItem(jget(l, "models"), 0), "counters.ok") < 4;
	     tries++) {
		cJSON_Delete(l);
		usleep(10000);
		l = dh_call_json(c, "model.list");
	}
	const cJSON *ms = jget(l, "models");
	ck_assert_int_eq(cJSON_GetArraySize(ms), 1);
	const cJSON *m = cJSON_GetArrayItem(ms, 0);
	ck_assert_str_eq(jget(m, "name")->valuestring, "mlp");
	ck_assert_int_eq(jget(m, "version")->valueint, 1);
	ck_assert(cJSON_IsTrue(jget(m, "batched")));
	ck_assert_int_eq(jget(m, "batch_max")->valueint, 32);
	assert_int_array(jget(m, "buckets"), (const int[]){1, 2, 4, 8, 16, 32}, 6, "buckets");
	const cJSON *in = cJSON_GetArrayItem(jget(m, "inputs"), 0), *out = cJSON_GetArrayItem(jget(m, "outputs"), 0);
	ck_assert_str_eq(jget(in, "name")->valuestring, "x");
	ck_assert_str_eq(jget(in, "dtype")->valuestring, "float32");
	assert_int_array(jget(in, "shape"), (const int[]){-1, 4}, 2, "inputs[0].shape");
	ck_assert_str_eq(jget(out, "name")->valuestring, "y");
	assert_int_array(jget(out, "shape"), (const int[]){-1, 2}, 2, "outputs[0].shape");
	ck_assert_int_eq((int)dh_num(m, "counters.ok"), 4);
	cJSON_Delete(l);

	cJSON *hu = cJSON_Parse("{\"verb\":\"model.unload\",\"name\":\"mlp\"}");
	tsd_reply *r = NULL;
	s = tsd_client_call(c, hu, NULL, 0, &r);
	cJSON_Delete(hu);
	ck_assert_msg(s == TSD_OK, "unload: %s", tsd_client_message(c, r));
	tsd_reply_free(r);
	s = dh_infer(c, "mlp", NULL, x, 3, 4, got, 6, why, sizeof(why));
	ck_assert_msg(s == TSD_UNKNOWN_MODEL, "infer after unload: %s: %s", tsd_status_name(s), why);
	ck_assert_msg(strstr(why, "model"), "the error names the field: %s", why);
	l = dh_call_json(c, "model.list");
	ck_assert_int_eq(cJSON_GetArraySize(jget(l, "models")), 0);
	cJSON_Delete(l);
	/* a spec's unknown fields are refused, each by its name (the load's and train's) */
	static const char *const bad[][2] = {{"shape", "shape: unknown field of model.load"},
					     {"train", "train.lr: unknown field"}};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cJSON *h = cJSON_Parse(MLP_SPEC);
		cJSON_AddStringToObject(h, "verb", "model.load");
		cJSON *f = cJSON_AddObjectToObject(h, bad[i][0]);
		cJSON_AddNumberToObject(f, "lr", 1);
		s = tsd_client_call(c, h, NULL, 0, &r);
		cJSON_Delete(h);
		const char *msg = tsd_client_message(c, r);
		ck_assert_msg(s == TSD_BAD_REQUEST && msg && strstr(msg, bad[i][1]), "%s: %s: %s", bad[i][0],
			      tsd_status_name(s), msg ? msg : "(none)");
		tsd_reply_free(r);
	}
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

/* ---- small realtime batches on the loop's thread (loop_run_max_us) ---- */

typedef struct rt_arg {
	dh_daemon *d;
	const char *prio;
	int n;
	const float *x, *y; /* 3 rows of 4, their 3 rows of 2 */
	char err[256];
} rt_arg;

/* n single-row infers at a->prio, every answer checked. */
static void *rt_main(void *p)
{
	rt_arg *a = p;
	tsd_client *c = dh_client(a->d);
	char why[256], extra[64];
	float got[2];
	snprintf(extra, sizeof(extra), "{\"priority\":\"%s\"}", a->prio);
	for (int i = 0; i < a->n && !a->err[0]; i++) {
		int r = i % 3;
		tsd_status s = dh_infer(c, "mlp", extra, a->x + 4 * r, 1, 4, got, 2, why, sizeof(why));
		if (s != TSD_OK)
			snprintf(a->err, sizeof(a->err), "%s %d: %s: %.180s", a->prio, i, tsd_status_name(s), why);
		else if (!close_to(got, a->y + 2 * r, 2, TOL))
			snprintf(a->err, sizeof(a->err), "%s %d: got %g %g, want %g %g", a->prio, i, got[0], got[1],
				 a->y[2 * r], a->y[2 * r + 1]);
	}
	dh_client_close(c);
	return NULL;
}

/* Realtime rows while normal ones keep the executor busy part of the time: the realtime batches
 * that find it idle run on the loop's thread (counted), the others on the executor; every
 * answer is right either way, and normal batches never run on the loop. */
START_TEST(t_loop_run)
{
	dh_daemon d = {0};
	dh_start(&d, "{\"loop_run_max_us\":1000000}");
	tsd_client *c = dh_client(&d);
	float x[12], y[6];
	load_mlp(c, x, y);
	rt_arg a[2] = {{.d = &d, .prio = "realtime", .n = 200, .x = x, .y = y},
		       {.d = &d, .prio = "normal", .n = 100, .x = x, .y = y}};
	pthread_t th[2];
	for (int k = 0; k < 2; k++)
		ck_assert_int_eq(pthread_create(&th[k], NULL, rt_main, &a[k]), 0);
	for (int k = 0; k < 2; k++)
		pthread_join(th[k], NULL);
	for (int k = 0; k < 2; k++)
		ck_assert_msg(!a[k].err[0], "%s", a[k].err);
	/* the executor sends a reply before the loop counts it: wait for the counts */
	for (int i = 0; i < 1000 && dh_stat(c, "models.mlp.ok") < 300; i++)
		usleep(1000);
	cJSON *l = dh_call_json(c, "model.list");
	const cJSON *m = cJSON_GetArrayItem(jget(l, "models"), 0);
	double on_loop = dh_num(m, "counters.loop_batches"), batches = dh_num(m, "counters.batches");
	fprintf(stderr, "daemon: %g of %g batches ran on the loop's thread\n", on_loop, batches);
	ck_assert_msg(on_loop >= 1 && on_loop < batches, "%g of %g batches on the loop", on_loop, batches);
	ck_assert_int_eq((int)dh_num(m, "counters.ok"), 300);
	cJSON_Delete(l);
	/* normal batches alone: never on the loop */
	rt_arg nrm = {.d = &d, .prio = "normal", .n = 30, .x = x, .y = y};
	rt_main(&nrm);
	ck_assert_msg(!nrm.err[0], "%s", nrm.err);
	/* the executor sends a reply before the loop counts its batch: wait for the count */
	for (int i = 0; i < 1000 && dh_stat(c, "models.mlp.batches") < batches + 30; i++)
		usleep(1000);
	ck_assert_int_eq((int)dh_stat(c, "models.mlp.batches"), (int)batches + 30);
	ck_assert_int_eq((int)dh_stat(c, "models.mlp.loop_batches"), (int)on_loop);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

/* ---- realize from two clients: the second compiles nothing ---- */

#define REALIZE_GRAPH                                                                                    \
	"{\"verb\":\"realize\",\"graph\":{\"nodes\":[{\"id\":\"x\",\"op\":\"input\",\"dtype\":\"float32\",\"shape\":[2,3]}," \
	"{\"id\":\"w\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[2,3]},"                            \
	"{\"id\":\"h\",\"op\":\"linear\",\"in\":[\"x\",\"w\"]},{\"id\":\"r\",\"op\":\"relu\",\"in\":[\"h\"]}," \
	"{\"id\":\"e\",\"op\":\"exp\",\"in\":[\"r\"]}],\"outputs\":[\"e\"]}}"

static void realize_once(tsd_client *c, unsigned seed)
{
	float x[6], w[6], h[4];
	fill(x, 6, seed, 1.0f);
	fill(w, 6, seed + 1, 1.0f);
	linear_ref(x, 2, 3, w, NULL, 2, h);
	for (int i = 0; i < 4; i++)
		h[i] = expf(h[i] > 0 ? h[i] : 0);
	cJSON *g = cJSON_Parse(REALIZE_GRAPH);
	tsd_tensor ts[2] = {DH_F32("x", x, 2, 3), DH_F32("w", w, 2, 3)};
	tsd_reply *r = NULL;
	tsd_status s = tsd_client_call(c, g, ts, 2, &r);
	cJSON_Delete(g);
	ck_assert_msg(s == TSD_OK, "realize: %s: %s", tsd_status_name(s), tsd_client_message(c, r));
	const tsd_tensor *e = tsd_reply_find(r, "e");
	ck_assert_msg(e && e->dtype == TSD_F32 && e->ndim == 2 && e->shape[0] == 2 && e->shape[1] == 2,
		      "realize: no float32 [2,2] output e");
	float got[4];
	memcpy(got, e->data, sizeof(got));
	assert_close(got, h, 4, "realize e");
	tsd_reply_free(r);
}

START_TEST(t_realize_shared)
{
	dh_daemon d = {0};
	dh_start(&d, NULL);
	tsd_client *a = dh_client(&d), *b = dh_client(&d);
	double c0 = dh_stat(a, "engine.compiles");
	realize_once(a, 10);
	double c1 = dh_stat(a, "engine.compiles"), r1 = dh_stat(a, "realize.compiles");
	ck_assert_msg(c1 > c0, "the first realize compiled nothing (%g, %g)", c0, c1);
	ck_assert_msg(r1 == c1 - c0, "realize.compiles %g, engine.compiles went from %g to %g", r1, c0, c1);
	realize_once(b, 20);
	double c2 = dh_stat(b, "engine.compiles"), r2 = dh_stat(b, "realize.compiles");
	ck_assert_msg(c2 == c1, "the second client's realize compiled %g kernels", c2 - c1);
	ck_assert_msg(r2 == r1, "realize.compiles went from %g to %g", r1, r2);
	ck_assert_int_eq((int)dh_stat(b, "realize.graphs"), 2);
	dh_client_close(a);
	dh_client_close(b);
	dh_stop(&d);
}
END_TEST

/* ---- training ---- */

/* train.step on lin with x [rows,4], t [rows,3]; returns the loss, asserts ok. */
static double train_step(tsd_client *c, const float *x, const float *t, int rows, int *step)
{
	cJSON *h = cJSON_Parse("{\"verb\":\"train.step\",\"model\":\"lin\"}");
	tsd_tensor ts[2] = {DH_F32("x", x, rows, 4), DH_F32("t", t, rows, 3)};
	tsd_reply *r = NULL;
	tsd_status s = tsd_client_call(c, h, ts, 2, &r);
	cJSON_Delete(h);
	ck_assert_msg(s == TSD_OK, "train.step: %s: %s", tsd_status_name(s), tsd_client_message(c, r));
	double loss = dh_num(tsd_reply_json(r), "loss");
	if (step)
		*step = (int)dh_num(tsd_reply_json(r), "step");
	tsd_reply_free(r);
	ck_assert_msg(isfinite(loss), "train.step: no finite loss");
	return loss;
}

/* model.save of lin without a path: the weights into W [12], b [3]. */
static void save_lin(tsd_client *c, float *W, float *b)
{
	cJSON *h = cJSON_Parse("{\"verb\":\"model.save\",\"name\":\"lin\"}");
	tsd_reply *r = NULL;
	tsd_status s = tsd_client_call(c, h, NULL, 0, &r);
	cJSON_Delete(h);
	ck_assert_msg(s == TSD_OK, "model.save: %s: %s", tsd_status_name(s), tsd_client_message(c, r));
	const tsd_tensor *tw = tsd_reply_find(r, "W"), *tb = tsd_reply_find(r, "b");
	ck_assert_msg(tw && tw->dtype == TSD_F32 && tw->ndim == 2 && tw->shape[0] == 3 && tw->shape[1] == 4,
		      "model.save: no float32 W [3,4]");
	ck_assert_msg(tb && tb->dtype == TSD_F32 && tb->ndim == 1 && tb->shape[0] == 3, "model.save: no float32 b [3]");
	memcpy(W, tw->data, 12 * sizeof(float));
	memcpy(b, tb->data, 3 * sizeof(float));
	tsd_reply_free(r);
}

static float trainX[32], trainT[24];

static void make_train_data(void)
{
	float Wt[12], bt[3];
	fill(Wt, 12, 50, 1.0f);
	fill(bt, 3, 51, 1.0f);
	fill(trainX, 32, 52, 1.0f);
	linear_ref(trainX, 8, 4, Wt, bt, 3, trainT);
}

/* One host SGD step of lin on mse (mean over all elements) with rows of x, t; returns the loss
 * before the step. */
static double sgd_ref(float *W, float *b, const float *x, const float *t, int rows, float lr)
{
	float y[8 * 3];
	double gW[12] = {0}, gb[3] = {0}, loss = 0;
	linear_ref(x, rows, 4, W, b, 3, y);
	for (int r = 0; r < rows; r++)
		for (int o = 0; o < 3; o++) {
			double e = (double)y[r * 3 + o] - t[r * 3 + o], g = 2 * e / (rows * 3);
			loss += e * e / (rows * 3);
			gb[o] += g;
			for (int i = 0; i < 4; i++)
				gW[o * 4 + i] += g * x[r * 4 + i];
		}
	for (int k = 0; k < 12; k++)
		W[k] -= (float)(lr * gW[k]);
	for (int k = 0; k < 3; k++)
		b[k] -= (float)(lr * gb[k]);
	return loss;
}

/* A train.step queued behind a reload that replaces its model by a version that does not train
 * and takes other inputs: checked again when it runs (the live fuzzer found it computed from a
 * tensor the new version named and the request lacked), answered with why, the daemon serving. */
START_TEST(t_train_replaced)
{
	dh_daemon d = {0};
	dh_start(&d, NULL);
	tsd_client *c = dh_client(&d);
	load_lin(c);
	make_train_data();
	nng_socket sock = dh_raw_open(&d, DH_TIMEOUT_MS);
	for (int round = 0; round < 3; round++) {
		/* the new version: input "z" [-1,4] -> linear, no train; a graph of its own per round
		 * (different shapes), so that its load compiles and the train.step waits behind it */
		char spec[1024];
		int hid = 5 + round;
		snprintf(spec, sizeof(spec),
			 "{\"id\":\"load%d\",\"verb\":\"model.load\",\"name\":\"lin\",\"graph\":{\"nodes\":["
			 "{\"id\":\"z\",\"op\":\"input\",\"dtype\":\"float32\",\"shape\":[-1,4]},"
			 "{\"id\":\"W\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[%d,4]},"
			 "{\"id\":\"y\",\"op\":\"linear\",\"in\":[\"z\",\"W\"]}],\"outputs\":[\"y\"]}}",
			 round, hid);
		float w[64] = {0};
		tsd_tensor wt = dh_f32("W", w, (const int64_t[]){hid, 4}, 2);
		cJSON *lh = cJSON_Parse(spec);
		ck_assert_ptr_nonnull(lh);
		dh_async lq = {0}, tq = {0};
		dh_async_send(sock, &lq, dh_encode(lh, &wt, 1));
		cJSON_Delete(lh);
		cJSON *th = cJSON_Parse("{\"id\":\"step\",\"verb\":\"train.step\",\"model\":\"lin\"}");
		tsd_tensor ts[2] = {DH_F32("x", trainX, 8, 4), DH_F32("t", trainT, 8, 3)};
		dh_async_send(sock, &tq, dh_encode(th, ts, 2));
		cJSON_Delete(th);
		proto_msg pm;
		ck_assert_int_eq(dh_async_wait(&lq, &pm), TSD_OK);
		proto_msg_free(&pm);
		tsd_status st = dh_async_wait(&tq, &pm);
		/* before the swap it trains the old version; after it, a named refusal */
		ck_assert_msg(st == TSD_OK || (pm.error && strstr(pm.error, "replaced")), "train.step: %s: %s",
			      tsd_status_name(st), pm.error ? pm.error : "");
		proto_msg_free(&pm);
		dh_async_free(&lq);
		dh_async_free(&tq);
		/* back to the trainable version for the next round */
		load_lin(c);
	}
	dh_raw_close(sock);
	cJSON *h = dh_call_json(c, "health");
	cJSON_Delete(h);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

START_TEST(t_train)
{
	dh_daemon d = {0};
	dh_start(&d, NULL);
	tsd_client *c = dh_client(&d);
	load_lin(c);
	make_train_data();
	double first = 0, last = 0;
	int step = 0;
	float hW[12], hb[3];
	memcpy(hW, linW, sizeof(hW));
	memcpy(hb, linB, sizeof(hb));
	for (int i = 0; i < 20; i++) {
		last = train_step(c, trainX, trainT, 8, &step);
		double want = sgd_ref(hW, hb, trainX, trainT, 8, 0.1f);
		ck_assert_msg(fabs(last - want) <= 1e-4 * (1 + want), "step %d: loss %g, host SGD's %g", i + 1, last, want);
		if (!i)
			first = last;
	}
	ck_assert_int_eq(step, 20);
	ck_assert_msg(last < 0.5 * first, "the loss went from %g to %g in 20 steps", first, last);
	/* fewer rows than the batch max: the mean is over these rows only */
	double l3 = train_step(c, trainX, trainT, 3, &step), want3 = sgd_ref(hW, hb, trainX, trainT, 3, 0.1f);
	ck_assert_msg(fabs(l3 - want3) <= 1e-4 * (1 + want3), "3 rows: loss %g, host SGD's %g", l3, want3);
	ck_assert_int_eq(step, 21);
	float W[12], b[3], x[8], want[6], got[6];
	save_lin(c, W, b);
	ck_assert_msg(!close_to(W, linW, 12, 1e-4f), "the saved weights are the initial ones");
	for (int k = 0; k < 12; k++)
		ck_assert_msg(fabsf(W[k] - hW[k]) <= 1e-4f, "W[%d] after 21 steps: %g, host SGD's %g", k, W[k], hW[k]);
	for (int k = 0; k < 3; k++)
		ck_assert_msg(fabsf(b[k] - hb[k]) <= 1e-4f, "b[%d] after 21 steps: %g, host SGD's %g", k, b[k], hb[k]);
	fill(x, 8, 60, 1.0f);
	linear_ref(x, 2, 4, W, b, 3, want);
	char why[256];
	tsd_status s = dh_infer(c, "lin", NULL, x, 2, 4, got, 6, why, sizeof(why));
	ck_assert_msg(s == TSD_OK, "infer: %s: %s", tsd_status_name(s), why);
	assert_close(got, want, 6, "infer after training");
	ck_assert_int_eq((int)dh_stat(c, "models.lin.train_steps"), 21);
	/* model.list says how to train it */
	cJSON *l = dh_call_json(c, "model.list");
	const cJSON *m = cJSON_GetArrayItem(jget(l, "models"), 0), *t = jget(m, "train");
	ck_assert_str_eq(jget(t, "loss")->valuestring, "mse");
	ck_assert_str_eq(jget(t, "output")->valuestring, "y");
	ck_assert_str_eq(jget(t, "optimizer")->valuestring, "sgd");
	ck_assert_str_eq(jget(jget(t, "target"), "name")->valuestring, "t");
	ck_assert_str_eq(jget(jget(t, "target"), "dtype")->valuestring, "float32");
	assert_int_array(jget(jget(t, "target"), "shape"), (const int[]){-1, 3}, 2, "train.target.shape");
	ck_assert_int_eq((int)dh_num(m, "train_steps"), 21);
	cJSON_Delete(l);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

/* ---- infers during training see whole weight versions ---- */

#define TRAIN_STEPS 20
#define MAX_SEEN 4000

typedef struct train_arg {
	const dh_daemon *d;
	float W[TRAIN_STEPS + 1][12], b[TRAIN_STEPS + 1][3];
	atomic_bool done;
	char err[256];
} train_arg;

static void *trainer(void *p)
{
	train_arg *a = p;
	tsd_client *c = tsd_client_open(a->d->url, DH_TIMEOUT_MS, a->err, sizeof(a->err));
	for (int i = 1; c && i <= TRAIN_STEPS && !a->err[0]; i++) {
		cJSON *h = cJSON_Parse("{\"verb\":\"train.step\",\"model\":\"lin\"}");
		tsd_tensor ts[2] = {DH_F32("x", trainX, 8, 4), DH_F32("t", trainT, 8, 3)};
		tsd_reply *r = NULL;
		tsd_status s = tsd_client_call(c, h, ts, 2, &r);
		cJSON_Delete(h);
		if (s != TSD_OK)
			snprintf(a->err, sizeof(a->err), "train.step %d: %s", i, tsd_client_message(c, r));
		tsd_reply_free(r);
		r = NULL;
		h = cJSON_Parse("{\"verb\":\"model.save\",\"name\":\"lin\"}");
		s = a->err[0] ? TSD_OK : tsd_client_call(c, h, NULL, 0, &r);
		cJSON_Delete(h);
		const tsd_tensor *tw = r ? tsd_reply_find(r, "W") : NULL, *tb = r ? tsd_reply_find(r, "b") : NULL;
		if (!a->err[0] && (s != TSD_OK || !tw || !tb))
			snprintf(a->err, sizeof(a->err), "model.save %d: %s", i, tsd_client_message(c, r));
		else if (!a->err[0]) {
			memcpy(a->W[i], tw->data, sizeof(a->W[i]));
			memcpy(a->b[i], tb->data, sizeof(a->b[i]));
		}
		tsd_reply_free(r);
	}
	dh_client_close(c);
	atomic_store(&a->done, true);
	return NULL;
}

START_TEST(t_infer_during_train)
{
	dh_daemon d = {0};
	dh_start(&d, NULL);
	tsd_client *c = dh_client(&d);
	load_lin(c);
	make_train_data();
	static train_arg a;
	memset(&a, 0, sizeof(a));
	a.d = &d;
	memcpy(a.W[0], linW, sizeof(linW));
	memcpy(a.b[0], linB, sizeof(linB));
	static float seen[MAX_SEEN][3];
	float x[4] = {0.5f, -1.0f, 2.0f, 0.25f};
	int n = 0;
	char why[256];
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, trainer, &a), 0);
	while (!atomic_load(&a.done) && n < MAX_SEEN) {
		tsd_status s = dh_infer(c, "lin", "{\"priority\":\"realtime\"}", x, 1, 4, seen[n], 3, why, sizeof(why));
		if (s != TSD_OK) {
			pthread_join(th, NULL);
			ck_abort_msg("infer during training: %s: %s", tsd_status_name(s), why);
		}
		n++;
	}
	pthread_join(th, NULL);
	ck_assert_msg(!a.err[0], "%s", a.err);
	ck_assert_msg(n > 0, "no infer ran during training");
	bool used[TRAIN_STEPS + 1] = {0};
	for (int i = 0; i < n; i++) {
		int k;
		for (k = 0; k <= TRAIN_STEPS; k++) {
			float want[3];
			linear_ref(x, 1, 4, a.W[k], a.b[k], 3, want);
			if (close_to(seen[i], want, 3, TOL))
				break;
		}
		ck_assert_msg(k <= TRAIN_STEPS, "infer %d (%g %g %g) matches no saved weight version", i, seen[i][0],
			      seen[i][1], seen[i][2]);
		used[k] = true;
	}
	int versions = 0;
	for (int k = 0; k <= TRAIN_STEPS; k++)
		versions += used[k];
	fprintf(stderr, "daemon: %d infers during training saw %d weight versions\n", n, versions);
	/* afterwards: the last version */
	float got[3], want[3];
	ck_assert_int_eq(dh_infer(c, "lin", NULL, x, 1, 4, got, 3, why, sizeof(why)), TSD_OK);
	linear_ref(x, 1, 4, a.W[TRAIN_STEPS], a.b[TRAIN_STEPS], 3, want);
	assert_close(got, want, 3, "infer after training");
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

/* ---- 32 concurrent clients ---- */

#define NCLIENTS 32
#define NREQ 12

typedef struct client_arg {
	const dh_daemon *d;
	int id;
	int ok;
	char err[256];
} client_arg;

static void *client_main(void *p)
{
	client_arg *a = p;
	tsd_client *c = tsd_client_open(a->d->url, DH_TIMEOUT_MS, a->err, sizeof(a->err));
	for (int i = 0; c && i < NREQ; i++) {
		float x[4] = {(float)a->id, (float)i, 0.5f * (float)(a->id - i), 1.0f}, want[3], got[3];
		char why[200];
		linear_ref(x, 1, 4, linW, linB, 3, want);
		tsd_status s = dh_infer(c, "lin", NULL, x, 1, 4, got, 3, why, sizeof(why));
		if (s != TSD_OK) {
			snprintf(a->err, sizeof(a->err), "client %d request %d: %s: %s", a->id, i, tsd_status_name(s), why);
			break;
		}
		if (!close_to(got, want, 3, TOL)) {
			snprintf(a->err, sizeof(a->err), "client %d request %d: got %g %g %g, want %g %g %g", a->id, i,
				 got[0], got[1], got[2], want[0], want[1], want[2]);
			break;
		}
		a->ok++;
	}
	dh_client_close(c);
	return NULL;
}

START_TEST(t_concurrent_clients)
{
	dh_daemon d = {0};
	dh_start(&d, NULL);
	tsd_client *c = dh_client(&d);
	load_lin(c);
	static client_arg args[NCLIENTS];
	pthread_t th[NCLIENTS];
	for (int i = 0; i < NCLIENTS; i++) {
		args[i] = (client_arg){.d = &d, .id = i};
		ck_assert_int_eq(pthread_create(&th[i], NULL, client_main, &args[i]), 0);
	}
	for (int i = 0; i < NCLIENTS; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < NCLIENTS; i++) {
		ck_assert_msg(!args[i].err[0], "%s", args[i].err);
		ck_assert_int_eq(args[i].ok, NREQ);
	}
	cJSON *st = dh_call_json(c, "stats");
	double req = dh_num(st, "models.lin.requests"), ok = dh_num(st, "models.lin.ok"),
	       batches = dh_num(st, "models.lin.batches"), rows = dh_num(st, "models.lin.rows");
	/* the process's memory, as the soak reads it (malloc's figures are 0 under ASan's malloc) */
	double rss = dh_num(st, "process.rss_bytes"), heap = dh_num(st, "process.heap_in_use_bytes");
	ck_assert_msg(rss > 1e6 && heap >= 0 && dh_num(st, "process.heap_free_bytes") >= 0,
		      "process: rss %g, heap in use %g", rss, heap);
	/* the model's own histograms: one queue time per request, one batch size per batch */
	ck_assert_int_eq((int)dh_num(st, "models.lin.histograms.queue_us.count"), NCLIENTS * NREQ);
	ck_assert_int_eq((int)dh_num(st, "models.lin.histograms.batch_size.count"), (int)batches);
	ck_assert_msg(dh_num(st, "models.lin.histograms.batch_size.sum") == rows, "batch sizes sum to %g rows",
		      dh_num(st, "models.lin.histograms.batch_size.sum"));
	cJSON_Delete(st);
	fprintf(stderr, "daemon: %g requests in %g batches\n", req, batches);
	ck_assert_int_eq((int)req, NCLIENTS * NREQ);
	ck_assert_int_eq((int)ok, NCLIENTS * NREQ);
	ck_assert_int_eq((int)rows, NCLIENTS * NREQ);
	ck_assert_msg(batches < req, "%g batches for %g requests", batches, req);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

/* ---- priorities, timeouts, busy, latest_only: raw contexts on the slow model ---- */

static void start_heavy(dh_daemon *d, const char *cfg)
{
	dh_start(d, cfg);
	tsd_client *c = dh_client(d);
	load_heavy(c);
	dh_client_close(c);
	fill(heavyX, HR * HC, 5, 1.0f);
}

/* Until the daemon has taken n infer requests for heavy off the wire (queued or run). A request
 * still in the connection when the daemon exits is lost: the tests of the drain wait for this
 * before the signal. */
static void wait_received(const dh_daemon *d, int n)
{
	tsd_client *c = dh_client(d);
	double got = 0;
	for (int i = 0; i < 10000 && (got = dh_stat(c, "models.heavy.requests")) < n; i++)
		usleep(1000);
	dh_client_close(c);
	ck_assert_msg(got >= n, "the daemon received %g of %d requests", got, n);
}

/* n infer requests for heavy on contexts q of s, ids prefix0, prefix1, ... */
static void send_heavy(nng_socket s, dh_async *q, int n, const char *prefix, const char *prio, int timeout_ms)
{
	char id[64];
	for (int i = 0; i < n; i++) {
		snprintf(id, sizeof(id), "%.40s%d", prefix, i);
		dh_async_send(s, &q[i], heavy_msg(id, prio, timeout_ms, false));
	}
}

#define ST(x) (1u << TSD_##x)
#define NO_REPLY (1u << TSD_STATUS_COUNT)

/* Wait for the replies to q[0..n) and free them: each status must be in the mask allowed
 * (NO_REPLY: none came), counted into counts[status] (counts[TSD_STATUS_COUNT]: no reply); a
 * reply of status named must have a message holding sub. */
static void wait_all(dh_async *q, int n, unsigned allowed, int *counts, tsd_status named, const char *sub)
{
	proto_msg *pm = calloc(1, sizeof(*pm));
	for (int i = 0; i < n; i++) {
		tsd_status st = dh_async_wait(&q[i], pm);
		ck_assert_msg(allowed & (1u << st), "request %d: %s (%s)", i,
			      st == TSD_STATUS_COUNT ? "no reply" : tsd_status_name(st),
			      st == TSD_STATUS_COUNT ? nng_strerror(q[i].rv) : pm->error ? pm->error : "");
		if (st == named)
			ck_assert_msg(strstr(pm->error, sub), "request %d: %s message: %s", i, tsd_status_name(st), pm->error);
		counts[st]++;
		proto_msg_free(pm);
		dh_async_free(&q[i]);
	}
	free(pm);
}

#define NBULK 48 /* ~0.1 s of backlog at 2.5 ms a request (Xeon, -O2); ~0.7 s under TSan */

START_TEST(t_priority)
{
	dh_daemon d = {0};
	start_heavy(&d, NULL);
	nng_socket s = dh_raw_open(&d, DH_TIMEOUT_MS);
	static dh_async bulk[NBULK], rt;
	send_heavy(s, bulk, NBULK, "bulk", "bulk", 0);
	wait_received(&d, NBULK); /* the backlog is queued (a fixed sleep is too short under TSAN) */
	int at_send = atomic_load(&dh_order);
	dh_async_send(s, &rt, heavy_msg("rt", "realtime", 0, false));
	proto_msg *pm = calloc(1, sizeof(*pm));
	static float want[HR * HC];
	heavy_ref(heavyX, want);
	int before = 0;
	for (int i = 0; i <= NBULK; i++) {
		dh_async *a = i < NBULK ? &bulk[i] : &rt;
		tsd_status st = dh_async_wait(a, pm);
		ck_assert_msg(st == TSD_OK, "request %d: %s (%s)", i, st == TSD_STATUS_COUNT ? "no reply" : tsd_status_name(st),
			      pm->error ? pm->error : nng_strerror(a->rv));
		const proto_tensor *y = proto_msg_tensor(pm, "y");
		ck_assert_msg(y && y->nbytes == sizeof(want), "request %d: no y", i);
		assert_close(y->data, want, HR * HC, "heavy y");
		proto_msg_free(pm);
	}
	/* bulk requests still queued when the realtime one was sent; of those, the ones that finished
	 * while it was in flight, and after it */
	int after = 0, pending = 0;
	for (int i = 0; i < NBULK; i++) {
		int o = atomic_load(&bulk[i].order);
		pending += o > at_send;
		before += o > at_send && o < atomic_load(&rt.order);
		after += o > atomic_load(&rt.order);
	}
	tsd_client *c = dh_client(&d);
	cJSON *st = dh_call_json(c, "stats");
	fprintf(stderr, "daemon: the realtime request finished after %d bulk ones, before %d of %d queued (compute %g us each)\n",
		before, after, pending, dh_num(st, "histograms.compute_us.sum") / dh_num(st, "histograms.compute_us.count"));
	cJSON_Delete(st);
	dh_client_close(c);
	/* it overtakes the backlog: few bulk replies (the one running when it came, replies already on
	 * their way while it travels: a few at 2.5 ms a request) arrive between its send and its
	 * reply, at most 5 or a quarter of the backlog, and the rest after it (in FIFO order all of
	 * them would come before it) */
	ck_assert_msg(pending >= NBULK / 4, "only %d of %d bulk requests were queued when the realtime one was sent",
		      pending, NBULK);
	ck_assert_msg(before <= 5 || before * 4 <= pending, "the realtime request waited for %d of %d queued bulk requests",
		      before, pending);
	for (int i = 0; i < NBULK; i++)
		dh_async_free(&bulk[i]);
	dh_async_free(&rt);
	free(pm);
	dh_raw_close(s);
	dh_stop(&d);
}
END_TEST

START_TEST(t_timeout)
{
	dh_daemon d = {0};
	start_heavy(&d, NULL);
	nng_socket s = dh_raw_open(&d, DH_TIMEOUT_MS);
	static dh_async q[NBULK], t[4];
	int counts[TSD_STATUS_COUNT + 1] = {0};
	send_heavy(s, q, NBULK, "q", "bulk", 0);
	send_heavy(s, t, 4, "t", "bulk", 3); /* 3 ms behind the backlog */
	wait_all(q, NBULK, ST(OK), counts, TSD_TIMEOUT, "");
	wait_all(t, 4, ST(TIMEOUT), counts, TSD_TIMEOUT, "timed out");
	dh_raw_close(s);
	tsd_client *c = dh_client(&d);
	ck_assert_int_eq((int)dh_stat(c, "models.heavy.timeouts"), 4);
	ck_assert_int_eq((int)dh_stat(c, "requests.infer.timeout"), 4);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

START_TEST(t_busy)
{
	dh_daemon d = {0};
	start_heavy(&d, "{\"queue_max\":4}");
	nng_socket s = dh_raw_open(&d, DH_TIMEOUT_MS);
	enum { N = 20 };
	static dh_async q[N];
	int counts[TSD_STATUS_COUNT + 1] = {0};
	send_heavy(s, q, N, "q", NULL, 0);
	wait_all(q, N, ST(OK) | ST(BUSY), counts, TSD_BUSY, "queue_max");
	dh_raw_close(s);
	int ok = counts[TSD_OK], busy = counts[TSD_BUSY];
	fprintf(stderr, "daemon: queue_max 4, %d requests: %d ok, %d busy\n", N, ok, busy);
	ck_assert_msg(busy > 0, "no busy reply with %d requests and queue_max 4", N);
	ck_assert_msg(ok >= 4, "only %d ok", ok);
	tsd_client *c = dh_client(&d);
	ck_assert_int_eq((int)dh_stat(c, "models.heavy.busy"), busy);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

START_TEST(t_latest_only)
{
	dh_daemon d = {0};
	start_heavy(&d, NULL);
	nng_socket blocker = dh_raw_open(&d, DH_TIMEOUT_MS), s = dh_raw_open(&d, DH_TIMEOUT_MS);
	enum { NB = 40, NL = 5 }; /* blockers: ~150 ms of work ahead of them */
	static dh_async b[NB], l[NL];
	char id[32];
	send_heavy(blocker, b, NB, "b", "bulk", 0);
	wait_received(&d, NB);
	for (int i = 0; i < NL; i++) {
		snprintf(id, sizeof(id), "l%d", i);
		dh_async_send(s, &l[i], heavy_msg(id, "bulk", 0, true)); /* behind the blockers */
		wait_received(&d, NB + i + 1); /* arrival order = sending order */
	}
	proto_msg *pm = calloc(1, sizeof(*pm));
	for (int i = 0; i < NL; i++) {
		tsd_status st = dh_async_wait(&l[i], pm), want = i < NL - 1 ? TSD_SUPERSEDED : TSD_OK;
		ck_assert_msg(st == want, "latest_only request %d: %s (%s), want %s", i,
			      st == TSD_STATUS_COUNT ? "no reply" : tsd_status_name(st), pm->error ? pm->error : "",
			      tsd_status_name(want));
		snprintf(id, sizeof(id), "l%d", i);
		ck_assert_str_eq(pm->id, id);
		proto_msg_free(pm);
		dh_async_free(&l[i]);
	}
	for (int i = 0; i < NB; i++) {
		ck_assert_int_eq(dh_async_wait(&b[i], pm), TSD_OK);
		proto_msg_free(pm);
		dh_async_free(&b[i]);
	}
	free(pm);
	dh_raw_close(s);
	dh_raw_close(blocker);
	tsd_client *c = dh_client(&d);
	ck_assert_int_eq((int)dh_stat(c, "models.heavy.superseded"), NL - 1);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

/* model.unload with requests queued: they are answered cancelled, the running one finishes */
START_TEST(t_unload_queued)
{
	dh_daemon d = {0};
	start_heavy(&d, NULL);
	nng_socket s = dh_raw_open(&d, DH_TIMEOUT_MS);
	enum { N = 12 };
	static dh_async q[N];
	int counts[TSD_STATUS_COUNT + 1] = {0};
	tsd_client *c = dh_client(&d);
	send_heavy(s, q, N, "q", NULL, 0);
	/* until some are queued behind the running one (a fixed sleep lost the race on a loaded
	 * machine: the unload went first and nothing was left to cancel) */
	for (int i = 0; i < 2000; i++) {
		cJSON *l = dh_call_json(c, "model.list");
		double queued = dh_num(cJSON_GetArrayItem(jget(l, "models"), 0), "queued");
		cJSON_Delete(l);
		if (queued >= 2)
			break;
		usleep(1000);
	}
	cJSON *h = cJSON_Parse("{\"verb\":\"model.unload\",\"name\":\"heavy\"}");
	tsd_reply *r = NULL;
	tsd_status st = tsd_client_call(c, h, NULL, 0, &r);
	cJSON_Delete(h);
	ck_assert_msg(st == TSD_OK, "unload: %s", tsd_client_message(c, r));
	tsd_reply_free(r);
	/* unknown_model: it arrived after the unload */
	wait_all(q, N, ST(OK) | ST(CANCELLED) | ST(UNKNOWN_MODEL), counts, TSD_UNKNOWN_MODEL, "heavy");
	dh_raw_close(s);
	fprintf(stderr, "daemon: unload with %d queued: %d ok, %d cancelled\n", N, counts[TSD_OK], counts[TSD_CANCELLED]);
	ck_assert_msg(counts[TSD_CANCELLED] > 0, "nothing was cancelled by the unload");
	/* the name can be loaded again */
	load_heavy(c);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

/* A client that dies with requests queued and running: they are dropped, others go on. The
 * client is a process of its own, killed: closing a socket with requests in flight in this
 * process can hang nng 1.5 (dh_raw_close), and a crash is what a daemon must survive. */
START_TEST(t_client_gone)
{
	dh_daemon d = {0};
	start_heavy(&d, NULL);
	enum { N = 24 };
	nng_msg *req = heavy_msg("gone", NULL, 0, false);
	pid_t sender = dh_spawn_sender(&d, req, N);
	nng_msg_free(req);
	wait_received(&d, N);
	dh_kill_sender(sender);
	tsd_client *c = dh_client(&d);
	nng_socket s2 = dh_raw_open(&d, DH_TIMEOUT_MS);
	static dh_async one;
	dh_async_send(s2, &one, heavy_msg("after", NULL, 0, false));
	proto_msg *pm = calloc(1, sizeof(*pm));
	tsd_status st = dh_async_wait(&one, pm);
	ck_assert_msg(st == TSD_OK, "a request after another client left: %s",
		      st == TSD_STATUS_COUNT ? "no reply" : tsd_status_name(st));
	proto_msg_free(pm);
	free(pm);
	dh_async_free(&one);
	dh_raw_close(s2);
	/* the executor sends a reply before the loop counts its job: the counts may trail the
	 * reply just taken by a moment (seen under TSan) */
	double cancelled = 0, ok = 0;
	for (int i = 0; i < 250; i++) {
		cancelled = dh_stat(c, "models.heavy.cancelled");
		ok = dh_stat(c, "models.heavy.ok");
		if (ok + cancelled >= N + 1)
			break;
		usleep(20000);
	}
	fprintf(stderr, "daemon: a client left with %d in flight: %g cancelled, %g ok in all\n", N, cancelled, ok);
	/* each request counted once: finished, or dropped (queued) or cancelled (running) */
	ck_assert_msg(ok + cancelled == N + 1, "%g ok + %g cancelled for %d requests", ok, cancelled, N + 1);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

/* client_inflight_max: one connection's requests beyond it are busy at once */
START_TEST(t_inflight_max)
{
	dh_daemon d = {0};
	start_heavy(&d, "{\"client_inflight_max\":3}");
	nng_socket s = dh_raw_open(&d, DH_TIMEOUT_MS);
	enum { N = 10 };
	static dh_async q[N];
	int counts[TSD_STATUS_COUNT + 1] = {0};
	send_heavy(s, q, N, "q", NULL, 0);
	wait_all(q, N, ST(OK) | ST(BUSY), counts, TSD_BUSY, "client_inflight_max");
	dh_raw_close(s);
	ck_assert_msg(counts[TSD_BUSY] > 0 && counts[TSD_OK] >= 3, "client_inflight_max 3 and %d at once: %d ok, %d busy",
		      N, counts[TSD_OK], counts[TSD_BUSY]);
	/* another connection is not limited by this one's count */
	tsd_client *c = dh_client(&d);
	float y[HR * HC];
	char why[200];
	ck_assert_int_eq(dh_infer(c, "heavy", NULL, heavyX, HR, HC, y, HR * HC, why, sizeof(why)), TSD_OK);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

/* ---- a peer whose uid is not allowed ---- */

START_TEST(t_unauthorised)
{
	dh_daemon d = {0};
	char cfg[128];
	snprintf(cfg, sizeof(cfg), "{\"allowed_uids\":[%u]}", (unsigned)getuid() + 12345u);
	dh_start(&d, cfg);
	ck_assert_msg(d.refused, "health was answered for a uid not in allowed_uids");
	tsd_client *c = dh_client(&d);
	const char *verbs[] = {"hello", "health", "stats", "model.list", "nonsense"};
	for (int i = 0; i < 5; i++) {
		tsd_reply *r = NULL;
		tsd_status s = !strcmp(verbs[i], "hello") ? tsd_client_hello(c, &r) : tsd_client_call_verb(c, verbs[i], &r);
		ck_assert_msg(s == TSD_UNAUTHORISED, "%s: %s, want unauthorised", verbs[i], tsd_status_name(s));
		ck_assert_msg(r && strstr(tsd_reply_error(r), "allowed_uids"), "%s: message %s", verbs[i],
			      r ? tsd_reply_error(r) : "(none)");
		tsd_reply_free(r);
	}
	float x[4] = {1, 2, 3, 4}, y[3];
	char why[256];
	ck_assert_int_eq(dh_infer(c, "lin", NULL, x, 1, 4, y, 3, why, sizeof(why)), TSD_UNAUTHORISED);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

/* ---- hot reload under load ---- */

typedef struct reload_arg {
	const dh_daemon *d;
	const float *old_y, *new_y;
	const float *x;
	atomic_bool *stop;
	int n_old, n_new, n_other, n_fail, new_then_old;
	char err[256];
} reload_arg;

static void *reload_client(void *p)
{
	reload_arg *a = p;
	tsd_client *c = tsd_client_open(a->d->url, DH_TIMEOUT_MS, a->err, sizeof(a->err));
	while (c && !atomic_load(a->stop)) {
		float got[3];
		char why[200];
		tsd_status s = dh_infer(c, "lin", NULL, a->x, 1, 4, got, 3, why, sizeof(why));
		if (s != TSD_OK) {
			a->n_fail++;
			snprintf(a->err, sizeof(a->err), "%s: %s", tsd_status_name(s), why);
		} else if (close_to(got, a->new_y, 3, TOL)) {
			a->n_new++;
		} else if (close_to(got, a->old_y, 3, TOL)) {
			a->n_old++;
			a->new_then_old += a->n_new > 0;
		} else {
			a->n_other++;
			snprintf(a->err, sizeof(a->err), "got %g %g %g: neither weights'", got[0], got[1], got[2]);
		}
	}
	dh_client_close(c);
	return NULL;
}

static void write_lin_files(dh_daemon *d, const char *weights, const float *W, const float *b)
{
	const char *names[2] = {"W", "b"};
	const float *data[2] = {W, b};
	dh_write_safetensors(d, weights, 2, names, data, (const int[]){2, 1}, (const int64_t[][4]){{3, 4}, {3}});
	char spec[2048];
	snprintf(spec, sizeof(spec), "{\"name\":\"lin\",\"weights\":\"%s\"," LIN_GRAPH "}", weights);
	dh_write_file(d, "lin.json", spec, strlen(spec));
}

static int lin_version(tsd_client *c)
{
	cJSON *l = dh_call_json(c, "model.list");
	const cJSON *m = cJSON_GetArrayItem(jget(l, "models"), 0);
	int v = m ? (int)dh_num(m, "version") : -1;
	cJSON_Delete(l);
	return v;
}

START_TEST(t_hot_reload)
{
	dh_daemon d = {0};
	float W0[12], b0[3], W1[12], b1[3], x[4] = {1, -2, 0.5f, 3}, y0[3], y1[3];
	fill(W0, 12, 70, 1.0f);
	fill(b0, 3, 71, 1.0f);
	fill(W1, 12, 72, 1.0f);
	fill(b1, 3, 73, 1.0f);
	linear_ref(x, 1, 4, W0, b0, 3, y0);
	linear_ref(x, 1, 4, W1, b1, 3, y1);
	dh_prepare(&d);
	write_lin_files(&d, "lin_a.safetensors", W0, b0);
	dh_start(&d, "{\"preload\":[\"lin.json\"]}");
	tsd_client *c = dh_client(&d);
	ck_assert_int_eq(lin_version(c), 1);
	enum { NT = 4 };
	static reload_arg args[NT];
	pthread_t th[NT];
	atomic_bool stop = false;
	for (int i = 0; i < NT; i++) {
		args[i] = (reload_arg){.d = &d, .old_y = y0, .new_y = y1, .x = x, .stop = &stop};
		ck_assert_int_eq(pthread_create(&th[i], NULL, reload_client, &args[i]), 0);
	}
	usleep(100000);
	write_lin_files(&d, "lin_b.safetensors", W1, b1);
	ck_assert_int_eq(kill(d.pid, SIGHUP), 0);
	int v = 1;
	for (int i = 0; i < 400 && v == 1; i++) {
		usleep(25000);
		v = lin_version(c);
	}
	usleep(150000);
	atomic_store(&stop, true);
	for (int i = 0; i < NT; i++)
		pthread_join(th[i], NULL);
	ck_assert_msg(v == 2, "model.list version %d after the reload, want 2", v);
	for (int i = 0; i < NT; i++) {
		reload_arg *a = &args[i];
		fprintf(stderr, "daemon: reload client %d: %d old, %d new\n", i, a->n_old, a->n_new);
		ck_assert_msg(!a->n_fail && !a->n_other, "client %d: %d failed, %d wrong: %s", i, a->n_fail, a->n_other,
			      a->err);
		ck_assert_msg(a->n_new > 0, "client %d never saw the new weights", i);
		ck_assert_msg(!a->new_then_old, "client %d saw the old weights after the new", i);
	}
	float got[3];
	char why[200];
	ck_assert_int_eq(dh_infer(c, "lin", NULL, x, 1, 4, got, 3, why, sizeof(why)), TSD_OK);
	assert_close(got, y1, 3, "after the reload");
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

/* ---- SIGTERM with requests in flight ---- */

START_TEST(t_sigterm_drain)
{
	dh_daemon d = {0};
	start_heavy(&d, NULL);
	enum { NS = 3, PER = 8 };
	nng_socket s[NS];
	static dh_async q[NS][PER];
	char id[32];
	for (int k = 0; k < NS; k++)
		s[k] = dh_raw_open(&d, DH_TIMEOUT_MS);
	for (int k = 0; k < NS; k++) {
		snprintf(id, sizeof(id), "s%dq", k);
		send_heavy(s[k], q[k], PER, id, NULL, 0);
	}
	wait_received(&d, NS * PER);
	char err[200];
	tsd_client *c = tsd_client_open(d.url, 2000, err, sizeof(err));
	ck_assert_msg(c, "%s", err);
	ck_assert_int_eq(kill(d.pid, SIGTERM), 0);
	/* health is still answered while draining: not ready (unless the drain ended first: the
	 * daemon is gone and nothing answers). The signal may be handled after a request that came
	 * with it: ask again until it is. */
	tsd_reply *hr = NULL;
	tsd_status hs;
	for (int i = 0; i < 100; i++) {
		tsd_reply_free(hr);
		hr = NULL;
		hs = tsd_client_call_verb(c, "health", &hr);
		if (hs != TSD_OK || cJSON_IsTrue(cJSON_GetObjectItem(tsd_reply_json(hr), "draining")))
			break;
		usleep(2000);
	}
	if (hs == TSD_OK) {
		const cJSON *hj = tsd_reply_json(hr);
		ck_assert_msg(cJSON_IsTrue(cJSON_GetObjectItem(hj, "draining")) && cJSON_IsFalse(cJSON_GetObjectItem(hj, "ready")),
			      "health while draining: not draining and not ready");
	} else {
		ck_assert_msg(!hr, "health while draining: %s", tsd_status_name(hs));
		fprintf(stderr, "daemon: health while draining got no answer (%s): the drain was over\n",
			tsd_client_message(c, NULL));
	}
	tsd_reply_free(hr);
	dh_client_close(c);
	/* one more after the signal, on a fresh connection: refused, not lost (unless the drain is
	 * over already and nothing listens: then there is nothing to refuse it) */
	nng_socket late;
	int lrv = dh_raw_try_open(&d, DH_TIMEOUT_MS, &late);
	ck_assert_msg(lrv == 0 || lrv == NNG_ECONNREFUSED || lrv == NNG_ENOENT, "dial %s: %s", d.nng_url, nng_strerror(lrv));
	static dh_async lq;
	if (!lrv) {
		cJSON *lh = cJSON_Parse("{\"id\":\"late\",\"verb\":\"model.list\"}");
		dh_async_send(late, &lq, dh_encode(lh, NULL, 0));
		cJSON_Delete(lh);
	} else {
		fprintf(stderr, "daemon: a connection after SIGTERM was refused by the socket: the drain was over\n");
	}
	int counts[TSD_STATUS_COUNT + 1] = {0};
	for (int k = 0; k < NS; k++)
		wait_all(q[k], PER, ST(OK) | ST(SHUTTING_DOWN), counts, TSD_SHUTTING_DOWN, "the daemon");
	int ok = counts[TSD_OK], down = counts[TSD_SHUTTING_DOWN];
	if (!lrv) {
		proto_msg *pm = calloc(1, sizeof(*pm));
		tsd_status st = dh_async_wait(&lq, pm);
		ck_assert_msg(st == TSD_SHUTTING_DOWN, "a request after SIGTERM: %s",
			      st == TSD_STATUS_COUNT ? nng_strerror(lq.rv) : tsd_status_name(st));
		proto_msg_free(pm);
		dh_async_free(&lq);
		free(pm);
	}
	fprintf(stderr, "daemon: SIGTERM with %d in flight: %d ok, %d shutting_down\n", NS * PER, ok, down);
	ck_assert_msg(ok > 0, "nothing in flight was finished by the drain");
	dh_wait_exit(&d);
	for (int k = 0; k < NS; k++)
		dh_raw_close(s[k]);
	dh_raw_close(late);
}
END_TEST

/* drain_seconds 0: what is queued at SIGTERM is answered shutting_down at once, and the
 * daemon still exits 0 */
START_TEST(t_drain_deadline)
{
	dh_daemon d = {0};
	start_heavy(&d, "{\"drain_seconds\":0}");
	nng_socket s = dh_raw_open(&d, DH_TIMEOUT_MS);
	enum { N = 16 };
	static dh_async q[N];
	int counts[TSD_STATUS_COUNT + 1] = {0};
	send_heavy(s, q, N, "q", NULL, 0);
	wait_received(&d, N);
	ck_assert_int_eq(kill(d.pid, SIGTERM), 0);
	wait_all(q, N, ST(OK) | ST(SHUTTING_DOWN) | ST(CANCELLED) | NO_REPLY, counts, TSD_SHUTTING_DOWN, "the daemon");
	int down = counts[TSD_SHUTTING_DOWN] + counts[TSD_CANCELLED], none = counts[TSD_STATUS_COUNT];
	fprintf(stderr, "daemon: drain_seconds 0 with %d in flight: %d ok, %d shutting_down or cancelled, %d lost\n",
		N, counts[TSD_OK], down, none);
	ck_assert_msg(!none, "%d requests got no reply", none);
	ck_assert_msg(down > 0, "nothing was refused at a drain deadline of 0 s");
	dh_wait_exit(&d);
	dh_raw_close(s);
}
END_TEST

/* SIGHUP with a broken spec file: the old version keeps serving */
START_TEST(t_reload_broken)
{
	dh_daemon d = {0};
	float W0[12], b0[3], x[4] = {1, 2, 3, 4}, y0[3], got[3];
	fill(W0, 12, 80, 1.0f);
	fill(b0, 3, 81, 1.0f);
	linear_ref(x, 1, 4, W0, b0, 3, y0);
	dh_prepare(&d);
	write_lin_files(&d, "lin_a.safetensors", W0, b0);
	dh_start(&d, "{\"preload\":[\"lin.json\"]}");
	tsd_client *c = dh_client(&d);
	const char *broken[] = {"{\"name\":\"lin\",", "{\"name\":\"lin\",\"weights\":\"missing.safetensors\"," LIN_GRAPH "}"};
	char why[200];
	for (int k = 0; k < 2; k++) {
		dh_write_file(&d, "lin.json", broken[k], strlen(broken[k]));
		ck_assert_int_eq(kill(d.pid, SIGHUP), 0);
		usleep(300000);
		tsd_status st = dh_infer(c, "lin", NULL, x, 1, 4, got, 3, why, sizeof(why));
		ck_assert_msg(st == TSD_OK, "infer after a broken reload %d: %s: %s", k, tsd_status_name(st), why);
		assert_close(got, y0, 3, "after a broken reload");
		ck_assert_int_eq(lin_version(c), 1);
	}
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

Suite *daemon_suite(void)
{
	Suite *s = suite_create("daemon");
	dh_add_test(s, "load_infer_unload", t_load_infer_unload, 60);
	dh_add_test(s, "loop_run", t_loop_run, 60);
	dh_add_test(s, "realize_shared", t_realize_shared, 60);
	dh_add_test(s, "train", t_train, 60);
	dh_add_test(s, "infer_during_train", t_infer_during_train, 60);
	dh_add_test(s, "concurrent_clients", t_concurrent_clients, 90);
	dh_add_test(s, "priority", t_priority, 60);
	dh_add_test(s, "timeout", t_timeout, 60);
	dh_add_test(s, "busy", t_busy, 60);
	dh_add_test(s, "latest_only", t_latest_only, 60);
	dh_add_test(s, "unload_queued", t_unload_queued, 60);
	dh_add_test(s, "client_gone", t_client_gone, 60);
	dh_add_test(s, "inflight_max", t_inflight_max, 60);
	dh_add_test(s, "unauthorised", t_unauthorised, 60);
	dh_add_test(s, "hot_reload", t_hot_reload, 90);
	dh_add_test(s, "train_replaced", t_train_replaced, 90);
	dh_add_test(s, "sigterm_drain", t_sigterm_drain, 60);
	dh_add_test(s, "drain_deadline", t_drain_deadline, 60);
	dh_add_test(s, "reload_broken", t_reload_broken, 60);
	return s;
}
