/* daemon_harness.c: starting, talking to and stopping the real tensord for the integration
 * tests (daemon_harness.h has the life cycle and the cleanup rules). */
#include "daemon_harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nng/protocol/reqrep0/req.h>

atomic_int dh_order;

static char top_dir[128];     /* the tcase's directory (unchecked setup, runner process) */
#define DH_MAX_DAEMONS 8
/* Daemons of this process not yet stopped: a copy, as a failed test's dh_daemon (on its stack)
 * is gone when the checked teardown runs (CK_FORK=no). */
static struct live {
	const dh_daemon *d;
	pid_t pid; /* 0 until started */
	char dir[256], err_path[320];
} live[DH_MAX_DAEMONS];

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag, (void)f;
	remove(path);
	return 0;
}

static void rm_rf(const char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

void dh_print_tail(const char *err_path)
{
	FILE *f = fopen(err_path, "r");
	if (!f)
		return;
	fseek(f, 0, SEEK_END);
	long n = ftell(f), from = n > 6000 ? n - 6000 : 0;
	fseek(f, from, SEEK_SET);
	char buf[6001];
	size_t got = fread(buf, 1, sizeof(buf) - 1, f);
	buf[got] = 0;
	fclose(f);
	fprintf(stderr, "---- tensord stderr (%s, last %zu bytes) ----\n%s---- end ----\n", err_path, got, buf);
}

void dh_tcase_setup(void)
{
	strcpy(top_dir, "/tmp/tsd_itest_XXXXXX");
	if (!mkdtemp(top_dir)) {
		perror("mkdtemp");
		abort();
	}
}

/* Prints the tails of daemons a failed forked test left behind, then removes everything. */
static int tail_left(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)f;
	size_t n = strlen(path);
	if (flag == FTW_F && n > 7 && !strcmp(path + n - 7, "/stderr"))
		dh_print_tail(path);
	return 0;
}

void dh_tcase_teardown(void)
{
	if (!top_dir[0])
		return;
	nftw(top_dir, tail_left, 16, FTW_PHYS);
	rm_rf(top_dir);
	top_dir[0] = 0;
}

static struct live *live_of(const dh_daemon *d)
{
	for (int i = 0; i < DH_MAX_DAEMONS; i++)
		if (live[i].d == d)
			return &live[i];
	return NULL;
}

static void forget(const dh_daemon *d)
{
	struct live *l = live_of(d);
	if (l)
		memset(l, 0, sizeof(*l));
}

void dh_teardown(void)
{
	for (int i = 0; i < DH_MAX_DAEMONS; i++) {
		struct live *l = &live[i];
		if (!l->d)
			continue;
		if (l->pid > 0) { /* the test failed with it running */
			kill(l->pid, SIGKILL);
			waitpid(l->pid, NULL, 0);
			dh_print_tail(l->err_path);
		}
		rm_rf(l->dir);
		memset(l, 0, sizeof(*l));
	}
}

void dh_add_test(Suite *s, const char *name, const TTest *t, int timeout_s)
{
	TCase *tc = tcase_create(name);
	tcase_add_unchecked_fixture(tc, dh_tcase_setup, dh_tcase_teardown);
	tcase_add_checked_fixture(tc, NULL, dh_teardown);
	tcase_set_timeout(tc, timeout_s);
	_tcase_add_test(tc, t, 0, 0, 0, 1);
	suite_add_tcase(s, tc);
}

/* ---- start and stop ---- */

/* This test binary's path into exe (PATH_MAX bytes). */
static void self_exe(char *exe)
{
	ssize_t n = readlink("/proc/self/exe", exe, PATH_MAX - 1);
	ck_assert_msg(n > 0, "readlink /proc/self/exe: %s", strerror(errno));
	exe[n] = 0;
}

static void daemon_path(char *out, size_t cap)
{
	char exe[PATH_MAX];
	self_exe(exe);
	/* BUILD/tests/run_tests -> BUILD/bin/tensord */
	snprintf(out, cap, "%s/../bin/tensord", dirname(exe));
	ck_assert_msg(access(out, X_OK) == 0, "%s: %s (build it: make BUILD=... all)", out, strerror(errno));
}

