/* tensorctl_bench.c: `tensorctl bench`: a load generator in the manner of Triton's
 * perf_analyzer: closed-loop concurrency levels or open-loop request rates, measurement windows
 * repeated until three agree, latency percentiles, throughput, the daemon's queue/compute split
 * from stats deltas; a table, CSV and an SVG chart. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tensorctl.h"
#include "tensorctl_oip.h"
#include "tensorctl_plot.h"

const char tctl_bench_help[] =
	"usage: tensorctl bench MODEL [INPUT...] [--batch N] [--concurrency LEVELS]\n"
	"                       [--rate LEVELS] [--window-ms MS] [--stability PCT]\n"
	"                       [--max-windows N] [--priority P] [--csv FILE] [--plot FILE.svg]\n"
	"                       [--progress|--no-progress] [--protocol tsd|http|grpc]\n"
	"                       [--http-url URL] [--grpc-url URL]\n"
	"\n"
	"Load the daemon with infer requests of MODEL and measure, level after level:\n"
	"  --concurrency LEVELS  closed loop: that many requests in flight, one connection each.\n"
	"                        LEVELS: N, A:B (A, 2A, 4A, ... up to B) or a list 1,4,16\n"
	"                        (default 1:16)\n"
	"  --rate LEVELS         open loop instead: requests started at that many per second\n"
	"                        (same forms), by up to --concurrency's last level connections\n"
	"                        (default 64); requests that could not start on time count as\n"
	"                        \"late\"\n"
	"  INPUT                 INPUT.json or NAME=FILE.npy, as for infer (default: every input\n"
	"                        filled with small pseudo-random values, --batch rows, default 1)\n"
	"  --window-ms MS        a measurement window (default 2000); windows repeat until the\n"
	"                        last three agree within --stability percent (default 10) in\n"
	"                        throughput and p50 latency, at most --max-windows (default 10)\n"
	"  --csv FILE            one line per level (header first)\n"
	"  --plot FILE.svg       latency percentiles and throughput against the levels\n"
	"  --protocol P          tsd (the default: tensord's own, over --url), http or grpc: the\n"
	"                        Open Inference Protocol (KServe v2) with binary tensor data over\n"
	"                        one connection per worker kept open: http to --http-url (default\n"
	"                        http://127.0.0.1:8000), grpc's ModelInfer with raw contents to\n"
	"                        --grpc-url (default grpc://127.0.0.1:8001); the daemon's figures\n"
	"                        still over --url\n"
	"Per level: throughput (requests/s, rows/s), latency p50 p90 p95 p99 and mean (ms, at the\n"
	"client), the daemon's mean queue and compute time per request (stats deltas), errors.\n"
	"SIGINT stops after the current window (the level so far kept, exit 5). Exit 4 when\n"
	"a request failed, 3 when none could be sent.\n";

#define MAX_LEVELS 32

typedef struct rec {
	double t_end, lat; /* seconds */
	bool ok;
} rec;

typedef struct bench bench;

typedef struct bworker {
	bench *b;
	pthread_t th;
	tsd_client *c;
	void *o; /* --protocol http or grpc: its connection (b->oip's) instead of c */
	pthread_mutex_t mu;
	rec *r;
	size_t n, cap;
	bool oom;
	char why[256]; /* the last transport failure */
} bworker;

struct bench {
	const char *model, *priority;
	tctl_inputs in;
	long rows;
	double rate;	  /* > 0: open loop */
	atomic_long next; /* open loop: the next request's index */
	double t0;	  /* open loop: the schedule's start */
	atomic_long late; /* open loop: started over 1 ms after their time */
	atomic_bool stop;
	tctl_ctx *ctx;
	bool progress; /* a status line on stderr while a level is measured */
	const tctl_oip_ops *oip; /* --protocol http or grpc; NULL: TSD1 */
	const char *oip_url;	 /* its frontend's */
};

/* One level's results. */
typedef struct level {
	double x, thr, rows_ps, p50, p90, p95, p99, mean, queue_us, compute_us, batch;
	long errors, late, windows;
	bool stable;
} level;

