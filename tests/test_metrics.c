/* test_metrics.c: the daemon's metrics (daemon/metrics.c): bucket placement at the bounds,
 * quantile estimates, the exact Prometheus text of a small page, label escaping, stats JSON. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/metrics.h"
#include "suites.h"
#include "testutil.h"

START_TEST(hist_bounds)
{
	dmn_hist h;
	ck_assert(dmn_hist_init_125(&h, 1, 1e7));
	ck_assert_int_eq(h.nbounds, 22);
	ck_assert(h.bounds[0] == 1 && h.bounds[1] == 2 && h.bounds[2] == 5 && h.bounds[3] == 10);
	ck_assert(h.bounds[20] == 5e6 && h.bounds[21] == 1e7);
	ck_assert(dmn_hist_init_pow2(&h, 1, 4096));
	ck_assert_int_eq(h.nbounds, 13);
	ck_assert(h.bounds[0] == 1 && h.bounds[12] == 4096);
	ck_assert(dmn_hist_init_pow2(&h, 1, 5000) && h.nbounds == 13); /* not past hi */
	/* refused: not increasing, not finite, none, too many, bad ranges */
	ck_assert(!dmn_hist_init(&h, (const double[]){1, 1}, 2) && h.nbounds == 0);
	ck_assert(!dmn_hist_init(&h, (const double[]){1, INFINITY}, 2));
	ck_assert(!dmn_hist_init(&h, (const double[]){1}, 0));
	ck_assert(!dmn_hist_init_pow2(&h, 1, 1e30));
	ck_assert(!dmn_hist_init_125(&h, 0, 10) && !dmn_hist_init_125(&h, 10, 1) && !dmn_hist_init_125(&h, 1, NAN));
	dmn_hist_observe(&h, 3); /* a refused init still counts (in +Inf) */
	ck_assert(h.count == 1 && h.counts[0] == 1);
}
END_TEST

START_TEST(hist_placement)
{
	dmn_hist h;
	ck_assert(dmn_hist_init(&h, (const double[]){1, 2, 5, 10}, 4));
	/* le is inclusive: a value at a bound goes into that bound's bucket */
	const double v[] = {-3, 0, 1, 1.0000001, 2, 5, 9.99, 10, 10.5, 1e300, NAN};
	for (size_t k = 0; k < sizeof(v) / sizeof(v[0]); k++)
		dmn_hist_observe(&h, v[k]);
	ck_assert(h.counts[0] == 3 && h.counts[1] == 2 && h.counts[2] == 1 && h.counts[3] == 2 && h.counts[4] == 2);
	ck_assert(h.count == 10); /* NaN ignored */
	ck_assert(dmn_hist_cumulative(&h, 0) == 3 && dmn_hist_cumulative(&h, 2) == 6);
	ck_assert(dmn_hist_cumulative(&h, 4) == 10 && dmn_hist_cumulative(&h, 99) == 10);
	ck_assert_double_eq_tol(h.sum, -3 + 0 + 1 + 1.0000001 + 2 + 5 + 9.99 + 10 + 10.5 + 1e300, 1e285);
}
END_TEST

START_TEST(hist_quantiles)
{
	dmn_hist h;
	ck_assert(dmn_hist_init(&h, (const double[]){1, 2, 5, 10}, 4));
	ck_assert(isnan(dmn_hist_quantile(&h, 0.5)));
	const double v[] = {1, 1, 2, 3, 4};
	for (int k = 0; k < 5; k++)
		dmn_hist_observe(&h, v[k]);
	/* rank 2.5 falls in (1, 2] holding 1 (2 before it): 1 + 1 * 0.5 */
	ck_assert_double_eq_tol(dmn_hist_quantile(&h, 0.5), 1.5, 1e-12);
	/* rank 4.95 in (2, 5] holding 2 (3 before): 2 + 3 * 1.95 / 2 */
	ck_assert_double_eq_tol(dmn_hist_quantile(&h, 0.99), 4.925, 1e-12);
	/* rank 2 exactly at the end of the first bucket, which starts at 0 */
	ck_assert_double_eq_tol(dmn_hist_quantile(&h, 0.4), 1, 1e-12);
	ck_assert_double_eq_tol(dmn_hist_quantile(&h, 0.2), 0.5, 1e-12);
	ck_assert_double_eq_tol(dmn_hist_quantile(&h, -1), 0, 1e-12); /* clamped to 0 */
	ck_assert_double_eq_tol(dmn_hist_quantile(&h, 7), 5, 1e-12);  /* clamped to 1: the top of (2, 5] */
	/* ranks in +Inf give the last finite bound; empty buckets are skipped */
	dmn_hist_observe(&h, 100);
	dmn_hist_observe(&h, 100);
	dmn_hist_observe(&h, 100);
	dmn_hist_observe(&h, 100);
	dmn_hist_observe(&h, 100);
	ck_assert_double_eq_tol(dmn_hist_quantile(&h, 0.99), 10, 1e-12);
	ck_assert_double_eq_tol(dmn_hist_quantile(&h, 0.5), 5, 1e-12); /* rank 5: the end of (2, 5] */
	/* latencies: 1000 values 1..1000 us with 1-2-5 bounds */
	ck_assert(dmn_hist_init_125(&h, 1, 1e7));
	for (int k = 1; k <= 1000; k++)
		dmn_hist_observe(&h, k);
	ck_assert_double_eq_tol(dmn_hist_quantile(&h, 0.5), 500, 1e-9); /* (200, 500] holds 300, 200 before */
	ck_assert_double_eq_tol(dmn_hist_quantile(&h, 0.99), 500 + 500 * 490.0 / 500, 1e-9);
}
END_TEST

