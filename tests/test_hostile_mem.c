/* test_hostile_mem.c: the hostile-client suite's memory part (suite `hostilemem`, issue 25
 * findings 2 and 3): the default memory limit derived from fake and real meminfo/cgroup files;
 * against a daemon on the DEFAULT config, a small one_hot bomb and a model.load asking for huge
 * tensors answered cleanly with the daemon alive and its RSS bounded; the engine's cached
 * buffers given back after idle_trim_ms idle (RSS drops back); 8 MiB and 96 MiB headers refused
 * on their length, RSS flat, another client served meanwhile. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <tensord/engine.h>

#include "daemon/memlimit.h"
#include "daemon_harness.h"
#include "suites.h"

#define MIB (UINT64_C(1) << 20)
/* ASan keeps freed memory in its quarantine (256 MiB): a freed message buffer stays resident */
#if defined(__SANITIZE_ADDRESS__)
#define FREED_STAYS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FREED_STAYS 1
#endif
#endif
#ifndef FREED_STAYS
#define FREED_STAYS 0
#endif
#define GIB (UINT64_C(1) << 30)

/* ---- the derivation, on fake files ---- */

typedef struct fake {
	char dir[256];
	char meminfo[320], cgroup[320], mounts[320];
	dmn_mem_paths p;
} fake;

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ck_assert_msg(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

/* mkdir -p under the fake's dir */
static void mkdirs(const fake *f, const char *rel)
{
	char p[1024];
	snprintf(p, sizeof(p), "%s/%s", f->dir, rel);
	for (char *s = p + strlen(f->dir) + 1; *s; s++)
		if (*s == '/') {
			*s = 0;
			mkdir(p, 0755);
			*s = '/';
		}
	mkdir(p, 0755);
}

static void put_rel(const fake *f, const char *rel, const char *text)
{
	char p[1024];
	snprintf(p, sizeof(p), "%s/%s", f->dir, rel);
	put(p, text);
}

/* A fake /proc: MemTotal kb, the process's cgroup lines, and mounts of a v2 hierarchy at
 * DIR/cg2 and a v1 memory controller at DIR/cg1 (either may be left out). */
static void fake_init(fake *f, unsigned long long memtotal_kb, const char *self_cgroup, bool v2, bool v1)
{
	snprintf(f->dir, sizeof(f->dir), "/tmp/tsd-memlimit-XXXXXX");
	ck_assert(mkdtemp(f->dir));
	snprintf(f->meminfo, sizeof(f->meminfo), "%s/meminfo", f->dir);
	snprintf(f->cgroup, sizeof(f->cgroup), "%s/cgroup", f->dir);
	snprintf(f->mounts, sizeof(f->mounts), "%s/mounts", f->dir);
	char t[2048];
	snprintf(t, sizeof(t), "MemTotal:       %llu kB\nMemFree:         1000 kB\nMemAvailable:    2000 kB\n",
		 memtotal_kb);
	put(f->meminfo, t);
	put(f->cgroup, self_cgroup);
	size_t n = (size_t)snprintf(t, sizeof(t), "proc /proc proc rw 0 0\ntmpfs %s tmpfs rw,mode=755 0 0\n"
				    "cgroup %s/cg0 cgroup rw,nosuid,pids 0 0\n", f->dir, f->dir);
	if (v1)
		n += (size_t)snprintf(t + n, sizeof(t) - n, "cgroup %s/cg1 cgroup rw,nosuid,cpu,memory 0 0\n", f->dir);
	if (v2)
		snprintf(t + n, sizeof(t) - n, "cgroup2 %s/cg2 cgroup2 rw,nsdelegate 0 0\n", f->dir);
	put(f->mounts, t);
	mkdirs(f, "cg1");
	mkdirs(f, "cg2");
	f->p = (dmn_mem_paths){f->meminfo, f->cgroup, f->mounts};
}

static void fake_free(fake *f)
{
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(t_derive)
{
	char why[800];
	dmn_mem_machine m;
	/* MemTotal only (no cgroup files): half of it */
	fake f;
	fake_init(&f, 8ull * 1024 * 1024, "0::/\n", false, false);
	dmn_mem_machine_read(&f.p, &m);
	ck_assert_uint_eq(m.mem_total, 8 * GIB);
	ck_assert_uint_eq(m.cgroup_limit, 0);
	ck_assert_uint_eq(dmn_mem_limit(0, 0.5, &m, why, sizeof(why)), 4 * GIB);
	ck_assert_msg(strstr(why, "MemTotal"), "%s", why);
	/* explicit bytes win; fraction 0 is no limit; fractions round down to a MiB */
	ck_assert_uint_eq(dmn_mem_limit(12345, 0.5, &m, why, sizeof(why)), 12345);
	ck_assert_uint_eq(dmn_mem_limit(0, 0, &m, why, sizeof(why)), 0);
	ck_assert_msg(strstr(why, "none"), "%s", why);
	ck_assert_uint_eq(dmn_mem_limit(0, 0.3, &m, why, sizeof(why)) % MIB, 0);
	fake_free(&f);

	/* v2, "max" at the process's cgroup and its parent: no cgroup limit */
	fake_init(&f, 8ull * 1024 * 1024, "0::/svc/tensord\n", true, false);
	mkdirs(&f, "cg2/svc/tensord");
	put_rel(&f, "cg2/svc/tensord/memory.max", "max\n");
	put_rel(&f, "cg2/svc/memory.max", "max\n");
	dmn_mem_machine_read(&f.p, &m);
	ck_assert_uint_eq(m.cgroup_limit, 0);
	ck_assert_uint_eq(dmn_mem_limit(0, 0.5, &m, why, sizeof(why)), 4 * GIB);
	/* a number on the parent binds the child: the smaller of it and MemTotal */
	put_rel(&f, "cg2/svc/memory.max", "2147483648\n");
	dmn_mem_machine_read(&f.p, &m);
	ck_assert_uint_eq(m.cgroup_limit, 2 * GIB);
	ck_assert_msg(strstr(m.cgroup_file, "cg2/svc/memory.max"), "%s", m.cgroup_file);
	ck_assert_uint_eq(dmn_mem_limit(0, 0.5, &m, why, sizeof(why)), 1 * GIB);
	ck_assert_msg(strstr(why, "cgroup"), "%s", why);
	/* and a tighter one on the process's own */
	put_rel(&f, "cg2/svc/tensord/memory.max", "1073741824\n");
	dmn_mem_machine_read(&f.p, &m);
	ck_assert_uint_eq(m.cgroup_limit, 1 * GIB);
	/* a cgroup limit above MemTotal: MemTotal */
	put_rel(&f, "cg2/svc/tensord/memory.max", "max\n");
	put_rel(&f, "cg2/svc/memory.max", "68719476736\n");
	dmn_mem_machine_read(&f.p, &m);
	ck_assert_uint_eq(dmn_mem_limit(0, 0.5, &m, why, sizeof(why)), 4 * GIB);
	fake_free(&f);

	/* v1: memory.limit_in_bytes, "unlimited" written as a page-rounded 2^63 - 1 */
	fake_init(&f, 16ull * 1024 * 1024, "5:pids:/\n4:cpu,memory:/docker/abc\n0::/\n", false, true);
	mkdirs(&f, "cg1/docker/abc");
	put_rel(&f, "cg1/docker/abc/memory.limit_in_bytes", "9223372036854771712\n");
	put_rel(&f, "cg1/memory.limit_in_bytes", "9223372036854771712\n");
	dmn_mem_machine_read(&f.p, &m);
	ck_assert_uint_eq(m.cgroup_limit, 0);
	ck_assert_uint_eq(dmn_mem_limit(0, 0.5, &m, why, sizeof(why)), 8 * GIB);
	put_rel(&f, "cg1/docker/abc/memory.limit_in_bytes", "1073741824\n");
	dmn_mem_machine_read(&f.p, &m);
	ck_assert_uint_eq(m.cgroup_limit, 1 * GIB);
	ck_assert_uint_eq(dmn_mem_limit(0, 0.5, &m, why, sizeof(why)), 512 * MIB);
	fake_free(&f);

	/* nothing readable: no limit, said so */
	dmn_mem_paths none = {"/nonexistent/meminfo", "/nonexistent/cgroup", "/nonexistent/mounts"};
	dmn_mem_machine_read(&none, &m);
	ck_assert_uint_eq(dmn_mem_limit(0, 0.5, &m, why, sizeof(why)), 0);
	ck_assert_msg(strstr(why, "neither"), "%s", why);

	/* this machine's */
	dmn_mem_paths real;
	dmn_mem_paths_default(&real);
	dmn_mem_machine_read(&real, &m);
	ck_assert_uint_gt(m.mem_total, 0);
	ck_assert_uint_gt(dmn_mem_limit(0, 0.5, &m, why, sizeof(why)), 0);
	ck_assert_uint_le(dmn_mem_limit(0, 0.5, &m, why, sizeof(why)), m.mem_total / 2);
}
END_TEST

/* ---- against a live daemon ---- */

/* The daemon's VmRSS in bytes (/proc/PID/status). */
static uint64_t rss_of(pid_t pid)
{
	char p[64], line[256];
	snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
	FILE *f = fopen(p, "r");
	ck_assert_msg(f, "%s", p);
	unsigned long long kb = 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %llu kB", &kb) == 1)
			break;
	fclose(f);
	ck_assert_uint_gt(kb, 0);
	return (uint64_t)kb * 1024;
}

static void alive(tsd_client *c, const char *after)
{
	tsd_reply *r = NULL;
	tsd_status s = tsd_client_call_verb(c, "health", &r);
	ck_assert_msg(s == TSD_OK, "health after %s: %s (%s)", after, tsd_status_name(s), tsd_client_error(c));
	tsd_reply_free(r);
}

/* The effective limit the daemon reports, checked against the derivation here (the test runs in
 * the daemon's cgroup) and against hello's limits. */
static uint64_t daemon_limit(tsd_client *c)
{
	uint64_t lim = (uint64_t)dh_stat(c, "engine.mem_limit");
	dmn_mem_paths p;
	dmn_mem_machine m;
	char why[800];
	dmn_mem_paths_default(&p);
	dmn_mem_machine_read(&p, &m);
	ck_assert_msg(lim == dmn_mem_limit(0, 0.5, &m, why, sizeof(why)), "the daemon's limit %llu, derived here %llu (%s)",
		      (unsigned long long)lim, (unsigned long long)dmn_mem_limit(0, 0.5, &m, why, sizeof(why)), why);
	ck_assert_uint_gt(lim, 0);
	tsd_reply *r = NULL;
	ck_assert_int_eq(tsd_client_hello(c, &r), TSD_OK);
	ck_assert_msg(dh_num(tsd_reply_json(r), "limits.mem_limit_bytes") == (double)lim, "hello's limits");
	ck_assert_msg(dh_num(tsd_reply_json(r), "limits.max_header_bytes") == (double)(1 << 20), "hello's limits");
	tsd_reply_free(r);
	return lim;
}

/* realize of one_hot(a + b, classes) for int32 a [n,1] and b [1,n] (2n labels sent, n^2 made),
 * materialised (contiguous) and summed over the classes: an intermediate of n^2 * classes * 4
 * bytes and an output of n^2 floats. The message is under 64 KiB. */
static tsd_status one_hot_bomb(tsd_client *c, int n, int classes, char *msg, size_t msglen, size_t *req_bytes)
{
	char h[1024];
	snprintf(h, sizeof(h),
		 "{\"verb\":\"realize\",\"graph\":{\"nodes\":["
		 "{\"id\":\"a\",\"op\":\"input\",\"dtype\":\"int32\",\"shape\":[%d,1]},"
		 "{\"id\":\"b\",\"op\":\"input\",\"dtype\":\"int32\",\"shape\":[1,%d]},"
		 "{\"id\":\"l\",\"op\":\"add\",\"in\":[\"a\",\"b\"]},"
		 "{\"id\":\"o\",\"op\":\"one_hot\",\"in\":[\"l\"],\"num_classes\":%d},"
		 "{\"id\":\"m\",\"op\":\"contiguous\",\"in\":[\"o\"]},"
		 "{\"id\":\"y\",\"op\":\"sum\",\"in\":[\"m\"],\"axes\":[2]}],\"outputs\":[\"y\"]}}",
		 n, n, classes);
	int32_t *a = calloc((size_t)n, sizeof(int32_t)), *b = calloc((size_t)n, sizeof(int32_t));
	for (int i = 0; i < n; i++)
		a[i] = i, b[i] = (i * 7) % 5;
	tsd_tensor ts[2] = {{.name = "a", .dtype = TSD_I32, .ndim = 2, .shape = {n, 1}, .data = a},
			    {.name = "b", .dtype = TSD_I32, .ndim = 2, .shape = {1, n}, .data = b}};
	*req_bytes = strlen(h) + 2 * (size_t)n * 4 + 8 + 128;
	tsd_reply *r = NULL;
	tsd_status s = tsd_client_call_text(c, h, ts, 2, &r);
	snprintf(msg, msglen, "%s", r && tsd_reply_error(r) ? tsd_reply_error(r) : tsd_client_error(c));
	if (s == TSD_OK) { /* y[i][j] = 1 when the label is inside [0, classes) */
		const tsd_tensor *y = tsd_reply_find(r, "y");
		ck_assert(y && y->ndim == 2 && y->shape[0] == n && y->shape[1] == n);
		const float *v = y->data;
		for (int i = 0; i < n; i++)
			for (int j = 0; j < n; j++)
				ck_assert_msg(v[i * n + j] == (a[i] + b[j] < classes ? 1.f : 0.f), "y[%d][%d] = %g", i, j,
					      v[i * n + j]);
	}
	tsd_reply_free(r);
	free(a);
	free(b);
	return s;
}

START_TEST(t_one_hot_bomb)
{
	dh_daemon d = {0};
	dh_start(&d, NULL); /* the default config: no mem_limit_bytes */
	tsd_client *c = dh_client(&d);
	uint64_t lim = daemon_limit(c);
	uint64_t rss0 = rss_of(d.pid);
	/* needs four times the limit in one intermediate */
	int classes = 1 << 20;
	int n = (int)ceil(sqrt(4.0 * (double)lim / ((double)classes * 4)));
	char msg[512];
	size_t bytes;
	tsd_status s = one_hot_bomb(c, n, classes, msg, sizeof(msg), &bytes);
	ck_assert_uint_lt(bytes, 64 * 1024);
	ck_assert_msg(s == TSD_OUT_OF_MEMORY, "a %zu-byte one_hot bomb (%d x %d labels, %d classes): %s (%s)", bytes,
		      n, n, classes, tsd_status_name(s), msg);
	/* the realize worker's context has its share of the limit (exec.c): the error names that */
	const char *at = strstr(msg, "memory limit of ");
	unsigned long long named = at ? strtoull(at + strlen("memory limit of "), NULL, 10) : 0;
	ck_assert_msg(named > 0 && named <= lim, "the error names a limit within %llu: %s", (unsigned long long)lim, msg);
	alive(c, "the bomb");
	uint64_t rss1 = rss_of(d.pid);
	ck_assert_msg(rss1 < lim + lim / 10, "RSS %llu after the bomb, limit %llu", (unsigned long long)rss1,
		      (unsigned long long)lim);
	fprintf(stderr, "hostilemem: a %zu-byte bomb asking %.1f GiB: %s; limit %.2f GiB, RSS %.0f -> %.0f MB\n", bytes,
		(double)n * n * classes * 4 / (double)GIB, tsd_status_name(s), (double)lim / (double)GIB, rss0 / 1e6,
		rss1 / 1e6);
	/* the 3 KB request: one_hot of 1,024 labels over 2^20 classes as the output (4 GiB,
	 * under this limit but past any reply): too_large before anything is computed */
	char h[512];
	snprintf(h, sizeof(h),
		 "{\"verb\":\"realize\",\"graph\":{\"nodes\":[{\"id\":\"a\",\"op\":\"input\",\"dtype\":\"int32\","
		 "\"shape\":[1024]},{\"id\":\"y\",\"op\":\"one_hot\",\"in\":[\"a\"],\"num_classes\":%d}],"
		 "\"outputs\":[\"y\"]}}", classes);
	int32_t labels[1024] = {0};
	tsd_tensor t = {.name = "a", .dtype = TSD_I32, .ndim = 1, .shape = {1024}, .data = labels};
	tsd_reply *r = NULL;
	s = tsd_client_call_text(c, h, &t, 1, &r);
	ck_assert_msg(s == TSD_TOO_LARGE && strstr(tsd_reply_error(r), "max_message_bytes"), "a 4 GiB output: %s (%s)",
		      tsd_status_name(s), r ? tsd_reply_error(r) : tsd_client_error(c));
	tsd_reply_free(r);
	uint64_t rss2 = rss_of(d.pid);
	ck_assert_msg(rss2 < rss0 + 64 * MIB, "RSS %llu -> %llu after a 4 GiB output refused", (unsigned long long)rss0,
		      (unsigned long long)rss2);
	/* the same graph small is served after it */
	ck_assert_int_eq(one_hot_bomb(c, 8, 16, msg, sizeof(msg), &bytes), TSD_OK);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

/* model.load specs of ~600 bytes asking for tensors past the limit: a param (weights) of 4x the
 * limit, and an unbatched input of 4x the limit (the load captures it). */
START_TEST(t_huge_load)
{
	dh_daemon d = {0};
	dh_start(&d, NULL);
	tsd_client *c = dh_client(&d);
	uint64_t lim = daemon_limit(c);
	long long rows = (long long)(4 * lim / (65536 * 4)) + 1;
	const char *kinds[] = {"param", "input"};
	for (int k = 0; k < 2; k++) {
		char h[1024];
		int n = snprintf(h, sizeof(h),
				 "{\"verb\":\"model.load\",\"name\":\"huge\",\"graph\":{\"nodes\":["
				 "{\"id\":\"x\",\"op\":\"input\",\"dtype\":\"float32\",\"shape\":[%s]},"
				 "{\"id\":\"w\",\"op\":\"%s\",\"dtype\":\"float32\",\"shape\":[%lld,65536]},"
				 "{\"id\":\"y\",\"op\":\"relu\",\"in\":[\"w\"]},"
				 "{\"id\":\"z\",\"op\":\"add\",\"in\":[\"y\",\"x\"]}],\"outputs\":[\"z\"]}}",
				 k ? "1" : "-1,1", kinds[k], rows);
		ck_assert_int_lt(n, 700);
		tsd_reply *r = NULL;
		uint64_t t0 = (uint64_t)time(NULL);
		tsd_status s = tsd_client_call_text(c, h, NULL, 0, &r);
		const char *e = r && tsd_reply_error(r) ? tsd_reply_error(r) : tsd_client_error(c);
		ck_assert_msg(s == TSD_OUT_OF_MEMORY || s == TSD_TOO_LARGE || s == TSD_BAD_REQUEST,
			      "a %d-byte model.load with a %s of %.1f GiB: %s (%s)", n, kinds[k],
			      (double)rows * 65536 * 4 / (double)GIB, tsd_status_name(s), e);
		ck_assert_msg(s != TSD_BAD_REQUEST || strstr(e, "weights") || strstr(e, "bytes"), "%s", e);
		ck_assert_msg(s != TSD_OUT_OF_MEMORY || strstr(e, "memory limit"), "the error names the limit: %s", e);
		fprintf(stderr, "hostilemem: a %d-byte model.load with a %.1f GiB %s: %s (%s) in %llu s\n", n,
			(double)rows * 65536 * 4 / (double)GIB, kinds[k], tsd_status_name(s), e,
			(unsigned long long)((uint64_t)time(NULL) - t0));
		tsd_reply_free(r);
		alive(c, "a huge model.load");
		uint64_t rss = rss_of(d.pid);
		ck_assert_msg(rss < lim + lim / 10, "RSS %llu, limit %llu", (unsigned long long)rss, (unsigned long long)lim);
	}
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

/* After a realize with a 512 MiB intermediate the allocator keeps the block (engine.mem_cached);
 * once idle for idle_trim_ms (default 1 s, checked each second) the trim gives it back and the
 * daemon's RSS drops to near where it was. With idle_trim_ms 0 it stays: the trim does it. */
static void big_then_idle(bool trim)
{
	dh_daemon d = {0};
	dh_start(&d, trim ? NULL : "{\"idle_trim_ms\":0}");
	tsd_client *c = dh_client(&d);
	char msg[512];
	size_t bytes;
	ck_assert_int_eq(one_hot_bomb(c, 8, 16, msg, sizeof(msg), &bytes), TSD_OK); /* compiles, warms */
	sleep(3);
	uint64_t rss0 = rss_of(d.pid);
	double trims0 = dh_stat(c, "engine.idle_trims");
	/* 45 x 45 labels x 65536 classes x 4 bytes: 0.5 GiB in one intermediate */
	ck_assert_int_eq(one_hot_bomb(c, 45, 65536, msg, sizeof(msg), &bytes), TSD_OK);
	uint64_t rss1 = rss_of(d.pid);
	double cached = dh_stat(c, "engine.mem_cached");
	ck_assert_msg(rss1 > rss0 + 400 * MIB, "RSS %llu -> %llu after a 500 MiB realize", (unsigned long long)rss0,
		      (unsigned long long)rss1);
	ck_assert_msg(cached >= 400.0 * MIB, "engine.mem_cached %g after the realize", cached);
	/* idle: at most idle_trim_ms + 1 s tick; generous for sanitizers and a busy machine */
	uint64_t rss2 = rss1;
	double waited = 0;
	for (; waited < 20; waited += 0.25) {
		usleep(250000);
		alive(c, "the realize"); /* a health poll is no activity: it does not put the trim off */
		rss2 = rss_of(d.pid);
		if (rss2 < rss0 + 64 * MIB)
			break;
		if (!trim && waited >= 4)
			break;
	}
	double trims1 = dh_stat(c, "engine.idle_trims");
	fprintf(stderr, "hostilemem: idle_trim_ms %s: RSS %.0f MB, %.0f MB after a 0.5 GiB realize, %.0f MB %.2f s later (trims %g -> %g)\n",
		trim ? "1000" : "0", rss0 / 1e6, rss1 / 1e6, rss2 / 1e6, waited + 0.25, trims0, trims1);
	if (trim) {
		ck_assert_msg(rss2 < rss0 + 64 * MIB, "RSS %llu -> %llu, still %llu after %.1f s idle", (unsigned long long)rss0,
			      (unsigned long long)rss1, (unsigned long long)rss2, waited);
		ck_assert_msg(trims1 > trims0, "idle_trims %g -> %g", trims0, trims1);
		ck_assert_msg(dh_stat(c, "engine.mem_cached") == 0, "engine.mem_cached after the trim");
	} else {
		ck_assert_msg(rss2 > rss0 + 400 * MIB, "without the trim RSS %llu -> %llu -> %llu", (unsigned long long)rss0,
			      (unsigned long long)rss1, (unsigned long long)rss2);
		ck_assert_msg(trims1 == trims0, "idle_trims %g -> %g with idle_trim_ms 0", trims0, trims1);
	}
	/* served afterwards */
	ck_assert_int_eq(one_hot_bomb(c, 8, 16, msg, sizeof(msg), &bytes), TSD_OK);
	dh_client_close(c);
	dh_stop(&d);
}

START_TEST(t_idle_trim)
{
	big_then_idle(true);
}
END_TEST

START_TEST(t_no_idle_trim)
{
	big_then_idle(false);
}
END_TEST

/* A request whose prefix declares a JSON header of hl bytes, all sent: {"id":3,"verb":"health",
 * "pad":[0,0,...]}, the kind of JSON that costs most to parse (~40x its text). */
static nng_msg *big_header(size_t hl)
{
	nng_msg *m;
	ck_assert_int_eq(nng_msg_alloc(&m, 8 + hl), 0);
	unsigned char *b = nng_msg_body(m);
	memcpy(b, "TSD1", 4);
	for (int i = 0; i < 4; i++)
		b[4 + i] = (unsigned char)(hl >> (8 * i));
	const char *head = "{\"id\":3,\"verb\":\"health\",\"pad\":[";
	size_t k = strlen(head);
	memcpy(b + 8, head, k);
	char *p = (char *)b + 8;
	for (size_t i = k; i < hl - 2; i++)
		p[i] = (i - k) % 2 ? ',' : '0';
	if (p[hl - 3] == ',')
		p[hl - 3] = ' ';
	memcpy(p + hl - 2, "]}", 2);
	return m;
}

#define TINY_SPEC                                                                                        \
	"{\"name\":\"tiny\",\"graph\":{\"nodes\":[{\"id\":\"x\",\"op\":\"input\",\"dtype\":\"float32\",\"shape\":[-1,4]}," \
	"{\"id\":\"w\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[4]},"                               \
	"{\"id\":\"y\",\"op\":\"mul\",\"in\":[\"x\",\"w\"]}],\"outputs\":[\"y\"]}}"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

START_TEST(t_big_header)
{
	dh_daemon d = {0};
	dh_start(&d, NULL);
	tsd_client *c = dh_client(&d);
	static const float w[4] = {1, -2, 0.5f, 4};
	tsd_tensor wt = DH_F32("w", w, 4);
	dh_load(c, TINY_SPEC, &wt, 1);
	alive(c, "the start");
	sleep(2); /* malloc_trim's tick after the start */
	uint64_t rss0 = rss_of(d.pid);
	nng_socket sock = dh_raw_open(&d, 20000);
	size_t sizes[] = {8 * MIB, 96 * MIB};
	for (int k = 0; k < 2; k++) {
		dh_async a;
		uint64_t t0 = (uint64_t)time(NULL);
		dh_async_send(sock, &a, big_header(sizes[k]));
		/* another client is served meanwhile: tiny infers, timed, until the reply came (at least 20) */
		uint64_t lat[4096];
		int nl = 0;
		while (nl < 4096 && (nl < 20 || !atomic_load(&a.order))) {
			float x[4] = {1, 2, 3, 4}, y[4];
			char why[256];
			uint64_t t = eng_now_ns();
			tsd_status is = dh_infer(c, "tiny", NULL, x, 1, 4, y, 4, why, sizeof(why));
			lat[nl++] = eng_now_ns() - t;
			ck_assert_msg(is == TSD_OK && y[1] == -4, "an infer while a big header is sent: %s: %s",
				      tsd_status_name(is), why);
		}
		qsort(lat, (size_t)nl, sizeof(*lat), cmp_u64);
		proto_msg pm;
		tsd_status s = dh_async_wait(&a, &pm);
		uint64_t secs = (uint64_t)time(NULL) - t0;
		ck_assert_msg(s == TSD_TOO_LARGE, "a %zu-byte header: %s (%s)", sizes[k],
			      s == TSD_STATUS_COUNT ? "no reply" : tsd_status_name(s), pm.error ? pm.error : "");
		char n[32];
		snprintf(n, sizeof(n), "%zu", sizes[k]);
		ck_assert_msg(strstr(pm.error, "header") && strstr(pm.error, n) && strstr(pm.error, "max_header_bytes"),
			      "the error names the header's size and the key: %s", pm.error);
		ck_assert_msg(secs <= 10, "a %zu-byte header answered after %llu s", sizes[k], (unsigned long long)secs);
		proto_msg_free(&pm);
		dh_async_free(&a);
		alive(c, "a big header");
		/* the message's buffer goes with it (malloc's trim tick is each second); parsing would have
		 * cost ~40x the header (issue 25: 8 MiB -> +335 MB) */
		uint64_t rss = 0, bound = 8 * MIB + (FREED_STAYS ? 2 * sizes[k] + 8 * MIB : 0); /* ASan: this one and the last */
		for (int i = 0; i < 40; i++) {
			rss = rss_of(d.pid);
			if (rss < rss0 + bound)
				break;
			usleep(100000);
		}
		fprintf(stderr, "hostilemem: a %zu MiB header: too_large in <= %llu s, RSS %.1f -> %.1f MB; another "
			"client's %d infers meanwhile: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", sizes[k] >> 20,
			(unsigned long long)secs, rss0 / 1e6, rss / 1e6, nl, lat[nl / 2] / 1e6, lat[nl * 99 / 100] / 1e6,
			lat[nl - 1] / 1e6);
		/* generous: the goal (5 ms p99) is measured and reported, not timed here */
		ck_assert_msg(lat[nl - 1] < 2000000000ull, "an infer took %.0f ms", lat[nl - 1] / 1e6);
		ck_assert_msg(rss < rss0 + bound, "RSS %llu -> %llu after a %zu-byte header", (unsigned long long)rss0,
			      (unsigned long long)rss, sizes[k]);
	}
	/* one byte over the default limit is refused, a header at it served */
	proto_msg pm;
	nng_msg *keep = NULL;
	nng_msg *m = big_header((1 << 20) + 1);
	tsd_status s = dh_raw_call(sock, nng_msg_body(m), nng_msg_len(m), &pm, &keep);
	ck_assert_msg(s == TSD_TOO_LARGE, "1 MiB + 1: %s", tsd_status_name(s));
	nng_msg_free(m);
	nng_msg_free(keep);
	proto_msg_free(&pm);
	m = big_header(1 << 20);
	s = dh_raw_call(sock, nng_msg_body(m), nng_msg_len(m), &pm, &keep);
	ck_assert_msg(s == TSD_OK, "a 1 MiB header: %s (%s)", tsd_status_name(s), pm.error ? pm.error : "");
	nng_msg_free(m);
	nng_msg_free(keep);
	proto_msg_free(&pm);
	dh_raw_close(sock);
	dh_client_close(c);
	dh_stop(&d);
}
END_TEST

/* The decoder alone: the limit is checked on the prefix's length, so a header declared far
 * larger than the bytes sent is too_large too (not "past the end"). */
START_TEST(t_decode_header_limit)
{
	unsigned char b[64] = "TSD1";
	size_t hl = 8 * MIB;
	for (int i = 0; i < 4; i++)
		b[4 + i] = (unsigned char)(hl >> (8 * i));
	memcpy(b + 8, "{\"verb\":\"health\"}", 17);
	proto_msg m;
	proto_err e;
	ck_assert_int_eq(proto_decode(b, sizeof(b), 256 * MIB, PROTO_REQUEST, &m, &e), TSD_TOO_LARGE);
	ck_assert_msg(strstr(e.msg, "8388608") && strstr(e.msg, "1048576"), "%s", e.msg);
	ck_assert_int_eq(proto_decode_hdr(b, sizeof(b), 256 * MIB, 64, PROTO_REQUEST, &m, &e), TSD_TOO_LARGE);
	/* a reply's header is bounded by the message limit only (past the end here) */
	ck_assert_int_eq(proto_decode(b, sizeof(b), 256 * MIB, PROTO_REPLY, &m, &e), TSD_BAD_REQUEST);
	ck_assert_msg(strstr(e.msg, "past the end"), "%s", e.msg);
	/* a header at the limit decodes */
	const char *h = "{\"id\":1,\"verb\":\"health\"}";
	size_t n = strlen(h);
	memcpy(b + 8, h, n);
	b[4] = (unsigned char)n, b[5] = b[6] = b[7] = 0;
	ck_assert_int_eq(proto_decode_hdr(b, 8 + n, 256 * MIB, n, PROTO_REQUEST, &m, &e), TSD_OK);
	proto_msg_free(&m);
	ck_assert_int_eq(proto_decode_hdr(b, 8 + n, 256 * MIB, n - 1, PROTO_REQUEST, &m, &e), TSD_TOO_LARGE);
}
END_TEST

Suite *hostilemem_suite(void)
{
	Suite *s = suite_create("hostilemem");
	TCase *tc = tcase_create("derive");
	tcase_add_test(tc, t_derive);
	tcase_add_test(tc, t_decode_header_limit);
	suite_add_tcase(s, tc);
	dh_add_test(s, "one_hot_bomb", t_one_hot_bomb, 120);
	dh_add_test(s, "huge_load", t_huge_load, 120);
	dh_add_test(s, "idle_trim", t_idle_trim, 120);
	dh_add_test(s, "no_idle_trim", t_no_idle_trim, 120);
	dh_add_test(s, "big_header", t_big_header, 120);
	return s;
}