static void record(bworker *w, double t_end, double lat, bool ok)
{
	pthread_mutex_lock(&w->mu);
	if (w->n == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 4096;
		rec *r = realloc(w->r, cap * sizeof(*r));
		if (!r) {
			w->oom = true;
			pthread_mutex_unlock(&w->mu);
			return;
		}
		w->r = r;
		w->cap = cap;
	}
	w->r[w->n++] = (rec){t_end, lat, ok};
	pthread_mutex_unlock(&w->mu);
}

static void *bworker_main(void *arg)
{
	bworker *w = arg;
	bench *b = w->b;
	cJSON *h = cJSON_CreateObject();
	cJSON_AddStringToObject(h, "verb", "infer");
	cJSON_AddStringToObject(h, "model", b->model);
	if (b->priority)
		cJSON_AddStringToObject(h, "priority", b->priority);
	while (!atomic_load(&b->stop)) {
		if (b->rate > 0) { /* wait for this request's time */
			long k = atomic_fetch_add(&b->next, 1);
			double due = b->t0 + (double)k / b->rate, now = tctl_now();
			if (now > due + 1e-3)
				atomic_fetch_add(&b->late, 1);
			while (now < due && !atomic_load(&b->stop)) {
				double d = due - now > 0.05 ? 0.05 : due - now;
				struct timespec ts = {0, (long)(d * 1e9)};
				nanosleep(&ts, NULL);
				now = tctl_now();
			}
			if (atomic_load(&b->stop))
				break;
		}
		bool ok, lost;
		double t = tctl_now(), e;
		if (w->o) {
			char why[sizeof(w->why)];
			tctl_oip_result res = b->oip->infer(w->o, why, sizeof(why));
			e = tctl_now();
			ok = res == TCTL_OIP_OK;
			lost = res == TCTL_OIP_LOST;
			if (!ok)
				snprintf(w->why, sizeof(w->why), "%s", why);
		} else {
			tsd_reply *r;
			tsd_status s = tsd_client_call(w->c, h, b->in.t, b->in.n, &r);
			e = tctl_now();
			ok = s == TSD_OK;
			lost = !r;
			tsd_reply_free(r);
			if (lost)
				snprintf(w->why, sizeof(w->why), "%s: %s", tsd_status_name(s), tsd_client_error(w->c));
		}
		record(w, e, e - t, ok);
		if (lost) { /* no reply: the connection is gone or timed out; try once more later */
			struct timespec ts = {0, 100000000};
			nanosleep(&ts, NULL);
		}
	}
	cJSON_Delete(h);
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double pct(const double *v, size_t n, double p)
{
	if (!n)
		return NAN;
	size_t k = (size_t)ceil(p / 100 * (double)n);
	return v[k ? k - 1 : 0];
}

/* The count and sum of model's queue, compute and batch-size histograms, from stats (the
 * daemon-wide ones from a daemon without per-model histograms). */
static bool hist(tsd_client *c, const char *model, double cnt[3], double sum[3])
{
	tsd_reply *r;
	static const char *const names[3] = {"queue_us", "compute_us", "batch_size"};
	if (tsd_client_call_verb(c, "stats", &r) != TSD_OK) {
		tsd_reply_free(r);
		return false;
	}
	const cJSON *j = tsd_reply_json(r);
	const cJSON *hs = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "models"), model), "histograms");
	if (!hs)
		hs = cJSON_GetObjectItemCaseSensitive(j, "histograms");
	for (int k = 0; k < 3; k++) {
		const cJSON *h = cJSON_GetObjectItemCaseSensitive(hs, names[k]);
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(h, "count");
		const cJSON *s = cJSON_GetObjectItemCaseSensitive(h, "sum");
		cnt[k] = cJSON_IsNumber(n) ? n->valuedouble : NAN;
		sum[k] = cJSON_IsNumber(s) ? s->valuedouble : NAN;
	}
	tsd_reply_free(r);
	return true;
}

typedef struct window {
	double thr, p50, t_start;
	double cnt[3], sum[3]; /* stats at the window's start */
	double *lat;	       /* the window's ok latencies, sorted */
	size_t n;
} window;

/* Run one level (n connections; rate > 0 for open loop) and measure it into *lv. Returns an exit
 * status (0, or 3 when no connection could be made). */
