/* test_cudacompile.c: the CUDA backend checked without a GPU: every kernel the conformance suites
 * make, rendered for a CUDA GPU, must compile with NVRTC for sm_80 and sm_90 (SKIPPED where NVRTC
 * is absent); and DEV=CUDA on a machine without a driver is a clear error, never a crash. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#include "realize/realize.h"

#include "backends/cuda/cudac.h"
#include "util/hash.h"

#ifdef TSD_HAVE_CUDA
/* The suites tests/conformance.sh runs on every backend, and the float16 one. Under the
 * sanitizers (make asan) a few of them, which check this machinery for memory errors: the
 * plain run (make test) covers every kernel, and ASan would take minutes over all of them. */
#if defined(__SANITIZE_ADDRESS__)
static const char default_suites[] = "ops f16";
#else
static const char default_suites[] = "ops api nn random errors kernels nnlayers optim grad jit devices cancel zerocopy f16";
#endif

typedef struct kern {
	char *name, *src;
} kern;

typedef struct kernset {
	kern *k;
	int n, cap;
	uint64_t *seen; /* open addressing over source hashes, cap 2x */
	int nseen;
	char *first_error; /* a kernel that could not be rendered for CUDA */
	int errors;
} kernset;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Add (name, src) unless a kernel with that source is in already; takes both strings. */
static void kernset_add(kernset *ks, char *name, char *src)
{
	uint64_t h = eng_hash_str(src) | 1;
	if (2 * (ks->nseen + 1) > ks->cap * 2 || !ks->seen) {
		int ncap = ks->cap ? ks->cap * 2 : 1024;
		uint64_t *ns = calloc((size_t)ncap * 2, sizeof(*ns));
		ck_assert(ns != NULL);
		for (int i = 0; i < ks->cap * 2; i++)
			if (ks->seen[i])
				for (size_t j = ks->seen[i] % ((size_t)ncap * 2);; j = (j + 1) % ((size_t)ncap * 2))
					if (!ns[j]) {
						ns[j] = ks->seen[i];
						break;
					}
		free(ks->seen);
		ks->seen = ns;
		kern *nk = realloc(ks->k, (size_t)ncap * sizeof(*nk));
		ck_assert(nk != NULL);
		ks->k = nk;
		ks->cap = ncap;
	}
	size_t m = (size_t)ks->cap * 2;
	for (size_t j = h % m;; j = (j + 1) % m) {
		if (ks->seen[j] == h) { /* the same source (a 64-bit hash of it) */
			free(name);
			free(src);
			return;
		}
		if (!ks->seen[j]) {
			ks->seen[j] = h;
			ks->nseen++;
			break;
		}
	}
	ks->k[ks->n++] = (kern){name, src};
}

static void kernset_free(kernset *ks)
{
	for (int i = 0; i < ks->n; i++) {
		free(ks->k[i].name);
		free(ks->k[i].src);
	}
	free(ks->k);
	free(ks->seen);
	free(ks->first_error);
}

/* Read the records the shadow wrote (testutil.c: "KERNEL name len\nsrc\n", "ERROR len\nmsg\n"). */
static void read_records(const char *path, kernset *ks)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return; /* no kernel at all: caught by the count */
	char head[256];
	while (fgets(head, sizeof(head), f)) {
		char name[160];
		size_t len = 0;
		bool is_kernel = sscanf(head, "KERNEL %159s %zu", name, &len) == 2;
		ck_assert_msg(is_kernel || sscanf(head, "ERROR %zu", &len) == 1, "bad record in %s: %s", path, head);
		char *body = malloc(len + 1);
		ck_assert(body != NULL);
		ck_assert_msg(fread(body, 1, len, f) == len && fgetc(f) == '\n', "truncated record in %s", path);
		body[len] = 0;
		if (is_kernel) {
			kernset_add(ks, strdup(name), body);
		} else {
			if (!ks->first_error)
				ks->first_error = strdup(body);
			ks->errors++;
			free(body);
		}
	}
	fclose(f);
}

/* Run this test binary again with env's changes ("KEY=value" sets, "KEY" unsets; NULL-ended),
 * its stdout (and with quiet its stderr) to /dev/null; its exit status. */
