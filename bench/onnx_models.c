/* onnx_models: per-call time of real-world ONNX models (bench/onnx_models.h) imported with
 * eng_onnx_load and run in-process under an eng_jit (replay), at batch 1 and 64: each call uploads
 * the inputs, runs and reads every output back, median and 99th percentile of the calls after a
 * warm-up. With -o DIR it writes each run's inputs and outputs as .npy files for
 * bench/ort_models.py to compare, and each model's model.load object (DIR/MODEL.load.json, for
 * bench/compare_oip.sh). -b 1: batch 1 only (compare_oip.sh's inputs). -p US: a pause of US
 * microseconds before each timed call (lone requests, as an idle daemon gets them). Each line
 * also gives the process's CPU time per timed call, every thread's (the worker pool's polling
 * included).
 * Usage: bench_onnx_models [-n CALLS] [-o DIR] [-b 1] [-p US] SITE_PACKAGES [MODEL ...] */
#include <sys/resource.h>

#include <tensord/jit.h>
#include <tensord/onnx.h>
#include "bench.h"
#include "onnx_models.h"

static const int64_t batches[] = {1, 64};

/* A model at one batch size: the loaded file, its JIT, the host data of its inputs (in graph
 * input order) and room for its outputs. */
typedef struct run {
	const obm_model *spec;
	eng_onnx_model *m;
	int64_t bs;
	int nin, nout;
	const obm_input *in[OBM_MAX_IN];
	int64_t in_shape[OBM_MAX_IN][4], in_n[OBM_MAX_IN];
	void *in_data[OBM_MAX_IN];
	void *out_data[8];
	size_t out_bytes[8];
	int out_ndim[8];
	int64_t out_shape[8][ENG_MAX_DIMS];
} run;

static eng_status step(eng_ctx *ctx, eng_tensor *const *in, int nin, eng_tensor **out, int nout, void *user)
{
	(void)ctx, (void)nin, (void)nout;
	return eng_onnx_build(user, in, out, ENG_ONNX_SPECIALIZE);
}

/* Match the model's graph inputs to the spec's by name and make their data. */
static int prepare(run *r, char *err, size_t errlen)
{
	r->nin = eng_onnx_input_count(r->m);
	r->nout = eng_onnx_output_count(r->m);
	if (r->nin > OBM_MAX_IN || r->nout > 8) {
		snprintf(err, errlen, "%s: %d inputs, %d outputs: more than the bench handles", r->spec->name, r->nin, r->nout);
		return -1;
	}
	for (int i = 0; i < r->nin; i++) {
		eng_onnx_io io;
		eng_onnx_input(r->m, i, &io);
		int k = 0;
		while (k < r->spec->nin && strcmp(r->spec->in[k].name, io.name))
			k++;
		if (k == r->spec->nin) {
			snprintf(err, errlen, "%s: graph input '%s' is not in bench/onnx_models.h", r->spec->name, io.name);
			return -1;
		}
		r->in[i] = &r->spec->in[k];
		r->in_n[i] = obm_shape(r->in[i], r->bs, r->in_shape[i]);
		r->in_data[i] = malloc((size_t)r->in_n[i] * 8);
		if (!r->in_data[i]) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		obm_fill_data(r->spec, k, r->bs, r->in_data[i], r->in_n[i]);
	}
	return 0;
}

/* One call: upload the inputs, call the JIT, read the outputs back (their sizes are learnt on
 * the first call). Returns the wall time in ms, or a negative value on error; adds the kernels'
 * time to *kern_ms. */
