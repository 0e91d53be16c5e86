/* test_sequence.c: sequences with implicit state through the real daemon (docs/PROTOCOL.md,
 * "Sequences"). The model is a small recurrent cell whose arithmetic is exact in float32
 * (integer weights and inputs, so every order of summation gives the same bits): each step's
 * outputs are compared bit for bit with the same stream computed here step by step. Covers
 * one stream, 64 interleaved streams batched together starting and ending at random, the
 * state read back, restarts, every named error, idle ends, max_sequences, a connection that
 * closes, outlive_connection, a reload, plain requests carrying their state, and many short
 * sequences leaving nothing live. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "suites.h"

#include <tensord/verbs.h>

/* hn = W x + U h (x [-1,3], h [-1,4]); y = V hn [-1,2]; the state pair h <- hn. */
#define RNN_GRAPH                                                                                        \
	"\"graph\":{\"nodes\":[{\"id\":\"x\",\"op\":\"input\",\"dtype\":\"float32\",\"shape\":[-1,3]},"     \
	"{\"id\":\"h\",\"op\":\"input\",\"dtype\":\"float32\",\"shape\":[-1,4]},"                           \
	"{\"id\":\"W\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[4,3]},"                            \
	"{\"id\":\"U\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[4,4]},"                            \
	"{\"id\":\"V\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[2,4]},"                            \
	"{\"id\":\"a\",\"op\":\"linear\",\"in\":[\"x\",\"W\"]},{\"id\":\"b\",\"op\":\"linear\",\"in\":[\"h\",\"U\"]}," \
	"{\"id\":\"hn\",\"op\":\"add\",\"in\":[\"a\",\"b\"]},{\"id\":\"y\",\"op\":\"linear\",\"in\":[\"hn\",\"V\"]}]," \
	"\"outputs\":[\"y\",\"hn\"]},\"inputs\":[\"x\",\"h\"]"
#define RNN_SPEC(seq) "{\"name\":\"rnn\"," RNN_GRAPH ",\"batching\":{\"max\":64,\"delay_us\":2000}," seq "}"
#define RNN_SEQ "\"sequence\":{\"state\":[{\"input\":\"h\",\"output\":\"hn\",\"init\":[1,0,-1,2]}]}"

/* Small integers: sums of a few products stay far below 2^24, exact in float32. U's rows have
 * at most one non-zero of magnitude 1, so the state grows at most linearly. */
static const float W[12] = {1, 0, -1, 2, 1, 0, 0, -2, 1, 1, 1, 1};
static const float U[16] = {1, 0, 0, 0, 0, 0, 1, 0, 0, -1, 0, 0, 0, 0, 0, 1};
static const float V[8] = {1, -1, 2, 0, 0, 1, 1, -1};
static const float H0[4] = {1, 0, -1, 2};

static void load_rnn(tsd_client *c, const char *spec)
{
	tsd_tensor w[3] = {DH_F32("W", W, 4, 3), DH_F32("U", U, 4, 4), DH_F32("V", V, 2, 4)};
	dh_load(c, spec, w, 3);
}

/* One step here: h <- W x + U h; y = V h. */
static void step_ref(const float *x, float *h, float *y)
{
	float hn[4];
	for (int o = 0; o < 4; o++) {
		float acc = 0;
		for (int i = 0; i < 3; i++)
			acc += W[o * 3 + i] * x[i];
		for (int i = 0; i < 4; i++)
			acc += U[o * 4 + i] * h[i];
		hn[o] = acc;
	}
	memcpy(h, hn, sizeof(hn));
	for (int o = 0; o < 2; o++) {
		float acc = 0;
		for (int i = 0; i < 4; i++)
			acc += V[o * 4 + i] * h[i];
		y[o] = acc;
	}
}

static void xs(unsigned *seed, float *x)
{
	for (int i = 0; i < 3; i++) {
		*seed = *seed * 1103515245u + 12345u;
		x[i] = (float)((int)(*seed >> 16) % 7 - 3);
	}
}

