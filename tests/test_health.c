/* test_health.c: readiness and liveness as a balancer or an orchestrator reads them, through the
 * real daemon: the drain's grace (SIGTERM: not ready at once, still serving for drain_grace_s,
 * then the drain refuses and the daemon exits 0), a stalled executor (one job running past
 * stall_ms with work waiting: not ready; past stall_restart_ms: not live; both back once it
 * finishes), a reload warming a new version (not ready), and the reason health gives each time. */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "suites.h"

/* y = W x: x [-1,3], W [2,3] */
#define LIN_SPEC                                                                                         \
	"{\"name\":\"lin\",\"graph\":{\"nodes\":[{\"id\":\"x\",\"op\":\"input\",\"dtype\":\"float32\",\"shape\":[-1,3]}," \
	"{\"id\":\"W\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[2,3]},"                            \
	"{\"id\":\"y\",\"op\":\"linear\",\"in\":[\"x\",\"W\"]}],\"outputs\":[\"y\"]}}"
static const float LW[6] = {1, 2, 3, -1, 0, 1};

/* Three chained 512x512x512 matmuls per request (0.8 GFLOP): several milliseconds on any of the
 * CI hosts (AVX2 or AVX-512), on the executor's thread, so a poll lands inside a job past 1 ms. */
#define SLOW_SPEC                                                                                        \
	"{\"name\":\"slow\",\"graph\":{\"nodes\":[{\"id\":\"x\",\"op\":\"input\",\"dtype\":\"float32\",\"shape\":[512,512]}," \
	"{\"id\":\"W\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[512,512]},"                        \
	"{\"id\":\"h1\",\"op\":\"matmul\",\"in\":[\"x\",\"W\"]},{\"id\":\"a1\",\"op\":\"tanh\",\"in\":[\"h1\"]}," \
	"{\"id\":\"h2\",\"op\":\"matmul\",\"in\":[\"a1\",\"W\"]},{\"id\":\"a2\",\"op\":\"tanh\",\"in\":[\"h2\"]}," \
	"{\"id\":\"h3\",\"op\":\"matmul\",\"in\":[\"a2\",\"W\"]},{\"id\":\"y\",\"op\":\"tanh\",\"in\":[\"h3\"]}]," \
	"\"outputs\":[\"y\"]}}"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* health's reply header (the caller's), or NULL when no reply came. */
static cJSON *health(tsd_client *c)
{
	tsd_reply *r = NULL;
	tsd_status s = tsd_client_call_verb(c, "health", &r);
	cJSON *j = s == TSD_OK && r ? cJSON_Duplicate(tsd_reply_json(r), true) : NULL;
	tsd_reply_free(r);
	return j;
}

static bool flag(const cJSON *j, const char *key)
{
	return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, key));
}

static const char *reason(const cJSON *j)
{
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "reason");
	return cJSON_IsString(r) ? r->valuestring : "";
}

static tsd_status lin_infer(tsd_client *c, char *why, size_t whylen)
{
	const float x[3] = {1, 1, 2};
	float y[2];
	tsd_status s = dh_infer(c, "lin", NULL, x, 1, 3, y, 2, why, whylen);
	if (s == TSD_OK)
		ck_assert_msg(y[0] == 9 && y[1] == 1, "lin: got %g %g, want 9 1", y[0], y[1]);
	return s;
}

/* SIGTERM with drain_grace_s 0.6: health says stopping (not ready, live) at once, infers are
 * still answered during the grace, then the drain refuses and the daemon exits 0. */
