/* robot_table.c: the robot brain's table (examples/robot/): per-call time of the whole greedy
 * decode through tensord at batch 1, 8, 16, 32, 64, 512 and 4096 (one infer of that many rows,
 * realtime, each an exact bucket; the daemon's mean compute time of those batches from stats
 * beside it), and one decision's p50/p95. Starts the tensord of the same
 * build directory (bench/daemon_bench.h) with the weights file's directory as models_dir: the
 * trained weights (--weights DIR/brain.safetensors) or a seeded random init written there.
 * Writes CHECK (the ids and tensord's plans of 64 commands) for bench/tinygrad_robot.py, which
 * runs the same model on the same weights in-process and must produce the same plans.
 * Usage: bench_robot_table [--weights FILE] [--check FILE] [--calls N (200)] */
#include <libgen.h>

#include "../examples/robot/weights.h"
#include "daemon_bench.h"

static const int batches[] = {1, 8, 16, 32, 64, 512, 4096};
#define NB ((int)(sizeof(batches) / sizeof(*batches)))

static const char *const cmds[] = {
	"chuck the red block in the trash", "please pick up the blue ball", "go to the shelf", "stop",
	"could you bring me the green cube", "toss the yellow can onto the table", "head back home",
	"place the orange brick in the crate", "grab the navy toy", "drive over to the desk", "freeze",
	"move the lime piece to the rack", "fetch the scarlet thing back to me",
};
#define NCMD ((int)(sizeof(cmds) / sizeof(*cmds)))

/* stats' compute_us histogram: count and sum (us) so far. */
static void compute_us(tsd_client *c, double *count, double *sum)
{
	tsd_reply *r = NULL;
	*count = *sum = 0;
	if (tsd_client_call_verb(c, "stats", &r) == TSD_OK) {
		const cJSON *h = cJSON_GetObjectItem(cJSON_GetObjectItem(tsd_reply_json(r), "histograms"), "compute_us");
		*count = cJSON_GetNumberValue(cJSON_GetObjectItem(h, "count"));
		*sum = cJSON_GetNumberValue(cJSON_GetObjectItem(h, "sum"));
	}
	tsd_reply_free(r);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The check file: {"ids": [[...], ...], "plans": [[...], ...]} for n rows. */
static int write_check(const char *path, const int32_t *ids, const int32_t *plans, int n)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		return -1;
	}
	for (int k = 0; k < 2; k++) {
		const int32_t *v = k ? plans : ids;
		int w = k ? RB_T : RB_L;
		fprintf(f, "%s\"%s\": [", k ? ", " : "{", k ? "plans" : "ids");
		for (int i = 0; i < n; i++) {
			fprintf(f, "%s[", i ? ", " : "");
			for (int j = 0; j < w; j++)
				fprintf(f, "%s%d", j ? ", " : "", v[i * w + j]);
			fprintf(f, "]");
		}
		fprintf(f, "]");
	}
	fprintf(f, "}\n");
	return fclose(f) ? -1 : 0;
}

