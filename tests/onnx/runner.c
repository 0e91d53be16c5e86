/* runner.c: ONNX's backend node tests against the importer: each case directory (model.onnx and
 * test_data_set_N/{input,output}_K.pb) runs in its own process, outputs are compared with rtol
 * 1e-3 / atol 1e-7 as ONNX's runner does, and a baseline of passing cases guards regressions.
 * ONNX's "light" models (light_NAME.onnx beside light_NAME_output_K.pb, in the onnx wheel's
 * backend/test/data/light, not in Debian's 1.12 test data) run the way ONNX's runner runs them:
 * each input arange(numel) / numel in its declared shape (symbolic dims 1), densenet121 at
 * rtol 2e-3.
 *
 * Usage: onnx_node_runner [-j N] [-d DEV] [-f SUBSTR] [--no-f64] [--baseline FILE] [--write FILE]
 *                         [--unsupported FILE] SUITE_DIR...
 * Every case of SUITE_DIR/<case>/ is run; per case one line PASS, FAIL or UNSUPPORTED with the
 * reason; per suite a summary line. --baseline: a case listed there ("suite/case") that does not
 * pass fails the run (exit 1). --write: write the passing cases there; --unsupported: write the
 * others with their reasons there (the repo's tests/onnx/passing.txt and unsupported.txt).
 * float64 models run in float32 (ENG_ONNX_F64_AS_F32, counted apart) unless --no-f64. */
/* Messages and paths are cut to their buffers on purpose. */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tensord/engine.h>
#include <tensord/onnx.h>

#define MAX_IO 64
#define CASE_TIMEOUT 120 /* seconds */

enum { R_PASS, R_FAIL, R_UNSUP };
static const char *const rname[] = {"PASS", "FAIL", "UNSUPPORTED"};

typedef struct tcase {
	char suite[64];
	char name[256];
	char path[1024];
	int result;
	char why[512];
	pid_t pid;
	int fd;
	size_t got;
	double t0;
} tcase;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* t's values as doubles (malloc'd). */
static double *values(eng_tensor *t, int64_t *n)
{
	*n = eng_numel(t);
	eng_dtype dt = eng_tensor_dtype(t);
	size_t isz = eng_dtype_size(dt);
	unsigned char *raw = malloc((size_t)*n * isz + 1);
	double *v = malloc((size_t)*n * sizeof(double) + 1);
	if (!raw || !v || eng_tensor_read(t, raw, (size_t)*n * isz)) {
		free(raw);
		free(v);
		return NULL;
	}
	for (int64_t i = 0; i < *n; i++) {
		switch (dt) {
		case ENG_BOOL:
		case ENG_U8: v[i] = raw[i]; break;
		case ENG_I32: v[i] = ((int32_t *)raw)[i]; break;
		case ENG_I64: v[i] = (double)((int64_t *)raw)[i]; break;
		case ENG_F16: v[i] = eng_f16_to_double(((uint16_t *)raw)[i]); break;
		case ENG_F32: v[i] = ((float *)raw)[i]; break;
		default: v[i] = NAN;
		}
	}
	free(raw);
	return v;
}

/* Compare got with want as ONNX's runner does (numpy assert_allclose, rtol 1e-3 unless given,
 * atol 1e-7). */