static int run_self(const char *const *env, bool quiet)
{
	char self[4096];
	ssize_t l = readlink("/proc/self/exe", self, sizeof(self) - 1);
	ck_assert(l > 0);
	self[l] = 0;
	pid_t pid = fork();
	ck_assert(pid >= 0);
	if (pid == 0) {
		for (int i = 0; env[i]; i++) {
			char kv[1024];
			snprintf(kv, sizeof(kv), "%s", env[i]);
			char *eq = strchr(kv, '=');
			if (eq) {
				*eq = 0;
				setenv(kv, eq + 1, 1);
			} else {
				unsetenv(kv);
			}
		}
		if (!freopen("/dev/null", "w", stdout) || (quiet && !freopen("/dev/null", "w", stderr)))
			_exit(126);
		execl(self, self, (char *)NULL);
		_exit(127);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* Run suite s of this test binary on the CPU with the shadow writing to path; its exit status. */
static int run_suite(const char *s, const char *path)
{
	char suite[128], kernels[128];
	snprintf(suite, sizeof(suite), "CK_RUN_SUITE=%s", s);
	snprintf(kernels, sizeof(kernels), "TENSORD_TEST_CUDA_KERNELS=%s", path);
	const char *env[] = {suite, kernels, "CK_FORK=yes", "DEV=CPU", "CK_RUN_CASE", NULL};
	return run_self(env, true);
}

/* One module of kernels [lo, hi) compiled for arch; on failure each kernel of it alone, to
 * name the one that fails. */
typedef struct job {
	const cuda_nvrtc *nv;
	const kernset *ks;
	const char *const *archs;
	int narch, batch, next, nbatches;
	pthread_mutex_t mu;
	int failures;
	char failure[3072]; /* the first: kernel name, arch, NVRTC's log */
	const char *failed_src;
} job;

static eng_status compile_range(job *j, int lo, int hi, const char *arch, bk_err *err)
{
	const char **srcs = malloc((size_t)(hi - lo) * sizeof(*srcs));
	ck_assert(srcs != NULL);
	for (int i = lo; i < hi; i++)
		srcs[i - lo] = j->ks->k[i].src;
	char *src = cuda_module_source(srcs, hi - lo), *ptx = NULL;
	size_t n = 0;
	ck_assert(src != NULL);
	eng_status st = cuda_nvrtc_ptx(j->nv, src, arch, &ptx, &n, err);
	free(ptx);
	free(src);
	free(srcs);
	return st;
}

static void *worker(void *arg)
{
	job *j = arg;
	for (;;) {
		pthread_mutex_lock(&j->mu);
		int b = j->next++;
		pthread_mutex_unlock(&j->mu);
		if (b >= j->nbatches * j->narch)
			return NULL;
		const char *arch = j->archs[b % j->narch];
		int lo = b / j->narch * j->batch, hi = lo + j->batch < j->ks->n ? lo + j->batch : j->ks->n;
		bk_err *err = malloc(sizeof(*err));
		if (!err || !compile_range(j, lo, hi, arch, err)) {
			free(err);
			continue;
		}
		for (int i = lo; i < hi; i++)
			if (compile_range(j, i, i + 1, arch, err)) {
				pthread_mutex_lock(&j->mu);
				if (!j->failures++) {
					snprintf(j->failure, sizeof(j->failure), "kernel %.100s does not compile for %s: %.2800s",
						 j->ks->k[i].name, arch, err->msg);
					j->failed_src = j->ks->k[i].src;
				}
				pthread_mutex_unlock(&j->mu);
			}
		free(err);
	}
}
#endif

START_TEST(test_every_kernel_compiles)
{
#ifndef TSD_HAVE_CUDA
	printf("cudacompile: SKIPPED (built without the CUDA toolkit: no NVRTC)\n");
	return;
#else
	bk_target t;
	cuda_target_facts(TU_CUDA_SMS, true, &t);
	ck_assert_msg(t.dialect == tu_cuda_target.dialect && t.parallelism == tu_cuda_target.parallelism &&
			      t.reduce_group == tu_cuda_target.reduce_group && t.vector_width == tu_cuda_target.vector_width,
		      "testutil's CUDA target differs from cuda_target_facts");
	cuda_nvrtc *nv;
	bk_err err;
	if (cuda_nvrtc_open(&nv, &err)) {
		printf("cudacompile: SKIPPED (%s)\n", err.msg);
		fflush(stdout);
		return;
	}
	double t0 = now_s();
	char dir[] = "/tmp/tsd-cudacompile-XXXXXX", path[64];
	ck_assert(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/kernels", dir);
	const char *env = getenv("TENSORD_CUDACOMPILE_SUITES");
	char suites[512];
	snprintf(suites, sizeof(suites), "%s", env && *env ? env : default_suites);
	kernset ks = {0};
	for (char *save = NULL, *s = strtok_r(suites, " ,", &save); s; s = strtok_r(NULL, " ,", &save)) {
		int rc = run_suite(s, path);
		if (rc) /* that suite's own run reports its failures; its kernels up to them are here */
			printf("cudacompile: note: suite %s exited %d under the CUDA shadow\n", s, rc);
	}
	read_records(path, &ks);
	unlink(path);
	rmdir(dir);
	double t1 = now_s();
	ck_assert_msg(!ks.errors, "%d kernels could not be rendered for CUDA; the first: %s", ks.errors, ks.first_error);
	ck_assert_msg(ks.n >= 100 || (env && *env), "only %d kernels rendered: did the suites run?", ks.n);
	static const char *const archs[] = {"sm_80", "sm_90"};
	job j = {.nv = nv, .ks = &ks, .archs = archs, .narch = 2, .batch = 48};
	j.nbatches = (ks.n + j.batch - 1) / j.batch;
	pthread_mutex_init(&j.mu, NULL);
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		ck_assert(!pthread_create(&th[i], NULL, worker, &j));
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	pthread_mutex_destroy(&j.mu);
	printf("cudacompile: %d distinct kernels from the suites (%.1f s), each compiled by NVRTC %s for sm_80 and "
	       "sm_90 (%.1f s): %d failed\n", ks.n, t1 - t0, cuda_nvrtc_version(nv), now_s() - t1, j.failures);
	fflush(stdout);
	if (j.failures)
		fprintf(stderr, "cudacompile: the first failing kernel's source:\n%s\n", j.failed_src);
	ck_assert_msg(!j.failures, "%d kernel compiles failed; the first: %s", j.failures, j.failure);
	kernset_free(&ks);
	cuda_nvrtc_close(nv);
#endif
}
END_TEST

#ifdef TSD_HAVE_CUDA
/* The kernels one realize renders for the shadow target (up to 8). */
typedef struct caught {
	char *name[8], *src[8];
	int n;
} caught;

static void catch_kernel(void *arg, const char *name, const char *src, const char *error)
{
	caught *c = arg;
	ck_assert_msg(src != NULL, "shadow: %s", error);
	if (c->n < 8) {
		c->name[c->n] = strdup(name);
		c->src[c->n++] = strdup(src);
	}
}
#endif

/* What the launch reads from a kernel's PTX (cuda_ptx_entry), on NVRTC's real output: a sum to
 * a scalar is grouped (.maxntid of CUDA_GROUP_SIZE: one block of that size), an elementwise
 * kernel is not; the parameter count is the buffers plus (start, end). */
START_TEST(test_launch_facts_from_ptx)
{
#ifndef TSD_HAVE_CUDA
	printf("cudacompile: launch facts SKIPPED (built without the CUDA toolkit)\n");
#else
	cuda_nvrtc *nv;
	bk_err err;
	if (cuda_nvrtc_open(&nv, &err)) {
		printf("cudacompile: launch facts SKIPPED (%s)\n", err.msg);
		return;
	}
	eng_ctx *ctx = tu_ctx_new();
	caught c = {0};
	eng_realize_set_shadow(ctx, &tu_cuda_target, catch_kernel, &c);
	int64_t shape[1] = {100000};
	eng_tensor *x = eng_contiguous(eng_rand(ctx, ENG_F32, 1, shape));
	eng_tensor *outs[2] = {eng_sum(x, NULL, 0, false), eng_mul(x, x)};
	ck_assert_int_eq(eng_realize(outs, 2), ENG_OK);
	int grouped = 0, plain = 0;
	for (int i = 0; i < c.n; i++) {
		char *ptx;
		size_t n;
		char *src = cuda_module_source((const char *const *)&c.src[i], 1);
		ck_assert_msg(!cuda_nvrtc_ptx(nv, src, "sm_80", &ptx, &n, &err), "%s", err.msg);
		int nparams, maxntid, nbufs = 0;
		cuda_ptx_entry(ptx, c.name[i], &nparams, &maxntid);
		for (const char *q = c.src[i]; (q = strstr(q, "__restrict__ b")); q++)
			nbufs++;
		ck_assert_msg(nparams == nbufs + 2, "%s: %d parameters in the PTX, %d buffers", c.name[i], nparams, nbufs);
		bool is_grouped = strstr(c.src[i], "__launch_bounds__(") != NULL;
		ck_assert_int_eq(maxntid, is_grouped ? CUDA_GROUP_SIZE : 0);
		grouped += is_grouped;
		plain += !is_grouped;
		free(ptx);
		free(src);
		free(c.name[i]);
		free(c.src[i]);
	}
	ck_assert_msg(grouped >= 1 && plain >= 1, "%d grouped and %d other kernels", grouped, plain);
	cuda_ptx_entry("", "nosuch", &grouped, &plain);
	ck_assert_int_eq(grouped, -1);
	tu_ctx_free(ctx);
	cuda_nvrtc_close(nv);
#endif
}
END_TEST

/* DEV=CUDA where there is no driver (libcuda.so.1 absent): context creation fails with a
 * message naming the missing driver. Where a driver is, the device opens or says why not. */
START_TEST(test_no_driver_is_a_clear_error)
{
	void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	eng_ctx_opts o;
	char msg[512] = "";
	eng_ctx_opts_default(&o);
	o.device = "CUDA";
	o.no_disk_cache = true;
	eng_ctx *ctx = eng_ctx_create(&o, msg, sizeof(msg));
#ifdef TSD_HAVE_CUDA
	if (!drv) {
		ck_assert_msg(ctx == NULL, "a CUDA context without a driver");
		ck_assert_msg(strstr(msg, "libcuda.so.1") && strstr(msg, "CUDA"), "unclear error: %s", msg);
	} else {
		ck_assert_msg(ctx || strstr(msg, "CUDA"), "unclear error: %s", msg);
	}
	char list[8192];
	ck_assert_int_eq(eng_devices_list(list, sizeof(list)), ENG_OK);
	ck_assert_msg(strstr(list, "CUDA"), "the device listing has no CUDA line: %s", list);
#else
	ck_assert_msg(ctx == NULL && strstr(msg, "CUDA"), "without the backend: %s", msg);
#endif
	if (ctx)
		eng_ctx_destroy(ctx);
	if (drv)
		dlclose(drv);
}
END_TEST

/* Every driver entry point the backend resolves exists in the driver's ABI: with the toolkit's
 * stub libcuda (which exports them all, and whose cuInit fails) as libcuda.so.1, opening CUDA
 * gets as far as cuInit. Run in a child of this binary with LD_LIBRARY_PATH set. */
START_TEST(test_stub_driver_resolves)
{
#ifndef TSD_HAVE_CUDA
	printf("cudacompile: stub driver SKIPPED (built without the CUDA toolkit)\n");
#else
	if (getenv("TSD_CUDA_STUB_CHILD")) { /* the child: libcuda.so.1 is the stub */
		eng_ctx_opts o;
		char msg[512] = "";
		eng_ctx_opts_default(&o);
		o.device = "CUDA";
		ck_assert(eng_ctx_create(&o, msg, sizeof(msg)) == NULL);
		ck_assert_msg(strstr(msg, "toolkit's stub"), "with the stub driver: %s", msg);
		return;
	}
	const char *home = getenv("CUDA_HOME");
	char stub[1024], dir[] = "/tmp/tsd-cudastub-XXXXXX", link[64];
	snprintf(stub, sizeof(stub), "%s/lib64/stubs/libcuda.so", home && *home ? home : "/usr/local/cuda");
	if (access(stub, R_OK)) {
		printf("cudacompile: stub driver SKIPPED (no %s)\n", stub);
		return;
	}
	ck_assert(mkdtemp(dir) != NULL);
	snprintf(link, sizeof(link), "%s/libcuda.so.1", dir);
	ck_assert(!symlink(stub, link));
	char ld[128];
	snprintf(ld, sizeof(ld), "LD_LIBRARY_PATH=%s", dir);
	const char *env[] = {ld, "TSD_CUDA_STUB_CHILD=1", "CK_RUN_SUITE=cudacompile", "CK_RUN_CASE=stub", "CK_FORK=no", NULL};
	int st = run_self(env, false);
	unlink(link);
	rmdir(dir);
	ck_assert_msg(st == 0, "the child with the stub driver failed (exit status %d)", st);
#endif
}
END_TEST

Suite *cudacompile_suite(void)
{
	Suite *s = suite_create("cudacompile");
	TCase *tc = tcase_create("nvrtc");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_every_kernel_compiles);
	tcase_add_test(tc, test_no_driver_is_a_clear_error);
	tcase_add_test(tc, test_launch_facts_from_ptx);
	suite_add_tcase(s, tc);
	TCase *stub = tcase_create("stub");
	tcase_set_timeout(stub, 60);
	tcase_add_test(stub, test_stub_driver_resolves);
	suite_add_tcase(s, stub);
	return s;
}
