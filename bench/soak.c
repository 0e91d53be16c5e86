/* soak.c: the daemon under a long mixed load, for leaks and wrong answers. Starts tensord (the
 * binary beside this one), loads a small MLP (x[-1,16] -> linear 16x32 -> relu -> linear 32x4)
 * with its weights in the message, then SOAK_REQUESTS (default 1,000,000) requests from
 * SOAK_THREADS (default 16) client threads, one connection each: mostly infer (normal, some
 * realtime and bulk), some hello, health, stats, model.list and realize, and a few bad requests
 * (an unknown verb, an unknown model, a wrong shape, a bad graph, no model field). Every reply
 * must have the status its request expects (and an infer its output). The daemon's VmRSS is
 * read after the first 100,000 requests (or a tenth of a shorter run) and at the end; the run
 * fails (exit 1) unless the end RSS is within 2% of that one and every status was right.
 * Environment: SOAK_REQUESTS, SOAK_THREADS, SOAK_RSS_TOLERANCE_PCT (2), SOAK_RSS_FLOOR_KB (0: growth
 * up to that many KiB passes too), and for finding a leak SOAK_ONLY=K (only request kind
 * K of kind_name[] besides infer; the others become normal infer).
 * `make soak` runs it; `make check` includes it. */
#include "daemon_bench.h"

#include <stdatomic.h>

#define NIN 16
#define NHID 32
#define NOUT 4
#define MAX_THREADS 256

enum { K_INFER, K_INFER_RT, K_INFER_BULK, K_HELLO, K_HEALTH, K_STATS, K_LIST, K_REALIZE, K_BAD_VERB,
       K_BAD_MODEL, K_BAD_SHAPE, K_BAD_GRAPH, K_NO_MODEL, K_COUNT };

static const char *const kind_name[K_COUNT] = {
	"infer normal", "infer realtime", "infer bulk", "hello", "health", "stats", "model.list",
	"realize", "unknown verb", "unknown model", "wrong shape", "bad graph", "infer no model"};

/* The daemon's heap from stats' "process" (KiB): in use, and free but held. 0 or -1. */
static int heap_kb(tsd_client *c, double *used, double *held)
{
	tsd_reply *r = NULL;
	int rc = -1;
	if (tsd_client_call_verb(c, "stats", &r) == TSD_OK) {
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(tsd_reply_json(r), "process");
		const cJSON *u = cJSON_GetObjectItemCaseSensitive(p, "heap_in_use_bytes");
		const cJSON *f = cJSON_GetObjectItemCaseSensitive(p, "heap_free_bytes");
		if (cJSON_IsNumber(u) && cJSON_IsNumber(f)) {
			*used = u->valuedouble / 1024;
			*held = f->valuedouble / 1024;
			rc = 0;
		}
	}
	tsd_reply_free(r);
	return rc;
}

/* The request mix, per 1000: what is not listed is normal infer. */
static int kind_of(uint64_t i)
{
	static const struct { int below, kind; } mix[] = {
		{50, K_INFER_RT}, {60, K_INFER_BULK}, {65, K_HELLO}, {70, K_HEALTH}, {72, K_STATS},
		{77, K_LIST}, {87, K_REALIZE}, {88, K_BAD_VERB}, {89, K_BAD_MODEL}, {90, K_BAD_SHAPE},
		{91, K_BAD_GRAPH}, {92, K_NO_MODEL}};
	int r = (int)(i % 1000);
	for (size_t k = 0; k < sizeof(mix) / sizeof(*mix); k++)
		if (r < mix[k].below)
			return mix[k].kind;
	return K_INFER;
}

