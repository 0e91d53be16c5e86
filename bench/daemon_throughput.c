/* daemon_throughput.c: the daemon's infer throughput with 1, 8 and 64 concurrent clients (one
 * thread and one connection each, closed loop: a client sends its next request when the reply
 * to the last came), batching on and off. Starts tensord (the binary beside this one), loads
 * the same MLP twice with its weights in the message (x[-1,256] -> linear 256x256 -> relu ->
 * linear 256x10, one row a request, priority normal): "mlp_batched" with batching {max 32,
 * buckets [1,2,4,8,16,32], delay_us D} and "mlp_single" with {max 1, buckets [1]}. Prints
 * requests/s, latency p50/p99, launches per request from the stats (models.NAME.batches /
 * requests over the run), and the CPU time per request of the daemon and of the clients (this
 * process: the clients share the machine's cores with the daemon); stops the daemon with SIGTERM.
 * Usage: bench_daemon_throughput [seconds per run (3)] [delay_us (1000)] */
#include "daemon_bench.h"

#include <stdatomic.h>

#define NIN 256
#define NHID 256
#define NOUT 10
#define MAX_CLIENTS 64
#define MAX_LAT 2000000 /* latencies kept per run */

typedef struct tp_run {
	const char *url, *model;
	uint64_t t_end;            /* clients stop sending at this time */
	pthread_barrier_t start;
	atomic_ulong done, failed;
	uint64_t *lat;             /* shared latency samples */
	atomic_ulong nlat;
} tp_run;

static void *client_main(void *arg)
{
	tp_run *run = arg;
	char err[256];
	tsd_client *c = tsd_client_open(run->url, 30000, err, sizeof(err));
	float x[NIN];
	db_fill(x, NIN, (uint32_t)(uintptr_t)&x, 1.0f);
	tsd_tensor in = {.name = "x", .dtype = TSD_F32, .ndim = 2, .shape = {1, NIN}, .data = x};
	cJSON *h = db_infer_header(run->model, "normal");
	pthread_barrier_wait(&run->start);
	if (!c) {
		fprintf(stderr, "client: %s\n", err);
		atomic_fetch_add(&run->failed, 1);
		cJSON_Delete(h);
		return NULL;
	}
	while (db_now_ns() < run->t_end) {
		tsd_reply *r = NULL;
		uint64_t t0 = db_now_ns();
		tsd_status st = tsd_client_call(c, h, &in, 1, &r);
		uint64_t dt = db_now_ns() - t0;
		if (st != TSD_OK) {
			if (atomic_fetch_add(&run->failed, 1) < 5)
				fprintf(stderr, "infer %s: %s: %s\n", run->model, tsd_status_name(st), tsd_client_message(c, r));
		} else {
			atomic_fetch_add(&run->done, 1);
			unsigned long k = atomic_fetch_add(&run->nlat, 1);
			if (k < MAX_LAT)
				run->lat[k] = dt;
		}
		tsd_reply_free(r);
	}
	cJSON_Delete(h);
	tsd_client_close(c);
	return NULL;
}

typedef struct tp_result {
	double rps, launches_per_req, p50_us, p99_us, mean_batch;
	double daemon_cpu_us, client_cpu_us; /* CPU time per request: the daemon's, this process's */
	unsigned long failed;
} tp_result;

