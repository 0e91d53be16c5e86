/* sequence_streams: issue 28's goals, measured through a daemon of this build serving silero-vad
 * (bench/onnx_models.h; models_dir = SITE_PACKAGES) loaded twice: "vad" (a plain model: each
 * request carries the LSTM state [2, 1, 128] and gets stateN back) and "vad_seq" (the same file
 * with the state pair state -> stateN held in the daemon, one sequence a stream). One run:
 *   held    S streams, one step each in flight, 512-sample chunks, state in the daemon
 *   sent    the same S streams sending their state with every request (today's only way)
 *           (the two runs alternate round by round; their outputs are compared)
 *   single  one stream alone, realtime priority, sequence steps and stateless requests of the
 *           same model and batch alternating call by call (p50 of each)
 *   churn   N sequences started and ended (a start+end step each, 64 in flight) on vad_seq:
 *           the daemon's RSS after the first tenth and at the end
 * Prints "result KEY VALUE" lines for bench/compare_sequences.sh.
 * Usage: bench_sequence_streams [-s STREAMS] [-r ROUNDS] [-n SINGLE_CALLS] [-c CHURN] SITE_PACKAGES */
#include <math.h>

#include <tensord/verbs.h>
#include "bench.h"
#include "daemon_bench.h"
#include "onnx_models.h"

#define MAXS 256
#define CHUNK 512
#define STATE (2 * 128)

typedef struct stream {
	float audio[CHUNK];
	float state[STATE]; /* the "sent" run's state */
	float out_held, out_sent;
	uint32_t seed;
} stream;

static const obm_model *silero(void)
{
	for (int k = 0; k < OBM_COUNT; k++)
		if (!strcmp(obm_models[k].name, "silero-vad"))
			return &obm_models[k];
	return NULL;
}

static int load(tsd_client *c, const char *name, bool seq, int streams)
{
	const obm_model *m = silero();
	cJSON *spec = obm_load_json(m, 64), *q = NULL;
	cJSON_ReplaceItemInObject(spec, "name", cJSON_CreateString(name));
	if (seq) {
		q = cJSON_Parse("{\"state\":[{\"input\":\"state\",\"output\":\"stateN\"}]}");
		cJSON_AddNumberToObject(q, "max_sequences", streams > 64 ? streams * 2 : 128);
		cJSON_AddItemToObject(spec, "sequence", q);
	}
	cJSON_AddStringToObject(spec, "verb", "model.load");
	tsd_reply *r = NULL;
	tsd_status s = tsd_client_call(c, spec, NULL, 0, &r);
	if (s != TSD_OK)
		fprintf(stderr, "bench_sequence_streams: loading %s: %s: %s\n", name, tsd_status_name(s),
			tsd_client_message(c, r));
	tsd_reply_free(r);
	cJSON_Delete(spec);
	return s == TSD_OK ? 0 : -1;
}

static void next_chunk(stream *s)
{
	db_fill(s->audio, CHUNK, s->seed++, 0.3f);
}

static float first_float(const tsd_reply *r, const char *name)
{
	const tsd_tensor *t = tsd_reply_find(r, name);
	return t && t->nbytes >= sizeof(float) ? *(const float *)t->data : NAN;
}