static int run_level(bench *b, int n, double rate, long window_ms, double stability,
		     long max_windows, const sigset_t *sigs, level *lv, bool *interrupted)
{
	bworker *ws = calloc((size_t)n, sizeof(*ws));
	if (!ws)
		return TCTL_EXIT_IO;
	b->rate = rate;
	atomic_store(&b->stop, false);
	atomic_store(&b->next, 0);
	atomic_store(&b->late, 0);
	b->t0 = tctl_now();
	int started = 0, rc = 0;
	char err[512] = "";
	for (; started < n; started++) {
		bworker *w = &ws[started];
		w->b = b;
		pthread_mutex_init(&w->mu, NULL);
		bool conn = b->oip ? !!(w->o = b->oip->open(b->oip_url, b->model, &b->in,
							    b->ctx->timeout_ms, err, sizeof(err)))
				   : !!(w->c = tsd_client_open(b->ctx->url, b->ctx->timeout_ms, err,
							       sizeof(err)));
		if (!conn || pthread_create(&w->th, NULL, bworker_main, w)) {
			tsd_client_close(w->c);
			if (w->o)
				b->oip->close(w->o);
			pthread_mutex_destroy(&w->mu);
			break;
		}
	}
	if (started < n) {
		fprintf(stderr, "tensorctl bench: %s\n", err[0] ? err : "cannot start a thread");
		rc = TCTL_EXIT_TRANSPORT;
	}
	window win[64];
	int nw = 0;
	long errors = 0, late0 = 0;
	/* a warm-up of half a window, then windows */
	struct timespec warm = {window_ms / 2000, (window_ms / 2 % 1000) * 1000000L};
	if (!rc)
		nanosleep(&warm, NULL);
	for (; !rc && nw < max_windows && nw < 64; nw++) {
		window *wd = &win[nw];
		memset(wd, 0, sizeof(*wd));
		wd->t_start = tctl_now();
		late0 = nw ? late0 : atomic_load(&b->late);
		if (!hist(b->ctx->c, b->model, wd->cnt, wd->sum))
			memset(wd->cnt, 0, sizeof(wd->cnt));
		for (int i = 0; i < started; i++) { /* drop what came before */
			pthread_mutex_lock(&ws[i].mu);
			ws[i].n = 0;
			pthread_mutex_unlock(&ws[i].mu);
		}
		struct timespec d = {window_ms / 1000, (window_ms % 1000) * 1000000L},
				zero = {0, 0};
		nanosleep(&d, NULL);
		double t_end = tctl_now();
		size_t cap = 0;
		for (int i = 0; i < started; i++) {
			pthread_mutex_lock(&ws[i].mu);
			cap += ws[i].n + 64; /* room for what arrives while the others are read */
			pthread_mutex_unlock(&ws[i].mu);
		}
		if (!(wd->lat = malloc((cap ? cap : 1) * sizeof(double)))) {
			rc = TCTL_EXIT_IO;
			break;
		}
		for (int i = 0; i < started; i++) {
			bworker *w = &ws[i];
			pthread_mutex_lock(&w->mu);
			for (size_t j = 0; j < w->n && wd->n < cap; j++) {
				if (w->r[j].t_end > t_end)
					break;
				if (w->r[j].ok)
					wd->lat[wd->n++] = w->r[j].lat;
				else
					errors++;
			}
			pthread_mutex_unlock(&w->mu);
		}
		qsort(wd->lat, wd->n, sizeof(double), cmp_double);
		wd->thr = (double)wd->n / (t_end - wd->t_start);
		wd->p50 = pct(wd->lat, wd->n, 50);
		if (b->progress) /* what a person waits for: the windows so far */
			fprintf(stderr, "\r%s %g: window %d/%ld, %.1f req/s, p50 %.3f ms\033[K",
				rate > 0 ? "rate" : "concurrency", rate > 0 ? rate : (double)n,
				nw + 1, max_windows, wd->thr, wd->p50 * 1e3);
		if (sigtimedwait(sigs, NULL, &zero) > 0) {
			*interrupted = true;
			nw++;
			break;
		}
		if (nw >= 2) { /* the last three agree? */
			bool ok = true;
			for (int q = nw - 2; q <= nw; q++)
				for (int m = nw - 2; m <= nw; m++)
					ok = ok &&
					     fabs(win[q].thr - win[m].thr) <=
						     stability / 100 * win[m].thr &&
					     fabs(win[q].p50 - win[m].p50) <=
						     stability / 100 * win[m].p50;
			if (ok) {
				lv->stable = true;
				nw++;
				break;
			}
		}
	}
	if (b->progress)
		fputs("\r\033[K", stderr);
	double cnt[3], sum[3];
	bool have = nw && hist(b->ctx->c, b->model, cnt, sum);
	atomic_store(&b->stop, true);
	for (int i = 0; i < started; i++) {
		pthread_join(ws[i].th, NULL);
		tsd_client_close(ws[i].c);
		if (ws[i].o)
			b->oip->close(ws[i].o);
		if (ws[i].oom)
			rc = TCTL_EXIT_IO;
		if (ws[i].why[0] && !rc)
			fprintf(stderr, "tensorctl bench: %s\n", ws[i].why);
		free(ws[i].r);
		pthread_mutex_destroy(&ws[i].mu);
	}
	/* the level: the last three windows (or fewer) together */
	int first = nw >= 3 ? nw - 3 : 0;
	size_t total = 0;
	lv->thr = 0;
	for (int q = first; q < nw; q++) {
		lv->thr += win[q].thr / (nw - first);
		total += win[q].n;
	}
	double *all = malloc((total ? total : 1) * sizeof(double)), sum_lat = 0;
	size_t k = 0;
	for (int q = first; all && q < nw; q++)
		for (size_t j = 0; j < win[q].n; j++)
			sum_lat += (all[k++] = win[q].lat[j]);
	qsort(all, k, sizeof(double), cmp_double);
	lv->p50 = pct(all, k, 50);
	lv->p90 = pct(all, k, 90);
	lv->p95 = pct(all, k, 95);
	lv->p99 = pct(all, k, 99);
	lv->mean = k ? sum_lat / (double)k : NAN;
	free(all);
	for (int q = 0; q < nw; q++)
		free(win[q].lat);
	double d[3];
	for (int q = 0; q < 3; q++)
		d[q] = have ? cnt[q] - win[first].cnt[q] : NAN;
	lv->queue_us = d[0] > 0 ? (sum[0] - win[first].sum[0]) / d[0] : NAN;
	lv->compute_us = d[1] > 0 ? (sum[1] - win[first].sum[1]) / d[1] : NAN;
	lv->batch = d[2] > 0 ? (sum[2] - win[first].sum[2]) / d[2] : NAN;
	lv->errors = errors;
	lv->windows = nw;
	lv->late = atomic_load(&b->late) - late0;
	free(ws);
	return rc;
}

