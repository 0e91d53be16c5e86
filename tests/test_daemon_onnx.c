/* test_daemon_onnx.c: ONNX models served by the real daemon: uploaded or read from models_dir,
 * a symbolic dim made the batch axis and callers' rows merged into shared launches (results
 * checked row by row), shapes fixed by the spec, inputs given as constants, a model whose rows
 * meet refused, bad loads answered with errors while the daemon keeps serving, and a preload. */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon_harness.h"
#include "onnx_mb.h"

#include <tensord/verbs.h>

/* ---- the models ---- */

static float mlpW[6] = {0.5f, -1.0f, 2.0f, 0.25f, -0.75f, 1.5f}, mlpB[2] = {0.1f, -0.2f};
static int64_t mlpWd[2] = {3, 2}, mlpBd[1] = {2};
static char *mm_in[] = {"x", "W"}, *mm_out[] = {"h"}, *add_in[] = {"h", "b"}, *add_out[] = {"a"},
	    *relu_in[] = {"a"}, *relu_out[] = {"y"};

/* y = relu(x @ W + b), x [batch, 3] */
static uint8_t *mlp_model(size_t *len)
{
	mb b;
	mb_init(&b, 13);
	mb_input(&b, "x", 2, (int64_t[]){-1, 3});
	mb_output(&b, "y", 2, (int64_t[]){-1, 2});
	mb_init_f32(&b, "W", 2, mlpWd, mlpW, 6);
	mb_init_f32(&b, "b", 1, mlpBd, mlpB, 2);
	mb_node(&b, "MatMul", 2, mm_in, 1, mm_out);
	mb_node(&b, "Add", 2, add_in, 1, add_out);
	mb_node(&b, "Relu", 1, relu_in, 1, relu_out);
	return mb_pack(&b, len);
}

static void mlp_ref(const float *x, int64_t rows, float *y)
{
	for (int64_t r = 0; r < rows; r++)
		for (int j = 0; j < 2; j++) {
			float a = mlpB[j];
			for (int k = 0; k < 3; k++)
				a += x[r * 3 + k] * mlpW[k * 2 + j];
			y[r * 2 + j] = a > 0 ? a : 0;
		}
}

/* g = x^T @ x: every row meets every other */
static char *tr_in[] = {"x"}, *tr_out[] = {"xt"}, *gram_in[] = {"xt", "x"}, *gram_out[] = {"g"};
static uint8_t *gram_model(size_t *len)
{
	mb b;
	mb_init(&b, 13);
	mb_input(&b, "x", 2, (int64_t[]){-1, 3});
	mb_output(&b, "g", 2, (int64_t[]){3, 3});
	mb_node(&b, "Transpose", 1, tr_in, 1, tr_out);
	mb_node(&b, "MatMul", 2, gram_in, 1, gram_out);
	return mb_pack(&b, len);
}

/* y = x * k, k a scalar input */
static char *mul_in[] = {"x", "k"}, *mul_out[] = {"y"};
static uint8_t *scale_model(size_t *len)
{
	mb b;
	mb_init(&b, 13);
	mb_input(&b, "x", 2, (int64_t[]){-1, 3});
	mb_input(&b, "k", 0, NULL);
	mb_output(&b, "y", 2, (int64_t[]){-1, 3});
	mb_node(&b, "Mul", 2, mul_in, 1, mul_out);
	return mb_pack(&b, len);
}

/* y = Reshape(x, shape), x [batch, 6], shape an int64 input [3] */
static char *rs_in[] = {"x", "shape"}, *rs_out[] = {"y"};
static uint8_t *reshape_model(size_t *len)
{
	mb b;
	mb_init(&b, 13);
	mb_input(&b, "x", 2, (int64_t[]){-1, 6});
	b.inp[1] = mb_value(&b, &b.in[1], "shape", 7, 1, (int64_t[]){3});
	b.g.n_input++;
	mb_output(&b, "y", 3, (int64_t[]){-1, 2, 3});
	mb_node(&b, "Reshape", 2, rs_in, 1, rs_out);
	return mb_pack(&b, len);
}

/* A recurrent cell: hn = x @ W + h @ U, y = hn @ V (x [batch, 3], h [batch, 4]); integer
 * weights, so every step is exact in float32 whatever the order of the sums. */
