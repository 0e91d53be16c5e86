/* onnx_daemon: the real-world ONNX models of bench/onnx_models.h served by tensord (a daemon of
 * this build started on a temporary socket, models_dir = SITE_PACKAGES, each model loaded with
 * "format": "onnx", its batch dims as -1 and silero's sr as a constant), timed from a client:
 *   b1    one caller, one row a request at realtime priority (which skips the batcher's wait
 *         for more rows: the latency a robot sees; median ms per call)
 *   b64   one caller, 64 rows a request (median ms per call)
 *   64x1  64 callers on their own connections, one row a request each, merged by the batcher
 *         (ms per 64 answered rows, and the rows per launch the daemon made)
 * Each call sends the inputs and gets every output back. With -o DIR, the outputs of b1 and b64
 * are checked against the in-process run's (DIR/MODEL-bB-out<k>.npy from bench_onnx_models -o,
 * themselves checked against onnxruntime), and 64x1's rows against b64's.
 * Usage: bench_onnx_daemon [-n CALLS] [-o DIR] SITE_PACKAGES [MODEL ...] */
#include <math.h>

#include <tensord/verbs.h>
#include "bench.h"
#include "daemon_bench.h"
#include "onnx_models.h"

#define NCALLERS 64
#define MAX_OUT 8

/* A model's inputs at one batch size: the tensors sent (constants excluded) and their data. */
typedef struct batch {
	int n;
	tsd_tensor t[OBM_MAX_IN];
	void *data[OBM_MAX_IN];
	int axis[OBM_MAX_IN]; /* the batch axis; -1: the first dim of the batch's size (outputs) */
} batch;

/* The spec's inputs at bs rows (rows from row0 of the bs0-row data when bs0 > 0). */
static int make_batch(const obm_model *m, int64_t bs, batch *b)
{
	memset(b, 0, sizeof(*b));
	for (int k = 0; k < m->nin; k++) {
		const obm_input *in = &m->in[k];
		if (in->fill == OBM_CONST)
			continue;
		tsd_tensor *t = &b->t[b->n];
		int64_t n = obm_shape(in, bs, t->shape);
		if (!(b->data[b->n] = malloc((size_t)n * 8 + 8)))
			return -1;
		obm_fill_data(m, k, bs, b->data[b->n], n);
		*t = (tsd_tensor){.name = in->name, .dtype = in->dtype, .ndim = in->ndim, .data = b->data[b->n],
				  .nbytes = (size_t)n * tsd_dtype_size(in->dtype)};
		obm_shape(in, bs, t->shape);
		b->axis[b->n] = -1;
		for (int d = 0; d < in->ndim; d++)
			if (in->shape[d] == OBM_BATCH)
				b->axis[b->n] = d;
		b->n++;
	}
	return 0;
}

/* Row r of b (a batch of rows) as a one-row batch into one (its own copies). */
static int row_of(const batch *b, int64_t rows, int64_t r, batch *one)
{
	memset(one, 0, sizeof(*one));
	for (int i = 0; i < b->n; i++) {
		const tsd_tensor *t = &b->t[i];
		int axis = b->axis[i];
		for (int d = 0; d < t->ndim && axis < 0; d++)
			if (t->shape[d] == rows)
				axis = d;
		size_t es = tsd_dtype_size(t->dtype), outer = 1, inner = es;
		for (int d = 0; d < t->ndim; d++)
			if (d < axis)
				outer *= (size_t)t->shape[d];
			else if (d > axis)
				inner *= (size_t)t->shape[d];
		uint8_t *dst = axis < 0 ? NULL : malloc(outer * inner + 8);
		if (!dst)
			return -1;
		one->data[i] = dst;
		for (size_t o = 0; o < outer; o++)
			memcpy(dst + o * inner, (const uint8_t *)t->data + (o * (size_t)rows + (size_t)r) * inner, inner);
		one->t[i] = *t;
		one->axis[i] = axis;
		one->t[i].shape[axis] = 1;
		one->t[i].data = dst;
		one->t[i].nbytes = outer * inner;
		one->n++;
	}
	return 0;
}

static void batch_free(batch *b)
{
	for (int i = 0; i < b->n; i++)
		free(b->data[i]);
}

/* The float32 data of a .npy file (n elements expected); 0, or -1 when absent or otherwise. */
static int read_npy_f32(const char *path, float *out, size_t n)
{
	FILE *f = fopen(path, "rb");
	unsigned char pre[10];
	int rc = -1;
	if (f && fread(pre, 1, 10, f) == 10 && !memcmp(pre, "\x93NUMPY\x01", 7)) {
		long hl = pre[8] | pre[9] << 8;
		if (!fseek(f, hl, SEEK_CUR) && fread(out, 4, n, f) == n && fgetc(f) == EOF)
			rc = 0;
	}
	if (f)
		fclose(f);
	return rc;
}

/* The largest |a - b| relative to the tolerance of ort_models.py (atol 1e-4, rtol 1e-3): a value
 * above 1 is a mismatch. *diff: the largest absolute difference. */