/* One round of S steps in flight: held (sequence steps) or sent (state in the request). */
static int round_of(tsd_client *c, stream *st, int S, bool held, bool start, bool end, uint64_t id0)
{
	static tsd_call *calls[MAXS];
	tsd_tensor in[MAXS][2];
	for (int k = 0; k < S; k++) {
		in[k][0] = (tsd_tensor){.name = "input", .dtype = TSD_F32, .ndim = 2, .shape = {1, CHUNK},
					.data = st[k].audio, .nbytes = sizeof(st[k].audio)};
		in[k][1] = (tsd_tensor){.name = "state", .dtype = TSD_F32, .ndim = 3, .shape = {2, 1, 128},
					.data = st[k].state, .nbytes = sizeof(st[k].state)};
		tsd_infer_opts o = {0};
		if (held)
			o = (tsd_infer_opts){.sequence_id = id0 + (uint64_t)k, .sequence_start = start, .sequence_end = end};
		if (tsd_infer_submit(c, held ? "vad_seq" : "vad", in[k], held ? 1 : 2, &o, NULL, NULL, &calls[k]) != TSD_OK) {
			fprintf(stderr, "submit: %s\n", tsd_client_error(c));
			return -1;
		}
	}
	int rc = 0;
	for (int k = 0; k < S; k++) {
		tsd_reply *r = NULL;
		tsd_call_wait(calls[k], -1);
		if (tsd_call_take(calls[k], &r) != TSD_OK) {
			fprintf(stderr, "%s step: %s\n", held ? "held" : "sent", tsd_call_error(calls[k]));
			rc = -1;
		} else if (held) {
			st[k].out_held = first_float(r, "output");
		} else {
			st[k].out_sent = first_float(r, "output");
			const tsd_tensor *sn = tsd_reply_find(r, "stateN");
			if (sn && sn->nbytes == sizeof(st[k].state))
				memcpy(st[k].state, sn->data, sizeof(st[k].state));
			else
				rc = -1;
		}
		tsd_reply_free(r);
		tsd_call_free(calls[k]);
	}
	return rc;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* One stream alone: sequence steps and stateless requests alternating; p50s in ms. */
static int single(tsd_client *c, int n, double *p50_seq, double *p50_plain)
{
	double *ts = malloc(sizeof(double) * (size_t)n), *tp = malloc(sizeof(double) * (size_t)n);
	stream s = {.seed = 777};
	int rc = ts && tp ? 0 : -1;
	for (int i = 0; i < n && !rc; i++) {
		next_chunk(&s);
		tsd_tensor in[2] = {{.name = "input", .dtype = TSD_F32, .ndim = 2, .shape = {1, CHUNK}, .data = s.audio,
				     .nbytes = sizeof(s.audio)},
				    {.name = "state", .dtype = TSD_F32, .ndim = 3, .shape = {2, 1, 128}, .data = s.state,
				     .nbytes = sizeof(s.state)}};
		tsd_infer_opts os = {.priority = TSD_PRIORITY_REALTIME, .sequence_id = 999999, .sequence_start = i == 0,
				     .sequence_end = i == n - 1};
		tsd_infer_opts op = {.priority = TSD_PRIORITY_REALTIME};
		tsd_reply *r = NULL;
		double t0 = bench_now_ms();
		rc |= tsd_infer(c, "vad_seq", in, 1, &os, &r) != TSD_OK;
		ts[i] = bench_now_ms() - t0;
		tsd_reply_free(r);
		t0 = bench_now_ms();
		rc |= tsd_infer(c, "vad", in, 2, &op, &r) != TSD_OK;
		tp[i] = bench_now_ms() - t0;
		const tsd_tensor *sn = r ? tsd_reply_find(r, "stateN") : NULL;
		if (sn && sn->nbytes == sizeof(s.state))
			memcpy(s.state, sn->data, sizeof(s.state));
		tsd_reply_free(r);
	}
	if (!rc) {
		qsort(ts, (size_t)n, sizeof(double), cmp_d);
		qsort(tp, (size_t)n, sizeof(double), cmp_d);
		*p50_seq = ts[n / 2];
		*p50_plain = tp[n / 2];
	}
	free(ts);
	free(tp);
	return rc;
}

/* n sequences of one start+end step each, 64 in flight; RSS (KiB) after a tenth and at the end. */
static int churn(tsd_client *c, pid_t pid, int n, long *rss0, long *rss1)
{
	stream st[64];
	memset(st, 0, sizeof(st));
	for (int k = 0; k < 64; k++) {
		st[k].seed = (uint32_t)k;
		next_chunk(&st[k]);
	}
	uint64_t id = 10000000;
	for (int done = 0; done < n; done += 64) {
		if (round_of(c, st, 64, true, true, true, id))
			return -1;
		id += 64;
		if (done < n / 10 && done + 64 >= n / 10)
			*rss0 = db_rss_kb(pid);
	}
	*rss1 = db_rss_kb(pid);
	return 0;
}

int main(int argc, char **argv)
{
	int S = 64, R = 40, n1 = 300, nchurn = 100000, i = 1;
	for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
		if (!strcmp(argv[i], "-s"))
			S = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-r"))
			R = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-n"))
			n1 = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-c"))
			nchurn = atoi(argv[i + 1]);
		else
			break;
	}
	char site[PATH_MAX], extra[PATH_MAX + 128];
	if (i >= argc || S < 1 || S > MAXS || R < 2 || n1 < 3 || nchurn < 640 || !realpath(argv[i], site)) {
		fprintf(stderr, "usage: bench_sequence_streams [-s STREAMS<=%d] [-r ROUNDS] [-n SINGLE_CALLS] [-c CHURN>=640] "
				"SITE_PACKAGES\n", MAXS);
		return 2;
	}
	snprintf(extra, sizeof(extra), "\"models_dir\": \"%s\", \"client_inflight_max\": %d", site, 2 * MAXS);
	db_daemon d;
	if (db_daemon_start(&d, extra))
		return 1;
	tsd_client *c = tsd_client_open(d.url, 120000, NULL, 0);
	int rc = !c || load(c, "vad", false, S) || load(c, "vad_seq", true, S);
	static stream st[MAXS];
	double held_ms = 0, sent_ms = 0, worst = 0;
	for (int k = 0; k < S; k++)
		st[k].seed = 1000u * (uint32_t)k;
	for (int r = 0; !rc && r < R; r++) {
		for (int k = 0; k < S; k++)
			next_chunk(&st[k]);
		/* alternate which goes first: the machine's load drifts */
		for (int pass = 0; pass < 2 && !rc; pass++) {
			bool held = (pass == 0) == (r % 2 == 0);
			double t0 = bench_now_ms();
			rc = round_of(c, st, S, held, r == 0, r == R - 1, 1);
			*(held ? &held_ms : &sent_ms) += bench_now_ms() - t0;
		}
		for (int k = 0; k < S; k++) {
			double dlt = fabs((double)st[k].out_held - st[k].out_sent);
			if (!(dlt <= worst))
				worst = dlt;
		}
	}
	double req_h = 0, bat_h = 0, req_s = 0, bat_s = 0;
	if (!rc)
		rc = db_model_counts(c, "vad_seq", &req_h, &bat_h) || db_model_counts(c, "vad", &req_s, &bat_s);
	double p50s = 0, p50p = 0;
	long rss0 = 0, rss1 = 0;
	rc = rc || single(c, n1, &p50s, &p50p) || churn(c, d.pid, nchurn, &rss0, &rss1);
	if (!rc) {
		double held_sps = S * R / (held_ms / 1e3), sent_sps = S * R / (sent_ms / 1e3);
		printf("streams %d, rounds %d (512-sample chunks of silero-vad, one step of each stream in flight)\n", S, R);
		printf("  state held in the daemon  %9.0f steps/s\n", held_sps);
		printf("  state sent with each step %9.0f steps/s   held/sent %.2fx (goal >= 1.5x)\n", sent_sps,
		       held_sps / sent_sps);
		printf("  outputs held vs sent: max |diff| %.2e; rows per launch: held %.1f, sent %.1f\n", worst,
		       req_h / bat_h, req_s / bat_s);
		printf("one stream alone, realtime: sequence step p50 %.3f ms, stateless p50 %.3f ms: %.2fx (goal <= 1.2x)\n",
		       p50s, p50p, p50s / p50p);
		printf("%d sequences started and ended: RSS %ld KiB after %d, %ld KiB at the end (%+.2f%%, goal within 2%%)\n",
		       nchurn, rss0, nchurn / 10, rss1, 100.0 * (double)(rss1 - rss0) / (double)rss0);
		printf("result held_sps %.1f\nresult sent_sps %.1f\nresult max_diff %.3e\nresult p50_seq_ms %.4f\n"
		       "result p50_plain_ms %.4f\nresult rss0_kb %ld\nresult rss1_kb %ld\n",
		       held_sps, sent_sps, worst, p50s, p50p, rss0, rss1);
		if (!(worst <= 1e-4)) {
			fprintf(stderr, "bench_sequence_streams: held and sent outputs differ by %g\n", worst);
			rc = 1;
		}
	}
	tsd_client_close(c);
	if (db_daemon_stop(&d))
		rc = 1;
	return rc ? 1 : 0;
}