/* LEVELS: N, A:B doubling, or a list. */
static int parse_levels(const char *s, double *v, int *n)
{
	*n = 0;
	char *end;
	double a = strtod(s, &end);
	if (end != s && *end == ':') {
		double b = strtod(end + 1, &end);
		if (*end || !(a >= 1) || b < a)
			return -1;
		for (double x = a; x <= b && *n < MAX_LEVELS; x *= 2)
			v[(*n)++] = x;
		return 0;
	}
	for (const char *p = s; *p;) {
		double x = strtod(p, &end);
		if (end == p || !(x > 0) || *n == MAX_LEVELS || (*end && *end != ','))
			return -1;
		v[(*n)++] = x;
		p = *end ? end + 1 : end;
	}
	return *n ? 0 : -1;
}

/* Every input of m with rows rows of small pseudo-random values. */
static bool synth_inputs(const tctl_model *m, long rows, tctl_inputs *in, char *err, size_t errlen)
{
	uint32_t s = 12345;
	for (int i = 0; i < m->nin; i++) {
		const tctl_port *p = &m->in[i];
		char shape[160] = "";
		size_t numel = 1;
		for (int d = 0, n = 0; d < p->ndim; d++) {
			int64_t v = d == p->batch_axis ? rows : p->shape[d];
			numel *= (size_t)v;
			n += snprintf(shape + n, sizeof(shape) - (size_t)n, "%s%lld", d ? "," : "",
				      (long long)v);
		}
		size_t es = tsd_dtype_size(p->dtype);
		uint8_t *data = malloc(numel * es + 1);
		if (!data) {
			snprintf(err, errlen, "out of memory");
			return false;
		}
		for (size_t k = 0; k < numel; k++) {
			s = s * 1664525u + 1013904223u;
			double v = tsd_dtype_is_float(p->dtype)
					   ? (double)(s >> 8) / (1 << 24) * 2 - 1
					   : (double)((s >> 28) % 2);
			tctl_value_store(p->dtype, v, data + k * es);
		}
		if (!tctl_inputs_raw(in, p->name, tsd_dtype_name(p->dtype), shape, data, numel * es,
				     err, errlen))
			return false;
	}
	return true;
}