/* A step of sequence id: its status; y (2 floats) and, with want_state, hn (4) on ok. */
static tsd_status step(tsd_client *c, uint64_t id, bool start, bool end, const float *x, float *y, float *hn,
		       char *err, size_t errlen)
{
	tsd_tensor in = DH_F32("x", x, 1, 3);
	tsd_infer_opts o = {.sequence_id = id, .sequence_start = start, .sequence_end = end, .sequence_state = hn != NULL};
	tsd_reply *r = NULL;
	tsd_status st = tsd_infer(c, "rnn", &in, 1, &o, &r);
	if (st == TSD_OK) {
		const tsd_tensor *ty = tsd_reply_find(r, "y"), *th = tsd_reply_find(r, "hn");
		ck_assert_msg(ty && ty->nbytes == 2 * sizeof(float), "y missing");
		memcpy(y, ty->data, 2 * sizeof(float));
		ck_assert_msg(!th == !hn, "the state is in the reply only when asked for");
		if (hn)
			memcpy(hn, th->data, 4 * sizeof(float));
	}
	snprintf(err, errlen, "%s", st == TSD_OK ? "" : (r ? tsd_reply_error(r) : tsd_client_error(c)));
	tsd_reply_free(r);
	return st;
}

/* stats' number at path once it equals want (a batch's bookkeeping can trail its replies: the
 * executor sends them before the job is back on the loop); asserts within 5 s. */
static void stat_is(tsd_client *c, const char *path, double want)
{
	double got = NAN;
	for (int k = 0; k < 500 && (got = dh_stat(c, path)) != want; k++)
		usleep(10000);
	ck_assert_msg(got == want, "%s: %g, want %g", path, got, want);
}

static void assert_same(const float *got, const float *want, int n, const char *what, int k)
{
	ck_assert_msg(!memcmp(got, want, (size_t)n * sizeof(float)), "%s at step %d: %g %g, want %g %g", what, k, got[0],
		      got[1], want[0], want[1]);
}

