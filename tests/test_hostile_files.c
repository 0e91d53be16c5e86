/* test_hostile_files.c: the real tensord against hostile or careless use of files (suite
 * `hostilefiles`, harness in daemon_harness.h): paths escaping models_dir through symbolic links,
 * control characters, errors naming server paths, a second daemon on a live socket, stale socket
 * files, leftovers of a killed save or compile, a runtime directory others can write, and
 * version numbers used up by failed loads (issue 25, findings 7-10). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "suites.h"

/* y = x * w: x [-1,4], w [4]; the fields without braces */
#define TINY_FIELDS                                                                                      \
	"\"name\":\"tiny\",\"graph\":{\"nodes\":[{\"id\":\"x\",\"op\":\"input\",\"dtype\":\"float32\",\"shape\":[-1,4]}," \
	"{\"id\":\"w\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[4]},"                               \
	"{\"id\":\"y\",\"op\":\"mul\",\"in\":[\"x\",\"w\"]}],\"outputs\":[\"y\"]}"
#define TINY_SPEC "{" TINY_FIELDS "}"
/* model.load of tiny with its weights from a file */
#define LOAD_FILE(weights) "{\"verb\":\"model.load\"," TINY_FIELDS ",\"weights\":\"" weights "\"}"

static const float tiny_w[4] = {1, -2, 0.5f, 4};

/* ---- helpers ---- */

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A request (header JSON text) with tensors; its status, its message copied into msg. */
static tsd_status call(tsd_client *c, const char *json, const tsd_tensor *ts, int n, char *msg, size_t cap)
{
	cJSON *h = cJSON_Parse(json);
	ck_assert_msg(h, "bad JSON in the test: %s", json);
	tsd_reply *r = NULL;
	tsd_status s = tsd_client_call(c, h, ts, n, &r);
	cJSON_Delete(h);
	snprintf(msg, cap, "%s", s == TSD_OK ? "" : tsd_client_message(c, r));
	tsd_reply_free(r);
	return s;
}

/* The daemon with tiny loaded from its message's weights; a client. */
static tsd_client *start_tiny(dh_daemon *d, const char *cfg)
{
	dh_start(d, cfg);
	tsd_client *c = dh_client(d);
	tsd_tensor w = DH_F32("w", tiny_w, 4);
	dh_load(c, TINY_SPEC, &w, 1);
	return c;
}

/* A refused request: want's status, a message naming names, never d's directory. */
static void expect_refused(const dh_daemon *d, tsd_status got, tsd_status want, const char *msg, const char *names,
			   const char *what)
{
	ck_assert_msg(got == want, "%s: %s (%s), want %s", what, tsd_status_name(got), msg, tsd_status_name(want));
	ck_assert_msg(strstr(msg, names), "%s: the message \"%s\" does not name \"%s\"", what, msg, names);
	ck_assert_msg(!strstr(msg, d->dir), "%s: the message \"%s\" names the server's path %s", what, msg, d->dir);
}

static bool exists(const char *path)
{
	struct stat st;
	return !lstat(path, &st);
}

/* Entries of dir (not . and ..) whose name contains part. */
static int count_in(const char *dir, const char *part)
{
	DIR *d = opendir(dir);
	int n = 0;
	for (struct dirent *e; d && (e = readdir(d));)
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strstr(e->d_name, part);
	if (d)
		closedir(d);
	return n;
}

/* Files under dir, any depth, whose name contains part. */
static int count_deep(const char *dir, const char *part)
{
	DIR *d = opendir(dir);
	int n = 0;
	for (struct dirent *e; d && (e = readdir(d));) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char sub[1024];
		snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name);
		struct stat st;
		if (!lstat(sub, &st) && S_ISDIR(st.st_mode))
			n += count_deep(sub, part);
		else
			n += strstr(e->d_name, part) != NULL;
	}
	if (d)
		closedir(d);
	return n;
}

