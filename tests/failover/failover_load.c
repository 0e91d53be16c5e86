/* failover_load.c: the load of the failure test (tests/failover.sh): N client threads (each its
 * own libtensord client, as a fleet of robots is) send infer requests for the example mlp to one
 * address (a list of replicas, or a balancer) while events run at given points of progress (a
 * SIGKILL, a SIGTERM, a restart: shell commands from the script). Every answer is checked
 * against the mlp computed here in double precision from the same safetensors file; every
 * `load_every`-th request is instead a model.load of a fresh name (non-idempotent: sent once).
 * Counts: answered right, wrong, failed with a named error (by status), lost (no completion by
 * its deadline + 5 s), model.loads sent more than once; latency p50/p99 overall and in the
 * failure window (first event to last event + 2 s). --check ADDRS: afterwards, each fresh name
 * must be loaded on at most one of those replicas. Exit 1 when anything is lost, wrong or
 * duplicated, or more than --max-fail-pct of the infers failed. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include <tensord/client.h>

#define MAX_CLIENTS 64
#define MAX_EVENTS 8
#define IN 16
#define HID 32
#define OUT 4

typedef struct mlp {
	double w1[HID][IN], b1[HID], w2[OUT][HID], b2[OUT];
} mlp;

typedef struct event {
	double pct;
	const char *cmd;
	double at; /* seconds since the start, once run */
} event;

typedef struct opts {
	const char *url, *weights, *spec, *check;
	int clients, requests, load_every, timeout_ms, interval_ms;
	double max_fail_pct;
	event ev[MAX_EVENTS];
	int nev;
} opts;

typedef struct result {
	double t, ms; /* completion time (s since start), latency */
	int kind;     /* 0 infer ok, 1 wrong, 2 failed, 3 lost; 10 load ok, 12 load failed */
	int status;
	int attempts;
} result;

typedef struct shared {
	const opts *o;
	mlp m;
	char *spec_text;
	double t0;
	atomic_int done;
	atomic_ullong retries; /* made by the clients' failover */
	result *res; /* clients * requests */
	char first_fail[2048];
	pthread_mutex_t mu;
} shared;

typedef struct worker {
	shared *sh;
	int id;
} worker;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The four float32 tensors of the example mlp from a safetensors file (make_weights'). */
static int read_mlp(const char *path, mlp *m)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	unsigned char lenb[8];
	uint64_t hl = 0;
	if (fread(lenb, 1, 8, f) != 8) {
		fclose(f);
		return -1;
	}
	for (int i = 7; i >= 0; i--)
		hl = hl << 8 | lenb[i];
	char *hdr = hl < (1u << 20) ? calloc(1, hl + 1) : NULL;
	if (!hdr || fread(hdr, 1, hl, f) != hl) {
		free(hdr);
		fclose(f);
		return -1;
	}
	cJSON *j = cJSON_Parse(hdr);
	free(hdr);
	struct {
		const char *name;
		double *dst;
		size_t n;
	} want[4] = {{"w1", &m->w1[0][0], HID * IN}, {"b1", m->b1, HID}, {"w2", &m->w2[0][0], OUT * HID}, {"b2", m->b2, OUT}};
	int rc = j ? 0 : -1;
	for (int k = 0; k < 4 && !rc; k++) {
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, want[k].name);
		const cJSON *off = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
		if (!t || cJSON_GetArraySize(off) != 2 || (size_t)(cJSON_GetArrayItem(off, 1)->valuedouble -
								    cJSON_GetArrayItem(off, 0)->valuedouble) != want[k].n * 4) {
			rc = -1;
			break;
		}
		float *buf = malloc(want[k].n * 4);
		if (!buf || fseek(f, (long)(8 + hl + (uint64_t)cJSON_GetArrayItem(off, 0)->valuedouble), SEEK_SET) ||
		    fread(buf, 4, want[k].n, f) != want[k].n)
			rc = -1;
		for (size_t i = 0; !rc && i < want[k].n; i++)
			want[k].dst[i] = buf[i];
		free(buf);
	}
	cJSON_Delete(j);
	fclose(f);
	return rc;
}

static void x_of(int client, int j, float *x)
{
	unsigned s = (unsigned)(client * 7919 + j * 104729 + 1);
	for (int i = 0; i < IN; i++) {
		s = s * 1103515245u + 12345u;
		x[i] = (float)((int)(s >> 16 & 0x3ff) - 512) / 256.0f;
	}
}

