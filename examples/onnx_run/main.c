/* onnx_run: runs an ONNX model on given inputs (TensorProto .pb files, as in ONNX's test data) or
 * on random inputs of the declared shapes (symbolic dims as 1), and prints the outputs and times.
 * DEBUG=2 prints per-kernel timings. Usage: onnx_run MODEL.onnx [INPUT.pb ...] [--repeat N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tensord/engine.h>
#include <tensord/onnx.h>

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static void print_tensor(const char *name, eng_tensor *t)
{
	printf("%s: %s [", name, eng_dtype_name(eng_tensor_dtype(t)));
	for (int i = 0; i < eng_ndim(t); i++)
		printf("%s%lld", i ? ", " : "", (long long)eng_shape(t)[i]);
	printf("]");
	int64_t n = eng_numel(t), show = n < 8 ? n : 8;
	eng_tensor *f = eng_cast(t, ENG_F32);
	float *v = malloc(sizeof(float) * (size_t)(n ? n : 1));
	if (f && v && !eng_tensor_read(f, v, sizeof(float) * (size_t)n)) {
		printf(" =");
		for (int64_t i = 0; i < show; i++)
			printf(" %.6g", v[i]);
		if (n > show)
			printf(" ...");
	}
	printf("\n");
	free(v);
	eng_tensor_free(f);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s MODEL.onnx [INPUT.pb ...] [--repeat N]\n", argv[0]);
		return 2;
	}
	int repeat = 1;
	const char *files[64];
	int nfiles = 0;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
			repeat = atoi(argv[++i]);
		else if (nfiles < 64)
			files[nfiles++] = argv[i];
	}
	char err[1024];
	eng_ctx *ctx = eng_ctx_create(NULL, err, sizeof(err));
	if (!ctx) {
		fprintf(stderr, "onnx_run: %s\n", err);
		return 1;
	}
	double t0 = now_ms();
	eng_onnx_model *m = eng_onnx_load(ctx, argv[1], ENG_ONNX_F64_AS_F32, err, sizeof(err));
	if (!m) {
		fprintf(stderr, "onnx_run: %s\n", err);
		eng_ctx_destroy(ctx);
		return 1;
	}
	printf("loaded %s in %.1f ms (opset %lld)\n", argv[1], now_ms() - t0, (long long)eng_onnx_opset(m, ""));
	int nin = eng_onnx_input_count(m), nout = eng_onnx_output_count(m), rc = 0;
	eng_tensor **in = calloc((size_t)nin + 1, sizeof(*in)), **out = calloc((size_t)nout + 1, sizeof(*out));
	for (int i = 0; i < nin && !rc; i++) {
		eng_onnx_io io;
		eng_onnx_input(m, i, &io);
		if (i < nfiles) {
			if (!(in[i] = eng_onnx_tensor_load(ctx, files[i], ENG_ONNX_F64_AS_F32, NULL, 0, err, sizeof(err)))) {
				fprintf(stderr, "onnx_run: %s\n", err);
				rc = 1;
			}
		} else if (!io.dtype_ok || io.ndim < 0) {
			fprintf(stderr, "onnx_run: input '%s' needs a file (type or rank unknown)\n", io.name);
			rc = 1;
		} else {
			int64_t sh[ENG_MAX_DIMS];
			for (int d = 0; d < io.ndim; d++)
				sh[d] = io.shape[d] < 0 ? 1 : io.shape[d];
			in[i] = eng_dtype_is_float(io.dtype) ? eng_rand(ctx, io.dtype, io.ndim, sh) : eng_zeros(ctx, io.dtype, io.ndim, sh);
		}
		if (in[i])
			print_tensor(io.name, in[i]);
	}
	for (int r = 0; r < repeat && !rc; r++) {
		double tb = now_ms();
		eng_scope_begin(ctx);
		if (eng_onnx_build(m, in, out, ENG_ONNX_SPECIALIZE)) {
			fprintf(stderr, "onnx_run: %s\n", eng_errmsg(ctx));
			rc = 1;
		} else {
			double tr = now_ms();
			if (eng_realize(out, nout)) {
				fprintf(stderr, "onnx_run: %s\n", eng_errmsg(ctx));
				rc = 1;
			} else {
				printf("run %d: build %.2f ms, realize %.2f ms\n", r, tr - tb, now_ms() - tr);
				for (int k = 0; r == repeat - 1 && k < nout; k++) {
					eng_onnx_io io;
					eng_onnx_output(m, k, &io);
					print_tensor(io.name, out[k]);
				}
			}
		}
		eng_scope_end(ctx);
	}
	free(in);
	free(out);
	eng_onnx_free(m);
	eng_ctx_destroy(ctx);
	return rc;
}