static double call(eng_ctx *ctx, eng_jit *j, run *r, double *kern_ms)
{
	eng_stats a, b;
	eng_tensor *in[OBM_MAX_IN], *out[8];
	eng_get_stats(ctx, &a);
	double t0 = bench_now_ms();
	eng_scope_begin(ctx);
	eng_status s = ENG_OK;
	for (int i = 0; i < r->nin && !s; i++)
		if (!(in[i] = eng_from_data(ctx, r->in[i]->dtype, r->in[i]->ndim, r->in_shape[i], r->in_data[i])))
			s = ENG_ENOMEM;
	if (!s)
		s = eng_jit_call(j, in, out);
	for (int k = 0; k < r->nout && !s; k++) {
		if (!r->out_data[k]) {
			r->out_bytes[k] = (size_t)eng_numel(out[k]) * eng_dtype_size(eng_tensor_dtype(out[k]));
			r->out_ndim[k] = eng_ndim(out[k]);
			memcpy(r->out_shape[k], eng_shape(out[k]), sizeof(int64_t) * (size_t)r->out_ndim[k]);
			if (eng_tensor_dtype(out[k]) != ENG_F32 || !(r->out_data[k] = malloc(r->out_bytes[k] + 1))) {
				eng_scope_end(ctx);
				fprintf(stderr, "bench_onnx_models: %s output %d: not float32 or out of memory\n",
					r->spec->name, k);
				return -1;
			}
		}
		s = eng_tensor_read(out[k], r->out_data[k], r->out_bytes[k]);
	}
	eng_scope_end(ctx);
	double ms = bench_now_ms() - t0;
	eng_get_stats(ctx, &b);
	if (s) {
		fprintf(stderr, "bench_onnx_models: %s batch %lld: %s\n", r->spec->name, (long long)r->bs, eng_errmsg(ctx));
		return -1;
	}
	*kern_ms = (double)(b.kernel_ns - a.kernel_ns) / 1e6;
	return ms;
}

/* The .npy files of one run: DIR/MODEL-bBATCH-in<i>.npy and -out<k>.npy. */
static int dump(const run *r, const char *dir)
{
	char path[4096];
	for (int i = 0; i < r->nin; i++) {
		snprintf(path, sizeof(path), "%s/%s-b%lld-in%d.npy", dir, r->spec->name, (long long)r->bs, i);
		if (obm_write_npy(path, r->in[i]->dtype, r->in[i]->ndim, r->in_shape[i], r->in_data[i], r->in_n[i]))
			return -1;
	}
	for (int k = 0; k < r->nout; k++) {
		snprintf(path, sizeof(path), "%s/%s-b%lld-out%d.npy", dir, r->spec->name, (long long)r->bs, k);
		if (obm_write_npy(path, ENG_F32, r->out_ndim[k], r->out_shape[k], r->out_data[k],
				  (int64_t)(r->out_bytes[k] / 4)))
			return -1;
	}
	return 0;
}

/* CPU time of the process so far (every thread, user and system), in ms. */
static double cpu_ms(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

/* Load, warm up and time one model at one batch size (pause_us before each timed call); prints
 * its line. Returns 0 or 1. */
static int bench_one(eng_ctx *ctx, const char *site, const obm_model *spec, int64_t bs, int calls, int pause_us,
		     const char *dir)
{
	char path[4096], err[1024];
	snprintf(path, sizeof(path), "%s/%s", site, spec->file);
	run r = {.spec = spec, .bs = bs};
	eng_jit *j = NULL;
	double *t = malloc(sizeof(double) * (size_t)calls), *k = malloc(sizeof(double) * (size_t)calls), ku = 0;
	int rc = 1;
	double t0 = bench_now_ms();
	if (!t || !k || !(r.m = eng_onnx_load(ctx, path, 0, err, sizeof(err))) || prepare(&r, err, sizeof(err))) {
		fprintf(stderr, "bench_onnx_models: %s\n", t && k ? err : "out of memory");
		goto out;
	}
	double load_ms = bench_now_ms() - t0;
	if (!(j = eng_jit_create(ctx, step, r.m, r.nin, r.nout, NULL))) {
		fprintf(stderr, "bench_onnx_models: %s\n", eng_errmsg(ctx));
		goto out;
	}
	t0 = bench_now_ms();
	if (call(ctx, j, &r, &ku) < 0) /* first call: build, schedule, compile */
		goto out;
	double first_ms = bench_now_ms() - t0;
	for (int w = 0; w < 4; w++) /* capture, then replays */
		if (call(ctx, j, &r, &ku) < 0)
			goto out;
	double cpu0 = cpu_ms();
	for (int c = 0; c < calls; c++) {
		if (pause_us > 0) {
			struct timespec ts = {pause_us / 1000000, (long)(pause_us % 1000000) * 1000};
			nanosleep(&ts, NULL);
		}
		if ((t[c] = call(ctx, j, &r, &k[c])) < 0)
			goto out;
	}
	double cpu = (cpu_ms() - cpu0) / calls;
	if (dir && dump(&r, dir)) {
		fprintf(stderr, "bench_onnx_models: cannot write %s\n", dir);
		goto out;
	}
	bench_sort(t, calls);
	bench_sort(k, calls);
	eng_jit_info ji;
	eng_jit_get_info(j, &ji);
	char stat[64] = "";
	for (int i = 0; i < r.nin; i++)
		if (eng_onnx_input_static(r.m, i))
			snprintf(stat + strlen(stat), sizeof(stat) - strlen(stat), " %s", r.in[i]->name);
	double p99 = t[(calls * 99 - 1) / 100]; /* the call 99% of the calls are at most as slow as */
	printf("tensord %-10s batch %3lld: median %9.3f ms per call (p99 %9.3f, best %9.3f, kernels %9.3f, cpu %9.3f); "
	       "%d kernels, load %.1f ms, first call %.0f ms; read at build:%s\n",
	       spec->name, (long long)bs, t[calls / 2], p99, t[0], k[calls / 2], cpu, ji.kernels, load_ms, first_ms,
	       stat[0] ? stat : " none");
	printf("result tensord %s %lld %.4f %.4f %.4f %.4f\n", spec->name, (long long)bs, t[calls / 2], t[0], p99, cpu);
	fflush(stdout);
	rc = 0;
out:
	eng_jit_destroy(j);
	eng_onnx_free(r.m);
	for (int i = 0; i < OBM_MAX_IN; i++)
		free(r.in_data[i]);
	for (int i = 0; i < 8; i++)
		free(r.out_data[i]);
	free(t);
	free(k);
	return rc;
}

/* DIR/MODEL.load.json: the model's model.load for a daemon serving the venv's site-packages (the
 * batcher's max 32: compare_oip.sh's most concurrent clients), for bench/compare_oip.sh. 0 or 1. */
static int write_load_json(const char *dir, const obm_model *m)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s.load.json", dir, m->name);
	cJSON *o = obm_load_json(m, 32);
	char *text = o ? cJSON_Print(o) : NULL;
	FILE *f = text ? fopen(path, "w") : NULL;
	int rc = !f || fputs(text, f) < 0;
	if (f && fclose(f))
		rc = 1;
	if (rc)
		fprintf(stderr, "bench_onnx_models: cannot write %s\n", path);
	cJSON_free(text);
	cJSON_Delete(o);
	return rc;
}