static double worst(const float *a, const float *b, size_t n, double *diff)
{
	double w = 0;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - b[i]);
		*diff = fmax(*diff, d);
		w = fmax(w, d / (1e-4 + 1e-3 * fabs((double)b[i])));
	}
	return w;
}

/* Check a reply's outputs against DIR/MODEL-bBS-out<k>.npy; "ok", "MISMATCH" or "unchecked". */
static const char *check_reply(const tsd_reply *r, const char *dir, const char *model, int64_t bs, double *diff)
{
	bool checked = false, ok = true;
	for (int k = 0; dir && k < tsd_reply_ntensors(r); k++) {
		const tsd_tensor *t = tsd_reply_tensor(r, k);
		size_t n = t->nbytes / 4;
		float *want = malloc(t->nbytes + 4);
		char path[1024];
		snprintf(path, sizeof(path), "%s/%s-b%lld-out%d.npy", dir, model, (long long)bs, k);
		if (t->dtype == TSD_F32 && want && !read_npy_f32(path, want, n)) {
			checked = true;
			ok &= worst(t->data, want, n, diff) <= 1;
		}
		free(want);
	}
	return !checked ? "unchecked" : ok ? "ok" : "MISMATCH";
}

/* n calls of in on one connection: per-call times (sorted) into t; the last reply kept. */
static int calls(tsd_client *c, const char *model, const batch *in, tsd_priority prio, int n, double *t,
		 tsd_reply **last)
{
	tsd_infer_opts o = {.priority = prio};
	for (int i = -5; i < n; i++) {
		tsd_reply *r = NULL;
		double t0 = bench_now_ms();
		tsd_status s = tsd_infer(c, model, in->t, in->n, &o, &r);
		if (s != TSD_OK) {
			fprintf(stderr, "bench_onnx_daemon: %s: %s: %s\n", model, tsd_status_name(s), tsd_client_message(c, r));
			tsd_reply_free(r);
			return -1;
		}
		if (i >= 0)
			t[i] = bench_now_ms() - t0;
		tsd_reply_free(*last);
		*last = r;
	}
	bench_sort(t, n);
	return 0;
}

typedef struct caller {
	const char *url, *model;
	batch one;
	int n;
	pthread_barrier_t *go;
	tsd_reply *last;
	int failed;
} caller;

static void *caller_main(void *p)
{
	caller *a = p;
	tsd_client *c = tsd_client_open(a->url, 60000, NULL, 0);
	pthread_barrier_wait(a->go);
	for (int i = 0; c && i < a->n && !a->failed; i++) {
		tsd_reply *r = NULL;
		a->failed = tsd_infer(c, a->model, a->one.t, a->one.n, NULL, &r) != TSD_OK;
		tsd_reply_free(a->last);
		a->last = r;
	}
	a->failed |= !c;
	tsd_client_close(c);
	return NULL;
}

/* 64 callers of one row each, n calls each: ms per 64 rows (one round), rows per launch, and
 * whether each caller's rows match row r of b64's outputs. */
static int fleet(const char *url, tsd_client *c, const obm_model *m, const batch *b64, const tsd_reply *r64, int n,
		 double *ms, double *per_launch, const char **check, double *diff)
{
	static caller a[NCALLERS];
	pthread_t th[NCALLERS];
	pthread_barrier_t go;
	double req0 = 0, b0 = 0, req1 = 0, b1 = 0;
	pthread_barrier_init(&go, NULL, NCALLERS + 1);
	int rc = db_model_counts(c, m->name, &req0, &b0);
	for (int r = 0; r < NCALLERS; r++) {
		a[r] = (caller){.url = url, .model = m->name, .n = n, .go = &go};
		rc |= row_of(b64, NCALLERS, r, &a[r].one);
		pthread_create(&th[r], NULL, caller_main, &a[r]);
	}
	pthread_barrier_wait(&go);
	double t0 = bench_now_ms();
	for (int r = 0; r < NCALLERS; r++)
		pthread_join(th[r], NULL);
	*ms = (bench_now_ms() - t0) / n;
	rc |= db_model_counts(c, m->name, &req1, &b1);
	*per_launch = b1 > b0 ? (req1 - req0) / (b1 - b0) : 0;
	bool ok = true;
	for (int r = 0; r < NCALLERS; r++) {
		rc |= a[r].failed;
		for (int k = 0; !a[r].failed && k < tsd_reply_ntensors(r64); k++) {
			const tsd_tensor *full = tsd_reply_tensor(r64, k), *one = tsd_reply_tensor(a[r].last, k);
			batch fb = {.n = 1, .t = {*full}, .axis = {-1}}, row;
			if (row_of(&fb, NCALLERS, r, &row) || one->nbytes != row.t[0].nbytes)
				ok = false;
			else
				ok &= worst(one->data, row.t[0].data, one->nbytes / 4, diff) <= 1;
			batch_free(&row);
		}
		tsd_reply_free(a[r].last);
		batch_free(&a[r].one);
	}
	pthread_barrier_destroy(&go);
	*check = ok ? "ok" : "MISMATCH";
	return rc ? -1 : 0;
}