int main(int argc, char **argv)
{
	const char *weights = NULL, *check = "/tmp/robot_check.json";
	int calls = 200;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--weights") && i + 1 < argc)
			weights = argv[++i];
		else if (!strcmp(argv[i], "--check") && i + 1 < argc)
			check = argv[++i];
		else if (!strcmp(argv[i], "--calls") && i + 1 < argc)
			calls = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: bench_robot_table [--weights FILE] [--check FILE] [--calls N]\n");
			return 2;
		}
	}
	char wpath[PATH_MAX], wdir[PATH_MAX], wbase[256], extra[PATH_MAX + 64];
	if (!weights) { /* a seeded init, written where the daemon can read it */
		snprintf(wpath, sizeof(wpath), "/tmp/robot_bench_weights.safetensors");
		rb_weights w;
		if (rb_weights_init(&w, 7) || rb_weights_save(&w, wpath))
			return 1;
		rb_weights_free(&w);
	} else if (!realpath(weights, wpath)) {
		perror(weights);
		return 1;
	}
	snprintf(wdir, sizeof(wdir), "%s", wpath);
	snprintf(wbase, sizeof(wbase), "%s", basename(wpath));
	snprintf(extra, sizeof(extra), "\"models_dir\": \"%s\"", dirname(wdir));
	db_daemon d;
	if (db_daemon_start(&d, extra))
		return 1;
	tsd_client *c = tsd_client_open(d.url, 600000, NULL, 0);
	cJSON *spec = rb_spec_serve("brain", 4096, 0);
	cJSON_AddStringToObject(spec, "weights", wbase);
	tsd_reply *r = NULL;
	uint64_t t0 = db_now_ns();
	tsd_status st = c ? tsd_client_call(c, spec, NULL, 0, &r) : TSD_INTERNAL;
	cJSON_Delete(spec);
	if (st != TSD_OK) {
		fprintf(stderr, "model.load: %s: %s\n", tsd_status_name(st), c ? tsd_client_message(c, r) : "no client");
		db_daemon_stop(&d);
		return 1;
	}
	tsd_reply_free(r);
	printf("robot brain through tensord (%s): weights %s, loaded with 9 buckets in %.1f s\n", d.url, wpath,
	       (double)(db_now_ns() - t0) / 1e9);
	int32_t *ids = malloc(sizeof(int32_t) * 4096 * RB_L), *plans = malloc(sizeof(int32_t) * 4096 * RB_T);
	for (int i = 0; i < 4096; i++)
		rb_tokenize(cmds[i % NCMD], ids + (size_t)i * RB_L);
	double *t = malloc(sizeof(double) * (size_t)(calls > 2000 ? calls : 2000));
	int rc = 0;
	printf("%-8s %14s %14s %22s\n", "batch", "ms per call", "us per row", "daemon compute ms");
	for (int k = 0; k < NB && !rc; k++) {
		int b = batches[k], n = b >= 512 ? (calls + 3) / 4 : calls;
		double c0, s0, c1, s1;
		compute_us(c, &c0, &s0);
		for (int i = -5; i < n && !rc; i++) {
			uint64_t s = db_now_ns();
			rc = rb_infer(c, "brain", "realtime", ids, b, plans) != TSD_OK;
			if (i >= 0)
				t[i] = (double)(db_now_ns() - s) / 1e6;
		}
		if (rc)
			break;
		compute_us(c, &c1, &s1);
		qsort(t, (size_t)n, sizeof(*t), cmp_double);
		printf("%-8d %14.3f %14.3f %17.3f mean\n", b, t[n / 2], t[n / 2] * 1e3 / b,
		       c1 > c0 ? (s1 - s0) / (c1 - c0) / 1e3 : 0);
		printf("RESULT tensord batch %d ms %.4f\n", b, t[n / 2]);
		if (b == 64 && write_check(check, ids, plans, 64))
			rc = 1;
	}
	for (int i = -100; i < 2000 && !rc; i++) {
		uint64_t s = db_now_ns();
		rc = rb_infer(c, "brain", "realtime", ids + (size_t)(i & 7) * RB_L, 1, plans) != TSD_OK;
		if (i >= 0)
			t[i] = (double)(db_now_ns() - s) / 1e6;
	}
	if (!rc) {
		qsort(t, 2000, sizeof(*t), cmp_double);
		printf("one decision (batch 1, 2000 calls): p50 %.3f ms  p95 %.3f ms\n", t[1000], t[1900]);
		printf("RESULT tensord decision p50 %.4f p95 %.4f\n", t[1000], t[1900]);
		printf("check file (ids and plans of 64 commands, for bench/tinygrad_robot.py): %s\n", check);
	}
	free(t);
	free(ids);
	free(plans);
	tsd_client_close(c);
	if (db_daemon_stop(&d))
		rc = 1;
	return rc;
}
