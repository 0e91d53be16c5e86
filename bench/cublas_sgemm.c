/* cublas_sgemm: the peer figure for bench_matmul on a GPU: an N x N float32 matmul by cuBLAS's
 * sgemm (default N = 4096), median and best of several runs timed with CUDA events. A benchmark
 * peer only: libcuda and libcublas are opened with dlopen here, never linked, and nothing of
 * the product uses cuBLAS. UNTESTED ON A GPU (written in a session without one). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The few driver and cuBLAS entry points used, declared here (bench/ sees no toolkit header):
 * int results (CUresult, cublasStatus_t; 0 is success), opaque handles as void *. */
typedef unsigned long long devptr;
typedef int (*fn_init)(unsigned);
typedef int (*fn_device_get)(int *, int);
typedef int (*fn_ctx_retain)(void **, int);
typedef int (*fn_ctx_set)(void *);
typedef int (*fn_mem_alloc)(devptr *, size_t);
typedef int (*fn_htod)(devptr, const void *, size_t);
typedef int (*fn_sync)(void);
typedef int (*fn_event_create)(void **, unsigned);
typedef int (*fn_event_record)(void *, void *);
typedef int (*fn_event_sync)(void *);
typedef int (*fn_event_elapsed)(float *, void *, void *);
typedef int (*fn_blas_create)(void **);
typedef int (*fn_sgemm)(void *, int, int, int, int, int, const float *, const float *, int, const float *, int,
			const float *, float *, int);

static void *sym(void *lib, const char *name)
{
	void *p = dlsym(lib, name);
	if (!p)
		fprintf(stderr, "cublas_sgemm: no %s\n", name);
	return p;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4096, runs = argc > 2 ? atoi(argv[2]) : 20;
	if (n < 1 || n > 16384 || runs < 1 || runs > 1000) {
		fprintf(stderr, "usage: bench_cublas_sgemm [N] [runs]\n");
		return 2;
	}
	void *cu = dlopen("libcuda.so.1", RTLD_NOW), *blas = dlopen("libcublas.so", RTLD_NOW);
	if (!blas)
		blas = dlopen("libcublas.so.13", RTLD_NOW);
	if (!blas)
		blas = dlopen("libcublas.so.12", RTLD_NOW);
	if (!cu || !blas) {
		fprintf(stderr, "cublas_sgemm: SKIPPED (%s)\n", !cu ? "no libcuda.so.1" : "no libcublas");
		return 0;
	}
	fn_init init = (fn_init)sym(cu, "cuInit");
	fn_device_get dget = (fn_device_get)sym(cu, "cuDeviceGet");
	fn_ctx_retain retain = (fn_ctx_retain)sym(cu, "cuDevicePrimaryCtxRetain");
	fn_ctx_set setc = (fn_ctx_set)sym(cu, "cuCtxSetCurrent");
	fn_mem_alloc alloc = (fn_mem_alloc)sym(cu, "cuMemAlloc_v2");
	fn_htod htod = (fn_htod)sym(cu, "cuMemcpyHtoD_v2");
	fn_sync csync = (fn_sync)sym(cu, "cuCtxSynchronize");
	fn_event_create ecreate = (fn_event_create)sym(cu, "cuEventCreate");
	fn_event_record erecord = (fn_event_record)sym(cu, "cuEventRecord");
	fn_event_sync esync = (fn_event_sync)sym(cu, "cuEventSynchronize");
	fn_event_elapsed elapsed = (fn_event_elapsed)sym(cu, "cuEventElapsedTime");
	fn_blas_create bcreate = (fn_blas_create)sym(blas, "cublasCreate_v2");
	fn_sgemm sgemm = (fn_sgemm)sym(blas, "cublasSgemm_v2");
	if (!init || !dget || !retain || !setc || !alloc || !htod || !csync || !ecreate || !erecord || !esync ||
	    !elapsed || !bcreate || !sgemm)
		return 1;
	int dev;
	void *ctx, *h, *e0, *e1;
	devptr a, b, c;
	size_t bytes = (size_t)n * n * sizeof(float);
	float *host = malloc(bytes), one = 1, zero = 0;
	double *t = calloc((size_t)runs, sizeof(double));
	if (!host || !t)
		return 1;
	for (size_t i = 0; i < (size_t)n * n; i++)
		host[i] = (float)((i * 2654435761u) % 1000) / 1000.0f;
	if (init(0) || dget(&dev, 0) || retain(&ctx, dev) || setc(ctx) || alloc(&a, bytes) || alloc(&b, bytes) ||
	    alloc(&c, bytes) || htod(a, host, bytes) || htod(b, host, bytes) || ecreate(&e0, 0) || ecreate(&e1, 0) ||
	    bcreate(&h)) {
		fprintf(stderr, "cublas_sgemm: CUDA setup failed\n");
		return 1;
	}
	/* column-major C = A B (the product's shape and work are what matter); 0: CUBLAS_OP_N */
	for (int r = -2; r < runs; r++) { /* two warm-up runs */
		float ms = 0;
		if (erecord(e0, NULL) ||
		    sgemm(h, 0, 0, n, n, n, &one, (const float *)(uintptr_t)a, n, (const float *)(uintptr_t)b, n, &zero,
			  (float *)(uintptr_t)c, n) ||
		    erecord(e1, NULL) || esync(e1) || elapsed(&ms, e0, e1)) {
			fprintf(stderr, "cublas_sgemm: sgemm failed\n");
			return 1;
		}
		if (r >= 0)
			t[r] = ms;
	}
	csync();
	qsort(t, (size_t)runs, sizeof(double), cmp);
	printf("cuBLAS sgemm %d: median %.3f ms best %.3f ms (%.1f GFLOPS)\n", n, t[runs / 2], t[0],
	       2.0 * n * n * (double)n / (t[0] * 1e6));
	free(host);
	free(t);
	return 0;
}