typedef struct soak {
	const char *url;
	pid_t pid;
	uint64_t total, rss_at;
	atomic_ullong next;      /* requests handed out */
	atomic_ullong answered;  /* replies checked */
	atomic_llong rss_base;   /* KiB after rss_at requests, 0 until read */
	atomic_llong rss_tenth[10]; /* KiB after each tenth of the run */
	atomic_llong heap_tenth[10][2]; /* the daemon's heap in use and free (KiB) after each tenth */
	int only;                /* SOAK_ONLY: the one non-infer kind sent (others become infer), -1: all */
	atomic_ullong wrong;     /* replies with an unexpected status or content */
	atomic_ullong count[K_COUNT];
	pthread_barrier_t start;
} soak;

typedef struct soak_reqs {
	cJSON *h[K_COUNT];
	tsd_status want[K_COUNT];
} soak_reqs;

static cJSON *header(const char *verb, const char *model, const char *prio)
{
	cJSON *h = cJSON_CreateObject();
	cJSON_AddStringToObject(h, "verb", verb);
	if (model)
		cJSON_AddStringToObject(h, "model", model);
	if (prio)
		cJSON_AddStringToObject(h, "priority", prio);
	return h;
}

static void make_reqs(soak_reqs *q)
{
	q->h[K_INFER] = header("infer", "soak", "normal");
	q->h[K_INFER_RT] = header("infer", "soak", "realtime");
	q->h[K_INFER_BULK] = header("infer", "soak", "bulk");
	q->h[K_HELLO] = header("hello", NULL, NULL);
	cJSON_AddNumberToObject(q->h[K_HELLO], "version", TSD_PROTOCOL_VERSION);
	q->h[K_HEALTH] = header("health", NULL, NULL);
	q->h[K_STATS] = header("stats", NULL, NULL);
	q->h[K_LIST] = header("model.list", NULL, NULL);
	q->h[K_REALIZE] = header("realize", NULL, NULL);
	cJSON_AddItemToObject(q->h[K_REALIZE], "graph",
			      cJSON_Parse("{\"nodes\": [{\"id\": \"x\", \"op\": \"input\", \"dtype\": \"float32\", "
					  "\"shape\": [1, 16]}, {\"id\": \"r\", \"op\": \"relu\", \"in\": [\"x\"]}, "
					  "{\"id\": \"s\", \"op\": \"sum\", \"in\": [\"r\"]}], \"outputs\": [\"s\"]}"));
	q->h[K_BAD_VERB] = header("no.such.verb", NULL, NULL);
	q->h[K_BAD_MODEL] = header("infer", "no_such_model", NULL);
	q->h[K_BAD_SHAPE] = header("infer", "soak", NULL); /* sent with x [1,15] */
	q->h[K_BAD_GRAPH] = header("realize", NULL, NULL);
	cJSON_AddItemToObject(q->h[K_BAD_GRAPH], "graph",
			      cJSON_Parse("{\"nodes\": [{\"id\": \"r\", \"op\": \"relu\", \"in\": [\"nowhere\"]}], "
					  "\"outputs\": [\"r\"]}"));
	q->h[K_NO_MODEL] = header("infer", NULL, NULL);
	for (int k = 0; k < K_COUNT; k++)
		q->want[k] = TSD_OK;
	q->want[K_BAD_VERB] = TSD_UNKNOWN_VERB;
	q->want[K_BAD_MODEL] = TSD_UNKNOWN_MODEL;
	q->want[K_BAD_SHAPE] = TSD_SHAPE_MISMATCH;
	q->want[K_BAD_GRAPH] = TSD_BAD_REQUEST;
	q->want[K_NO_MODEL] = TSD_BAD_REQUEST;
}

static void free_reqs(soak_reqs *q)
{
	for (int k = 0; k < K_COUNT; k++)
		cJSON_Delete(q->h[k]);
}