/* model.load of m from models_dir: batch dims -1, OBM_CONST inputs as constants, max 64. */
static int load(tsd_client *c, const obm_model *m)
{
	cJSON *shapes = obm_shapes_json(m), *consts = obm_constants_json(m);
	tsd_batching bt = TSD_BATCHING_DEFAULT;
	bt.max = NCALLERS;
	tsd_onnx_spec sp = {.name = m->name, .file = m->file, .shapes = shapes, .constants = consts, .batching = &bt};
	tsd_reply *r = NULL;
	double t0 = bench_now_ms();
	tsd_status s = tsd_model_load_onnx(c, &sp, &r);
	if (s != TSD_OK)
		fprintf(stderr, "bench_onnx_daemon: loading %s: %s: %s\n", m->name, tsd_status_name(s), tsd_client_message(c, r));
	else
		printf("daemon  %-10s loaded in %.0f ms (every bucket compiled and proven row-independent)\n", m->name,
		       bench_now_ms() - t0);
	tsd_reply_free(r);
	cJSON_Delete(shapes);
	cJSON_Delete(consts);
	return s == TSD_OK ? 0 : -1;
}

static int bench_model(db_daemon *d, tsd_client *c, const obm_model *m, int n, const char *dir)
{
	batch b1, b64;
	double *t = malloc(sizeof(double) * (size_t)n), diff = 0, ms, per_launch;
	tsd_reply *r1 = NULL, *r64 = NULL;
	const char *chk = "?";
	int rc = !t || load(c, m) || make_batch(m, 1, &b1) || make_batch(m, NCALLERS, &b64) ? -1 : 0;
	if (!rc && !(rc = calls(c, m->name, &b1, TSD_PRIORITY_REALTIME, n, t, &r1))) {
		chk = check_reply(r1, dir, m->name, 1, &diff);
		printf("daemon  %-10s b1   : median %9.3f ms per call (best %9.3f); outputs vs in-process: %s\n", m->name,
		       t[n / 2], t[0], chk);
		printf("result daemon %s 1 %.4f %.4f %s %.2e\n", m->name, t[n / 2], t[0], chk, diff);
	}
	if (!rc && !(rc = calls(c, m->name, &b64, TSD_PRIORITY_NORMAL, n, t, &r64))) {
		diff = 0;
		chk = check_reply(r64, dir, m->name, NCALLERS, &diff);
		printf("daemon  %-10s b64  : median %9.3f ms per call (best %9.3f); outputs vs in-process: %s\n", m->name,
		       t[n / 2], t[0], chk);
		printf("result daemon %s 64 %.4f %.4f %s %.2e\n", m->name, t[n / 2], t[0], chk, diff);
	}
	if (!rc && !(rc = fleet(d->url, c, m, &b64, r64, n, &ms, &per_launch, &chk, &(double){0}))) {
		printf("daemon  %-10s 64x1 : %9.3f ms per 64 rows from 64 callers, %.1f rows per launch; rows vs b64: %s\n",
		       m->name, ms, per_launch, chk);
		printf("result daemon64x1 %s 64 %.4f %.4f %s %.1f\n", m->name, ms, ms, chk, per_launch);
	}
	tsd_reply_free(r1);
	tsd_reply_free(r64);
	batch_free(&b1);
	batch_free(&b64);
	free(t);
	return rc || !strcmp(chk, "MISMATCH") ? -1 : 0;
}

int main(int argc, char **argv)
{
	int n = 50, i = 1;
	const char *dir = NULL;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "-n") && i + 1 < argc)
			n = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-o") && i + 1 < argc)
			dir = argv[++i];
		else
			break;
	}
	char site[PATH_MAX], extra[PATH_MAX + 64];
	if (i >= argc || n < 1 || !realpath(argv[i], site)) {
		fprintf(stderr, "usage: bench_onnx_daemon [-n CALLS] [-o DIR] SITE_PACKAGES [MODEL ...]\n");
		return 2;
	}
	i++;
	snprintf(extra, sizeof(extra), "\"models_dir\": \"%s\"", site);
	db_daemon d;
	if (db_daemon_start(&d, extra))
		return 1;
	tsd_client *c = tsd_client_open(d.url, 120000, NULL, 0);
	int rc = c ? 0 : 1;
	for (int k = 0; c && k < OBM_COUNT; k++) {
		bool wanted = i >= argc && !obm_models[k].named;
		for (int j = i; j < argc; j++)
			wanted |= !strcmp(argv[j], obm_models[k].name);
		if (wanted && bench_model(&d, c, &obm_models[k], n, dir))
			rc = 1;
	}
	tsd_client_close(c);
	if (db_daemon_stop(&d))
		rc = 1;
	return rc;
}