void dh_prepare(dh_daemon *d)
{
	if (d->dir[0])
		return;
	ck_assert_msg(top_dir[0], "dh_tcase_setup did not run (use dh_add_test)");
	snprintf(d->dir, sizeof(d->dir), "%s/dXXXXXX", top_dir);
	ck_assert(mkdtemp(d->dir));
	snprintf(d->models_dir, sizeof(d->models_dir), "%s/models", d->dir);
	ck_assert_int_eq(mkdir(d->models_dir, 0700), 0);
	snprintf(d->nng_url, sizeof(d->nng_url), "ipc://%s/nng.sock", d->dir);
	snprintf(d->unix_path, sizeof(d->unix_path), "%s/unix.sock", d->dir);
	const char *tr = getenv("TSD_TEST_TRANSPORT");
	if (tr && !strcmp(tr, "nng"))
		snprintf(d->url, sizeof(d->url), "%s", d->nng_url);
	else
		snprintf(d->url, sizeof(d->url), "unix://%s", d->unix_path);
	snprintf(d->cfg_path, sizeof(d->cfg_path), "%s/tensord.json", d->dir);
	snprintf(d->err_path, sizeof(d->err_path), "%s/stderr", d->dir);
	struct live *l = live_of(NULL);
	ck_assert_msg(l, "more than %d daemons at once", DH_MAX_DAEMONS);
	l->d = d;
	snprintf(l->dir, sizeof(l->dir), "%s", d->dir);
	snprintf(l->err_path, sizeof(l->err_path), "%s", d->err_path);
}

void dh_write_file(const dh_daemon *d, const char *rel, const void *data, size_t len)
{
	char path[512], tmp[520];
	snprintf(path, sizeof(path), "%s/%s", d->models_dir, rel);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "wb");
	ck_assert_msg(f, "%s: %s", tmp, strerror(errno));
	ck_assert(fwrite(data, 1, len, f) == len);
	ck_assert(fclose(f) == 0);
	ck_assert_msg(rename(tmp, path) == 0, "rename %s: %s", path, strerror(errno));
}

void dh_write_safetensors(const dh_daemon *d, const char *rel, int n, const char *const *names,
			  const float *const *data, const int *ndim, const int64_t (*shape)[4])
{
	cJSON *h = cJSON_CreateObject();
	size_t off = 0;
	for (int i = 0; i < n; i++) {
		cJSON *t = cJSON_CreateObject(), *sh = cJSON_CreateArray(), *o = cJSON_CreateArray();
		int64_t numel = 1;
		for (int k = 0; k < ndim[i]; k++) {
			cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)shape[i][k]));
			numel *= shape[i][k];
		}
		cJSON_AddStringToObject(t, "dtype", "F32");
		cJSON_AddItemToObject(t, "shape", sh);
		cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
		off += (size_t)numel * 4;
		cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
		cJSON_AddItemToObject(t, "data_offsets", o);
		cJSON_AddItemToObject(h, names[i], t);
	}
	char *js = cJSON_PrintUnformatted(h);
	cJSON_Delete(h);
	size_t hl = strlen(js), pad = (8 - hl % 8) % 8, total = 8 + hl + pad + off;
	unsigned char *buf = calloc(1, total);
	ck_assert(buf);
	uint64_t hl64 = hl + pad;
	for (int b = 0; b < 8; b++)
		buf[b] = (unsigned char)(hl64 >> (8 * b));
	memcpy(buf + 8, js, hl);
	memset(buf + 8 + hl, ' ', pad);
	size_t at = 8 + hl + pad;
	for (int i = 0; i < n; i++) {
		int64_t numel = 1;
		for (int k = 0; k < ndim[i]; k++)
			numel *= shape[i][k];
		memcpy(buf + at, data[i], (size_t)numel * 4);
		at += (size_t)numel * 4;
	}
	dh_write_file(d, rel, buf, total);
	free(buf);
	free(js);
}

