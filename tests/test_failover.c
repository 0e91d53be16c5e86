/* test_failover.c: the client library's failover over a list of replicas (clients/failover.c),
 * against real daemons: calls spread round robin; a replica killed (SIGKILL) under a load of
 * asynchronous infers loses none of them (each is retried on another and answered right); a
 * draining replica's refusals are retried elsewhere; a non-idempotent verb is sent once; a
 * sequence stays on its replica and its loss is sequence_ended naming it; with every replica
 * gone the error names each endpoint tried. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "suites.h"

#include <tensord/verbs.h>

/* y = W x: x [-1,3], W [2,3]; hn = W x + h as a sequence's state (rnn) */
#define LIN_SPEC                                                                                         \
	"{\"name\":\"lin\",\"graph\":{\"nodes\":[{\"id\":\"x\",\"op\":\"input\",\"dtype\":\"float32\",\"shape\":[-1,3]}," \
	"{\"id\":\"W\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[2,3]},"                            \
	"{\"id\":\"y\",\"op\":\"linear\",\"in\":[\"x\",\"W\"]}],\"outputs\":[\"y\"]}}"
#define RNN_SPEC                                                                                         \
	"{\"name\":\"rnn\",\"graph\":{\"nodes\":[{\"id\":\"x\",\"op\":\"input\",\"dtype\":\"float32\",\"shape\":[-1,3]}," \
	"{\"id\":\"h\",\"op\":\"input\",\"dtype\":\"float32\",\"shape\":[-1,2]},"                           \
	"{\"id\":\"W\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[2,3]},"                            \
	"{\"id\":\"a\",\"op\":\"linear\",\"in\":[\"x\",\"W\"]},{\"id\":\"hn\",\"op\":\"add\",\"in\":[\"a\",\"h\"]}]," \
	"\"outputs\":[\"hn\"]},\"inputs\":[\"x\",\"h\"],"                                                  \
	"\"sequence\":{\"state\":[{\"input\":\"h\",\"output\":\"hn\",\"init\":0}]}}"
static const float LW[6] = {1, 2, 3, -1, 0, 1};

enum { NR = 3 };

typedef struct replicas {
	dh_daemon d[NR];
	char list[NR * 340];
} replicas;

static void start_replicas(replicas *r, const char *cfg)
{
	size_t len = 0;
	for (int i = 0; i < NR; i++) {
		memset(&r->d[i], 0, sizeof(r->d[i]));
		dh_start(&r->d[i], cfg);
		tsd_client *c = dh_client(&r->d[i]);
		tsd_tensor w = DH_F32("W", LW, 2, 3);
		dh_load(c, LIN_SPEC, &w, 1);
		dh_load(c, RNN_SPEC, &w, 1);
		dh_client_close(c);
		len += (size_t)snprintf(r->list + len, sizeof(r->list) - len, "%s%s", i ? "," : "", r->d[i].url);
	}
}

static void stop_replicas(replicas *r)
{
	for (int i = 0; i < NR; i++)
		if (r->d[i].running)
			dh_stop(&r->d[i]);
}

static tsd_client *open_list(const char *list, int timeout_ms)
{
	char err[1024];
	tsd_client *c = tsd_client_open(list, timeout_ms, err, sizeof(err));
	ck_assert_msg(c, "open %s: %s", list, err);
	return c;
}

/* x_i = (i, 1, -i): y = (i + 2 - 3i, -i - i) = (2 - 2i, -2i) */
static void x_of(int i, float *x)
{
	x[0] = (float)i;
	x[1] = 1;
	x[2] = (float)-i;
}

static bool y_right(int i, const float *y)
{
	return y[0] == (float)(2 - 2 * i) && y[1] == (float)(-2 * i);
}

static double requests_of(const dh_daemon *d)
{
	tsd_client *c = dh_client(d);
	double n = dh_stat(c, "models.lin.requests");
	dh_client_close(c);
	return n;
}

START_TEST(t_round_robin)
{
	replicas r;
	start_replicas(&r, NULL);
	tsd_client *c = open_list(r.list, DH_TIMEOUT_MS);
	char why[512];
	for (int i = 0; i < 30; i++) {
		float x[3], y[2];
		x_of(i, x);
		ck_assert_msg(dh_infer(c, "lin", NULL, x, 1, 3, y, 2, why, sizeof(why)) == TSD_OK, "infer %d: %s", i, why);
		ck_assert_msg(y_right(i, y), "infer %d: %g %g", i, y[0], y[1]);
	}
	for (int i = 0; i < NR; i++) {
		double n = requests_of(&r.d[i]);
		ck_assert_msg(n >= 5, "replica %d took %g of 30 calls: not spread", i, n);
	}
	ck_assert_int_eq(tsd_client_retries(c), 0);
	tsd_client_close(c);
	stop_replicas(&r);
}
END_TEST

typedef struct load {
	tsd_call *k;
	int i;
} load;

/* 400 asynchronous infers, 16 in flight; replica 1 killed after 100 have completed: every call
 * answered, right; model.load calls in flight with them are each sent once. */