START_TEST(t_one_stream)
{
	dh_daemon d = {0};
	dh_start(&d, NULL);
	tsd_client *c = dh_client(&d);
	load_rnn(c, RNN_SPEC(RNN_SEQ));
	float h[4], x[3], y[2], want[2], hn[4];
	unsigned seed = 3;
	char err[256];
	for (int round = 0; round < 2; round++) { /* the second round restarts the live sequence: a reset */
		memcpy(h, H0, sizeof(h));
		for (int k = 0; k < 40; k++) {
			xs(&seed, x);
			step_ref(x, h, want);
			bool state = k % 10 == 9;
			ck_assert_int_eq(step(c, 7, k == 0, false, x, y, state ? hn : NULL, err, sizeof(err)), TSD_OK);
			assert_same(y, want, 2, "y", k);
			if (state)
				assert_same(hn, h, 4, "hn", k);
		}
	}
	/* a plain request carries its state and gets it back: the same numbers */
	xs(&seed, x);
	float h2[4];
	memcpy(h2, h, sizeof(h2));
	step_ref(x, h2, want);
	tsd_tensor in[2] = {DH_F32("x", x, 1, 3), DH_F32("h", h, 1, 4)};
	tsd_reply *r = NULL;
	ck_assert_int_eq(tsd_infer(c, "rnn", in, 2, NULL, &r), TSD_OK);
	assert_same(tsd_reply_find(r, "y")->data, want, 2, "plain y", 0);
	assert_same(tsd_reply_find(r, "hn")->data, h2, 4, "plain hn", 0);
	tsd_reply_free(r);
	/* the end step answers, then the sequence is gone */
	ck_assert_int_eq(step(c, 7, false, true, x, y, NULL, err, sizeof(err)), TSD_OK);
	assert_same(y, want, 2, "end y", 0);
	ck_assert_int_eq(step(c, 7, false, false, x, y, NULL, err, sizeof(err)), TSD_SEQUENCE_ENDED);
	ck_assert_msg(strstr(err, "sequence_end"), "%s", err);
	stat_is(c, "models.rnn.sequence.live", 0);
	stat_is(c, "models.rnn.sequence.started", 1);
	stat_is(c, "models.rnn.sequence.ended", 1);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

/* 64 streams interleaved on one connection, many steps in flight, starting and ending at random. */
#define NSEQ 64
typedef struct stream {
	uint64_t id;
	bool live;
	float h[4];
	unsigned seed;
} stream;

START_TEST(t_interleaved)
{
	dh_daemon d = {0};
	dh_start(&d, "{\"client_inflight_max\":256}");
	tsd_client *c = dh_client(&d);
	load_rnn(c, RNN_SPEC(RNN_SEQ));
	stream st[NSEQ];
	memset(st, 0, sizeof(st));
	unsigned rnd = 11;
	uint64_t next_id = 1000;
	int steps = 0, ends = 0;
	for (int round = 0; round < 30; round++) {
		tsd_call *calls[NSEQ];
		float want[NSEQ][2], x[NSEQ][3];
		bool start[NSEQ], end[NSEQ];
		tsd_tensor in[NSEQ];
		for (int k = 0; k < NSEQ; k++) {
			stream *s = &st[k];
			rnd = rnd * 1103515245u + 12345u;
			start[k] = !s->live || (rnd >> 16) % 23 == 0; /* a new sequence, or a restart */
			end[k] = (rnd >> 8) % 9 == 0;
			if (!s->live)
				s->id = next_id++;
			if (start[k])
				memcpy(s->h, H0, sizeof(s->h));
			s->live = !end[k];
			xs(&s->seed, x[k]);
			step_ref(x[k], s->h, want[k]);
			in[k] = DH_F32("x", x[k], 1, 3);
			tsd_infer_opts o = {.sequence_id = s->id, .sequence_start = start[k], .sequence_end = end[k]};
			ck_assert_int_eq(tsd_infer_submit(c, "rnn", &in[k], 1, &o, NULL, NULL, &calls[k]), TSD_OK);
		}
		for (int k = 0; k < NSEQ; k++) {
			tsd_reply *r = NULL;
			ck_assert(tsd_call_wait(calls[k], 30000));
			tsd_status s = tsd_call_take(calls[k], &r);
			ck_assert_msg(s == TSD_OK, "round %d stream %d: %s", round, k, tsd_call_error(calls[k]));
			assert_same(tsd_reply_find(r, "y")->data, want[k], 2, "y", round);
			ck_assert_msg(!tsd_reply_find(r, "hn"), "state in the reply");
			tsd_reply_free(r);
			tsd_call_free(calls[k]);
			steps++;
			ends += end[k];
		}
	}
	double batches = dh_stat(c, "models.rnn.batches");
	ck_assert_msg(batches < steps, "%d steps in %.0f batches: nothing batched across sequences", steps, batches);
	int live = 0;
	for (int k = 0; k < NSEQ; k++)
		live += st[k].live;
	stat_is(c, "models.rnn.sequence.live", live);
	stat_is(c, "models.rnn.sequence.ended", ends);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

START_TEST(t_errors)
{
	dh_daemon d = {0};
	dh_start(&d, NULL);
	tsd_client *c = dh_client(&d);
	load_rnn(c, RNN_SPEC("\"sequence\":{\"state\":[{\"input\":\"h\",\"output\":\"hn\"}],\"max_sequences\":2}"));
	float x[3] = {1, 2, 3}, y[2], x2[6] = {0};
	char err[256];
	ck_assert_int_eq(step(c, 5, false, false, x, y, NULL, err, sizeof(err)), TSD_SEQUENCE_ENDED);
	ck_assert_msg(strstr(err, "not live"), "%s", err);
	ck_assert_int_eq(step(c, 5, true, false, x, y, NULL, err, sizeof(err)), TSD_OK);
	ck_assert_int_eq(step(c, 6, true, false, x, y, NULL, err, sizeof(err)), TSD_OK);
	ck_assert_int_eq(step(c, 8, true, false, x, y, NULL, err, sizeof(err)), TSD_BUSY); /* max_sequences 2 */
	ck_assert_msg(strstr(err, "max_sequences"), "%s", err);
	/* the state is the daemon's: a step that carries it is refused */
	float h[4] = {0};
	tsd_tensor in2[2] = {DH_F32("x", x, 1, 3), DH_F32("h", h, 1, 4)};
	tsd_infer_opts o = {.sequence_id = 5};
	tsd_reply *r = NULL;
	ck_assert_int_eq(tsd_infer(c, "rnn", in2, 2, &o, &r), TSD_BAD_REQUEST);
	ck_assert_msg(strstr(tsd_reply_error(r), "state"), "%s", tsd_reply_error(r));
	tsd_reply_free(r);
	/* rows unlike its state's */
	tsd_tensor two = DH_F32("x", x2, 2, 3);
	ck_assert_int_eq(tsd_infer(c, "rnn", &two, 1, &o, &r), TSD_SHAPE_MISMATCH);
	ck_assert_msg(strstr(tsd_reply_error(r), "rows"), "%s", tsd_reply_error(r));
	tsd_reply_free(r);
	/* bad fields, raw */
	static const char *const bad[] = {
		"\"sequence_id\":0", "\"sequence_id\":-3", "\"sequence_id\":1.5", "\"sequence_id\":\"\"",
		"\"sequence_id\":true", "\"sequence_start\":true", "\"sequence_id\":5,\"sequence_end\":1",
		"\"sequence_id\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"",
	};
	for (size_t k = 0; k < sizeof(bad) / sizeof(*bad); k++) {
		char hdr[512];
		snprintf(hdr, sizeof(hdr), "{\"verb\":\"infer\",\"model\":\"rnn\",%s}", bad[k]);
		cJSON *h = cJSON_Parse(hdr);
		tsd_tensor in = DH_F32("x", x, 1, 3);
		ck_assert_int_eq(tsd_client_call(c, h, &in, 1, &r), TSD_BAD_REQUEST);
		tsd_reply_free(r);
		cJSON_Delete(h);
	}
	/* a string id is another sequence than the number */
	tsd_infer_opts so = {.sequence_name = "5"};
	tsd_tensor in = DH_F32("x", x, 1, 3);
	ck_assert_int_eq(tsd_infer(c, "rnn", &in, 1, &so, &r), TSD_SEQUENCE_ENDED);
	tsd_reply_free(r);
	/* a model without state */
	dh_load(c, "{\"name\":\"rnn2\"," RNN_GRAPH "}",
		(tsd_tensor[]){DH_F32("W", W, 4, 3), DH_F32("U", U, 4, 4), DH_F32("V", V, 2, 4)}, 3);
	ck_assert_int_eq(tsd_infer(c, "rnn2", &in, 1, &o, &r), TSD_BAD_REQUEST);
	ck_assert_msg(strstr(tsd_reply_error(r), "keeps no state"), "%s", tsd_reply_error(r));
	tsd_reply_free(r);
	/* state pairs that do not fit the model */
	static const char *const badspec[] = {
		"\"sequence\":{\"state\":[{\"input\":\"x\",\"output\":\"hn\"}]}",
		"\"sequence\":{\"state\":[{\"input\":\"h\",\"output\":\"y\"}]}",
		"\"sequence\":{\"state\":[{\"input\":\"q\",\"output\":\"hn\"}]}",
		"\"sequence\":{\"state\":[{\"input\":\"h\",\"output\":\"hn\",\"init\":[1,2]}]}",
		"\"sequence\":{\"state\":[]}",
		"\"sequence\":{\"state\":[{\"input\":\"h\",\"output\":\"hn\"}],\"max_sequences\":0}",
		"\"sequence\":{\"state\":[{\"input\":\"h\",\"output\":\"hn\"}],\"frobnicate\":1}",
	};
	for (size_t k = 0; k < sizeof(badspec) / sizeof(*badspec); k++) {
		char spec[2048];
		snprintf(spec, sizeof(spec), "{\"verb\":\"model.load\",\"name\":\"rnn3\"," RNN_GRAPH ",%s}", badspec[k]);
		cJSON *h = cJSON_Parse(spec);
		ck_assert_ptr_nonnull(h);
		tsd_tensor w[3] = {DH_F32("W", W, 4, 3), DH_F32("U", U, 4, 4), DH_F32("V", V, 2, 4)};
		ck_assert_msg(tsd_client_call(c, h, w, 3, &r) == TSD_BAD_REQUEST, "spec %zu: %s", k,
			      r ? tsd_reply_error(r) : "no reply");
		tsd_reply_free(r);
		cJSON_Delete(h);
	}
	/* the daemon still serves the live ones */
	ck_assert_int_eq(step(c, 5, false, false, x, y, NULL, err, sizeof(err)), TSD_OK);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

START_TEST(t_idle_end)
{
	dh_daemon d = {0};
	dh_start(&d, NULL);
	tsd_client *c = dh_client(&d);
	load_rnn(c, RNN_SPEC("\"sequence\":{\"state\":[{\"input\":\"h\",\"output\":\"hn\"}],\"max_sequence_idle_us\":50000}"));
	float x[3] = {1, 0, 0}, y[2];
	char err[256];
	ck_assert_int_eq(step(c, 1, true, false, x, y, NULL, err, sizeof(err)), TSD_OK);
	ck_assert_int_eq(step(c, 2, true, false, x, y, NULL, err, sizeof(err)), TSD_OK);
	for (int k = 0; k < 8; k++) { /* 2 stays busy, 1 goes idle */
		usleep(20000);
		ck_assert_int_eq(step(c, 2, false, false, x, y, NULL, err, sizeof(err)), TSD_OK);
	}
	ck_assert_int_eq(step(c, 1, false, false, x, y, NULL, err, sizeof(err)), TSD_SEQUENCE_ENDED);
	ck_assert_msg(strstr(err, "idle"), "%s", err);
	stat_is(c, "models.rnn.sequence.idle_ended", 1);
	/* with no traffic at all the timer ends it */
	usleep(200000);
	stat_is(c, "models.rnn.sequence.live", 0);
	stat_is(c, "models.rnn.sequence.idle_ended", 2);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

START_TEST(t_connection_and_reload)
{
	dh_daemon d = {0};
	dh_start(&d, NULL);
	tsd_client *a = dh_client(&d), *b = dh_client(&d);
	load_rnn(a, RNN_SPEC(RNN_SEQ));
	float x[3] = {1, 1, 1}, y[2];
	char err[256];
	ck_assert_int_eq(step(a, 9, true, false, x, y, NULL, err, sizeof(err)), TSD_OK);
	ck_assert_int_eq(step(b, 9, false, false, x, y, NULL, err, sizeof(err)), TSD_OK); /* any connection may step it */
	dh_client_close(a);
	bool ended = false;
	for (int k = 0; k < 100 && !ended; k++) { /* the close reaches the daemon soon */
		ended = step(b, 9, false, false, x, y, NULL, err, sizeof(err)) == TSD_SEQUENCE_ENDED;
		if (!ended)
			usleep(10000);
	}
	ck_assert_msg(ended && strstr(err, "connection"), "%s", err);
	/* outlive_connection: it stays */
	a = dh_client(&d);
	load_rnn(a, RNN_SPEC("\"sequence\":{\"state\":[{\"input\":\"h\",\"output\":\"hn\"}],\"outlive_connection\":true}"));
	ck_assert_int_eq(step(a, 10, true, false, x, y, NULL, err, sizeof(err)), TSD_OK);
	dh_client_close(a);
	usleep(100000);
	ck_assert_int_eq(step(b, 10, false, false, x, y, NULL, err, sizeof(err)), TSD_OK);
	/* a reload ends it, named */
	load_rnn(b, RNN_SPEC(RNN_SEQ));
	ck_assert_int_eq(step(b, 10, false, false, x, y, NULL, err, sizeof(err)), TSD_SEQUENCE_ENDED);
	ck_assert_msg(strstr(err, "reloaded"), "%s", err);
	ck_assert_int_eq(step(b, 10, true, false, x, y, NULL, err, sizeof(err)), TSD_OK);
	dh_client_close(b);
	dh_stop(&d);
}
END_TEST

/* Many short sequences: nothing stays live, and the slots are reused (max_sequences 8). */
START_TEST(t_many_short)
{
	dh_daemon d = {0};
	dh_start(&d, NULL);
	tsd_client *c = dh_client(&d);
	load_rnn(c, RNN_SPEC("\"sequence\":{\"state\":[{\"input\":\"h\",\"output\":\"hn\"}],\"max_sequences\":8}"));
	float x[3] = {1, -1, 2}, y[2];
	char err[256];
	for (uint64_t id = 1; id <= 600; id++) {
		ck_assert_int_eq(step(c, id, true, false, x, y, NULL, err, sizeof(err)), TSD_OK);
		ck_assert_int_eq(step(c, id, false, true, x, y, NULL, err, sizeof(err)), TSD_OK);
	}
	stat_is(c, "models.rnn.sequence.live", 0);
	stat_is(c, "models.rnn.sequence.started", 600);
	stat_is(c, "models.rnn.sequence.ended", 600);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

Suite *sequence_suite(void)
{
	Suite *s = suite_create("sequence");
	dh_add_test(s, "one_stream", t_one_stream, 120);
	dh_add_test(s, "interleaved", t_interleaved, 180);
	dh_add_test(s, "errors", t_errors, 120);
	dh_add_test(s, "idle_end", t_idle_end, 120);
	dh_add_test(s, "connection_and_reload", t_connection_and_reload, 120);
	dh_add_test(s, "many_short", t_many_short, 180);
	return s;
}