static int compare(int k, eng_tensor *got, eng_tensor *want, double rtol, char *why, size_t wl)
{
	if (eng_tensor_dtype(got) != eng_tensor_dtype(want)) {
		snprintf(why, wl, "output %d: dtype %s, expected %s", k, eng_dtype_name(eng_tensor_dtype(got)), eng_dtype_name(eng_tensor_dtype(want)));
		return R_FAIL;
	}
	bool same = eng_ndim(got) == eng_ndim(want);
	for (int i = 0; same && i < eng_ndim(got); i++)
		same = eng_shape(got)[i] == eng_shape(want)[i];
	if (!same) {
		snprintf(why, wl, "output %d: shape differs (rank %d, expected %d)", k, eng_ndim(got), eng_ndim(want));
		return R_FAIL;
	}
	int64_t n, m;
	double *a = values(got, &n), *b = values(want, &m);
	int r = R_PASS;
	if (!a || !b) {
		snprintf(why, wl, "output %d: read failed: %s", k, eng_errmsg(eng_tensor_ctx(got)));
		r = R_FAIL;
	}
	int64_t bad = 0, first = -1;
	for (int64_t i = 0; r == R_PASS && i < n; i++) {
		bool ok = isnan(b[i]) ? isnan(a[i]) : isinf(b[i]) ? a[i] == b[i] : fabs(a[i] - b[i]) <= 1e-7 + rtol * fabs(b[i]);
		if (!ok && first < 0)
			first = i;
		bad += !ok;
	}
	if (r == R_PASS && bad) {
		snprintf(why, wl, "output %d: %lld of %lld values differ (first at %lld: %.9g, expected %.9g)", k, (long long)bad, (long long)n,
			 (long long)first, a[first], b[first]);
		r = R_FAIL;
	}
	free(a);
	free(b);
	return r;
}

static int classify(eng_status s) { return s == ENG_ENOTSUP ? R_UNSUP : R_FAIL; }

/* One case, in the child: returns the result, the reason in why. */
#define NARROWED "float64 computed as float32"

/* A light model (path: .../light_NAME.onnx): ONNX's generated inputs, its stored outputs. */
static int run_light(eng_ctx *ctx, eng_onnx_model *m, const char *path, unsigned flags, char *why, size_t wl)
{
	int nin = eng_onnx_input_count(m), nout = eng_onnx_output_count(m), r = R_PASS;
	eng_tensor *in[MAX_IO] = {0}, *out[MAX_IO] = {0};
	char err[1024], op[1200];
	if (nin > MAX_IO || nout > MAX_IO) {
		snprintf(why, wl, "%d inputs, %d outputs: more than the runner handles", nin, nout);
		return R_FAIL;
	}
	for (int i = 0; r == R_PASS && i < nin; i++) {
		eng_onnx_io io;
		eng_onnx_input(m, i, &io);
		int64_t shape[ENG_MAX_DIMS], n = 1;
		for (int d = 0; d < io.ndim; d++)
			n *= shape[d] = io.shape[d] < 0 ? 1 : io.shape[d];
		float *v = io.ndim >= 0 && io.dtype_ok && io.dtype == ENG_F32 ? malloc((size_t)n * 4 + 4) : NULL;
		for (int64_t e = 0; v && e < n; e++)
			v[e] = (float)((double)e / (double)n);
		if (!v || !(in[i] = eng_from_data(ctx, ENG_F32, io.ndim, shape, v))) {
			snprintf(why, wl, "input %d ('%s'): not a float32 input of known rank", i, io.name);
			r = R_FAIL;
		}
		free(v);
	}
	if (r == R_PASS) {
		eng_status s = eng_onnx_build(m, in, out, ENG_ONNX_SPECIALIZE);
		if (s || (nout && eng_realize(out, nout))) {
			snprintf(why, wl, "%s", eng_errmsg(ctx));
			r = s ? classify(s) : R_FAIL;
		}
	}
	size_t plen = strlen(path) - strlen(".onnx");
	for (int k = 0; r == R_PASS && k < nout; k++) {
		snprintf(op, sizeof(op), "%.*s_output_%d.pb", (int)plen, path, k);
		eng_tensor *want = eng_onnx_tensor_load(ctx, op, flags, NULL, 0, err, sizeof(err));
		if (!want) {
			snprintf(why, wl, "output %d: %s", k, err);
			r = R_FAIL;
		} else {
			r = compare(k, out[k], want, strstr(path, "densenet121") ? 2e-3 : 1e-3, why, wl);
		}
	}
	return r;
}

/* onnx 1.12's cases store bfloat16 values as uint16 tensors of their bits (numpy had no
 * bfloat16), which the loader reads as int32; where the model declares bfloat16 (held in float32
 * by the engine) they are turned into those values: the bits are the top half of a float32's. */