START_TEST(t_kill_one)
{
	replicas r;
	start_replicas(&r, NULL);
	tsd_client *c = open_list(r.list, DH_TIMEOUT_MS);
	enum { TOTAL = 400, WINDOW = 16 };
	load q[WINDOW] = {{0}};
	tsd_call *loads[8] = {0};
	int sent = 0, done = 0, bad = 0, nloads = 0, loads_ok = 0, loads_failed = 0;
	char why[512] = "";
	float xs[WINDOW][3];
	while (done < TOTAL) {
		for (int w = 0; w < WINDOW && sent < TOTAL; w++) {
			if (q[w].k)
				continue;
			cJSON *h = cJSON_CreateObject();
			cJSON_AddStringToObject(h, "verb", "infer");
			cJSON_AddStringToObject(h, "model", "lin");
			x_of(sent, xs[w]);
			tsd_tensor t = DH_F32("x", xs[w], 1, 3);
			ck_assert_int_eq(tsd_client_submit(c, h, &t, 1, NULL, NULL, &q[w].k), TSD_OK);
			cJSON_Delete(h);
			q[w].i = sent++;
		}
		for (int w = 0; w < WINDOW; w++) {
			if (!q[w].k || !tsd_call_wait(q[w].k, 1))
				continue;
			tsd_reply *rp = NULL;
			tsd_status s = tsd_call_take(q[w].k, &rp);
			const tsd_tensor *y = rp ? tsd_reply_find(rp, "y") : NULL;
			if (s != TSD_OK || !y || !y_right(q[w].i, y->data)) {
				if (!bad++)
					snprintf(why, sizeof(why), "call %d: %s: %s", q[w].i, tsd_status_name(s),
						 tsd_call_error(q[w].k) ? tsd_call_error(q[w].k) : "wrong answer");
			}
			tsd_reply_free(rp);
			tsd_call_free(q[w].k);
			q[w].k = NULL;
			if (++done == 100) {
				/* model.load of fresh names in flight with the kill: never sent twice */
				for (nloads = 0; nloads < 8; nloads++) {
					char spec[1024];
					snprintf(spec, sizeof(spec), "%s", LIN_SPEC);
					cJSON *h = cJSON_Parse(spec);
					char name[32];
					snprintf(name, sizeof(name), "lin%d", nloads);
					cJSON_ReplaceItemInObject(h, "name", cJSON_CreateString(name));
					cJSON_AddStringToObject(h, "verb", "model.load");
					tsd_tensor wt = DH_F32("W", LW, 2, 3);
					ck_assert_int_eq(tsd_client_submit(c, h, &wt, 1, NULL, NULL, &loads[nloads]), TSD_OK);
					cJSON_Delete(h);
				}
				dh_kill(&r.d[1]);
			}
		}
	}
	ck_assert_msg(!bad, "%d of %d calls failed or were wrong; first: %s", bad, TOTAL, why);
	for (int i = 0; i < nloads; i++) {
		tsd_call_wait(loads[i], -1);
		ck_assert_int_eq(tsd_call_attempts(loads[i]), 1);
		if (tsd_call_status(loads[i]) == TSD_OK)
			loads_ok++;
		else
			loads_failed++;
		tsd_call_free(loads[i]);
	}
	/* where each load ran: on one replica, or lost with the killed one; never on two */
	int placed = 0;
	for (int i = 0; i < nloads; i++) {
		char name[32];
		snprintf(name, sizeof(name), "lin%d", i);
		int on = 0;
		for (int k = 0; k < NR; k++) {
			if (!r.d[k].running)
				continue;
			tsd_client *dc = dh_client(&r.d[k]);
			cJSON *l = dh_call_json(dc, "model.list");
			const cJSON *m;
			cJSON_ArrayForEach(m, cJSON_GetObjectItem(l, "models")) {
				const char *mn = cJSON_GetStringValue(cJSON_GetObjectItem(m, "name"));
				on += mn && !strcmp(mn, name);
			}
			cJSON_Delete(l);
			dh_client_close(dc);
		}
		ck_assert_msg(on <= 1, "model.load %s ran on %d replicas", name, on);
		placed += on;
	}
	fprintf(stderr, "failover: %d infers, replica killed after 100: 0 failed, %llu retries; %d model.load in flight: "
		"%d ok, %d failed (sent once each), %d found on the live replicas\n", TOTAL,
		(unsigned long long)tsd_client_retries(c), nloads, loads_ok, loads_failed, placed);
	tsd_client_close(c);
	stop_replicas(&r);
}
END_TEST

/* A draining replica (drain_grace_s 0) refuses with shutting_down: those calls are answered by the others. */
START_TEST(t_drain_refusal)
{
	replicas r;
	start_replicas(&r, "{\"drain_seconds\":5}");
	tsd_client *c = open_list(r.list, DH_TIMEOUT_MS);
	char why[512];
	for (int i = 0; i < 60; i++) {
		if (i == 20)
			ck_assert_int_eq(kill(r.d[0].pid, SIGTERM), 0);
		float x[3], y[2];
		x_of(i, x);
		ck_assert_msg(dh_infer(c, "lin", NULL, x, 1, 3, y, 2, why, sizeof(why)) == TSD_OK, "infer %d: %s", i, why);
		ck_assert_msg(y_right(i, y), "infer %d: %g %g", i, y[0], y[1]);
	}
	dh_wait_exit(&r.d[0]);
	tsd_client_close(c);
	stop_replicas(&r);
}
END_TEST