void dh_write_config(const dh_daemon *d, const char *extra_json)
{
	char buf[640];
	cJSON *c = cJSON_CreateObject(), *l = cJSON_CreateArray();
	snprintf(buf, sizeof(buf), "unix://%s", d->unix_path);
	cJSON_AddItemToArray(l, cJSON_CreateString(buf));
	cJSON_AddItemToArray(l, cJSON_CreateString(d->nng_url));
	cJSON_AddItemToObject(c, "listen", l);
	cJSON_AddStringToObject(c, "models_dir", d->models_dir);
	snprintf(buf, sizeof(buf), "%s/cache", d->dir);
	cJSON_AddStringToObject(c, "cache_dir", buf);
	cJSON_AddStringToObject(c, "log_level", "warn");
	cJSON_AddStringToObject(c, "oip_http_listen", ""); /* port 8000 is not this test's; oip tests set one */
	cJSON_AddStringToObject(c, "oip_grpc_listen", ""); /* nor 8001 */
	if (extra_json) {
		cJSON *x = cJSON_Parse(extra_json);
		ck_assert_msg(cJSON_IsObject(x), "extra config is not a JSON object: %s", extra_json);
		for (cJSON *f = x->child; f; f = f->next) {
			cJSON_DeleteItemFromObjectCaseSensitive(c, f->string);
			cJSON_AddItemToObject(c, f->string, cJSON_Duplicate(f, true));
		}
		cJSON_Delete(x);
	}
	char *js = cJSON_Print(c);
	cJSON_Delete(c);
	FILE *f = fopen(d->cfg_path, "w");
	ck_assert(f);
	fputs(js, f);
	ck_assert(fclose(f) == 0);
	free(js);
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void dh_start(dh_daemon *d, const char *extra_json)
{
	char bin[PATH_MAX + 32];
	daemon_path(bin, sizeof(bin));
	dh_prepare(d);
	dh_write_config(d, extra_json);
	pid_t parent = getpid();
	pid_t pid = fork();
	ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
		if (getppid() != parent)
			_exit(127);
		int fd = open(d->err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0 || dup2(fd, 2) < 0 || dup2(fd, 1) < 0)
			_exit(127);
		execl(bin, bin, "--config", d->cfg_path, (char *)NULL);
		_exit(127);
	}
	d->pid = pid;
	d->running = true;
	live_of(d)->pid = pid;
	/* until health says ready (or, with our uid refused, until any answer) */
	uint64_t t0 = now_ms();
	for (;;) {
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			d->running = false;
			live_of(d)->pid = 0;
			dh_print_tail(d->err_path);
			ck_abort_msg("tensord exited while starting (status 0x%x)", st);
		}
		tsd_client *c = tsd_client_open(d->url, 2000, NULL, 0);
		if (c) {
			tsd_reply *r = NULL;
			tsd_status s = tsd_client_call_verb(c, "health", &r);
			bool ready = s == TSD_OK && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(tsd_reply_json(r), "ready"));
			d->refused = s == TSD_UNAUTHORISED;
			tsd_reply_free(r);
			tsd_client_close(c);
			if (ready || d->refused)
				return;
		}
		if (now_ms() - t0 > 60000) {
			dh_print_tail(d->err_path);
			ck_abort_msg("tensord not ready after 60 s");
		}
		usleep(20000);
	}
}

bool dh_file_has(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	static char buf[1 << 16];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	fclose(f);
	return strstr(buf, needle) != NULL;
}

int dh_run_tensord(const char *cfg, const char *err_path, int timeout_s)
{
	char bin[PATH_MAX + 32];
	daemon_path(bin, sizeof(bin));
	pid_t pid = fork();
	ck_assert(pid >= 0);
	if (pid == 0) {
		int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0 || dup2(fd, 2) < 0 || dup2(fd, 1) < 0)
			_exit(127);
		execl(bin, bin, "--config", cfg, (char *)NULL);
		_exit(127);
	}
	int st;
	uint64_t t0 = now_ms();
	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (now_ms() - t0 > (uint64_t)timeout_s * 1000) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		usleep(10000);
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void dh_expect_start_fails(const dh_daemon *d, const char *err_path, const char *needle, const char *what)
{
	int rc = dh_run_tensord(d->cfg_path, err_path, 60);
	if (rc == 0 || rc == -1 || !dh_file_has(err_path, needle))
		dh_print_tail(err_path);
	ck_assert_msg(rc != -1, "%s: tensord was still running after 60 s", what);
	ck_assert_msg(rc != 0, "%s: tensord exited 0", what);
	ck_assert_msg(dh_file_has(err_path, needle), "%s: its stderr does not say \"%s\"", what, needle);
}