START_TEST(t_drain_grace)
{
	dh_daemon d = {0};
	dh_start(&d, "{\"drain_grace_s\":0.6,\"drain_seconds\":5}");
	char err[256];
	/* a short timeout: once the drain is over the daemon is gone, and a call waits for a new one */
	tsd_client *c = tsd_client_open(d.url, 1000, err, sizeof(err));
	ck_assert_msg(c, "%s", err);
	tsd_tensor w = DH_F32("W", LW, 2, 3);
	dh_load(c, LIN_SPEC, &w, 1);
	cJSON *h = health(c);
	ck_assert_msg(h && flag(h, "ready") && flag(h, "live") && !flag(h, "stopping") && !reason(h)[0],
		      "before the signal: not ready or live (%s)", h ? reason(h) : "no reply");
	cJSON_Delete(h);
	char why[256];
	double t0 = now_s();
	ck_assert_int_eq(kill(d.pid, SIGTERM), 0);
	/* the signal is handled by the loop: ask until it has been */
	for (h = NULL; now_s() - t0 < 0.5; usleep(2000)) {
		cJSON_Delete(h);
		h = health(c);
		ck_assert_msg(h, "health during the grace got no reply");
		if (flag(h, "stopping"))
			break;
	}
	ck_assert_msg(flag(h, "stopping") && !flag(h, "ready") && flag(h, "live") && !flag(h, "draining"),
		      "during the grace: stopping %d ready %d live %d draining %d", flag(h, "stopping"),
		      flag(h, "ready"), flag(h, "live"), flag(h, "draining"));
	ck_assert_msg(strstr(reason(h), "stopping"), "reason: \"%s\"", reason(h));
	cJSON_Delete(h);
	int served = 0;
	while (now_s() - t0 < 0.4) { /* well inside the grace: every infer is answered */
		ck_assert_msg(lin_infer(c, why, sizeof(why)) == TSD_OK, "infer during the grace: %s", why);
		served++;
		usleep(5000);
	}
	/* after the grace the drain refuses new work (or the daemon is gone already) */
	tsd_status s = TSD_OK;
	while (now_s() - t0 < 10 && (s = lin_infer(c, why, sizeof(why))) == TSD_OK)
		usleep(5000);
	double refused_at = now_s() - t0;
	ck_assert_msg(s == TSD_SHUTTING_DOWN || s == TSD_TIMEOUT, "after the grace: %s (%s)", tsd_status_name(s), why);
	ck_assert_msg(refused_at >= 0.55, "refused %.3f s after SIGTERM, before drain_grace_s 0.6", refused_at);
	fprintf(stderr, "health: drain_grace_s 0.6: %d infers served during the grace, refused from %.3f s (%s)\n",
		served, refused_at, tsd_status_name(s));
	dh_client_close(c);
	dh_wait_exit(&d);
}
END_TEST

/* stall_ms 1, stall_restart_ms 1: while one slow job runs with others queued behind it, health
 * says not ready ("stalled") and not live; once the queue is through, both hold again. (Equal
 * bounds: a job of a few ms outlasts both wherever a poll lands in it, on any host.) */