static tsd_status seq_step(tsd_client *c, uint64_t id, bool start, float *h, char *why, size_t whylen)
{
	const float x[3] = {1, 1, 1};
	tsd_tensor in = DH_F32("x", x, 1, 3);
	tsd_infer_opts o = {.sequence_id = id, .sequence_start = start, .sequence_state = true};
	tsd_reply *rp = NULL;
	tsd_status s = tsd_infer(c, "rnn", &in, 1, &o, &rp);
	const tsd_tensor *t = rp ? tsd_reply_find(rp, "hn") : NULL;
	if (s == TSD_OK && t)
		memcpy(h, t->data, 2 * sizeof(float));
	snprintf(why, whylen, "%s", s == TSD_OK ? "" : tsd_client_message(c, rp));
	tsd_reply_free(rp);
	return s;
}

/* Sequences stay on their replica (the state adds up step by step); the replica's loss is
 * sequence_ended naming it, and a new start works elsewhere. */
START_TEST(t_sequence_sticks)
{
	replicas r;
	start_replicas(&r, NULL);
	tsd_client *c = open_list(r.list, 3000);
	char why[512];
	float h[2];
	for (uint64_t id = 1; id <= 6; id++) /* six sequences over three replicas */
		ck_assert_msg(seq_step(c, id, true, h, why, sizeof(why)) == TSD_OK, "start %llu: %s", (unsigned long long)id, why);
	for (int step = 2; step <= 5; step++)
		for (uint64_t id = 1; id <= 6; id++) {
			ck_assert_msg(seq_step(c, id, false, h, why, sizeof(why)) == TSD_OK, "seq %llu step %d: %s",
				      (unsigned long long)id, step, why);
			ck_assert_msg(h[0] == 6.0f * (float)step && h[1] == 0, "seq %llu step %d: state %g %g: not kept on one replica",
				      (unsigned long long)id, step, h[0], h[1]);
		}
	dh_kill(&r.d[1]);
	int ended = 0;
	char lost[512] = "";
	for (uint64_t id = 1; id <= 6; id++) {
		tsd_status s = seq_step(c, id, false, h, why, sizeof(why));
		if (s == TSD_OK) {
			ck_assert_msg(h[0] == 36.0f, "seq %llu after the kill: state %g", (unsigned long long)id, h[0]);
			continue;
		}
		/* the step in flight with the loss, if any, says connection lost; after it, sequence_ended */
		if (s != TSD_SEQUENCE_ENDED)
			s = seq_step(c, id, false, h, why, sizeof(why));
		ck_assert_msg(s == TSD_SEQUENCE_ENDED && strstr(why, r.d[1].url), "seq %llu on the killed replica: %s: %s",
			      (unsigned long long)id, tsd_status_name(s), why);
		ended++;
		snprintf(lost, sizeof(lost), "%s", why);
		ck_assert_msg(seq_step(c, id, true, h, why, sizeof(why)) == TSD_OK && h[0] == 6.0f, "restart %llu: %s",
			      (unsigned long long)id, why);
	}
	ck_assert_msg(ended == 2, "%d of 6 sequences were on the killed replica (round robin puts 2 there)", ended);
	fprintf(stderr, "failover: sequence lost with its replica: \"%s\"\n", lost);
	tsd_client_close(c);
	stop_replicas(&r);
}
END_TEST

/* Every replica gone: the error after the retries names each endpoint. */
START_TEST(t_all_gone)
{
	replicas r;
	start_replicas(&r, NULL);
	tsd_client *c = open_list(r.list, 2500);
	for (int i = 0; i < NR; i++)
		dh_kill(&r.d[i]);
	float x[3] = {1, 1, 1}, y[2];
	char why[1024];
	tsd_status s = dh_infer(c, "lin", NULL, x, 1, 3, y, 2, why, sizeof(why));
	ck_assert_msg(s == TSD_SHUTTING_DOWN || s == TSD_TIMEOUT, "infer with no replica: %s", tsd_status_name(s));
	for (int i = 0; i < NR; i++)
		ck_assert_msg(strstr(why, r.d[i].url), "the error does not name %s: %s", r.d[i].url, why);
	fprintf(stderr, "failover: no replica: %s: %s\n", tsd_status_name(s), why);
	tsd_client_close(c);
}
END_TEST

Suite *failover_suite(void)
{
	Suite *s = suite_create("failover");
	dh_add_test(s, "round_robin", t_round_robin, 120);
	dh_add_test(s, "kill_one", t_kill_one, 180);
	dh_add_test(s, "drain_refusal", t_drain_refusal, 120);
	dh_add_test(s, "sequence_sticks", t_sequence_sticks, 120);
	dh_add_test(s, "all_gone", t_all_gone, 120);
	return s;
}