/* Whether the stderr file has a sanitizer report. */
static bool sanitizer_report(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[1024];
	bool bad = false;
	while (f && !bad && fgets(line, sizeof(line), f))
		bad = strstr(line, "ERROR: AddressSanitizer") || strstr(line, "ERROR: LeakSanitizer") ||
		      strstr(line, "runtime error:") || strstr(line, "WARNING: ThreadSanitizer");
	if (f)
		fclose(f);
	return bad;
}

void dh_stop(dh_daemon *d)
{
	ck_assert(d->running);
	ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
	dh_wait_exit(d);
}

void dh_wait_exit(dh_daemon *d)
{
	ck_assert(d->running);
	int st = 0;
	uint64_t t0 = now_ms();
	pid_t w;
	while ((w = waitpid(d->pid, &st, WNOHANG)) == 0 && now_ms() - t0 < 30000)
		usleep(10000);
	if (w == 0) {
		kill(d->pid, SIGKILL);
		waitpid(d->pid, &st, 0);
		d->running = false;
		live_of(d)->pid = 0;
		dh_print_tail(d->err_path);
		ck_abort_msg("tensord did not exit within 30 s of SIGTERM");
	}
	d->running = false;
	live_of(d)->pid = 0;
	bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0, san = sanitizer_report(d->err_path);
	if (!ok || san)
		dh_print_tail(d->err_path);
	ck_assert_msg(!san, "tensord's stderr has a sanitizer report");
	ck_assert_msg(ok, "tensord exited with status 0x%x (want exit 0)", st);
	if (!d->keep_dir) {
		rm_rf(d->dir);
		forget(d);
	}
}

void dh_stop_keep(dh_daemon *d)
{
	d->keep_dir = true;
	dh_stop(d);
	d->keep_dir = false;
}

void dh_kill(dh_daemon *d)
{
	ck_assert(d->running);
	ck_assert_int_eq(kill(d->pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(d->pid, NULL, 0), d->pid);
	d->running = false;
	live_of(d)->pid = 0;
}

/* ---- clients ---- */

static tsd_client *client_on(const char *url)
{
	char err[256] = "";
	tsd_client *c = tsd_client_open(url, DH_TIMEOUT_MS, err, sizeof(err));
	ck_assert_msg(c, "open %s: %s", url, err);
	return c;
}

tsd_client *dh_client(const dh_daemon *d)
{
	return client_on(d->url);
}

tsd_client *dh_client_nng(const dh_daemon *d)
{
	return client_on(d->nng_url);
}

tsd_tensor dh_f32(const char *name, const float *data, const int64_t *shape, int ndim)
{
	tsd_tensor t = {.name = name, .dtype = TSD_F32, .ndim = ndim, .data = data};
	for (int i = 0; i < ndim; i++)
		t.shape[i] = shape[i];
	return t;
}

void dh_load(tsd_client *c, const char *spec_json, const tsd_tensor *ws, int n)
{
	cJSON *h = cJSON_Parse(spec_json);
	ck_assert_msg(cJSON_IsObject(h), "model spec is not a JSON object: %s", spec_json);
	cJSON_AddStringToObject(h, "verb", "model.load");
	tsd_reply *r = NULL;
	tsd_status s = tsd_client_call(c, h, ws, n, &r);
	cJSON_Delete(h);
	ck_assert_msg(s == TSD_OK, "model.load: %s: %s", tsd_status_name(s), tsd_client_message(c, r));
	tsd_reply_free(r);
}

tsd_status dh_infer(tsd_client *c, const char *model, const char *extra_json, const float *x, int64_t rows,
		    int64_t cols, float *out, int64_t nout, char *why, size_t whylen)
{
	cJSON *h = extra_json ? cJSON_Parse(extra_json) : cJSON_CreateObject();
	if (!h) {
		snprintf(why, whylen, "bad extra JSON");
		return TSD_INTERNAL;
	}
	cJSON_AddStringToObject(h, "verb", "infer");
	cJSON_AddStringToObject(h, "model", model);
	tsd_tensor t = DH_F32("x", x, rows, cols);
	tsd_reply *r = NULL;
	tsd_status s = tsd_client_call(c, h, &t, 1, &r);
	cJSON_Delete(h);
	if (why && whylen)
		snprintf(why, whylen, "%s", s == TSD_OK ? "" : tsd_client_message(c, r));
	if (s == TSD_OK) {
		const tsd_tensor *y = tsd_reply_ntensors(r) > 0 ? tsd_reply_tensor(r, 0) : NULL;
		int64_t numel = 1;
		for (int i = 0; y && i < y->ndim; i++)
			numel *= y->shape[i];
		if (!y || y->dtype != TSD_F32 || numel != nout) {
			if (why && whylen)
				snprintf(why, whylen, "the output is not %lld float32", (long long)nout);
			s = TSD_INTERNAL;
		} else {
			memcpy(out, y->data, (size_t)nout * sizeof(float));
		}
	}
	tsd_reply_free(r);
	return s;
}

cJSON *dh_call_json(tsd_client *c, const char *verb)
{
	tsd_reply *r = NULL;
	tsd_status s = tsd_client_call_verb(c, verb, &r);
	ck_assert_msg(s == TSD_OK, "%s: %s: %s", verb, tsd_status_name(s), tsd_client_message(c, r));
	cJSON *j = cJSON_Duplicate(tsd_reply_json(r), true);
	tsd_reply_free(r);
	return j;
}

double dh_num(const cJSON *j, const char *path)
{
	char buf[256], *save = NULL;
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *k = strtok_r(buf, ".", &save); k && j; k = strtok_r(NULL, ".", &save))
		j = cJSON_GetObjectItemCaseSensitive(j, k);
	return cJSON_IsNumber(j) ? j->valuedouble : NAN;
}