static float rnnW[12] = {1, 2, 0, 1, 0, 1, -2, 1, -1, 0, 1, 1}, rnnU[16] = {1, 0, 0, 0, 0, 0, -1, 0, 0, 1, 0, 0, 0, 0, 0, 1},
	     rnnV[8] = {1, 0, -1, 1, 2, 1, 0, -1};
static int64_t rnnWd[2] = {3, 4}, rnnUd[2] = {4, 4}, rnnVd[2] = {4, 2};
static char *r_a_in[] = {"x", "W"}, *r_a_out[] = {"a"}, *r_b_in[] = {"h", "U"}, *r_b_out[] = {"b"},
	    *r_h_in[] = {"a", "b"}, *r_h_out[] = {"hn"}, *r_y_in[] = {"hn", "V"}, *r_y_out[] = {"y"};
static uint8_t *rnn_model(size_t *len)
{
	mb b;
	mb_init(&b, 13);
	mb_input(&b, "x", 2, (int64_t[]){-1, 3});
	mb_input(&b, "h", 2, (int64_t[]){-1, 4});
	mb_output(&b, "y", 2, (int64_t[]){-1, 2});
	mb_output(&b, "hn", 2, (int64_t[]){-1, 4});
	mb_init_f32(&b, "W", 2, rnnWd, rnnW, 12);
	mb_init_f32(&b, "U", 2, rnnUd, rnnU, 16);
	mb_init_f32(&b, "V", 2, rnnVd, rnnV, 8);
	mb_node(&b, "MatMul", 2, r_a_in, 1, r_a_out);
	mb_node(&b, "MatMul", 2, r_b_in, 1, r_b_out);
	mb_node(&b, "Add", 2, r_h_in, 1, r_h_out);
	mb_node(&b, "MatMul", 2, r_y_in, 1, r_y_out);
	return mb_pack(&b, len);
}

static void rnn_ref(const float *x, float *h, float *y)
{
	float hn[4];
	for (int j = 0; j < 4; j++) {
		float acc = 0;
		for (int k = 0; k < 3; k++)
			acc += x[k] * rnnW[k * 4 + j];
		for (int k = 0; k < 4; k++)
			acc += h[k] * rnnU[k * 4 + j];
		hn[j] = acc;
	}
	memcpy(h, hn, sizeof(hn));
	for (int j = 0; j < 2; j++) {
		float acc = 0;
		for (int k = 0; k < 4; k++)
			acc += h[k] * rnnV[k * 2 + j];
		y[j] = acc;
	}
}

/* ---- helpers ---- */

/* model.load of spec_json (without "verb") with the model's bytes as the tensor "onnx" (data
 * NULL: none); the status, and the reply's message or model entry (copied) into *model. */
static tsd_status load(tsd_client *c, const char *spec_json, const uint8_t *data, size_t len, char *msg,
		       size_t msglen, cJSON **model)
{
	cJSON *h = cJSON_Parse(spec_json);
	ck_assert_ptr_nonnull(h);
	cJSON_AddStringToObject(h, "verb", "model.load");
	tsd_tensor t = {.name = "onnx", .dtype = TSD_U8, .ndim = 1, .shape = {(int64_t)len}, .data = data, .nbytes = len};
	tsd_reply *r = NULL;
	tsd_status s = tsd_client_call(c, h, data ? &t : NULL, data ? 1 : 0, &r);
	cJSON_Delete(h);
	snprintf(msg, msglen, "%s", s == TSD_OK ? "" : tsd_client_message(c, r));
	if (model)
		*model = s == TSD_OK ? cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(tsd_reply_json(r), "model"), true)
				     : NULL;
	tsd_reply_free(r);
	return s;
}

#define LOAD_FAILS(c, spec, data, len, want_status, word)                                                    \
	do {                                                                                                 \
		char m_[600];                                                                                \
		tsd_status s_ = load(c, spec, data, len, m_, sizeof(m_), NULL);                               \
		ck_assert_msg(s_ == (want_status), "line %d: %s: %s", __LINE__, tsd_status_name(s_), m_);       \
		ck_assert_msg(strstr(m_, word), "line %d: message \"%s\" lacks \"%s\"", __LINE__, m_, word); \
	} while (0)