/* Whether y (OUT floats) and p are the mlp's answer for x. */
static bool right(const mlp *m, const float *x, const float *y, const float *p)
{
	double h[HID], yy[OUT], mx = -INFINITY, sum = 0;
	for (int o = 0; o < HID; o++) {
		double a = m->b1[o];
		for (int i = 0; i < IN; i++)
			a += m->w1[o][i] * x[i];
		h[o] = a > 0 ? a : 0;
	}
	for (int o = 0; o < OUT; o++) {
		double a = m->b2[o];
		for (int i = 0; i < HID; i++)
			a += m->w2[o][i] * h[i];
		yy[o] = a;
		mx = a > mx ? a : mx;
	}
	for (int o = 0; o < OUT; o++)
		sum += exp(yy[o] - mx);
	for (int o = 0; o < OUT; o++) {
		double pw = exp(yy[o] - mx) / sum;
		if (fabs(y[o] - yy[o]) > 1e-4 * (1 + fabs(yy[o])) || fabs(p[o] - pw) > 1e-5)
			return false;
	}
	return true;
}

static void note_fail(shared *sh, const char *fmt, const char *a, const char *b)
{
	pthread_mutex_lock(&sh->mu);
	if (!sh->first_fail[0])
		snprintf(sh->first_fail, sizeof(sh->first_fail), fmt, a, b ? b : "");
	pthread_mutex_unlock(&sh->mu);
}