static eng_tensor *bf16_from_bits(eng_tensor *t, int onnx_type)
{
	enum { ONNX_BFLOAT16 = 16 };
	if (!t || onnx_type != ONNX_BFLOAT16 || eng_tensor_dtype(t) != ENG_I32)
		return t;
	return eng_bitcast(eng_shl(t, eng_scalar(eng_tensor_ctx(t), ENG_I32, 16)), ENG_F32);
}

static bool is_light(const char *path)
{
	size_t n = strlen(path);
	return n > 5 && !strcmp(path + n - 5, ".onnx");
}

static int run_case(const char *dir, const char *dev, unsigned flags, char *why, size_t wl)
{
	eng_ctx_opts o;
	eng_ctx_opts_default(&o);
	o.device = dev;
	o.debug = 0;
	char err[1024];
	eng_ctx *ctx = eng_ctx_create(&o, err, sizeof(err));
	if (!ctx) {
		snprintf(why, wl, "context: %s", err);
		return R_FAIL;
	}
	char path[1200];
	snprintf(path, sizeof(path), is_light(dir) ? "%s" : "%s/model.onnx", dir);
	eng_onnx_model *m = eng_onnx_load(ctx, path, flags, err, sizeof(err));
	if (!m) {
		snprintf(why, wl, "%s", err);
		eng_ctx_destroy(ctx);
		/* the loader's own messages say "not supported" for what it lacks */
		return strstr(err, "not supported") ? R_UNSUP : R_FAIL;
	}
	int nin = eng_onnx_input_count(m), nout = eng_onnx_output_count(m), r = R_PASS, sets = 0;
	if (is_light(dir)) {
		eng_scope_begin(ctx);
		r = run_light(ctx, m, dir, flags, why, wl);
		eng_scope_end(ctx);
		sets = 1;
	}
	for (int set = 0; !is_light(dir) && r == R_PASS && nin <= MAX_IO && nout <= MAX_IO; set++) {
		char sd[1200];
		snprintf(sd, sizeof(sd), "%s/test_data_set_%d", dir, set);
		struct stat st;
		if (stat(sd, &st))
			break;
		sets++;
		eng_scope_begin(ctx);
		eng_tensor *in[MAX_IO] = {0}, *out[MAX_IO] = {0};
		for (int i = 0; r == R_PASS && i < nin; i++) {
			snprintf(path, sizeof(path), "%s/input_%d.pb", sd, i);
			eng_onnx_io io;
			if (!(in[i] = eng_onnx_tensor_load(ctx, path, flags, NULL, 0, err, sizeof(err)))) {
				snprintf(why, wl, "input %d: %s", i, err);
				r = strstr(err, "not supported") ? R_UNSUP : R_FAIL;
			} else if (!eng_onnx_input(m, i, &io))
				in[i] = bf16_from_bits(in[i], io.onnx_type);
		}
		if (r == R_PASS) {
			eng_status s = eng_onnx_build(m, in, out, ENG_ONNX_SPECIALIZE);
			if (s) {
				snprintf(why, wl, "%s", eng_errmsg(ctx));
				r = classify(s);
			}
		}
		if (r == R_PASS && nout && eng_realize(out, nout)) {
			snprintf(why, wl, "realize: %s", eng_errmsg(ctx));
			r = R_FAIL;
		}
		for (int k = 0; r == R_PASS && k < nout; k++) {
			snprintf(path, sizeof(path), "%s/output_%d.pb", sd, k);
			eng_tensor *want = eng_onnx_tensor_load(ctx, path, flags, NULL, 0, err, sizeof(err));
			eng_onnx_io io;
			if (want && !eng_onnx_output(m, k, &io))
				want = bf16_from_bits(want, io.onnx_type);
			if (!want) {
				snprintf(why, wl, "output %d: %s", k, err);
				r = strstr(err, "not supported") ? R_UNSUP : R_FAIL;
			} else
				r = compare(k, out[k], want, 1e-3, why, wl);
		}
		eng_scope_end(ctx);
	}
	if (r == R_PASS && eng_onnx_narrowed(m))
		snprintf(why, wl, NARROWED);
	if (r == R_PASS && !sets) {
		snprintf(why, wl, "no test data sets");
		r = R_FAIL;
	}
	eng_onnx_free(m);
	eng_ctx_destroy(ctx);
	return r;
}