static int run_one(const db_daemon *d, tsd_client *ctl, const char *model, int nclients, double seconds,
		   uint64_t *lat, tp_result *res)
{
	double req0, bat0, req1, bat1;
	if (db_model_counts(ctl, model, &req0, &bat0))
		return -1;
	tp_run run = {.url = d->url, .model = model, .lat = lat};
	pthread_barrier_init(&run.start, NULL, (unsigned)nclients + 1);
	pthread_t th[MAX_CLIENTS];
	/* the clock starts once every client is connected (the barrier publishes t_end) */
	for (int i = 0; i < nclients; i++)
		pthread_create(&th[i], NULL, client_main, &run);
	double dc0 = db_cpu_s(d->pid), cc0 = db_cpu_s(getpid());
	uint64_t t0 = db_now_ns();
	run.t_end = t0 + (uint64_t)(seconds * 1e9);
	pthread_barrier_wait(&run.start);
	t0 = db_now_ns(); /* requests go from here */
	for (int i = 0; i < nclients; i++)
		pthread_join(th[i], NULL);
	double el = (double)(db_now_ns() - t0) / 1e9;
	double dc1 = db_cpu_s(d->pid), cc1 = db_cpu_s(getpid());
	pthread_barrier_destroy(&run.start);
	if (db_model_counts(ctl, model, &req1, &bat1))
		return -1;
	size_t n = atomic_load(&run.nlat);
	if (n > MAX_LAT)
		n = MAX_LAT;
	qsort(lat, n, sizeof(*lat), db_cmp_u64);
	res->rps = (double)atomic_load(&run.done) / el;
	res->failed = atomic_load(&run.failed);
	res->launches_per_req = req1 > req0 ? (bat1 - bat0) / (req1 - req0) : 0;
	res->mean_batch = bat1 > bat0 ? (req1 - req0) / (bat1 - bat0) : 0;
	double done = (double)atomic_load(&run.done);
	res->daemon_cpu_us = done > 0 ? (dc1 - dc0) / done * 1e6 : 0;
	res->client_cpu_us = done > 0 ? (cc1 - cc0) / done * 1e6 : 0;
	res->p50_us = n ? db_pct(lat, n, 0.5) / 1e3 : 0;
	res->p99_us = n ? db_pct(lat, n, 0.99) / 1e3 : 0;
	return 0;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 3;
	int delay_us = argc > 2 ? atoi(argv[2]) : 1000;
	if (seconds <= 0 || delay_us < 0) {
		fprintf(stderr, "usage: %s [seconds per run] [delay_us]\n", argv[0]);
		return 2;
	}
	db_daemon d;
	if (db_daemon_start(&d, "\"client_inflight_max\": 64")) {
		db_daemon_stop(&d);
		return 1;
	}
	int rc = 1;
	uint64_t *lat = malloc(MAX_LAT * sizeof(*lat));
	tsd_client *ctl = tsd_client_open(d.url, 30000, NULL, 0);
	char batching[160];
	snprintf(batching, sizeof(batching), "{\"max\": 32, \"buckets\": [1,2,4,8,16,32], \"delay_us\": %d}", delay_us);
	if (!lat || !ctl || db_load_mlp(ctl, "mlp_batched", NIN, NHID, NOUT, batching) ||
	    db_load_mlp(ctl, "mlp_single", NIN, NHID, NOUT, "{\"max\": 1, \"buckets\": [1]}"))
		goto out;
	/* warm-up: the first launches of each bucket */
	tp_result warm;
	if (run_one(&d, ctl, "mlp_batched", 8, 0.3, lat, &warm) || run_one(&d, ctl, "mlp_single", 8, 0.3, lat, &warm))
		goto out;
	printf("daemon_throughput: model x[-1,%d] -> linear %dx%d -> relu -> linear %dx%d (f32), 1 row a request, "
	       "priority normal, %.1f s a run, ipc://\n", NIN, NIN, NHID, NHID, NOUT, seconds);
	printf("%-28s %7s %10s %9s %9s %10s %11s %11s %11s\n", "batching", "clients", "requests/s", "p50 us",
	       "p99 us", "launch/req", "rows/launch", "daemon CPU", "client CPU");
	printf("%-28s %7s %10s %9s %9s %10s %11s %11s %11s\n", "", "", "", "", "", "", "", "us/req", "us/req");
	const int clients[] = {1, 8, 64};
	const char *models[] = {"mlp_batched", "mlp_single"};
	tp_result res[2][3];
	unsigned long failed = 0;
	for (int m = 0; m < 2; m++)
		for (int k = 0; k < 3; k++) {
			if (run_one(&d, ctl, models[m], clients[k], seconds, lat, &res[m][k]))
				goto out;
			tp_result *r = &res[m][k];
			failed += r->failed;
			char what[64];
			if (m == 0)
				snprintf(what, sizeof(what), "on (max 32, %d us)", delay_us);
			else
				snprintf(what, sizeof(what), "off (max 1)");
			printf("%-28s %7d %10.0f %9.1f %9.1f %10.3f %11.2f %11.1f %11.1f\n", what, clients[k], r->rps,
			       r->p50_us, r->p99_us, r->launches_per_req, r->mean_batch, r->daemon_cpu_us, r->client_cpu_us);
			fflush(stdout);
		}
	double scale = res[0][2].rps / res[0][0].rps, scale_off = res[0][2].rps / res[1][0].rps;
	printf("batching on: 64 clients / 1 client = %.1fx (goal >= 10x); / 1 client unbatched = %.1fx; "
	       "launches per request at 64 clients %.3f (goal <= 0.1)\n",
	       scale, scale_off, res[0][2].launches_per_req);
	printf("batching off: 64 clients / 1 client = %.1fx\n", res[1][2].rps / res[1][0].rps);
	printf("RESULT throughput on_1 %.0f on_8 %.0f on_64 %.0f off_1 %.0f off_8 %.0f off_64 %.0f scale_on %.1f "
	       "launches_per_req_on_64 %.3f failed %lu\n",
	       res[0][0].rps, res[0][1].rps, res[0][2].rps, res[1][0].rps, res[1][1].rps, res[1][2].rps, scale,
	       res[0][2].launches_per_req, failed);
	rc = failed ? 1 : 0;
out:
	tsd_client_close(ctl);
	free(lat);
	int drc = db_daemon_stop(&d);
	if (drc) {
		fprintf(stderr, "tensord exited with %d\n", drc);
		rc = 1;
	}
	return rc;
}