START_TEST(prom_exact)
{
	dmn_hist h;
	ck_assert(dmn_hist_init(&h, (const double[]){0.5, 1, 2.5}, 3));
	dmn_hist_observe(&h, 0.25);
	dmn_hist_observe(&h, 1);
	dmn_hist_observe(&h, 7);
	dmn_prom p;
	dmn_prom_init(&p);
	dmn_prom_counter(&p, "tensord_requests_total", "Requests answered, by verb and status.",
			 (const dmn_label[]){{"verb", "infer"}, {"status", "ok"}}, 2, 12);
	dmn_prom_counter(&p, "tensord_requests_total", "(not written again)",
			 (const dmn_label[]){{"verb", "infer"}, {"status", "busy"}}, 2, 3);
	dmn_prom_gauge(&p, "tensord_up", "1 while serving.", NULL, 0, 1);
	dmn_prom_gauge(&p, "tensord_mem_bytes", "Ratio \\ of\nmemory", NULL, 0, 0.1);
	dmn_prom_hist(&p, "tensord_total_seconds", "Request time.", (const dmn_label[]){{"model", "m"}}, 1, &h);
	dmn_prom_hist(&p, "tensord_x", "", NULL, 0, &h);
	dmn_prom_status st = DMN_PROM_ENOMEM;
	const char *text = dmn_prom_finish(&p, &st);
	ck_assert_int_eq(st, DMN_PROM_OK);
	ck_assert_str_eq(text,
			 "# HELP tensord_requests_total Requests answered, by verb and status.\n"
			 "# TYPE tensord_requests_total counter\n"
			 "tensord_requests_total{verb=\"infer\",status=\"ok\"} 12\n"
			 "tensord_requests_total{verb=\"infer\",status=\"busy\"} 3\n"
			 "# HELP tensord_up 1 while serving.\n"
			 "# TYPE tensord_up gauge\n"
			 "tensord_up 1\n"
			 "# HELP tensord_mem_bytes Ratio \\\\ of\\nmemory\n"
			 "# TYPE tensord_mem_bytes gauge\n"
			 "tensord_mem_bytes 0.1\n"
			 "# HELP tensord_total_seconds Request time.\n"
			 "# TYPE tensord_total_seconds histogram\n"
			 "tensord_total_seconds_bucket{model=\"m\",le=\"0.5\"} 1\n"
			 "tensord_total_seconds_bucket{model=\"m\",le=\"1\"} 2\n"
			 "tensord_total_seconds_bucket{model=\"m\",le=\"2.5\"} 2\n"
			 "tensord_total_seconds_bucket{model=\"m\",le=\"+Inf\"} 3\n"
			 "tensord_total_seconds_sum{model=\"m\"} 8.25\n"
			 "tensord_total_seconds_count{model=\"m\"} 3\n"
			 "# HELP tensord_x \n"
			 "# TYPE tensord_x histogram\n"
			 "tensord_x_bucket{le=\"0.5\"} 1\n"
			 "tensord_x_bucket{le=\"1\"} 2\n"
			 "tensord_x_bucket{le=\"2.5\"} 2\n"
			 "tensord_x_bucket{le=\"+Inf\"} 3\n"
			 "tensord_x_sum 8.25\n"
			 "tensord_x_count 3\n");
	dmn_prom_free(&p);
	/* an empty page is an empty string; special values */
	dmn_prom_init(&p);
	ck_assert_str_eq(dmn_prom_finish(&p, NULL), "");
	dmn_prom_gauge(&p, "g", "", NULL, 0, NAN);
	dmn_prom_gauge(&p, "g", "", NULL, 0, -INFINITY);
	dmn_prom_gauge(&p, "g", "", NULL, 0, 1e21);
	dmn_prom_gauge(&p, "g", "", NULL, 0, 1.0 / 3);
	ck_assert_str_eq(dmn_prom_finish(&p, NULL), "# HELP g \n# TYPE g gauge\ng NaN\ng -Inf\ng 1e+21\n"
			 "g 0.33333333333333331\n");
	dmn_prom_free(&p);
}
END_TEST