/* ---- the parent: cases, processes, baseline ---- */

typedef struct list {
	char **items;
	int n, cap;
} list;

static void list_add(list *l, const char *s)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 256;
		l->items = realloc(l->items, (size_t)l->cap * sizeof(char *));
	}
	l->items[l->n++] = strdup(s);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static bool list_has(const list *l, const char *s)
{
	return l->n && bsearch(&s, l->items, (size_t)l->n, sizeof(char *), cmp_str);
}

static void start_case(tcase *c, const char *dev, unsigned flags)
{
	int p[2];
	if (pipe(p)) {
		c->result = R_FAIL;
		snprintf(c->why, sizeof(c->why), "pipe: %s", strerror(errno));
		c->pid = -1;
		return;
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		alarm(CASE_TIMEOUT);
		char why[512] = "";
		int r = run_case(c->path, dev, flags, why, sizeof(why));
		for (char *q = why; *q; q++)
			if (*q == '\n')
				*q = ' ';
		dprintf(p[1], "%d %s", r, why);
		_exit(0);
	}
	close(p[1]);
	c->pid = pid;
	c->fd = p[0];
	c->got = 0;
	c->why[0] = 0;
	c->t0 = now_s();
}

static void finish_case(tcase *c)
{
	char buf[600];
	ssize_t k, tot = 0;
	while ((k = read(c->fd, buf + tot, sizeof(buf) - 1 - (size_t)tot)) > 0)
		tot += k;
	buf[tot > 0 ? tot : 0] = 0;
	close(c->fd);
	int st = 0;
	waitpid(c->pid, &st, 0);
	int r;
	char *sp = strchr(buf, ' ');
	if (tot > 0 && sp && sscanf(buf, "%d", &r) == 1 && r >= R_PASS && r <= R_UNSUP) {
		c->result = r;
		snprintf(c->why, sizeof(c->why), "%s", sp + 1);
	} else {
		c->result = R_FAIL;
		if (WIFSIGNALED(st))
			snprintf(c->why, sizeof(c->why), "crashed: signal %d%s", WTERMSIG(st), WTERMSIG(st) == SIGALRM ? " (timeout)" : "");
		else
			snprintf(c->why, sizeof(c->why), "exited with status %d and no result", WEXITSTATUS(st));
	}
}