double dh_stat(tsd_client *c, const char *path)
{
	cJSON *j = dh_call_json(c, "stats");
	double v = dh_num(j, path);
	cJSON_Delete(j);
	ck_assert_msg(!isnan(v), "stats has no number at %s", path);
	return v;
}

/* ---- raw contexts ---- */

nng_socket dh_raw_open(const dh_daemon *d, int timeout_ms)
{
	return dh_raw_open_dialer(d, timeout_ms, NULL);
}

int dh_raw_try_open(const dh_daemon *d, int timeout_ms, nng_socket *s)
{
	ck_assert_int_eq(nng_req0_open(s), 0);
	ck_assert_int_eq(nng_socket_set_ms(*s, NNG_OPT_RECVTIMEO, timeout_ms), 0);
	ck_assert_int_eq(nng_socket_set_ms(*s, NNG_OPT_SENDTIMEO, timeout_ms), 0);
	ck_assert_int_eq(nng_socket_set_ms(*s, NNG_OPT_REQ_RESENDTIME, 0), 0);
	ck_assert_int_eq(nng_socket_set_size(*s, NNG_OPT_RECVMAXSZ, 0), 0);
	return nng_dial(*s, d->nng_url, NULL, 0);
}

nng_socket dh_raw_open_dialer(const dh_daemon *d, int timeout_ms, nng_dialer *dl)
{
	nng_socket s;
	ck_assert_int_eq(nng_req0_open(&s), 0);
	ck_assert_int_eq(nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, timeout_ms), 0);
	ck_assert_int_eq(nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, timeout_ms), 0);
	ck_assert_int_eq(nng_socket_set_ms(s, NNG_OPT_REQ_RESENDTIME, 0), 0); /* never resend */
	ck_assert_int_eq(nng_socket_set_size(s, NNG_OPT_RECVMAXSZ, 0), 0);
	int rv = nng_dial(s, d->nng_url, dl, 0);
	ck_assert_msg(rv == 0, "dial %s: %s", d->nng_url, nng_strerror(rv));
	return s;
}

typedef struct closer {
	nng_socket s;
	tsd_client *c; /* a client to close instead (tsd_client_close), if not NULL */
	sem_t done;
} closer;

static void *close_main(void *arg)
{
	closer *c = arg;
	if (c->c)
		tsd_client_close(c->c);
	else
		nng_close(c->s);
	sem_post(&c->done);
	return NULL;
}