static void print_level(FILE *f, const level *l, bool csv)
{
	if (csv)
		fprintf(f, "%g,%.2f,%.2f,%.4f,%.4f,%.4f,%.4f,%.4f,%.1f,%.1f,%.2f,%ld,%ld,%ld,%d\n",
			l->x, l->thr, l->rows_ps, l->p50 * 1e3, l->p90 * 1e3, l->p95 * 1e3,
			l->p99 * 1e3, l->mean * 1e3, l->queue_us, l->compute_us, l->batch,
			l->errors, l->late, l->windows, l->stable);
	else
		fprintf(f,
			"%8g %10.1f %8.3f %8.3f %8.3f %8.3f %8.3f %9.1f %9.1f %6.1f %6ld %6ld %s\n",
			l->x, l->thr, l->p50 * 1e3, l->p90 * 1e3, l->p95 * 1e3, l->p99 * 1e3,
			l->mean * 1e3, l->queue_us, l->compute_us, l->batch, l->errors, l->late,
			l->stable ? "" : "(unstable)");
}

/* The protocol whose --X-url flag a is (its index in tctl_oip_protocols), or -1. */
static int url_flag(const char *a)
{
	for (int k = 0; k < TCTL_OIP_COUNT; k++)
		if (!strcmp(a, tctl_oip_protocols[k]->url_flag))
			return k;
	return -1;
}