static void *worker_main(void *arg)
{
	worker *w = arg;
	shared *sh = w->sh;
	const opts *o = sh->o;
	char err[1024];
	tsd_client *c = tsd_client_open_wait(o->url, o->timeout_ms, 10000, err, sizeof(err));
	double next = now_s();
	for (int j = 0; j < o->requests; j++) {
		result *r = &sh->res[w->id * o->requests + j];
		if (o->interval_ms > 0) { /* a control loop's period: the next request at its tick */
			double wait = next - now_s();
			if (wait > 0)
				usleep((useconds_t)(wait * 1e6));
			next += o->interval_ms / 1e3;
		}
		double t = now_s();
		tsd_call *k = NULL;
		bool load = o->load_every > 0 && j % o->load_every == o->load_every - 1;
		float x[IN];
		cJSON *h = load ? cJSON_Parse(sh->spec_text) : cJSON_CreateObject();
		tsd_tensor in = {.name = "x", .dtype = TSD_F32, .ndim = 2, .shape = {1, IN}, .data = x, .nbytes = sizeof(x)};
		if (load) {
			char name[64];
			snprintf(name, sizeof(name), "fresh_%d_%d", w->id, j);
			cJSON_ReplaceItemInObject(h, "name", cJSON_CreateString(name));
			cJSON_AddStringToObject(h, "verb", "model.load");
		} else {
			x_of(w->id, j, x);
			cJSON_AddStringToObject(h, "verb", "infer");
			cJSON_AddStringToObject(h, "model", "mlp");
		}
		tsd_status s = c ? tsd_client_submit(c, h, load ? NULL : &in, load ? 0 : 1, NULL, NULL, &k) : TSD_TIMEOUT;
		cJSON_Delete(h);
		r->status = s;
		if (s != TSD_OK || !k) {
			r->kind = load ? 12 : 2;
			note_fail(sh, "%s: %s", tsd_status_name(s), c ? tsd_client_error(c) : err);
		} else if (!tsd_call_wait(k, o->timeout_ms + 5000)) {
			r->kind = 3; /* lost: never completed */
			tsd_call_cancel(k);
		} else {
			tsd_reply *rp = NULL;
			s = tsd_call_take(k, &rp);
			r->status = s;
			r->attempts = tsd_call_attempts(k);
			if (s != TSD_OK) {
				r->kind = load ? 12 : 2;
				note_fail(sh, "%s: %s", tsd_status_name(s), tsd_call_error(k));
			} else if (load) {
				r->kind = 10;
			} else {
				const tsd_tensor *y = tsd_reply_find(rp, "y"), *p = tsd_reply_find(rp, "p");
				bool ok = y && p && y->nbytes == OUT * 4 && p->nbytes == OUT * 4 && right(&sh->m, x, y->data, p->data);
				r->kind = ok ? 0 : 1;
			}
			tsd_reply_free(rp);
		}
		tsd_call_free(k);
		r->ms = (now_s() - t) * 1e3;
		r->t = now_s() - sh->t0;
		atomic_fetch_add(&sh->done, 1);
	}
	if (c)
		atomic_fetch_add(&sh->retries, tsd_client_retries(c));
	tsd_client_close(c);
	return NULL;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double pct_of(double *v, int n, double q)
{
	if (!n)
		return 0;
	qsort(v, (size_t)n, sizeof(double), cmp_d);
	int i = (int)ceil(q * n) - 1;
	return v[i < 0 ? 0 : i];
}

/* Each fresh name of a model.load on at most one of the replicas in list. */
static int check_dups(const opts *o, const shared *sh, int *placed)
{
	char *list = strdup(o->check);
	int dups = 0;
	*placed = 0;
	cJSON *names = cJSON_CreateObject();
	for (char *save = NULL, *u = strtok_r(list, ",", &save); u; u = strtok_r(NULL, ",", &save)) {
		char err[512];
		tsd_client *c = tsd_client_open(u, 5000, err, sizeof(err));
		if (!c) {
			fprintf(stderr, "failover_load: --check %s: %s (skipped: not running)\n", u, err);
			continue;
		}
		tsd_reply *r = NULL;
		if (tsd_client_call_verb(c, "model.list", &r) == TSD_OK) {
			const cJSON *m;
			cJSON_ArrayForEach(m, cJSON_GetObjectItem(tsd_reply_json(r), "models")) {
				const char *n = cJSON_GetStringValue(cJSON_GetObjectItem(m, "name"));
				if (!n || strncmp(n, "fresh_", 6))
					continue;
				cJSON *seen = cJSON_GetObjectItem(names, n);
				if (seen) {
					dups++;
					fprintf(stderr, "failover_load: DUPLICATE: model.load %s ran on two replicas\n", n);
				} else {
					cJSON_AddTrueToObject(names, n);
					(*placed)++;
				}
			}
		}
		tsd_reply_free(r);
		tsd_client_close(c);
	}
	(void)sh;
	cJSON_Delete(names);
	free(list);
	return dups;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = n >= 0 && n < (1 << 20) ? calloc(1, (size_t)n + 1) : NULL;
	if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	fclose(f);
	return b;
}

int main(int argc, char **argv)
{
	opts o = {.clients = 20, .requests = 150, .load_every = 0, .timeout_ms = 10000, .max_fail_pct = 0.1};
	for (int i = 1; i + 1 < argc; i += 2) {
		const char *a = argv[i], *v = argv[i + 1];
		if (!strcmp(a, "--url"))
			o.url = v;
		else if (!strcmp(a, "--weights"))
			o.weights = v;
		else if (!strcmp(a, "--spec"))
			o.spec = v;
		else if (!strcmp(a, "--check"))
			o.check = v;
		else if (!strcmp(a, "--clients"))
			o.clients = atoi(v);
		else if (!strcmp(a, "--requests"))
			o.requests = atoi(v);
		else if (!strcmp(a, "--load-every"))
			o.load_every = atoi(v);
		else if (!strcmp(a, "--interval-ms"))
			o.interval_ms = atoi(v);
		else if (!strcmp(a, "--timeout-ms"))
			o.timeout_ms = atoi(v);
		else if (!strcmp(a, "--max-fail-pct"))
			o.max_fail_pct = atof(v);
		else if (!strcmp(a, "--event") && o.nev < MAX_EVENTS && strchr(v, ':')) {
			o.ev[o.nev].pct = atof(v);
			o.ev[o.nev].cmd = strchr(v, ':') + 1;
			o.nev++;
		} else {
			fprintf(stderr, "failover_load: unknown option %s\n", a);
			return 2;
		}
	}
	if (!o.url || !o.weights || o.clients < 1 || o.clients > MAX_CLIENTS || o.requests < 1 ||
	    (o.load_every && !o.spec)) {
		fprintf(stderr, "usage: failover_load --url ADDR --weights mlp.safetensors [--spec mlp.json --load-every K] "
				"[--clients N] [--requests N] [--interval-ms MS] [--timeout-ms MS] [--event PCT:CMD]... [--check ADDRS] [--max-fail-pct P]\n");
		return 2;
	}
	static shared sh;
	sh.o = &o;
	pthread_mutex_init(&sh.mu, NULL);
	if (read_mlp(o.weights, &sh.m)) {
		fprintf(stderr, "failover_load: cannot read the mlp's weights from %s\n", o.weights);
		return 2;
	}
	if (o.spec && !(sh.spec_text = slurp(o.spec))) {
		fprintf(stderr, "failover_load: cannot read %s\n", o.spec);
		return 2;
	}
	int total = o.clients * o.requests;
	sh.res = calloc((size_t)total, sizeof(result));
	pthread_t th[MAX_CLIENTS];
	worker w[MAX_CLIENTS];
	sh.t0 = now_s();
	for (int i = 0; i < o.clients; i++) {
		w[i] = (worker){&sh, i};
		pthread_create(&th[i], NULL, worker_main, &w[i]);
	}
	for (int e = 0; e < o.nev; e++) { /* in order: each when that share of the requests is done */
		while (atomic_load(&sh.done) < (int)(o.ev[e].pct / 100.0 * total))
			usleep(1000);
		o.ev[e].at = now_s() - sh.t0;
		int rc = system(o.ev[e].cmd);
		fprintf(stderr, "failover_load: at %.0f%% (%.2f s): %s (exit %d)\n", o.ev[e].pct, o.ev[e].at, o.ev[e].cmd, rc);
	}
	for (int i = 0; i < o.clients; i++)
		pthread_join(th[i], NULL);
	double wall = now_s() - sh.t0;
	int n[16] = {0}, dup_sends = 0, nall = 0, nwin = 0;
	double *lat = calloc((size_t)total, sizeof(double)), *win = calloc((size_t)total, sizeof(double));
	double w0 = o.nev ? o.ev[0].at : 0, w1 = o.nev ? o.ev[o.nev - 1].at + 2.0 : 0;
	int status_count[64] = {0};
	for (int i = 0; i < total; i++) {
		result *r = &sh.res[i];
		n[r->kind]++;
		if (r->kind >= 10 && r->attempts > 1)
			dup_sends++;
		if (r->kind == 2 || r->kind == 12)
			status_count[r->status & 63]++;
		if (r->kind == 0) {
			lat[nall++] = r->ms;
			if (o.nev && r->t >= w0 && r->t - r->ms / 1e3 <= w1)
				win[nwin++] = r->ms;
		}
	}
	int placed = 0, dups = o.check ? check_dups(&o, &sh, &placed) : 0;
	int infers = n[0] + n[1] + n[2] + n[3];
	double fail_pct = infers ? 100.0 * n[2] / infers : 0;
	printf("failover_load: %s: %d clients x %d requests in %.2f s (%.0f req/s)\n", o.url, o.clients, o.requests, wall,
	       total / wall);
	printf("failover_load: infer: %d right, %d wrong, %d failed with a named error (%.3f%%), %d lost; %llu retries made\n",
	       n[0], n[1], n[2], fail_pct, n[3], (unsigned long long)atomic_load(&sh.retries));
	if (o.load_every)
		printf("failover_load: model.load (non-idempotent): %d ok, %d failed with a named error, %d sent more than "
		       "once; %d fresh names found on the live replicas, %d on two\n",
		       n[10], n[12], dup_sends, placed, dups);
	for (int s = 0; s < 64; s++)
		if (status_count[s])
			printf("failover_load:   failed %s: %d\n", tsd_status_name((tsd_status)s), status_count[s]);
	if (sh.first_fail[0])
		printf("failover_load:   first failure: %s\n", sh.first_fail);
	double p50 = pct_of(lat, nall, 0.5), p99 = pct_of(lat, nall, 0.99);
	printf("failover_load: latency of right answers: p50 %.3f ms, p99 %.3f ms", p50, p99);
	if (o.nev)
		printf("; in the failure window (%.2f-%.2f s, %d answers): p50 %.3f ms, p99 %.3f ms", w0, w1, nwin,
		       pct_of(win, nwin, 0.5), pct_of(win, nwin, 0.99));
	printf("\n");
	bool bad = n[1] || n[3] || dup_sends || dups || fail_pct > o.max_fail_pct;
	if (bad)
		printf("failover_load: FAILED (lost %d, wrong %d, sent twice %d, duplicated %d, failed %.3f%% > %.3f%%?)\n", n[3], n[1],
		       dup_sends, dups, fail_pct, o.max_fail_pct);
	free(lat);
	free(win);
	free(sh.res);
	free(sh.spec_text);
	return bad ? 1 : 0;
}