/* Run cl's close on a helper thread and wait at most 5 s (see dh_raw_close). */
static void timed_close(closer *cl, const char *what)
{
	pthread_t th;
	ck_assert_int_eq(sem_init(&cl->done, 0, 0), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, close_main, cl), 0);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 5;
	int rv;
	while ((rv = sem_timedwait(&cl->done, &until)) != 0 && errno == EINTR)
		;
	if (rv != 0) {
		pthread_detach(th);
		fprintf(stderr, "daemon harness: nng_close of %s did not return in 5 s (nng bug); left open\n", what);
		return;
	}
	pthread_join(th, NULL);
	sem_destroy(&cl->done);
	free(cl);
}

void dh_raw_close(nng_socket s)
{
	closer *c = calloc(1, sizeof(*c)); /* left to a stuck thread if it never returns */
	ck_assert(c);
	c->s = s;
	timed_close(c, "a REQ socket");
}

void dh_client_close(tsd_client *cl)
{
	closer *c = calloc(1, sizeof(*c)); /* left to a stuck thread if it never returns */
	ck_assert(c);
	c->c = cl;
	timed_close(c, "a client's socket");
}

/* ---- a client in a process of its own ---- */

pid_t dh_spawn_sender(const dh_daemon *d, nng_msg *req, int n)
{
	char exe[PATH_MAX], path[400], num[16];
	self_exe(exe);
	snprintf(path, sizeof(path), "%s/sender.msg", d->dir);
	FILE *f = fopen(path, "wb");
	ck_assert_msg(f, "%s: %s", path, strerror(errno));
	ck_assert(fwrite(nng_msg_body(req), 1, nng_msg_len(req), f) == nng_msg_len(req));
	ck_assert(fclose(f) == 0);
	snprintf(num, sizeof(num), "%d", n);
	pid_t parent = getpid(), pid = fork();
	ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		setenv("DH_SENDER_URL", d->nng_url, 1);
		setenv("DH_SENDER_MSG", path, 1);
		setenv("DH_SENDER_N", num, 1);
		execl(exe, exe, (char *)NULL);
		_exit(127);
	}
	return pid;
}

void dh_kill_sender(pid_t pid)
{
	int st = 0;
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the sender exited by itself (status 0x%x)", st);
}

static int sender_fail(const char *what, int rv)
{
	fprintf(stderr, "sender: %s: %s\n", what, nng_strerror(rv));
	return 2;
}

int dh_sender_main(void)
{
	const char *url = getenv("DH_SENDER_URL"), *path = getenv("DH_SENDER_MSG"), *num = getenv("DH_SENDER_N");
	int n = num ? atoi(num) : 0, rv;
	FILE *f = path ? fopen(path, "rb") : NULL;
	if (!url || !f || n <= 0 || n > 1024) {
		fprintf(stderr, "sender: DH_SENDER_URL, DH_SENDER_MSG (a readable file) and DH_SENDER_N (1..1024) are needed\n");
		return 2;
	}
	static char body[1 << 20];
	size_t len = fread(body, 1, sizeof(body), f);
	fclose(f);
	if (len == sizeof(body)) {
		fprintf(stderr, "sender: %s: over %zu bytes\n", path, sizeof(body) - 1);
		return 2;
	}
	nng_socket s;
	if ((rv = nng_req0_open(&s)) || (rv = nng_socket_set_ms(s, NNG_OPT_REQ_RESENDTIME, 0)) ||
	    (rv = nng_dial(s, url, NULL, 0)))
		return sender_fail(url, rv);
	for (int i = 0; i < n; i++) {
		nng_ctx ctx;
		nng_aio *aio;
		nng_msg *m;
		if ((rv = nng_ctx_open(&ctx, s)) || (rv = nng_aio_alloc(&aio, NULL, NULL)) ||
		    (rv = nng_msg_alloc(&m, 0)) || (rv = nng_msg_append(m, body, len)))
			return sender_fail("a request", rv);
		nng_aio_set_msg(aio, m);
		nng_ctx_send(ctx, aio);
		nng_aio_wait(aio);
		if ((rv = nng_aio_result(aio)))
			return sender_fail("send", rv);
		nng_ctx_recv(ctx, aio); /* the reply would land here; the process is killed first */
	}
	for (;;)
		pause();
}

static void *to_msg(void *arg, size_t size)
{
	nng_msg **m = arg;
	return nng_msg_alloc(m, size) ? NULL : nng_msg_body(*m);
}