START_TEST(prom_escaping_and_errors)
{
	dmn_prom p;
	dmn_prom_init(&p);
	dmn_prom_counter(&p, "c_total", "h", (const dmn_label[]){{"path", "a\\b\"c\"\nd"}, {"e", ""}}, 2, 1);
	ck_assert_str_eq(dmn_prom_finish(&p, NULL),
			 "# HELP c_total h\n# TYPE c_total counter\nc_total{path=\"a\\\\b\\\"c\\\"\\nd\",e=\"\"} 1\n");
	dmn_prom_free(&p);

	static const struct {
		const char *name, *label;
	} bad[] = {{"1abc", "x"}, {"a-b", "x"}, {"", "x"}, {"ok", "a:b"}, {"ok", "9"}, {"ok", "le"}, {NULL, "x"}};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		dmn_prom_init(&p);
		dmn_prom_gauge(&p, bad[k].name, "h", (const dmn_label[]){{bad[k].label, "v"}}, 1, 1);
		dmn_prom_gauge(&p, "later", "h", NULL, 0, 1); /* sticky: nothing more is written */
		dmn_prom_status st = DMN_PROM_OK;
		ck_assert_ptr_null(dmn_prom_finish(&p, &st));
		ck_assert_msg(st == DMN_PROM_EINVAL && p.msg[0], "case %zu: %d", k, st);
		dmn_prom_free(&p);
	}
	/* colons are fine in metric names; a label without a value is not */
	dmn_prom_init(&p);
	dmn_prom_gauge(&p, "a:b", "h", NULL, 0, 1);
	ck_assert_ptr_nonnull(dmn_prom_finish(&p, NULL));
	dmn_prom_gauge(&p, "v", "h", (const dmn_label[]){{"x", NULL}}, 1, 1);
	ck_assert_ptr_null(dmn_prom_finish(&p, NULL));
	dmn_prom_free(&p);
	/* a family reopened after another one */
	dmn_prom_init(&p);
	dmn_prom_gauge(&p, "a", "h", NULL, 0, 1);
	dmn_prom_gauge(&p, "ab", "h", NULL, 0, 1);
	dmn_prom_gauge(&p, "b", "h", NULL, 0, 1);
	ck_assert_ptr_nonnull(dmn_prom_finish(&p, NULL));
	dmn_prom_gauge(&p, "a", "h", NULL, 0, 2);
	dmn_prom_status st;
	ck_assert_ptr_null(dmn_prom_finish(&p, &st));
	ck_assert_int_eq(st, DMN_PROM_EINVAL);
	ck_assert_str_eq(p.msg, "a: its family was written earlier, not in one group");
	dmn_prom_free(&p);
	/* a big page grows the buffer */
	dmn_prom_init(&p);
	char v[16];
	for (int k = 0; k < 2000; k++) {
		snprintf(v, sizeof(v), "m%d", k);
		dmn_prom_counter(&p, "many_total", "h", (const dmn_label[]){{"model", v}}, 1, k);
	}
	const char *text = dmn_prom_finish(&p, NULL);
	ck_assert_ptr_nonnull(text);
	ck_assert_ptr_nonnull(strstr(text, "many_total{model=\"m1999\"} 1999\n"));
	dmn_prom_free(&p);
}
END_TEST

START_TEST(hist_json)
{
	dmn_hist h;
	ck_assert(dmn_hist_init(&h, (const double[]){1, 2, 5}, 3));
	cJSON *j = dmn_hist_json(&h);
	char *s = cJSON_PrintUnformatted(j);
	ck_assert_str_eq(s, "{\"count\":0,\"sum\":0,\"p50\":null,\"p99\":null,\"buckets\":[[1,0],[2,0],[5,0]]}");
	free(s);
	cJSON_Delete(j);
	dmn_hist_observe(&h, 1);
	dmn_hist_observe(&h, 3);
	dmn_hist_observe(&h, 4);
	dmn_hist_observe(&h, 6);
	j = dmn_hist_json(&h);
	s = cJSON_PrintUnformatted(j);
	/* p50: rank 2 in (2, 5] holding 2, 1 before: 3.5; p99: rank 3.96 in +Inf: 5 */
	ck_assert_str_eq(s, "{\"count\":4,\"sum\":14,\"p50\":3.5,\"p99\":5,\"buckets\":[[1,1],[2,1],[5,3]]}");
	free(s);
	cJSON_Delete(j);
}
END_TEST

Suite *metrics_suite(void)
{
	const TTest *const tests[] = {hist_bounds, hist_placement, hist_quantiles, prom_exact,
				      prom_escaping_and_errors, hist_json};
	return tu_suite("metrics", tests, (int)(sizeof(tests) / sizeof(tests[0])), TU_TIMEOUT);
}