int tctl_cmd_bench(tctl_ctx *ctx, int argc, char **argv)
{
	bench b = {.ctx = ctx, .rows = 1, .progress = isatty(2)};
	const char *conc = NULL, *rates = NULL, *csv = NULL, *plot = NULL;
	const char *urls[TCTL_OIP_COUNT] = {NULL}; /* each protocol's --X-url */
	long window_ms = 2000, max_windows = 10;
	double stability = 10;
	char err[512], *end;
	int rc = 0;
	for (int i = 0; i < argc && !rc; i++) {
		const char *a = argv[i];
		bool has = i + 1 < argc;
		if (!strcmp(a, "--concurrency") && has)
			conc = argv[++i];
		else if (!strcmp(a, "--rate") && has)
			rates = argv[++i];
		else if (!strcmp(a, "--csv") && has)
			csv = argv[++i];
		else if (!strcmp(a, "--plot") && has)
			plot = argv[++i];
		else if (!strcmp(a, "--progress") || !strcmp(a, "--no-progress"))
			b.progress = a[2] == 'p';
		else if (!strcmp(a, "--priority") && has)
			b.priority = argv[++i];
		else if (!strcmp(a, "--protocol") && has) {
			const char *p = argv[++i];
			if (!(b.oip = tctl_oip_find(p)) && strcmp(p, "tsd"))
				rc = tctl_usage("bench", "--protocol %s: tsd, http or grpc", p);
		} else if (url_flag(a) >= 0 && has) {
			urls[url_flag(a)] = argv[++i];
		} else if (!strcmp(a, "--batch") && has) {
			if (!tctl_parse_long(argv[++i], 1, 4096, &b.rows))
				rc = tctl_usage("bench", "--batch %s: not in 1..4096", argv[i]);
		} else if (!strcmp(a, "--window-ms") && has) {
			if (!tctl_parse_long(argv[++i], 10, 600000, &window_ms))
				rc = tctl_usage("bench", "--window-ms %s: not in 10..600000",
						argv[i]);
		} else if (!strcmp(a, "--max-windows") && has) {
			if (!tctl_parse_long(argv[++i], 3, 64, &max_windows))
				rc = tctl_usage("bench", "--max-windows %s: not in 3..64", argv[i]);
		} else if (!strcmp(a, "--stability") && has) {
			stability = strtod(argv[++i], &end);
			if (*end || !(stability > 0 && stability <= 100))
				rc = tctl_usage("bench", "--stability %s: not a percentage",
						argv[i]);
		} else if (a[0] == '-') {
			rc = tctl_usage("bench", "unexpected argument %s", a);
		} else if (!b.model) {
			b.model = a;
		} else if (!tctl_inputs_arg(&b.in, a, err, sizeof(err))) {
			fprintf(stderr, "tensorctl bench: %s\n", err);
			rc = TCTL_EXIT_USAGE;
		}
	}
	for (int k = 0; k < TCTL_OIP_COUNT; k++)
		if (b.oip == tctl_oip_protocols[k])
			b.oip_url = urls[k] ? urls[k] : b.oip->default_url;
	if (!rc && b.oip && b.priority)
		rc = tctl_usage(
			"bench",
			"--priority: TSD1 only (over %s the request's parameters would carry it)",
			b.oip->name);
	double cl[MAX_LEVELS], rl[MAX_LEVELS];
	int ncl = 0, nrl = 0;
	if (!rc && !b.model)
		rc = tctl_usage("bench", "needs MODEL");
	if (!conc)
		conc = rates ? "64" : "1:16";
	if (!rc && parse_levels(conc, cl, &ncl))
		rc = tctl_usage("bench", "--concurrency %s: not N, A:B or a list", conc);
	if (!rc && rates && parse_levels(rates, rl, &nrl))
		rc = tctl_usage("bench", "--rate %s: not N, A:B or a list", rates);
	if (!rc && cl[ncl - 1] > 1024)
		rc = tctl_usage("bench", "--concurrency: at most 1024");
	tctl_model *ms = NULL;
	int nms = 0;
	if (!rc && !(rc = tctl_models_fetch(ctx->c, &ms, &nms))) {
		const tctl_model *m = tctl_model_find(ms, nms, b.model, strlen(b.model));
		if (!m) {
			fprintf(stderr, "tensorctl bench: unknown_model: no model %s\n", b.model);
			rc = TCTL_EXIT_DAEMON;
		} else if (b.in.n) { /* rows/s: the given inputs' batch size */
			for (int i = 0; i < b.in.n; i++)
				if (!strcmp(b.in.t[i].name, m->in[0].name) &&
				    m->in[0].batch_axis >= 0 &&
				    m->in[0].batch_axis < b.in.t[i].ndim)
					b.rows = (long)b.in.t[i].shape[m->in[0].batch_axis];
		} else if (!synth_inputs(m, b.rows, &b.in, err, sizeof(err))) {
			fprintf(stderr, "tensorctl bench: %s\n", err);
			rc = TCTL_EXIT_USAGE;
		}
	}
	free(ms);
	if (rc) {
		tctl_inputs_free(&b.in);
		return rc;
	}
	/* one request first: a model that fails fails here, not in every window */
	cJSON *h = cJSON_CreateObject();
	cJSON_AddStringToObject(h, "verb", "infer");
	cJSON_AddStringToObject(h, "model", b.model);
	tsd_reply *r;
	tsd_status s = tsd_client_call(ctx->c, h, b.in.t, b.in.n, &r);
	cJSON_Delete(h);
	rc = tctl_outcome(ctx->c, s, r);
	tsd_reply_free(r);
	bool oip_up = false; /* b.oip's global setup done */
	if (!rc && b.oip) {  /* and once over the OIP frontend: it is there and takes it */
		void *o = NULL;
		tctl_oip_result res = TCTL_OIP_LOST;
		if ((oip_up = b.oip->global(err, sizeof(err))) &&
		    (o = b.oip->open(b.oip_url, b.model, &b.in, ctx->timeout_ms, err, sizeof(err))))
			res = b.oip->infer(o, err, sizeof(err));
		if (res != TCTL_OIP_OK) {
			fprintf(stderr, "tensorctl bench: %s: %s\n", b.oip_url, err);
			rc = res == TCTL_OIP_ERROR ? TCTL_EXIT_DAEMON : TCTL_EXIT_TRANSPORT;
		}
		if (o)
			b.oip->close(o);
	}
	if (rc) {
		if (oip_up)
			b.oip->global_end();
		tctl_inputs_free(&b.in);
		return rc;
	}
	bool rate_mode = nrl > 0;
	int nl = rate_mode ? nrl : ncl;
	level lv[MAX_LEVELS];
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	bool interrupted = false;
	printf("%8s %10s %8s %8s %8s %8s %8s %9s %9s %6s %6s %6s\n", rate_mode ? "rate" : "conc",
	       "req/s", "p50 ms", "p90 ms", "p95 ms", "p99 ms", "mean ms", "queue us", "comp us",
	       "batch", "errors", "late");
	int done = 0;
	long errors = 0;
	for (; done < nl && !interrupted && !rc; done++) {
		memset(&lv[done], 0, sizeof(level));
		lv[done].x = rate_mode ? rl[done] : cl[done];
		int conn = (int)(rate_mode ? cl[ncl - 1] : cl[done]);
		rc = run_level(&b, conn, rate_mode ? rl[done] : 0, window_ms, stability,
			       max_windows, &sigs, &lv[done], &interrupted);
		lv[done].rows_ps = lv[done].thr * (double)b.rows;
		print_level(stdout, &lv[done], false);
		fflush(stdout);
		errors += lv[done].errors;
	}
	if (b.oip)
		b.oip->global_end();
	tctl_inputs_free(&b.in);
	if (csv) {
		FILE *f = fopen(csv, "w");
		if (f) {
			fprintf(f,
				"%s,throughput_rps,throughput_rows_ps,p50_ms,p90_ms,p95_ms,p99_ms,"
				"mean_ms,server_queue_us,server_compute_us,server_batch,errors,"
				"late,windows,stable\n",
				rate_mode ? "rate" : "concurrency");
			for (int i = 0; i < done; i++) {
				level l = lv[i];
				print_level(f, &l, true);
			}
		}
		if (!f || fclose(f)) {
			fprintf(stderr, "tensorctl bench: %s: cannot write\n", csv);
			rc = rc ? rc : TCTL_EXIT_IO;
		}
	}
	if (plot) {
		double x[MAX_LEVELS], y[5][MAX_LEVELS];
		for (int i = 0; i < done; i++) {
			x[i] = lv[i].x;
			y[0][i] = lv[i].p50 * 1e3, y[1][i] = lv[i].p90 * 1e3;
			y[2][i] = lv[i].p95 * 1e3, y[3][i] = lv[i].p99 * 1e3, y[4][i] = lv[i].thr;
		}
		tctl_series ser[5] = {
			{"p50 latency", "#1f77b4", y[0], false, false},
			{"p90 latency", "#2ca02c", y[1], false, false},
			{"p95 latency", "#ff7f0e", y[2], false, false},
			{"p99 latency", "#d62728", y[3], false, false},
			{"throughput", "#444444", y[4], true, true},
		};
		char title[160];
		snprintf(title, sizeof(title), "%s: latency and throughput against %s", b.model,
			 rate_mode ? "request rate" : "concurrency");
		tctl_plot p = {title,
			       rate_mode ? "requests started per second" : "concurrent requests",
			       "latency (ms)",
			       "throughput (requests/s)",
			       x,
			       done,
			       done > 1 && x[done - 1] / x[0] >= 8,
			       ser,
			       5};
		if (!tctl_plot_svg(plot, &p, err, sizeof(err))) {
			fprintf(stderr, "tensorctl bench: %s\n", err);
			rc = rc ? rc : TCTL_EXIT_IO;
		}
	}
	if (rc)
		return rc;
	if (interrupted)
		return TCTL_EXIT_INTERRUPTED;
	return errors ? TCTL_EXIT_PARTIAL : TCTL_EXIT_OK;
}