int main(int argc, char **argv)
{
	int calls = 50, pause_us = 0, a = 1;
	size_t nbatches = sizeof(batches) / sizeof(batches[0]);
	const char *dir = NULL;
	for (; a + 1 < argc && argv[a][0] == '-'; a += 2)
		if (!strcmp(argv[a], "-n"))
			calls = atoi(argv[a + 1]);
		else if (!strcmp(argv[a], "-p"))
			pause_us = atoi(argv[a + 1]);
		else if (!strcmp(argv[a], "-o"))
			dir = argv[a + 1];
		else if (!strcmp(argv[a], "-b") && !strcmp(argv[a + 1], "1"))
			nbatches = 1; /* batches[0] */
		else
			break;
	if (a >= argc || argv[a][0] == '-' || calls < 3 || calls > 100000 || pause_us < 0 || pause_us > 10000000) {
		fprintf(stderr, "usage: bench_onnx_models [-n CALLS] [-o DIR] [-b 1] [-p US] SITE_PACKAGES [MODEL ...]\n");
		return 2;
	}
	const char *site = argv[a++];
	char err[256];
	eng_ctx *ctx = eng_ctx_create(NULL, err, sizeof(err));
	if (!ctx) {
		fprintf(stderr, "bench_onnx_models: %s\n", err);
		return 1;
	}
	int rc = 0;
	FILE *list = NULL; /* DIR/models.txt: name and file of each model run, for the peer */
	if (dir) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/models.txt", dir);
		if (!(list = fopen(path, "w"))) {
			fprintf(stderr, "bench_onnx_models: cannot write %s\n", path);
			rc = 1;
		}
	}
	for (int mi = 0; mi < OBM_COUNT && !rc; mi++) {
		bool want = a >= argc && !obm_models[mi].named;
		for (int i = a; i < argc; i++)
			want |= !strcmp(argv[i], obm_models[mi].name);
		if (want && list) {
			fprintf(list, "%s %s\n", obm_models[mi].name, obm_models[mi].file);
			rc = write_load_json(dir, &obm_models[mi]);
		}
		for (size_t bi = 0; want && bi < nbatches && !rc; bi++)
			rc = bench_one(ctx, site, &obm_models[mi], batches[bi], calls, pause_us, dir);
	}
	if (list && fclose(list))
		rc = 1;
	eng_ctx_destroy(ctx);
	return rc;
}