int main(int argc, char **argv)
{
	int jobs = (int)sysconf(_SC_NPROCESSORS_ONLN);
	const char *dev = "CPU", *filter = NULL, *baseline = NULL, *write_pass = NULL, *write_unsup = NULL;
	bool verbose = false;
	unsigned flags = ENG_ONNX_F64_AS_F32;
	list suites = {0};
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-j") && i + 1 < argc) jobs = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-d") && i + 1 < argc) dev = argv[++i];
		else if (!strcmp(argv[i], "-f") && i + 1 < argc) filter = argv[++i];
		else if (!strcmp(argv[i], "-v")) verbose = true;
		else if (!strcmp(argv[i], "--no-f64")) flags &= ~ENG_ONNX_F64_AS_F32;
		else if (!strcmp(argv[i], "--baseline") && i + 1 < argc) baseline = argv[++i];
		else if (!strcmp(argv[i], "--write") && i + 1 < argc) write_pass = argv[++i];
		else if (!strcmp(argv[i], "--unsupported") && i + 1 < argc) write_unsup = argv[++i];
		else if (argv[i][0] == '-') {
			fprintf(stderr, "usage: %s [-j N] [-d DEV] [-f SUBSTR] [--no-f64] [--baseline FILE] [--write FILE] [--unsupported FILE] SUITE_DIR...\n", argv[0]);
			return 2;
		} else
			list_add(&suites, argv[i]);
	}
	if (jobs < 1)
		jobs = 1;
	/* the cases */
	tcase *cases = NULL;
	int nc = 0, cap = 0;
	for (int s = 0; s < suites.n; s++) {
		DIR *d = opendir(suites.items[s]);
		if (!d) {
			fprintf(stderr, "onnx: %s: %s\n", suites.items[s], strerror(errno));
			return 2;
		}
		list names = {0};
		struct dirent *e;
		while ((e = readdir(d)))
			if (e->d_name[0] != '.' && (!filter || strstr(e->d_name, filter)))
				list_add(&names, e->d_name);
		closedir(d);
		qsort(names.items, (size_t)names.n, sizeof(char *), cmp_str);
		const char *base = strrchr(suites.items[s], '/');
		char sname[64];
		snprintf(sname, sizeof(sname), "%s", base && base[1] ? base + 1 : suites.items[s]);
		if (base && !base[1]) { /* a trailing slash */
			char tmp[1024];
			snprintf(tmp, sizeof(tmp), "%s", suites.items[s]);
			tmp[strlen(tmp) - 1] = 0;
			const char *b2 = strrchr(tmp, '/');
			snprintf(sname, sizeof(sname), "%s", b2 ? b2 + 1 : tmp);
		}
		for (int i = 0; i < names.n; i++) {
			char p[1024];
			struct stat st;
			bool light = !strncmp(names.items[i], "light_", 6) && is_light(names.items[i]);
			snprintf(p, sizeof(p), light ? "%s/%s" : "%s/%s/model.onnx", suites.items[s], names.items[i]);
			if (stat(p, &st)) {
				free(names.items[i]);
				continue;
			}
			if (nc == cap) {
				cap = cap ? cap * 2 : 1024;
				cases = realloc(cases, (size_t)cap * sizeof(*cases));
			}
			tcase *c = &cases[nc++];
			memset(c, 0, sizeof(*c));
			snprintf(c->suite, sizeof(c->suite), "%s", sname);
			snprintf(c->name, sizeof(c->name), "%s", names.items[i]);
			snprintf(c->path, sizeof(c->path), "%s/%s", suites.items[s], names.items[i]);
			free(names.items[i]);
		}
		free(names.items);
	}
	/* run them, jobs at a time */
	double t0 = now_s();
	int next = 0, running = 0, done = 0;
	int *slot = calloc((size_t)jobs, sizeof(int));
	for (int i = 0; i < jobs; i++)
		slot[i] = -1;
	while (done < nc) {
		for (int i = 0; i < jobs && next < nc; i++)
			if (slot[i] < 0) {
				start_case(&cases[next], dev, flags);
				if (cases[next].pid < 0) {
					done++;
					next++;
					continue;
				}
				slot[i] = next++;
				running++;
			}
		struct pollfd pf[256];
		int map[256], np = 0;
		for (int i = 0; i < jobs && np < 256; i++)
			if (slot[i] >= 0) {
				pf[np] = (struct pollfd){.fd = cases[slot[i]].fd, .events = POLLIN};
				map[np++] = i;
			}
		if (!np)
			continue;
		poll(pf, (nfds_t)np, -1);
		for (int k = 0; k < np; k++)
			if (pf[k].revents & (POLLIN | POLLHUP | POLLERR)) {
				tcase *c = &cases[slot[map[k]]];
				finish_case(c);
				printf("%-11s %s/%s%s%s (%.1fs)\n", rname[c->result], c->suite, c->name, c->why[0] ? ": " : "", c->why,
				       now_s() - c->t0);
				slot[map[k]] = -1;
				running--;
				done++;
			}
	}
	free(slot);
	(void)verbose;
	/* summary per suite */
	int rc = 0;
	for (int i = 0; i < nc;) {
		int j = i, cnt[3] = {0}, narrowed = 0;
		while (j < nc && !strcmp(cases[j].suite, cases[i].suite)) {
			narrowed += cases[j].result == R_PASS && !strcmp(cases[j].why, NARROWED);
			cnt[cases[j++].result]++;
		}
		int n = j - i;
		printf("onnx %s: passed %d, failed %d, unsupported %d of %d (%.1f%%) on %s; %d of the passes with float64 as float32\n",
		       cases[i].suite, cnt[R_PASS], cnt[R_FAIL], cnt[R_UNSUP], n, n ? 100.0 * cnt[R_PASS] / n : 0.0, dev, narrowed);
		i = j;
	}
	printf("onnx: %d cases in %.0f s\n", nc, now_s() - t0);
	/* the baseline: every case listed must pass */
	if (baseline) {
		list want = {0};
		FILE *f = fopen(baseline, "r");
		char line[512];
		while (f && fgets(line, sizeof(line), f)) {
			line[strcspn(line, " \t\r\n")] = 0;
			if (line[0] && line[0] != '#')
				list_add(&want, line);
		}
		if (f)
			fclose(f);
		else {
			fprintf(stderr, "onnx: baseline %s: %s\n", baseline, strerror(errno));
			rc = 1;
		}
		qsort(want.items, (size_t)want.n, sizeof(char *), cmp_str);
		int regress = 0, newpass = 0;
		for (int i = 0; i < nc; i++) {
			char key[400];
			snprintf(key, sizeof(key), "%s/%s", cases[i].suite, cases[i].name);
			bool listed = list_has(&want, key);
			if (listed && cases[i].result != R_PASS) {
				printf("REGRESSION  %s: %s\n", key, cases[i].why);
				regress++;
			} else if (!listed && cases[i].result == R_PASS)
				newpass++;
		}
		/* without a filter every baseline case must have run (missing test data is a failure) */
		list ran = {0};
		for (int i = 0; !filter && i < nc; i++) {
			char key[400];
			snprintf(key, sizeof(key), "%s/%s", cases[i].suite, cases[i].name);
			list_add(&ran, key);
		}
		if (ran.n)
			qsort(ran.items, (size_t)ran.n, sizeof(char *), cmp_str);
		for (int i = 0; !filter && i < want.n; i++)
			if (!list_has(&ran, want.items[i])) {
				printf("REGRESSION  %s: not found (is libonnx-testdata installed?)\n", want.items[i]);
				regress++;
			}
		for (int i = 0; i < ran.n; i++)
			free(ran.items[i]);
		free(ran.items);
		if (regress) {
			printf("onnx: %d cases of the baseline no longer pass\n", regress);
			rc = 1;
		}
		if (newpass)
			printf("onnx: %d cases pass that the baseline does not list (make onnx-baseline updates it)\n", newpass);
		for (int i = 0; i < want.n; i++)
			free(want.items[i]);
		free(want.items);
	}
	if (write_pass || write_unsup) {
		FILE *fp = write_pass ? fopen(write_pass, "w") : NULL, *fu = write_unsup ? fopen(write_unsup, "w") : NULL;
		if (fp)
			fprintf(fp, "# ONNX backend cases that pass (suite/case); written by `make onnx-baseline`.\n");
		if (fu)
			fprintf(fu, "# ONNX backend cases that do not pass, with the reason; written by `make onnx-baseline`.\n"
				    "# suite/case  unsupported|fail: reason\n");
		for (int i = 0; i < nc; i++) {
			if (cases[i].result == R_PASS && fp)
				fprintf(fp, "%s/%s\n", cases[i].suite, cases[i].name);
			else if (cases[i].result != R_PASS && fu)
				fprintf(fu, "%s/%s  %s: %s\n", cases[i].suite, cases[i].name, cases[i].result == R_UNSUP ? "unsupported" : "fail",
					cases[i].why);
		}
		if (fp)
			fclose(fp);
		if (fu)
			fclose(fu);
	}
	free(cases);
	for (int i = 0; i < suites.n; i++)
		free(suites.items[i]);
	free(suites.items);
	return rc;
}