/* The shape of the port named name in a model.list entry's inputs or outputs, as "a,b". */
static void port_shape(const cJSON *model, const char *list, int i, char *out, size_t cap)
{
	const cJSON *p = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(model, list), i);
	const cJSON *sh = cJSON_GetObjectItemCaseSensitive(p, "shape");
	size_t at = 0;
	out[0] = 0;
	for (const cJSON *d = sh ? sh->child : NULL; d && at < cap; d = d->next)
		at += (size_t)snprintf(out + at, cap - at, "%s%g", at ? "," : "", d->valuedouble);
}

#define NTHREADS 4
#define NREQ 25

typedef struct caller {
	const dh_daemon *d;
	int id, ok;
	char err[300];
} caller;

/* NREQ requests of 1 to 3 rows each, every row checked against mlp_ref. */
static void *caller_main(void *p)
{
	caller *a = p;
	tsd_client *c = tsd_client_open(a->d->url, DH_TIMEOUT_MS, a->err, sizeof(a->err));
	for (int i = 0; c && i < NREQ; i++) {
		int64_t rows = 1 + (a->id + i) % 3;
		float x[9], want[6], got[6];
		for (int k = 0; k < rows * 3; k++)
			x[k] = (float)((a->id * 31 + i * 7 + k * 3) % 17) / 4.0f - 2.0f;
		mlp_ref(x, rows, want);
		char why[200];
		tsd_status s = dh_infer(c, "mlp", NULL, x, rows, 3, got, rows * 2, why, sizeof(why));
		if (s != TSD_OK) {
			snprintf(a->err, sizeof(a->err), "caller %d request %d: %s: %s", a->id, i, tsd_status_name(s), why);
			break;
		}
		for (int k = 0; k < rows * 2; k++)
			if (fabsf(got[k] - want[k]) > 1e-5f) {
				snprintf(a->err, sizeof(a->err), "caller %d request %d: [%d] = %g, want %g", a->id, i, k,
					 got[k], want[k]);
				i = NREQ;
				break;
			}
		a->ok += !a->err[0];
	}
	dh_client_close(c);
	return NULL;
}

/* ---- tests ---- */