START_TEST(t_stall)
{
	dh_daemon d = {0};
	dh_start(&d, "{\"stall_ms\":1,\"stall_restart_ms\":1,\"batch_max\":1,\"batch_buckets\":[1]}");
	tsd_client *c = dh_client(&d);
	static float W[512 * 512], X[512 * 512];
	for (int i = 0; i < 512 * 512; i++)
		W[i] = (float)((i * 7919) % 97) / 97.0f * 0.08f - 0.04f;
	for (int i = 0; i < 512 * 512; i++)
		X[i] = (float)((i * 31) % 13) / 13.0f;
	tsd_tensor w = DH_F32("W", W, 512, 512);
	dh_load(c, SLOW_SPEC, &w, 1);
	enum { N = 24 };
	tsd_call *k[N];
	tsd_tensor x = DH_F32("x", X, 512, 512);
	for (int round = 0; round < 2; round++) { /* the first round compiles nothing new either way */
		cJSON *req = cJSON_CreateObject();
		cJSON_AddStringToObject(req, "verb", "infer");
		cJSON_AddStringToObject(req, "model", "slow");
		for (int i = 0; i < N; i++)
			ck_assert_int_eq(tsd_client_submit(c, req, &x, 1, NULL, NULL, &k[i]), TSD_OK);
		cJSON_Delete(req);
		tsd_client *hc = dh_client(&d);
		bool not_ready = false, not_live = false;
		char seen[256] = "";
		while (!tsd_call_done(k[N - 1])) {
			cJSON *h = health(hc);
			ck_assert_msg(h, "health during the stall got no reply");
			if (!flag(h, "ready") && strstr(reason(h), "stalled")) {
				not_ready = true;
				snprintf(seen, sizeof(seen), "%s", reason(h));
			}
			not_live |= !flag(h, "live");
			cJSON_Delete(h);
			usleep(500);
		}
		for (int i = 0; i < N; i++) {
			tsd_call_wait(k[i], -1);
			ck_assert_int_eq(tsd_call_status(k[i]), TSD_OK);
			tsd_call_free(k[i]);
		}
		cJSON *h = health(hc);
		ck_assert_msg(h && flag(h, "ready") && flag(h, "live"), "after the queue: not ready or live (%s)",
			      h ? reason(h) : "no reply");
		cJSON_Delete(h);
		dh_client_close(hc);
		if (round == 1) {
			ck_assert_msg(not_ready, "a slow job with %d waiting never made health say stalled", N - 1);
			ck_assert_msg(not_live, "a stall past stall_restart_ms never made health say not live");
			fprintf(stderr, "health: stall seen: \"%s\"\n", seen);
		}
	}
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

/* A preloaded model of 2048x2048 weights (16 MB: its load takes a while) in models_dir. */
static void write_big(dh_daemon *d, const char *weights, float scale)
{
	static float W[2048 * 2048];
	for (int i = 0; i < 2048 * 2048; i++)
		W[i] = scale * (float)(i % 7 - 3);
	const char *names[1] = {"W"};
	const float *data[1] = {W};
	dh_write_safetensors(d, weights, 1, names, data, (const int[]){2}, (const int64_t[][4]){{2048, 2048}});
	char spec[1024];
	snprintf(spec, sizeof(spec),
		 "{\"name\":\"big\",\"weights\":\"%s\",\"graph\":{\"nodes\":[{\"id\":\"x\",\"op\":\"input\","
		 "\"dtype\":\"float32\",\"shape\":[-1,2048]},{\"id\":\"W\",\"op\":\"param\",\"dtype\":\"float32\","
		 "\"shape\":[2048,2048]},{\"id\":\"y\",\"op\":\"matmul\",\"in\":[\"x\",\"W\"]}],\"outputs\":[\"y\"]}}",
		 weights);
	dh_write_file(d, "big.json", spec, strlen(spec));
}

static int big_version(tsd_client *c)
{
	cJSON *l = dh_call_json(c, "model.list");
	const cJSON *m = cJSON_GetArrayItem(cJSON_GetObjectItem(l, "models"), 0);
	int v = m ? (int)cJSON_GetNumberValue(cJSON_GetObjectItem(m, "version")) : -1;
	cJSON_Delete(l);
	return v;
}

/* SIGHUP with a preloaded model's weights changed: not ready ("reloading") while the new
 * version loads, ready again once it serves. */
START_TEST(t_reload_not_ready)
{
	dh_daemon d = {0};
	dh_prepare(&d);
	write_big(&d, "big_a.safetensors", 1.0f);
	dh_start(&d, "{\"preload\":[\"big.json\"]}");
	tsd_client *c = dh_client(&d);
	ck_assert_int_eq(big_version(c), 1);
	write_big(&d, "big_b.safetensors", 2.0f);
	ck_assert_int_eq(kill(d.pid, SIGHUP), 0);
	bool seen = false;
	char why[256] = "";
	double t0 = now_s();
	while (now_s() - t0 < 20 && big_version(c) != 2) {
		cJSON *h = health(c);
		ck_assert_msg(h, "health during the reload got no reply");
		if (!flag(h, "ready") && strstr(reason(h), "reloading")) {
			seen = true;
			snprintf(why, sizeof(why), "%s", reason(h));
		}
		ck_assert_msg(flag(h, "live"), "not live during a reload");
		cJSON_Delete(h);
	}
	ck_assert_int_eq(big_version(c), 2);
	ck_assert_msg(seen, "health never said reloading while the new version loaded");
	cJSON *h = health(c);
	ck_assert_msg(h && flag(h, "ready"), "not ready after the reload: %s", h ? reason(h) : "no reply");
	cJSON_Delete(h);
	fprintf(stderr, "health: during the reload: \"%s\"\n", why);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

Suite *health_suite(void)
{
	Suite *s = suite_create("health");
	dh_add_test(s, "drain_grace", t_drain_grace, 60);
	dh_add_test(s, "stall", t_stall, 180);
	dh_add_test(s, "reload_not_ready", t_reload_not_ready, 120);
	return s;
}