nng_msg *dh_encode(const cJSON *header, const tsd_tensor *ts, int n)
{
	proto_out outs[PROTO_MAX_TENSORS];
	for (int i = 0; i < n; i++)
		outs[i] = (proto_out){ts[i].name, ts[i].dtype, ts[i].ndim, ts[i].shape, ts[i].data};
	nng_msg *m = NULL;
	void *buf;
	size_t len;
	proto_err e = {0};
	tsd_status s = proto_encode(header, outs, n, 0, to_msg, &m, &buf, &len, &e);
	ck_assert_msg(s == TSD_OK, "encode: %s", e.msg);
	return m;
}

static void async_cb(void *arg)
{
	dh_async *a = arg;
	int rv = nng_aio_result(a->aio);
	if (a->sending) {
		a->sending = false;
		if (rv == 0 && !atomic_load(&a->stopping)) {
			nng_ctx_recv(a->ctx, a->aio);
			return;
		}
		if (rv)
			nng_msg_free(nng_aio_get_msg(a->aio)); /* not sent: still ours */
		else
			rv = NNG_ECANCELED;
	} else if (rv == 0) {
		a->reply = nng_aio_get_msg(a->aio);
	}
	a->rv = rv;
	atomic_store(&a->order, atomic_fetch_add(&dh_order, 1) + 1);
}

void dh_async_send(nng_socket sock, dh_async *a, nng_msg *msg)
{
	memset(a, 0, sizeof(*a));
	ck_assert_int_eq(nng_ctx_open(&a->ctx, sock), 0);
	ck_assert_int_eq(nng_aio_alloc(&a->aio, async_cb, a), 0);
	a->sending = true;
	nng_aio_set_timeout(a->aio, DH_TIMEOUT_MS);
	nng_aio_set_msg(a->aio, msg);
	nng_ctx_send(a->ctx, a->aio);
}

static tsd_status decode_reply(nng_msg *m, proto_msg *pm)
{
	proto_err e = {0};
	tsd_status s = proto_decode(nng_msg_body(m), nng_msg_len(m), TSD_CLIENT_MAX_REPLY, PROTO_REPLY, pm, &e);
	ck_assert_msg(s == TSD_OK, "the daemon's reply does not decode: %s", e.msg);
	return pm->status;
}

tsd_status dh_async_wait(dh_async *a, proto_msg *pm)
{
	/* the callback marks the end of both stages (send, then receive) */
	while (!atomic_load(&a->order))
		usleep(100);
	memset(pm, 0, sizeof(*pm));
	if (a->rv || !a->reply)
		return TSD_STATUS_COUNT;
	return decode_reply(a->reply, pm);
}

void dh_async_free(dh_async *a)
{
	atomic_store(&a->stopping, true);
	if (a->aio) {
		nng_aio_stop(a->aio);
		nng_aio_free(a->aio);
	}
	nng_ctx_close(a->ctx);
	if (a->reply)
		nng_msg_free(a->reply);
	memset(a, 0, sizeof(*a));
}

tsd_status dh_raw_call(nng_socket sock, const void *buf, size_t len, proto_msg *pm, nng_msg **keep)
{
	nng_msg *m;
	*keep = NULL;
	memset(pm, 0, sizeof(*pm));
	ck_assert_int_eq(nng_msg_alloc(&m, len), 0);
	memcpy(nng_msg_body(m), buf, len);
	int rv = nng_sendmsg(sock, m, 0);
	if (rv) {
		nng_msg_free(m);
		return TSD_STATUS_COUNT;
	}
	if (nng_recvmsg(sock, keep, 0))
		return TSD_STATUS_COUNT;
	return decode_reply(*keep, pm);
}

int dh_free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

bool dh_recv_all(int fd, void *buf, size_t len, int timeout_ms)
{
	unsigned char *b = buf;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	double until = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6 + timeout_ms;
	while (len) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		int left = (int)(until - ((double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6));
		struct pollfd p = {fd, POLLIN, 0};
		if (left <= 0 || poll(&p, 1, left) != 1)
			return false;
		ssize_t r = recv(fd, b, len, 0);
		if (r <= 0)
			return false;
		b += r;
		len -= (size_t)r;
	}
	return true;
}