START_TEST(t_onnx_batched)
{
	dh_daemon d = {0};
	dh_start(&d, NULL);
	tsd_client *c = dh_client(&d);
	size_t len;
	uint8_t *bytes = mlp_model(&len);
	char msg[600], shape[64];
	cJSON *m = NULL;
	tsd_status s = load(c, "{\"name\": \"mlp\", \"format\": \"onnx\", \"batching\": {\"max\": 8, \"delay_us\": 3000}}",
			    bytes, len, msg, sizeof(msg), &m);
	ck_assert_msg(s == TSD_OK, "%s: %s", tsd_status_name(s), msg);
	ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(m, "format")->valuestring, "onnx");
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "batched")));
	port_shape(m, "inputs", 0, shape, sizeof(shape));
	ck_assert_str_eq(shape, "-1,3");
	port_shape(m, "outputs", 0, shape, sizeof(shape));
	ck_assert_str_eq(shape, "-1,2");
	cJSON_Delete(m);

	static caller args[NTHREADS];
	pthread_t th[NTHREADS];
	for (int i = 0; i < NTHREADS; i++) {
		args[i] = (caller){.d = &d, .id = i};
		ck_assert_int_eq(pthread_create(&th[i], NULL, caller_main, &args[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < NTHREADS; i++)
		ck_assert_msg(args[i].ok == NREQ, "%s", args[i].err);
	double req = dh_stat(c, "models.mlp.requests"), batches = dh_stat(c, "models.mlp.batches");
	fprintf(stderr, "onnx: %g requests in %g launches\n", req, batches);
	ck_assert_int_eq((int)req, NTHREADS * NREQ);
	ck_assert_msg(batches < req, "%g launches for %g requests: nothing was merged", batches, req);

	/* the same file from models_dir with its shape fixed: one request a launch, exact shapes */
	dh_write_file(&d, "mlp.onnx", bytes, len);
	s = load(c, "{\"name\": \"mlp4\", \"format\": \"onnx\", \"file\": \"mlp.onnx\", \"shapes\": {\"x\": [4, 3]}}",
		 NULL, 0, msg, sizeof(msg), &m);
	ck_assert_msg(s == TSD_OK, "%s: %s", tsd_status_name(s), msg);
	ck_assert(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(m, "batched")));
	port_shape(m, "outputs", 0, shape, sizeof(shape));
	ck_assert_str_eq(shape, "4,2");
	cJSON_Delete(m);
	float x[12], want[8], got[8];
	for (int k = 0; k < 12; k++)
		x[k] = (float)k / 3.0f - 1.5f;
	mlp_ref(x, 4, want);
	ck_assert_int_eq(dh_infer(c, "mlp4", NULL, x, 4, 3, got, 8, msg, sizeof(msg)), TSD_OK);
	for (int k = 0; k < 8; k++)
		ck_assert_float_eq_tol(got[k], want[k], 1e-5f);
	ck_assert_int_eq(dh_infer(c, "mlp4", NULL, x, 2, 3, got, 4, msg, sizeof(msg)), TSD_SHAPE_MISMATCH);
	free(bytes);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

START_TEST(t_onnx_constants_and_refusals)
{
	dh_daemon d = {0};
	dh_start(&d, NULL);
	tsd_client *c = dh_client(&d);
	size_t len, glen, slen;
	uint8_t *mlp = mlp_model(&len), *gram = gram_model(&glen), *scale = scale_model(&slen);
	char msg[600], shape[64];
	cJSON *m = NULL;
	dh_load(c, "{\"name\": \"lin\", \"graph\": {\"nodes\": [{\"id\": \"x\", \"op\": \"input\", \"dtype\": \"float32\", "
		   "\"shape\": [-1, 3]}, {\"id\": \"y\", \"op\": \"relu\", \"in\": [\"x\"]}], \"outputs\": [\"y\"]}}",
		NULL, 0);

	/* a scalar input given once at load: the model's only input is then x */
	tsd_status s = load(c, "{\"name\": \"scale\", \"format\": \"onnx\", \"constants\": {\"k\": 2.5}}", scale, slen,
			    msg, sizeof(msg), &m);
	ck_assert_msg(s == TSD_OK, "%s: %s", tsd_status_name(s), msg);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(m, "inputs")), 1);
	port_shape(m, "outputs", 0, shape, sizeof(shape));
	ck_assert_str_eq(shape, "-1,3");
	cJSON_Delete(m);
	float x[6] = {1, -2, 3, 0.5f, 0, -4}, got[6];
	ck_assert_int_eq(dh_infer(c, "scale", NULL, x, 2, 3, got, 6, msg, sizeof(msg)), TSD_OK);
	for (int k = 0; k < 6; k++)
		ck_assert_float_eq(got[k], 2.5f * x[k]);
	/* an integer constant the graph's shape depends on (read while building) */
	size_t rlen;
	uint8_t *rs = reshape_model(&rlen);
	s = load(c, "{\"name\": \"rs\", \"format\": \"onnx\", \"constants\": {\"shape\": [0, 2, 3]}}", rs, rlen, msg,
		 sizeof(msg), &m);
	ck_assert_msg(s == TSD_OK, "%s: %s", tsd_status_name(s), msg);
	port_shape(m, "outputs", 0, shape, sizeof(shape));
	ck_assert_str_eq(shape, "-1,2,3");
	cJSON_Delete(m);
	float x6[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, got6[12];
	ck_assert_int_eq(dh_infer(c, "rs", NULL, x6, 2, 6, got6, 12, msg, sizeof(msg)), TSD_OK);
	ck_assert(!memcmp(got6, x6, sizeof(x6)));
	LOAD_FAILS(c, "{\"name\": \"j\", \"format\": \"onnx\", \"constants\": {\"shape\": [0, 2.5, 3]}}", rs, rlen,
		   TSD_BAD_REQUEST, "no integer");
	/* without the constant the graph cannot be built for callers' values */
	LOAD_FAILS(c, "{\"name\": \"j\", \"format\": \"onnx\", \"shapes\": {\"x\": [2, 6], \"shape\": [3]}}", rs,
		   rlen, TSD_BAD_REQUEST, "Reshape");
	free(rs);
	/* without it, k has no batch axis beside x's */
	LOAD_FAILS(c, "{\"name\": \"scale2\", \"format\": \"onnx\"}", scale, slen, TSD_BAD_REQUEST, "no batch axis");

	/* rows that meet are never batched */
	LOAD_FAILS(c, "{\"name\": \"gram\", \"format\": \"onnx\"}", gram, glen, TSD_BAD_REQUEST,
		   "reduction runs over the batch axis");
	/* ... but served one request a launch with its shape fixed */
	s = load(c, "{\"name\": \"gram\", \"format\": \"onnx\", \"shapes\": {\"x\": [2, 3]}}", gram, glen, msg,
		 sizeof(msg), NULL);
	ck_assert_msg(s == TSD_OK, "%s: %s", tsd_status_name(s), msg);

	/* bad loads: each a clear error */
	uint8_t junk[64];
	memset(junk, 0xff, sizeof(junk));
	LOAD_FAILS(c, "{\"name\": \"j\", \"format\": \"onnx\"}", junk, sizeof(junk), TSD_BAD_REQUEST, "onnx:");
	LOAD_FAILS(c, "{\"name\": \"j\", \"format\": \"onnx\"}", mlp, len / 2, TSD_BAD_REQUEST, "onnx:");
	LOAD_FAILS(c, "{\"name\": \"j\", \"format\": \"onnx\", \"file\": \"../x.onnx\"}", NULL, 0, TSD_BAD_REQUEST, "..");
	LOAD_FAILS(c, "{\"name\": \"j\", \"format\": \"onnx\", \"file\": \"none.onnx\"}", NULL, 0, TSD_BAD_REQUEST,
		   "none.onnx");
	LOAD_FAILS(c, "{\"name\": \"j\", \"format\": \"onnx\", \"file\": \"m.onnx\"}", mlp, len, TSD_BAD_REQUEST, "not both");
	LOAD_FAILS(c, "{\"name\": \"j\", \"format\": \"onnx\"}", NULL, 0, TSD_BAD_REQUEST, "needs \"file\"");
	LOAD_FAILS(c, "{\"name\": \"j\", \"format\": \"onnx\", \"graph\": {}}", mlp, len, TSD_BAD_REQUEST, "graph:");
	LOAD_FAILS(c, "{\"name\": \"j\", \"format\": \"tflite\"}", mlp, len, TSD_BAD_REQUEST, "format:");
	LOAD_FAILS(c, "{\"name\": \"j\", \"shapes\": {}}", mlp, len, TSD_BAD_REQUEST, "shapes: a field of ONNX");
	LOAD_FAILS(c, "{\"name\": \"j\", \"format\": \"onnx\", \"shapes\": {\"zz\": [1]}}", mlp, len, TSD_BAD_REQUEST,
		   "zz: not an input");
	LOAD_FAILS(c, "{\"name\": \"j\", \"format\": \"onnx\", \"shapes\": {\"x\": [-1, -1]}}", mlp, len,
		   TSD_BAD_REQUEST, "at most one -1");
	LOAD_FAILS(c, "{\"name\": \"j\", \"format\": \"onnx\", \"shapes\": {\"x\": [-1, 4]}}", mlp, len,
		   TSD_SHAPE_MISMATCH, "building the graph");
	LOAD_FAILS(c, "{\"name\": \"j\", \"format\": \"onnx\", \"constants\": {\"k\": [1, 2]}}", scale, slen,
		   TSD_BAD_REQUEST, "2 value(s), the input has 1");
	LOAD_FAILS(c, "{\"name\": \"j\", \"format\": \"onnx\", \"constants\": {\"x\": 1, \"k\": 2}}", scale, slen,
		   TSD_BAD_REQUEST, "symbolic");
	/* an ONNX model's weights are its file */
	cJSON *h = cJSON_Parse("{\"verb\": \"model.save\", \"name\": \"gram\"}");
	tsd_reply *r = NULL;
	ck_assert_int_eq(tsd_client_call(c, h, NULL, 0, &r), TSD_BAD_REQUEST);
	ck_assert_msg(strstr(tsd_client_message(c, r), "ONNX"), "%s", tsd_client_message(c, r));
	tsd_reply_free(r);
	cJSON_Delete(h);

	/* nothing failed loaded; the others still serve */
	cJSON *list = dh_call_json(c, "model.list");
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(list, "models")), 4);
	cJSON_Delete(list);
	ck_assert_int_eq(dh_infer(c, "scale", NULL, x, 1, 3, got, 3, msg, sizeof(msg)), TSD_OK);
	ck_assert_int_eq(dh_infer(c, "lin", NULL, x, 2, 3, got, 6, msg, sizeof(msg)), TSD_OK);
	free(mlp);
	free(gram);
	free(scale);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