/* A pid that was alive a moment ago and is not now (a child that exited, reaped). */
static pid_t dead_pid(void)
{
	pid_t p = fork();
	ck_assert(p >= 0);
	if (p == 0)
		_exit(0);
	ck_assert_int_eq(waitpid(p, NULL, 0), p);
	return p;
}

static void touch(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	ck_assert(write(fd, "x", 1) == 1);
	close(fd);
}

static void health_ok(const dh_daemon *d, const char *what)
{
	tsd_client *c = dh_client(d);
	cJSON *h = dh_call_json(c, "health");
	ck_assert_msg(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(h, "ready")), "%s: health not ready", what);
	cJSON_Delete(h);
	dh_client_close(c);
}

/* ---- paths ---- */

/* models/linkout -> ../outside: a save through it is refused and writes nothing outside; a save
 * through a link that stays inside works. */
START_TEST(t_save_symlink_dir)
{
	dh_daemon d = {0};
	char outside[400], link[400], sub[400], alias[400], saved[500];
	dh_prepare(&d);
	snprintf(outside, sizeof(outside), "%s/outside", d.dir);
	snprintf(link, sizeof(link), "%s/linkout", d.models_dir);
	snprintf(sub, sizeof(sub), "%s/sub", d.models_dir);
	snprintf(alias, sizeof(alias), "%s/alias", d.models_dir);
	ck_assert_int_eq(mkdir(outside, 0700), 0);
	ck_assert_int_eq(symlink("../outside", link), 0);
	ck_assert_int_eq(mkdir(sub, 0700), 0);
	ck_assert_int_eq(symlink("sub", alias), 0);
	tsd_client *c = start_tiny(&d, NULL);
	char msg[600];
	const char *bad[] = {"linkout/s.safetensors", "linkout/deeper/s.safetensors", "alias/../linkout/s.safetensors"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		char req[300];
		snprintf(req, sizeof(req), "{\"verb\":\"model.save\",\"name\":\"tiny\",\"path\":\"%s\"}", bad[i]);
		tsd_status s = call(c, req, NULL, 0, msg, sizeof(msg));
		ck_assert_msg(s != TSD_OK, "save to %s: ok", bad[i]);
		expect_refused(&d, s, TSD_BAD_REQUEST, msg, "linkout", bad[i]);
	}
	ck_assert_int_eq(count_in(outside, ""), 0);
	/* a link inside models_dir is fine */
	tsd_status s = call(c, "{\"verb\":\"model.save\",\"name\":\"tiny\",\"path\":\"alias/ok.safetensors\"}", NULL, 0, msg,
			    sizeof(msg));
	ck_assert_msg(s == TSD_OK, "save through an inside link: %s: %s", tsd_status_name(s), msg);
	snprintf(saved, sizeof(saved), "%s/ok.safetensors", sub);
	ck_assert_msg(exists(saved), "%s was not written", saved);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

/* Loads through a symbolic link out of models_dir (a directory, or the file) are refused, with
 * messages naming the relative path only. */
START_TEST(t_load_symlink)
{
	dh_daemon d = {0};
	char outside[400], link[400], flink[400];
	dh_prepare(&d);
	snprintf(outside, sizeof(outside), "%s/outside", d.dir);
	ck_assert_int_eq(mkdir(outside, 0700), 0);
	snprintf(link, sizeof(link), "%s/linkout", d.models_dir);
	ck_assert_int_eq(symlink("../outside", link), 0);
	snprintf(flink, sizeof(flink), "%s/w.safetensors", d.models_dir);
	ck_assert_int_eq(symlink("../outside/w.safetensors", flink), 0);
	const char *names[] = {"w"};
	const float *data[] = {tiny_w};
	int ndim[] = {1};
	int64_t shape[][4] = {{4}};
	dh_write_safetensors(&d, "linkout/w.safetensors", 1, names, data, ndim, shape); /* lands in outside/ */
	dh_start(&d, NULL);
	tsd_client *c = dh_client(&d);
	char msg[600];
	const char *specs[] = {LOAD_FILE("linkout/w.safetensors"),
			       LOAD_FILE("w.safetensors")};
	const char *what[] = {"linkout/w.safetensors", "w.safetensors"};
	for (int i = 0; i < 2; i++) {
		tsd_status s = call(c, specs[i], NULL, 0, msg, sizeof(msg));
		expect_refused(&d, s, TSD_BAD_REQUEST, msg, "leads out of models_dir", what[i]);
		ck_assert_msg(strstr(msg, what[i]), "%s: the message \"%s\" does not name it", what[i], msg);
	}
	/* the same file copied inside loads */
	dh_write_safetensors(&d, "in.safetensors", 1, names, data, ndim, shape);
	tsd_status s = call(c, LOAD_FILE("in.safetensors"), NULL, 0, msg, sizeof(msg));
	ck_assert_msg(s == TSD_OK, "load from inside: %s: %s", tsd_status_name(s), msg);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

/* Control characters in a path are refused (save, load weights, ONNX file). */
START_TEST(t_control_chars)
{
	dh_daemon d = {0};
	tsd_client *c = start_tiny(&d, NULL);
	char msg[600];
	const char *reqs[] = {
		"{\"verb\":\"model.save\",\"name\":\"tiny\",\"path\":\"a\\u0001b.safetensors\"}",
		"{\"verb\":\"model.save\",\"name\":\"tiny\",\"path\":\"new\\nline.safetensors\"}",
		"{\"verb\":\"model.save\",\"name\":\"tiny\",\"path\":\"del\\u007f.safetensors\"}",
		LOAD_FILE("w\\u001b[2J.safetensors"),
		"{\"verb\":\"model.load\",\"name\":\"o\",\"format\":\"onnx\",\"file\":\"m\\t.onnx\"}",
	};
	for (size_t i = 0; i < sizeof(reqs) / sizeof(*reqs); i++) {
		tsd_status s = call(c, reqs[i], NULL, 0, msg, sizeof(msg));
		expect_refused(&d, s, TSD_BAD_REQUEST, msg, "control character", reqs[i]);
		for (const char *p = msg; *p; p++)
			ck_assert_msg((unsigned char)*p >= 0x20 && *p != 0x7f, "%s: the message echoes a control character",
				      reqs[i]);
	}
	ck_assert_int_eq(count_deep(d.models_dir, ".safetensors"), 0);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

/* A save into a missing directory, a load of a missing or broken file: bad_request naming the
 * relative path only. */
START_TEST(t_relative_messages)
{
	dh_daemon d = {0};
	dh_prepare(&d);
	dh_write_file(&d, "broken.safetensors", "not a safetensors file", 22);
	tsd_client *c = start_tiny(&d, NULL);
	char msg[600];
	tsd_status s = call(c, "{\"verb\":\"model.save\",\"name\":\"tiny\",\"path\":\"nodir/x.safetensors\"}", NULL, 0, msg,
			    sizeof(msg));
	expect_refused(&d, s, TSD_BAD_REQUEST, msg, "directory \"nodir\" does not exist", "save into a missing directory");
	s = call(c, "{\"verb\":\"model.save\",\"name\":\"tiny\",\"path\":\"broken.safetensors/x.safetensors\"}", NULL, 0,
		 msg, sizeof(msg));
	expect_refused(&d, s, TSD_BAD_REQUEST, msg, "broken.safetensors", "save under a file");
	s = call(c, LOAD_FILE("missing.safetensors"), NULL, 0, msg, sizeof(msg));
	expect_refused(&d, s, TSD_BAD_REQUEST, msg, "missing.safetensors", "load of a missing file");
	/* the engine's own message, about the file it could not read */
	s = call(c, LOAD_FILE("broken.safetensors"), NULL, 0, msg, sizeof(msg));
	ck_assert_msg(s != TSD_OK, "load of a broken file: ok");
	expect_refused(&d, s, s, msg, "broken.safetensors", "load of a broken file");
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

/* A load that fails on the executor uses no version number: ok, failed, ok give 1 then 2. */
static int load_version(tsd_client *c, const tsd_tensor *w, tsd_status *st, char *msg, size_t cap)
{
	cJSON *h = cJSON_Parse(TINY_SPEC);
	cJSON_AddStringToObject(h, "verb", "model.load");
	tsd_reply *r = NULL;
	*st = tsd_client_call(c, h, w, 1, &r);
	cJSON_Delete(h);
	snprintf(msg, cap, "%s", *st == TSD_OK ? "" : tsd_client_message(c, r));
	double v = *st == TSD_OK ? dh_num(tsd_reply_json(r), "model.version") : -1;
	tsd_reply_free(r);
	return (int)v;
}

START_TEST(t_versions_dense)
{
	dh_daemon d = {0};
	dh_start(&d, NULL);
	tsd_client *c = dh_client(&d);
	float w5[5] = {1, 2, 3, 4, 5};
	tsd_tensor good = DH_F32("w", tiny_w, 4), bad = DH_F32("w", w5, 5);
	tsd_status st;
	char msg[600];
	ck_assert_int_eq(load_version(c, &good, &st, msg, sizeof(msg)), 1);
	for (int i = 0; i < 3; i++) {
		load_version(c, &bad, &st, msg, sizeof(msg)); /* the weights' shape is checked on the executor */
		ck_assert_msg(st == TSD_SHAPE_MISMATCH, "a load with w [5]: %s: %s", tsd_status_name(st), msg);
	}
	int v = load_version(c, &good, &st, msg, sizeof(msg));
	ck_assert_msg(st == TSD_OK, "load: %s: %s", tsd_status_name(st), msg);
	ck_assert_msg(v == 2, "the load after three failed ones is version %d, want 2", v);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

/* ---- the socket ---- */

/* A second daemon on the same socket path fails to start, naming it; the first still answers,
 * and still does after the second exited. */
START_TEST(t_second_daemon)
{
	dh_daemon d = {0};
	dh_start(&d, NULL);
	char err2[400], pidtxt[64];
	snprintf(err2, sizeof(err2), "%s/stderr2", d.dir);
	dh_expect_start_fails(&d, err2, "another tensord", "a second daemon");
	ck_assert_msg(dh_file_has(err2, d.nng_url + strlen("ipc://")) || dh_file_has(err2, d.unix_path),
		      "the second daemon's message does not name the socket");
	snprintf(pidtxt, sizeof(pidtxt), "pid %d", (int)d.pid);
	ck_assert_msg(dh_file_has(err2, pidtxt), "the second daemon's message does not name the first's %s", pidtxt);
	ck_assert_msg(exists(d.nng_url + strlen("ipc://")) && exists(d.unix_path), "a socket file is gone");
	health_ok(&d, "the first daemon after the second failed");
	dh_stop(&d);
}
END_TEST

/* A socket file nobody listens on (a daemon that died) is replaced; a live listener that is
 * not tensord (no lock) still makes the start fail. */
START_TEST(t_stale_socket)
{
	dh_daemon d = {0};
	dh_prepare(&d);
	const char *path = d.nng_url + strlen("ipc://");
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	ck_assert(strlen(path) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(fd, 4), 0);
	/* alive: refused */
	dh_write_config(&d, NULL);
	char err2[400];
	snprintf(err2, sizeof(err2), "%s/stderr2", d.dir);
	dh_expect_start_fails(&d, err2, "listening on this socket already", "a live listener on the path");
	ck_assert_msg(exists(path), "the live listener's socket file was removed");
	/* dead: the file stays, and is replaced */
	close(fd);
	ck_assert_msg(exists(path), "closing did not leave the socket file");
	dh_start(&d, NULL);
	ck_assert_msg(dh_file_has(d.err_path, "removed a stale socket file"), "the removal was not logged");
	health_ok(&d, "after replacing a stale socket");
	dh_stop_keep(&d);
	ck_assert_msg(!exists(path), "the socket file is left after a clean exit");
	dh_start(&d, NULL);
	dh_stop(&d);
}
END_TEST

/* The runtime directory (the socket's) writable by others, or another user's: refused. */
START_TEST(t_runtime_dir)
{
	dh_daemon d = {0};
	dh_prepare(&d);
	dh_write_config(&d, NULL);
	char err2[400];
	snprintf(err2, sizeof(err2), "%s/stderr2", d.models_dir); /* not in the directory changed */
	ck_assert_int_eq(chmod(d.dir, 0777), 0);
	dh_expect_start_fails(&d, err2, "writable by others", "mode 0777");
	if (geteuid() == 0) { /* only root can give it away */
		ck_assert_int_eq(chmod(d.dir, 0770), 0);
		ck_assert_int_eq(chown(d.dir, 0, 65534), 0);
		dh_expect_start_fails(&d, err2, "writable by its group", "mode 0770, another group");
		ck_assert_int_eq(chmod(d.dir, 0700), 0);
		ck_assert_int_eq(chown(d.dir, 65534, 65534), 0);
		dh_expect_start_fails(&d, err2, "belongs to uid 65534", "owned by another uid");
		ck_assert_int_eq(chown(d.dir, geteuid(), getegid()), 0);
	}
	ck_assert_msg(!exists(d.nng_url + strlen("ipc://")), "a refused start left a socket file");
	/* group-writable by the daemon's own group with no other member (umask 002): accepted */
	struct group *g = getgrgid(getegid());
	bool alone = g && (!g->gr_mem[0] || (!g->gr_mem[1] && getpwuid(geteuid()) &&
					     !strcmp(g->gr_mem[0], getpwuid(geteuid())->pw_name)));
	ck_assert_int_eq(chmod(d.dir, alone ? 0770 : 0700), 0);
	dh_start(&d, NULL);
	dh_stop(&d);
}
END_TEST

/* ---- leftovers ---- */

/* 4096 x 4096 float32 (64 MiB): a save long enough to be killed in the middle. */
#define BIG_N 4096
#define BIG_LOAD                                                                                         \
	"{\"verb\":\"model.load\",\"name\":\"big\",\"weights\":\"big.safetensors\",\"graph\":{\"nodes\":[{\"id\":\"x\"," \
	"\"op\":\"input\",\"dtype\":\"float32\",\"shape\":[1,4096]},{\"id\":\"W\",\"op\":\"param\","         \
	"\"dtype\":\"float32\",\"shape\":[4096,4096]},{\"id\":\"y\",\"op\":\"mul\",\"in\":[\"x\",\"W\"]}],"      \
	"\"outputs\":[\"y\"]}}"

/* Fake temp files of dead and live pids are sorted at start; then kill -9 during a real 64 MiB
 * save, and a restart leaves no temp file. */
START_TEST(t_killed_save)
{
	dh_daemon d = {0};
	char sub[400], p[600];
	dh_prepare(&d);
	snprintf(sub, sizeof(sub), "%s/a/b", d.models_dir);
	snprintf(p, sizeof(p), "%s/a", d.models_dir);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	ck_assert_int_eq(mkdir(sub, 0700), 0);
	pid_t dead = dead_pid();
	char f_dead[700], f_dead2[700], f_live[700], f_other[700];
	snprintf(f_dead, sizeof(f_dead), "%s/m.safetensors.tmp.%d.%d.0", sub, (int)dead, (int)dead);
	snprintf(f_dead2, sizeof(f_dead2), "%s/top.safetensors.tmp.%d.77.12", d.models_dir, (int)dead);
	snprintf(f_live, sizeof(f_live), "%s/m.safetensors.tmp.%d.%d.0", sub, (int)getpid(), (int)getpid());
	snprintf(f_other, sizeof(f_other), "%s/notes.tmp.%d.1.0", d.models_dir, (int)dead);
	touch(f_dead);
	touch(f_dead2);
	touch(f_live);
	touch(f_other);
	float *W = malloc(sizeof(float) * BIG_N * BIG_N);
	ck_assert(W);
	for (long i = 0; i < (long)BIG_N * BIG_N; i++)
		W[i] = (float)(i % 1000) * 0.001f;
	const char *names[] = {"W"};
	const float *data[] = {W};
	int ndim[] = {2};
	int64_t shape[][4] = {{BIG_N, BIG_N}};
	dh_write_safetensors(&d, "big.safetensors", 1, names, data, ndim, shape);
	free(W);
	dh_start(&d, NULL);
	ck_assert_msg(!exists(f_dead) && !exists(f_dead2), "a dead pid's save temp is still there");
	ck_assert_msg(exists(f_live), "a live pid's save temp was removed");
	ck_assert_msg(exists(f_other), "a file not named as a save's temp was removed");
	ck_assert_msg(dh_file_has(d.err_path, "m.safetensors.tmp."), "the removal was not logged");
	unlink(f_live);
	tsd_client *c = dh_client(&d);
	char msg[600];
	ck_assert_msg(call(c, BIG_LOAD, NULL, 0, msg, sizeof(msg)) == TSD_OK, "load big: %s",
		      msg);
	dh_client_close(c);
	/* a save sent from a process of its own; the daemon killed when the save's temp file shows */
	char final[700];
	snprintf(final, sizeof(final), "%s/big2.safetensors", sub);
	bool caught = false;
	for (int round = 0; round < 3 && !caught; round++) {
		unlink(final);
		cJSON *h = cJSON_Parse("{\"id\":1,\"verb\":\"model.save\",\"name\":\"big\",\"path\":\"a/b/big2.safetensors\"}");
		nng_msg *req = dh_encode(h, NULL, 0);
		cJSON_Delete(h);
		pid_t sender = dh_spawn_sender(&d, req, 1);
		nng_msg_free(req);
		uint64_t t0 = now_ms();
		while (now_ms() - t0 < 20000 && !count_in(sub, "big2.safetensors.tmp.") && !exists(final))
			usleep(200);
		if ((caught = count_in(sub, "big2.safetensors.tmp.") > 0)) {
			dh_kill(&d);
			ck_assert_msg(count_in(sub, "big2.safetensors.tmp.") > 0, "the temp file went with the kill");
		}
		dh_kill_sender(sender);
	}
	fprintf(stderr, "hostilefiles: kill -9 during a 64 MiB save: %s\n",
		caught ? "caught with its temp file" : "never caught in the middle (3 tries)");
	if (!caught)
		dh_kill(&d);
	dh_start(&d, NULL);
	ck_assert_msg(count_deep(d.models_dir, ".tmp.") == 1, "%d temp files after the restart (want only notes.tmp.*)",
		      count_deep(d.models_dir, ".tmp."));
	if (caught)
		ck_assert_msg(dh_file_has(d.err_path, "big2.safetensors.tmp."), "the removal of the killed save's temp was not logged");
	dh_stop(&d);
}
END_TEST

/* A compiler scratch directory of a dead pid in $TMPDIR is removed at start, a live pid's kept;
 * and the daemon's own compiles leave none. */
START_TEST(t_stale_scratch)
{
	dh_daemon d = {0};
	dh_prepare(&d);
	char tmp[400], dead_dir[500], live_dir[500], old_dir[500], f[600];
	snprintf(tmp, sizeof(tmp), "%s/tmp", d.dir);
	ck_assert_int_eq(mkdir(tmp, 0700), 0);
	pid_t dead = dead_pid();
	snprintf(dead_dir, sizeof(dead_dir), "%s/tensord-cc-%d-AbC123", tmp, (int)dead);
	snprintf(live_dir, sizeof(live_dir), "%s/tensord-cc-%d-XyZ789", tmp, (int)getpid());
	snprintf(old_dir, sizeof(old_dir), "%s/tensord-cc-Q1w2e3", tmp); /* no pid: not ours to judge */
	ck_assert_int_eq(mkdir(dead_dir, 0700), 0);
	ck_assert_int_eq(mkdir(live_dir, 0700), 0);
	ck_assert_int_eq(mkdir(old_dir, 0700), 0);
	const char *files[] = {"k0.c", "k0.so", "k0.log", "k1.c"};
	for (int i = 0; i < 4; i++) {
		snprintf(f, sizeof(f), "%s/%s", dead_dir, files[i]);
		touch(f);
	}
	setenv("TMPDIR", tmp, 1);
	tsd_client *c = start_tiny(&d, NULL); /* the load compiles */
	unsetenv("TMPDIR");
	ck_assert_msg(!exists(dead_dir), "a dead pid's scratch directory is still there");
	ck_assert_msg(exists(live_dir) && exists(old_dir), "a scratch directory not a dead pid's was removed");
	ck_assert_msg(dh_file_has(d.err_path, "tensord-cc-"), "the removal was not logged");
	float x[4] = {1, 1, 1, 1}, y[4];
	char why[200];
	tsd_status s = dh_infer(c, "tiny", NULL, x, 1, 4, y, 4, why, sizeof(why));
	ck_assert_msg(s == TSD_OK, "infer: %s: %s", tsd_status_name(s), why);
	ck_assert_int_eq(count_in(tmp, "tensord-cc-"), 2); /* its own compiles cleaned up after themselves */
	dh_client_close(c);
	/* kill -9 while the compiler runs: a realize with a new constant compiles; the daemon is
	 * killed when its scratch directory shows */
	char mine[64];
	snprintf(mine, sizeof(mine), "tensord-cc-%d-", (int)d.pid);
	bool caught = false;
	float a[2] = {1, 2};
	tsd_tensor ta = DH_F32("a", a, 2);
	for (int round = 0; round < 5 && !caught; round++) {
		char req[600];
		snprintf(req, sizeof(req),
			 "{\"id\":1,\"verb\":\"realize\",\"graph\":{\"nodes\":[{\"id\":\"a\",\"op\":\"input\","
			 "\"dtype\":\"float32\",\"shape\":[2]},{\"id\":\"k\",\"op\":\"const\",\"value\":%d.25},"
			 "{\"id\":\"e\",\"op\":\"exp\",\"in\":[\"a\"]},{\"id\":\"y\",\"op\":\"mul\",\"in\":[\"e\",\"k\"]}],"
			 "\"outputs\":[\"y\"]}}",
			 round + 3);
		cJSON *h = cJSON_Parse(req);
		nng_msg *m = dh_encode(h, &ta, 1);
		cJSON_Delete(h);
		pid_t sender = dh_spawn_sender(&d, m, 1);
		nng_msg_free(m);
		uint64_t t0 = now_ms();
		while (now_ms() - t0 < 5000 && !count_in(tmp, mine))
			usleep(100);
		if ((caught = count_in(tmp, mine) > 0))
			dh_kill(&d);
		dh_kill_sender(sender);
	}
	fprintf(stderr, "hostilefiles: kill -9 during a compile: %s\n",
		caught ? "caught with its scratch directory" : "never caught in the middle (5 tries)");
	if (caught) {
		setenv("TMPDIR", tmp, 1);
		dh_start(&d, NULL);
		unsetenv("TMPDIR");
		ck_assert_msg(!count_in(tmp, mine), "the killed daemon's scratch directory is still there after a restart");
	}
	dh_stop(&d);
}
END_TEST

Suite *hostilefiles_suite(void)
{
	Suite *s = suite_create("hostilefiles");
	dh_add_test(s, "save_symlink_dir", t_save_symlink_dir, 60);
	dh_add_test(s, "load_symlink", t_load_symlink, 60);
	dh_add_test(s, "control_chars", t_control_chars, 60);
	dh_add_test(s, "relative_messages", t_relative_messages, 60);
	dh_add_test(s, "versions_dense", t_versions_dense, 60);
	dh_add_test(s, "second_daemon", t_second_daemon, 120);
	dh_add_test(s, "stale_socket", t_stale_socket, 120);
	dh_add_test(s, "runtime_dir", t_runtime_dir, 180);
	dh_add_test(s, "killed_save", t_killed_save, 240);
	dh_add_test(s, "stale_scratch", t_stale_scratch, 60);
	return s;
}