static void *client_main(void *arg)
{
	soak *s = arg;
	char err[256];
	tsd_client *c = tsd_client_open(s->url, 60000, err, sizeof(err));
	soak_reqs q;
	make_reqs(&q);
	float x[NIN];
	db_fill(x, NIN, (uint32_t)(uintptr_t)&q, 1.0f);
	tsd_tensor good = {.name = "x", .dtype = TSD_F32, .ndim = 2, .shape = {1, NIN}, .data = x};
	tsd_tensor bad = {.name = "x", .dtype = TSD_F32, .ndim = 2, .shape = {1, NIN - 1}, .data = x};
	pthread_barrier_wait(&s->start);
	if (!c) {
		fprintf(stderr, "soak client: %s\n", err);
		atomic_fetch_add(&s->wrong, 1);
		free_reqs(&q);
		return NULL;
	}
	for (;;) {
		uint64_t i = atomic_fetch_add(&s->next, 1);
		if (i >= s->total)
			break;
		int k = kind_of(i);
		if (s->only >= 0 && k > K_INFER_BULK && k != s->only)
			k = K_INFER;
		bool infer = k == K_INFER || k == K_INFER_RT || k == K_INFER_BULK || k == K_BAD_MODEL || k == K_NO_MODEL;
		const tsd_tensor *ts = infer || k == K_REALIZE ? &good : k == K_BAD_SHAPE ? &bad : NULL;
		tsd_reply *r = NULL;
		tsd_status st = tsd_client_call(c, q.h[k], ts, ts ? 1 : 0, &r);
		bool ok = st == q.want[k] && r;
		if (ok && (k == K_INFER || k == K_INFER_RT || k == K_INFER_BULK)) {
			const tsd_tensor *y = tsd_reply_find(r, "y");
			ok = y && y->ndim == 2 && y->shape[0] == 1 && y->shape[1] == NOUT;
		} else if (ok && k == K_REALIZE) {
			ok = tsd_reply_find(r, "s") != NULL;
		}
		if (!ok && atomic_fetch_add(&s->wrong, 1) < 10)
			fprintf(stderr, "soak: request %llu (%s): %s, expected %s: %s\n", (unsigned long long)i,
				kind_name[k], tsd_status_name(st), tsd_status_name(q.want[k]), tsd_client_message(c, r));
		tsd_reply_free(r);
		atomic_fetch_add(&s->count[k], 1);
		uint64_t a = atomic_fetch_add(&s->answered, 1) + 1;
		if (a == s->rss_at)
			atomic_store(&s->rss_base, db_rss_kb(s->pid));
		if (a % (s->total / 10) == 0 && a / (s->total / 10) <= 10) {
			int t = (int)(a / (s->total / 10)) - 1;
			atomic_store(&s->rss_tenth[t], db_rss_kb(s->pid));
			double used, held;
			if (!heap_kb(c, &used, &held)) {
				atomic_store(&s->heap_tenth[t][0], (long long)used);
				atomic_store(&s->heap_tenth[t][1], (long long)held);
			}
		}
	}
	tsd_client_close(c);
	free_reqs(&q);
	return NULL;
}

static long env_long(const char *name, long dflt, long lo, long hi)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return dflt;
	char *end;
	long n = strtol(v, &end, 10);
	if (*end || n < lo || n > hi) {
		fprintf(stderr, "%s=%s: expected an integer in [%ld, %ld]; using %ld\n", name, v, lo, hi, dflt);
		return dflt;
	}
	return n;
}