/* An ONNX model named by the config's preload: served when the daemon says ready. */
START_TEST(t_onnx_preload)
{
	dh_daemon d = {0};
	size_t len;
	uint8_t *bytes = mlp_model(&len);
	dh_prepare(&d);
	dh_write_file(&d, "mlp.onnx", bytes, len);
	static const char spec[] = "{\"name\": \"brain\", \"format\": \"onnx\", \"file\": \"mlp.onnx\", "
				   "\"batching\": {\"max\": 4}}";
	dh_write_file(&d, "brain.json", spec, sizeof(spec) - 1);
	dh_start(&d, "{\"preload\": [\"brain.json\"]}");
	tsd_client *c = dh_client(&d);
	float x[6] = {0.5f, -1, 2, 1, 1, -0.25f}, want[4], got[4];
	char msg[300];
	mlp_ref(x, 2, want);
	ck_assert_int_eq(dh_infer(c, "brain", NULL, x, 2, 3, got, 4, msg, sizeof(msg)), TSD_OK);
	for (int k = 0; k < 4; k++)
		ck_assert_float_eq_tol(got[k], want[k], 1e-5f);
	free(bytes);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

/* An ONNX file's input/output pair as a sequence's state (resolved when the executor has opened
 * the file): a stream of steps equals the same steps computed here, bit for bit. */
START_TEST(t_onnx_sequence)
{
	dh_daemon d = {0};
	dh_start(&d, NULL);
	tsd_client *c = dh_client(&d);
	size_t len;
	uint8_t *data = rnn_model(&len);
	char msg[600];
	LOAD_FAILS(c, "{\"name\":\"bad\",\"format\":\"onnx\",\"sequence\":{\"state\":[{\"input\":\"x\",\"output\":\"hn\"}]}}",
		   data, len, TSD_BAD_REQUEST, "differ");
	LOAD_FAILS(c, "{\"name\":\"bad\",\"format\":\"onnx\",\"sequence\":{\"state\":[{\"input\":\"h\",\"output\":\"hm\"}]}}",
		   data, len, TSD_BAD_REQUEST, "not an output");
	ck_assert_int_eq(load(c, "{\"name\":\"rnn\",\"format\":\"onnx\",\"sequence\":{\"state\":[{\"input\":\"h\",\"output\":"
				 "\"hn\",\"init\":[1,-1,0,2]}]}}",
			      data, len, msg, sizeof(msg), NULL),
			 TSD_OK);
	free(data);
	float h[4] = {1, -1, 0, 2}, x[3], want[2];
	unsigned seed = 9;
	for (int k = 0; k < 30; k++) {
		for (int i = 0; i < 3; i++) {
			seed = seed * 1103515245u + 12345u;
			x[i] = (float)((int)(seed >> 16) % 5 - 2);
		}
		rnn_ref(x, h, want);
		tsd_tensor in = DH_F32("x", x, 1, 3);
		tsd_infer_opts o = {.sequence_name = "onnx-stream", .sequence_start = k == 0, .sequence_end = k == 29,
				    .sequence_state = k == 29};
		tsd_reply *r = NULL;
		ck_assert_int_eq(tsd_infer(c, "rnn", &in, 1, &o, &r), TSD_OK);
		ck_assert_msg(!memcmp(tsd_reply_find(r, "y")->data, want, sizeof(want)), "step %d", k);
		if (k == 29)
			ck_assert(!memcmp(tsd_reply_find(r, "hn")->data, h, sizeof(h)));
		tsd_reply_free(r);
	}
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

Suite *daemononnx_suite(void)
{
	Suite *s = suite_create("daemononnx");
	dh_add_test(s, "batched", t_onnx_batched, 120);
	dh_add_test(s, "constants_and_refusals", t_onnx_constants_and_refusals, 120);
	dh_add_test(s, "preload", t_onnx_preload, 60);
	dh_add_test(s, "sequence", t_onnx_sequence, 120);
	return s;
}