int main(void)
{
	long total = env_long("SOAK_REQUESTS", 1000000, 1000, 1000000000);
	long nthreads = env_long("SOAK_THREADS", 16, 1, MAX_THREADS);
	long only = env_long("SOAK_ONLY", -1, -1, K_COUNT - 1); /* diagnosis: one kind besides infer */
	long tol = env_long("SOAK_RSS_TOLERANCE_PCT", 2, 0, 100);
	long floor_kb = env_long("SOAK_RSS_FLOOR_KB", 0, 0, 1 << 20);
	db_daemon d;
	if (db_daemon_start(&d, "\"batch_delay_us\": 200")) {
		db_daemon_stop(&d);
		return 1;
	}
	int rc = 1;
	tsd_client *ctl = tsd_client_open(d.url, 60000, NULL, 0);
	if (!ctl || db_load_mlp(ctl, "soak", NIN, NHID, NOUT, NULL))
		goto out;
	soak *s = calloc(1, sizeof(*s));
	pthread_t *th = calloc((size_t)nthreads, sizeof(*th));
	if (!s || !th) {
		free(s);
		free(th);
		goto out;
	}
	s->url = d.url;
	s->pid = d.pid;
	s->total = (uint64_t)total;
	s->only = (int)only;
	s->rss_at = total >= 1000000 ? 100000 : (uint64_t)total / 10;
	long rss0 = db_rss_kb(d.pid);
	pthread_barrier_init(&s->start, NULL, (unsigned)nthreads + 1);
	for (long i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, client_main, s);
	pthread_barrier_wait(&s->start);
	uint64_t t0 = db_now_ns();
	for (long i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	double el = (double)(db_now_ns() - t0) / 1e9;
	pthread_barrier_destroy(&s->start);
	long rss_end = db_rss_kb(d.pid);
	long rss_base = (long)atomic_load(&s->rss_base);
	uint64_t answered = atomic_load(&s->answered), wrong = atomic_load(&s->wrong);
	double req = 0, bat = 0;
	db_model_counts(ctl, "soak", &req, &bat);
	printf("soak: %llu requests from %ld threads in %.1f s (%.0f/s), model x[-1,%d] -> %dx%d -> relu -> %dx%d\n",
	       (unsigned long long)answered, nthreads, el, (double)answered / el, NIN, NIN, NHID, NHID, NOUT);
	for (int k = 0; k < K_COUNT; k++)
		printf("  %-16s %10llu\n", kind_name[k], (unsigned long long)atomic_load(&s->count[k]));
	printf("  infer launches %.0f for %.0f requests (%.3f per request)\n", bat, req, req ? bat / req : 0);
	double growth = rss_base > 0 ? (double)(rss_end - rss_base) / (double)rss_base * 100 : 0;
	printf("daemon VmRSS: %ld KiB after loading, %ld KiB after %llu requests, %ld KiB at the end (%+.2f%%, limit +-%ld%%)\n",
	       rss0, rss_base, (unsigned long long)s->rss_at, rss_end, growth, tol);
	printf("daemon VmRSS after each tenth (KiB):");
	for (int k = 0; k < 10; k++)
		printf(" %lld", (long long)atomic_load(&s->rss_tenth[k]));
	printf("\n");
	printf("daemon heap after each tenth (KiB in use / free but held):");
	for (int k = 0; k < 10; k++)
		printf(" %lld/%lld", (long long)atomic_load(&s->heap_tenth[k][0]), (long long)atomic_load(&s->heap_tenth[k][1]));
	printf("\n");
	printf("wrong replies: %llu\n", (unsigned long long)wrong);
	/* growth within tol% of the baseline, or (SOAK_RSS_FLOOR_KB) within that many KiB */
	bool pct_ok = growth <= (double)tol && growth >= -(double)tol;
	bool rss_ok = rss_base > 0 && rss_end > 0 && (pct_ok || labs(rss_end - rss_base) <= floor_kb);
	printf("RSS growth %+ld KiB: within %ld%%: %s; within the floor of %ld KiB: %s\n", rss_end - rss_base, tol,
	       pct_ok ? "yes" : "NO", floor_kb, labs(rss_end - rss_base) <= floor_kb ? "yes" : "no");
	rc = answered == s->total && !wrong && rss_ok ? 0 : 1;
	printf("RESULT soak requests %llu seconds %.1f rss_base_kb %ld rss_end_kb %ld growth_pct %.2f wrong %llu %s\n",
	       (unsigned long long)answered, el, rss_base, rss_end, growth, (unsigned long long)wrong,
	       rc ? "FAIL" : "PASS");
	free(th);
	free(s);
out:
	tsd_client_close(ctl);
	int drc = db_daemon_stop(&d);
	if (drc) {
		fprintf(stderr, "tensord exited with %d\n", drc);
		rc = 1;
	}
	return rc;
}
