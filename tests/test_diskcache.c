/* test_diskcache.c: the on-disk kernel cache (engine/diskcache.h): round trips, keys, corrupt and
 * truncated entries, LRU eviction, unusable directories, concurrent writers, and the CPU
 * backend's cache_id / program_blob / load. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backends/cpu/cpu.h"
#include "backends/registry.h"
#include "cache/diskcache.h"
#include "testutil.h"

/* The suite's root directory (made once, removed after all tests, failed ones included: with
 * CK_FORK=yes a failed test exits without its teardown) and the running test's directory in it. */
static char root_dir[64], tmp_dir[128];

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	chmod(path, 0700);
	return remove(path) < 0 ? -1 : 0;
}

static void remove_tree(char *dir)
{
	if (dir[0])
		nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
	dir[0] = 0;
}

static void root_setup(void)
{
	snprintf(root_dir, sizeof(root_dir), "/tmp/tensord-dc-XXXXXX");
	if (!mkdtemp(root_dir))
		root_dir[0] = 0;
}

static void root_teardown(void) { remove_tree(root_dir); }

static void tmp_setup(void)
{
	ck_assert_msg(root_dir[0], "no root directory");
	snprintf(tmp_dir, sizeof(tmp_dir), "%s/t-XXXXXX", root_dir);
	ck_assert_msg(mkdtemp(tmp_dir) != NULL, "mkdtemp: %s", strerror(errno));
}

static void tmp_teardown(void) { remove_tree(tmp_dir); }

/* A path below the temporary directory (static buffer, one at a time). */
static const char *tmp_path(const char *fmt, const char *arg)
{
	static char p[512], rel[256];
	snprintf(rel, sizeof(rel), fmt, arg);
	snprintf(p, sizeof(p), "%s/%s", tmp_dir, rel);
	return p;
}

static const char *entry_file(const char *key)
{
	static char p[512];
	snprintf(p, sizeof(p), "%s/%.2s/%s", tmp_dir, key, key);
	return p;
}

static bool exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* Files in the temporary directory's subdirectory sub. */
static int count_files(const char *sub)
{
	DIR *d = opendir(tmp_path("%s", sub));
	ck_assert_ptr_nonnull(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

static eng_diskcache *open_tmp(uint64_t max_bytes)
{
	char msg[512] = "";
	eng_diskcache *dc = eng_diskcache_open(tmp_dir, max_bytes, msg, sizeof(msg));
	ck_assert_msg(dc != NULL, "open: %s", msg);
	return dc;
}

static void key_of(const char *s, char key[33])
{
	const void *parts[1] = {s};
	size_t lens[1] = {strlen(s)};
	eng_diskcache_key(parts, lens, 1, key);
}

/* n bytes of a pattern depending on seed. Caller frees. */
static unsigned char *pattern(size_t n, unsigned seed)
{
	unsigned char *p = malloc(n ? n : 1);
	ck_assert_ptr_nonnull(p);
	tu_rng r = {seed};
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)tu_next(&r);
	return p;
}

/* get must hit with exactly want[0..n). */
static void expect_hit(eng_diskcache *dc, const char *key, const void *want, size_t n)
{
	void *got;
	size_t len;
	eng_status st = eng_diskcache_get(dc, key, &got, &len);
	ck_assert_msg(st == ENG_OK, "get %s: %s %s", key, eng_strerror(st), eng_diskcache_errmsg(dc));
	ck_assert_ptr_nonnull(got);
	ck_assert_uint_eq(len, n);
	ck_assert(n == 0 || memcmp(got, want, n) == 0);
	free(got);
}

static void expect_miss(eng_diskcache *dc, const char *key)
{
	void *got = (void *)1;
	size_t len = 7;
	ck_assert_int_eq(eng_diskcache_get(dc, key, &got, &len), ENG_ENOTFOUND);
	ck_assert_ptr_null(got);
	ck_assert_uint_eq(len, 0);
}

START_TEST(test_round_trip)
{
	eng_diskcache *dc = open_tmp(0);
	char k0[33], k1[33];
	key_of("empty", k0);
	key_of("big", k1);
	ck_assert_int_eq(eng_diskcache_put(dc, k0, "", 0), ENG_OK);
	expect_hit(dc, k0, "", 0);
	size_t n = 1000003;
	unsigned char *a = pattern(n, 1), *b = pattern(n, 2);
	ck_assert_int_eq(eng_diskcache_put(dc, k1, a, n), ENG_OK);
	expect_hit(dc, k1, a, n);
	ck_assert(exists(entry_file(k1)));
	/* a second put replaces the entry */
	ck_assert_int_eq(eng_diskcache_put(dc, k1, b, n - 1), ENG_OK);
	expect_hit(dc, k1, b, n - 1);
	ck_assert_uint_eq(eng_diskcache_size_estimate(dc), 2 * ENG_DISKCACHE_HEADER_SIZE + n - 1);
	ck_assert_str_eq(eng_diskcache_dir(dc), tmp_dir);
	eng_diskcache_close(dc);
	/* another handle sees the entries and measures them */
	dc = open_tmp(0);
	expect_hit(dc, k1, b, n - 1);
	ck_assert_uint_eq(eng_diskcache_size_estimate(dc), 2 * ENG_DISKCACHE_HEADER_SIZE + n - 1);
	eng_diskcache_close(dc);
	free(a);
	free(b);
}
END_TEST

START_TEST(test_miss_and_bad_keys)
{
	eng_diskcache *dc = open_tmp(0);
	char k[33];
	key_of("never stored", k);
	expect_miss(dc, k);
	void *got;
	size_t n;
	const char *bad[] = {"../../../../../../../etc/passwd", "ABCDEF0123456789ABCDEF0123456789", "0123", ""};
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(eng_diskcache_get(dc, bad[i], &got, &n), ENG_EINVAL);
		ck_assert_int_eq(eng_diskcache_put(dc, bad[i], "x", 1), ENG_EINVAL);
		ck_assert(strstr(eng_diskcache_errmsg(dc), "key") != NULL);
	}
	eng_diskcache_close(dc);
}
END_TEST

START_TEST(test_key_parts)
{
	char k1[33], k2[33], k3[33], k4[33];
	const void *ab_c[] = {"ab", "c"}, *a_bc[] = {"a", "bc"}, *abc[] = {"abc"};
	size_t l21[] = {2, 1}, l12[] = {1, 2}, l3[] = {3};
	eng_diskcache_key(ab_c, l21, 2, k1);
	eng_diskcache_key(a_bc, l12, 2, k2);
	eng_diskcache_key(abc, l3, 1, k3);
	ck_assert_str_ne(k1, k2);
	ck_assert_str_ne(k1, k3);
	ck_assert_str_ne(k2, k3);
	eng_diskcache_key(ab_c, l21, 2, k4);
	ck_assert_str_eq(k1, k4);
	ck_assert_uint_eq(strlen(k1), 32);
	ck_assert_uint_eq(strspn(k1, "0123456789abcdef"), 32);
	/* empty parts count: ("") != () != ("", "") */
	const void *e2[] = {"", ""};
	size_t l00[] = {0, 0};
	eng_diskcache_key(e2, l00, 0, k1);
	eng_diskcache_key(e2, l00, 1, k2);
	eng_diskcache_key(e2, l00, 2, k3);
	ck_assert_str_ne(k1, k2);
	ck_assert_str_ne(k2, k3);
	/* trailing zero bytes change the key */
	const void *z[] = {"a\0\0"};
	size_t l1[] = {1};
	eng_diskcache_key(z, l1, 1, k1);
	eng_diskcache_key(z, l3, 1, k2);
	ck_assert_str_ne(k1, k2);
}
END_TEST

/* Damage done to a stored entry file: flip the byte at off (from the end if negative), or
 * truncate the file to off bytes (off < 0: to half), or append a byte. */
typedef enum { FLIP, TRUNCATE, APPEND } damage_kind;
typedef struct damage {
	const char *what;
	damage_kind kind;
	long off;
} damage;

static void do_damage(const char *path, const damage *d)
{
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	int fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	unsigned char c;
	off_t at = d->off < 0 ? st.st_size + d->off : d->off;
	switch (d->kind) {
	case FLIP:
		ck_assert_int_eq(pread(fd, &c, 1, at), 1);
		c ^= 0x40;
		ck_assert_int_eq(pwrite(fd, &c, 1, at), 1);
		break;
	case TRUNCATE:
		ck_assert_int_eq(ftruncate(fd, d->off < 0 ? st.st_size / 2 : d->off), 0);
		break;
	case APPEND:
		ck_assert_int_eq(pwrite(fd, "z", 1, st.st_size), 1);
		break;
	}
	close(fd);
}

START_TEST(test_corrupt_entries_are_removed)
{
	const damage cases[] = {
		{"payload byte", FLIP, ENG_DISKCACHE_HEADER_SIZE + 1000},
		{"last payload byte", FLIP, -1},
		{"magic", FLIP, 0},
		{"format version", FLIP, 4},
		{"stored length", FLIP, 8},
		{"length high byte", FLIP, 15},
		{"checksum", FLIP, 16},
		{"key copy", FLIP, 24 + 31},
		{"truncated to the header", TRUNCATE, ENG_DISKCACHE_HEADER_SIZE},
		{"truncated to half", TRUNCATE, -1},
		{"truncated inside the header", TRUNCATE, 10},
		{"empty file", TRUNCATE, 0},
		{"a byte appended", APPEND, 0},
	};
	eng_diskcache *dc = open_tmp(0);
	size_t n = 4096;
	unsigned char *data = pattern(n, 3);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char k[33];
		key_of(cases[i].what, k);
		ck_assert_int_eq(eng_diskcache_put(dc, k, data, n), ENG_OK);
		expect_hit(dc, k, data, n);
		do_damage(entry_file(k), &cases[i]);
		void *got = NULL;
		size_t len = 0;
		ck_assert_msg(eng_diskcache_get(dc, k, &got, &len) == ENG_ENOTFOUND, "%s: not detected", cases[i].what);
		ck_assert_ptr_null(got);
		ck_assert_msg(!exists(entry_file(k)), "%s: the bad file is still there", cases[i].what);
		/* a fresh put works again */
		ck_assert_int_eq(eng_diskcache_put(dc, k, data, n), ENG_OK);
		expect_hit(dc, k, data, n);
	}
	/* an entry file renamed to another key's name is rejected by the key copy */
	char a[33], b[33];
	key_of("a", a);
	key_of("b", b);
	ck_assert_int_eq(eng_diskcache_put(dc, a, data, n), ENG_OK);
	mkdir(tmp_path("%.2s", b), 0700);
	ck_assert_int_eq(rename(entry_file(a), entry_file(b)), 0);
	expect_miss(dc, b);
	eng_diskcache_close(dc);
	free(data);
}
END_TEST

/* Give the entry of key a modification time `age` seconds in the past. */
static void age_file(const char *path, int age)
{
	struct timespec t[2];
	clock_gettime(CLOCK_REALTIME, &t[0]);
	t[0].tv_sec -= age;
	t[1] = t[0];
	ck_assert_int_eq(utimensat(AT_FDCWD, path, t, 0), 0);
}

START_TEST(test_lru_eviction)
{
	enum { PAYLOAD = 1000, ENTRY = PAYLOAD + ENG_DISKCACHE_HEADER_SIZE };
	eng_diskcache *dc = open_tmp(10 * ENTRY); /* evicts down to 9 entries */
	unsigned char *data = pattern(PAYLOAD, 4);
	char keys[11][33], name[32];
	for (int i = 0; i < 11; i++) {
		snprintf(name, sizeof(name), "entry %d", i);
		key_of(name, keys[i]);
	}
	for (int i = 0; i < 8; i++) {
		ck_assert_int_eq(eng_diskcache_put(dc, keys[i], data, PAYLOAD), ENG_OK);
		age_file(entry_file(keys[i]), 1000 - 10 * i); /* 0 oldest ... 7 newest */
	}
	/* using 0 and 1 makes them the most recent */
	expect_hit(dc, keys[0], data, PAYLOAD);
	expect_hit(dc, keys[1], data, PAYLOAD);
	for (int i = 8; i < 11; i++)
		ck_assert_int_eq(eng_diskcache_put(dc, keys[i], data, PAYLOAD), ENG_OK);
	/* 11 entries passed the limit: the two least recently used (2 and 3) went */
	for (int i = 0; i < 11; i++)
		ck_assert_msg(exists(entry_file(keys[i])) == (i != 2 && i != 3), "entry %d", i);
	ck_assert_uint_eq(eng_diskcache_size_estimate(dc), 9 * ENTRY);
	eng_diskcache_close(dc);
	free(data);
}
END_TEST

START_TEST(test_stale_temporary_files)
{
	char k[33];
	key_of("tmp", k);
	mkdir(tmp_path("%.2s", k), 0700);
	char stale[600], fresh[600];
	snprintf(stale, sizeof(stale), "%s.tmp.AAAAAA", entry_file(k));
	snprintf(fresh, sizeof(fresh), "%s.tmp.BBBBBB", entry_file(k));
	FILE *f = fopen(stale, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	f = fopen(fresh, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	age_file(stale, 2 * 3600);
	eng_diskcache *dc = open_tmp(0);
	ck_assert(!exists(stale));
	ck_assert(exists(fresh)); /* may belong to a writer at work */
	expect_miss(dc, k);
	eng_diskcache_close(dc);
}
END_TEST

START_TEST(test_unusable_directory)
{
	char msg[512];
	FILE *f = fopen(tmp_path("%s", "file"), "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	const char *dirs[] = {"file/cache", "file"};
	for (int i = 0; i < 2; i++) {
		char dir[512];
		snprintf(dir, sizeof(dir), "%s", tmp_path("%s", dirs[i]));
		msg[0] = 0;
		ck_assert_ptr_null(eng_diskcache_open(dir, 0, msg, sizeof(msg)));
		/* one sentence naming the directory */
		ck_assert_msg(strstr(msg, dir) != NULL && !strchr(msg, '\n') && msg[strlen(msg) - 1] == '.', "%s",
			      msg);
	}
	/* put failures are errors with a message, not crashes: the fan-out directory is a file */
	eng_diskcache *dc = open_tmp(0);
	char k[33];
	key_of("blocked", k);
	f = fopen(tmp_path("%.2s", k), "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	ck_assert_int_eq(eng_diskcache_put(dc, k, "abc", 3), ENG_EIO);
	ck_assert_msg(strstr(eng_diskcache_errmsg(dc), tmp_dir) != NULL, "%s", eng_diskcache_errmsg(dc));
	expect_miss(dc, k);
	/* an entry larger than the whole cache is refused */
	eng_diskcache_close(dc);
	dc = open_tmp(100);
	key_of("large", k);
	ck_assert_int_eq(eng_diskcache_put(dc, k, msg, sizeof(msg)), ENG_EINVAL);
	eng_diskcache_close(dc);
}
END_TEST

/* eng_diskcache_open(NULL) with XDG_CACHE_HOME and HOME set as given (NULL: unset), restored afterwards;
 * dir_out gets the directory opened, or the message. */
static eng_diskcache *open_default_with(const char *xdg, const char *home, char *dir_out, size_t cap)
{
	char *old_xdg = getenv("XDG_CACHE_HOME"), *old_home = getenv("HOME");
	old_xdg = old_xdg ? strdup(old_xdg) : NULL;
	old_home = old_home ? strdup(old_home) : NULL;
	xdg ? setenv("XDG_CACHE_HOME", xdg, 1) : unsetenv("XDG_CACHE_HOME");
	home ? setenv("HOME", home, 1) : unsetenv("HOME");
	char msg[512] = "";
	eng_diskcache *dc = eng_diskcache_open(NULL, 0, msg, sizeof(msg));
	snprintf(dir_out, cap, "%s", dc ? eng_diskcache_dir(dc) : msg);
	old_xdg ? setenv("XDG_CACHE_HOME", old_xdg, 1) : unsetenv("XDG_CACHE_HOME");
	old_home ? setenv("HOME", old_home, 1) : unsetenv("HOME");
	free(old_xdg);
	free(old_home);
	return dc;
}

START_TEST(test_default_directory)
{
	char xdg[512], home[512], got[600], want[600];
	snprintf(xdg, sizeof(xdg), "%s", tmp_path("%s", "xdg"));
	snprintf(home, sizeof(home), "%s", tmp_path("%s", "home"));
	eng_diskcache *dc = open_default_with(xdg, home, got, sizeof(got));
	snprintf(want, sizeof(want), "%s/tensord", xdg);
	ck_assert_ptr_nonnull(dc);
	ck_assert_str_eq(got, want);
	struct stat st;
	ck_assert_int_eq(stat(want, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0700);
	eng_diskcache_close(dc);
	dc = open_default_with(NULL, home, got, sizeof(got));
	snprintf(want, sizeof(want), "%s/.cache/tensord", home);
	ck_assert_ptr_nonnull(dc);
	ck_assert_str_eq(got, want);
	eng_diskcache_close(dc);
	ck_assert_ptr_null(open_default_with(NULL, NULL, got, sizeof(got)));
	ck_assert_msg(strstr(got, "HOME") != NULL, "%s", got);
}
END_TEST

/* One process of the concurrency test: rounds of put (if writer) and get of key; every hit must
 * be exactly want. Returns the number of bad reads, or -1 on a failed put. */
static int hammer(const char *key, const unsigned char *want, size_t n, int rounds, bool writer, int *hits)
{
	char msg[512];
	eng_diskcache *dc = eng_diskcache_open(tmp_dir, 0, msg, sizeof(msg));
	if (!dc)
		return -1;
	int bad = 0;
	for (int i = 0; i < rounds; i++) {
		if (writer && eng_diskcache_put(dc, key, want, n) != ENG_OK) {
			bad = -1;
			break;
		}
		void *got;
		size_t len;
		if (eng_diskcache_get(dc, key, &got, &len) == ENG_OK) {
			bad += len != n || memcmp(got, want, n) != 0;
			++*hits;
			free(got);
		}
	}
	eng_diskcache_close(dc);
	return bad;
}

START_TEST(test_concurrent_writers_never_tear)
{
	enum { NCHILD = 6, ROUNDS = 200 };
	size_t n = 256 * 1024;
	unsigned char *data = pattern(n, 5);
	char k[33];
	key_of("shared", k);
	pid_t pids[NCHILD];
	for (int i = 0; i < NCHILD; i++) {
		pids[i] = fork();
		ck_assert_int_ge(pids[i], 0);
		if (pids[i] == 0) {
			int hits = 0;
			_exit(hammer(k, data, n, ROUNDS, true, &hits) == 0 && hits > 0 ? 0 : 1);
		}
	}
	int hits = 0, bad = 0, done = 0, status[NCHILD];
	while (done < NCHILD) {
		bad += hammer(k, data, n, 20, false, &hits);
		for (int i = 0; i < NCHILD; i++)
			if (pids[i] > 0 && waitpid(pids[i], &status[i], WNOHANG) == pids[i]) {
				pids[i] = 0;
				done++;
			}
	}
	for (int i = 0; i < NCHILD; i++)
		ck_assert_msg(WIFEXITED(status[i]) && WEXITSTATUS(status[i]) == 0, "child %d: status %d", i, status[i]);
	ck_assert_int_eq(bad, 0);
	eng_diskcache *dc = open_tmp(0);
	expect_hit(dc, k, data, n);
	/* one entry and no temporary files are left */
	ck_assert_uint_eq(eng_diskcache_size_estimate(dc), n + ENG_DISKCACHE_HEADER_SIZE);
	char sub[3] = {k[0], k[1], 0};
	ck_assert_int_eq(count_files(sub), 1);
	eng_diskcache_close(dc);
	free(data);
}
END_TEST

/* ---- the CPU backend's disk-caching methods ---- */

#define KSRC_SCALE "void tk_scale(void *const *bufs, int64_t start, int64_t end) { float *o = bufs[0]; " \
		   "const float *a = bufs[1]; for (int64_t i = start; i < end; i++) o[i] = a[i] * 2.0f + 1.0f; }"
#define KSRC_SQ "void tk_sq(void *const *bufs, int64_t start, int64_t end) { float *o = bufs[0]; " \
		"const float *a = bufs[1]; for (int64_t i = start; i < end; i++) o[i] = a[i] * a[i]; }"

enum { NELEM = 1000 };

/* Targets a device may not state. */
static void target_without_dialect(void *dev, bk_target *t) { t->parallelism = 2; }
static void target_with_groups(void *dev, bk_target *t)
{
	*t = (bk_target){.dialect = &cpu_dialect, .parallelism = 2, .reduce_group = 64}; /* C has no work-groups */
}

static bk_device cpu_device(void)
{
	bk_device dev;
	bk_err err;
	bk_target tg;
	bk_opts opts = {.n = 1, .key = {"threads"}, .value = {"2"}};
	ck_assert_msg(bk_backend_find("CPU")->open(0, &opts, 0, &dev, &err) == ENG_OK, "%s", err.msg);
	ck_assert_msg(bk_device_check(&dev, &tg, &err) == ENG_OK, "%s", err.msg);
	return dev;
}

/* Run p (out[i] = f(a[i])) over NELEM floats a[i] = i - 500 and check every element. */
static void run_and_check(bk_device *dev, bk_program *p, float (*f)(float))
{
	bk_err err;
	void *o, *a;
	ck_assert_int_eq(dev->ops->alloc(dev->ctx, NELEM * sizeof(float), &o, &err), ENG_OK);
	ck_assert_int_eq(dev->ops->alloc(dev->ctx, NELEM * sizeof(float), &a, &err), ENG_OK);
	float in[NELEM], out[NELEM];
	for (int i = 0; i < NELEM; i++)
		in[i] = (float)(i - 500);
	dev->ops->copy_in(dev->ctx, a, 0, in, sizeof(in), &err);
	void *bufs[2] = {o, a};
	bk_launch l = {.nparallel = NELEM, .cost = 1e6};
	ck_assert_msg(dev->ops->launch(dev->ctx, p, bufs, 2, &l, &err) == ENG_OK, "%s", err.msg);
	dev->ops->copy_out(dev->ctx, o, 0, out, sizeof(out), &err);
	for (int i = 0; i < NELEM; i++)
		ck_assert_msg(out[i] == f(in[i]), "element %d: %g", i, out[i]);
	dev->ops->free(dev->ctx, o);
	dev->ops->free(dev->ctx, a);
}

static float scale_ref(float x) { return x * 2.0f + 1.0f; }
static float sq_ref(float x) { return x * x; }

START_TEST(test_cpu_blob_load_round_trip)
{
	bk_device dev = cpu_device();
	bk_err err;
	const char *srcs[2] = {KSRC_SCALE, KSRC_SQ}, *names[2] = {"tk_scale", "tk_sq"};
	bk_program *progs[2], *loaded[2];
	ck_assert_msg(dev.ops->compile(dev.ctx, srcs, 2, names, progs, &err) == ENG_OK, "%s", err.msg);
	run_and_check(&dev, progs[0], scale_ref);
	const void *blob;
	size_t n;
	const char *sym;
	ck_assert_int_eq(dev.ops->program_blob(dev.ctx, progs[0], &blob, &n, &sym, &err), ENG_OK);
	ck_assert_str_eq(sym, "tk_scale");
	ck_assert_uint_gt(n, 4);
	ck_assert(memcmp(blob, "\177ELF", 4) == 0);
	/* through the disk cache: keyed by cache_id and source, stored, read back, loaded */
	eng_diskcache *dc = open_tmp(0);
	const char *id = dev.ops->cache_id(dev.ctx);
	const void *parts[2] = {id, srcs[0]};
	size_t lens[2] = {strlen(id), strlen(srcs[0])};
	char key[33];
	eng_diskcache_key(parts, lens, 2, key);
	ck_assert_int_eq(eng_diskcache_put(dc, key, blob, n), ENG_OK);
	void *got;
	size_t gn;
	ck_assert_int_eq(eng_diskcache_get(dc, key, &got, &gn), ENG_OK);
	eng_diskcache_close(dc);
	/* the module holds both kernels; the originals may go first */
	dev.ops->program_free(dev.ctx, progs[0]);
	dev.ops->program_free(dev.ctx, progs[1]);
	ck_assert_msg(dev.ops->load(dev.ctx, got, gn, names, 2, loaded, &err) == ENG_OK, "%s", err.msg);
	free(got);
	run_and_check(&dev, loaded[0], scale_ref);
	run_and_check(&dev, loaded[1], sq_ref);
	/* a loaded program has a blob too, equal to what it was loaded from */
	ck_assert_int_eq(dev.ops->program_blob(dev.ctx, loaded[1], &blob, &gn, &sym, &err), ENG_OK);
	ck_assert_str_eq(sym, "tk_sq");
	ck_assert_uint_eq(gn, n);
	dev.ops->program_free(dev.ctx, loaded[0]);
	dev.ops->program_free(dev.ctx, loaded[1]);
	dev.ops->destroy(dev.ctx);
}
END_TEST

START_TEST(test_cpu_cache_id_and_bad_modules)
{
	bk_device dev = cpu_device(), other = cpu_device();
	bk_err err;
	const char *id = dev.ops->cache_id(dev.ctx);
	ck_assert_uint_gt(strlen(id), 0);
	ck_assert_ptr_eq(dev.ops->cache_id(dev.ctx), id);
	ck_assert_str_eq(other.ops->cache_id(other.ctx), id);
	ck_assert_msg(strstr(id, "-march=native -mtune=generic") && strstr(id, "cc=") && strstr(id, "cpu="), "%s", id);
	other.ops->destroy(other.ctx);
	/* the tuning is part of the identity: code scheduled for another CPU is another module */
	bk_opts tuned = {.n = 2, .key = {"threads", "mtune"}, .value = {"2", "native"}};
	ck_assert_msg(bk_backend_find("CPU")->open(0, &tuned, 0, &other, &err) == ENG_OK, "%s", err.msg);
	const char *tid = other.ops->cache_id(other.ctx);
	ck_assert_msg(strstr(tid, "-mtune=native") && strcmp(tid, id), "%s", tid);
	other.ops->destroy(other.ctx);
	/* garbage is an error, not a crash */
	bk_program *p[1] = {(bk_program *)1};
	const char *names[1] = {"tk_scale"};
	static const char junk[] = "\177ELF this is not a shared object";
	ck_assert_int_ne(dev.ops->load(dev.ctx, junk, sizeof(junk), names, 1, p, &err), ENG_OK);
	ck_assert_ptr_null(p[0]);
	ck_assert_uint_gt(strlen(err.msg), 0);
	ck_assert_int_ne(dev.ops->load(dev.ctx, "", 0, names, 1, p, &err), ENG_OK);
	/* a valid module without the named kernel: an error, and nothing leaks */
	const char *srcs[1] = {KSRC_SCALE};
	bk_program *good[1];
	ck_assert_msg(dev.ops->compile(dev.ctx, srcs, 1, names, good, &err) == ENG_OK, "%s", err.msg);
	const void *blob;
	size_t n;
	const char *sym, *two[2] = {"tk_scale", "tk_missing"};
	ck_assert_int_eq(dev.ops->program_blob(dev.ctx, good[0], &blob, &n, &sym, &err), ENG_OK);
	bk_program *q[2];
	ck_assert_int_eq(dev.ops->load(dev.ctx, blob, n, two, 2, q, &err), ENG_ECOMPILE);
	ck_assert_ptr_null(q[0]);
	ck_assert_ptr_null(q[1]);
	ck_assert_msg(strstr(err.msg, "tk_missing") != NULL, "%s", err.msg);
	dev.ops->program_free(dev.ctx, good[0]);
	/* the disk-caching methods are optional, but only as a set */
	bk_device_ops ops = *dev.ops;
	bk_device half = {.ops = &ops, .ctx = dev.ctx};
	bk_target tg;
	ops.load = NULL;
	ck_assert_int_eq(bk_device_check(&half, &tg, &err), ENG_EINVAL);
	ops.cache_id = NULL;
	ops.program_blob = NULL;
	ck_assert_int_eq(bk_device_check(&half, &tg, &err), ENG_OK);
	ck_assert_ptr_eq(tg.dialect, &cpu_dialect);
	/* the target is checked too: a dialect, parallelism, groups only with work-groups */
	ops.target = target_without_dialect;
	ck_assert_int_eq(bk_device_check(&half, &tg, &err), ENG_EINVAL);
	ck_assert_msg(strstr(err.msg, "dialect"), "%s", err.msg);
	ops.target = target_with_groups;
	ck_assert_int_eq(bk_device_check(&half, &tg, &err), ENG_EINVAL);
	ck_assert_msg(strstr(err.msg, "reduce_group"), "%s", err.msg);
	ops.target = NULL;
	ck_assert_int_eq(bk_device_check(&half, &tg, &err), ENG_EINVAL);
	ck_assert_msg(strstr(err.msg, "target"), "%s", err.msg);
	dev.ops->destroy(dev.ctx);
}
END_TEST

Suite *diskcache_suite(void)
{
	Suite *s = suite_create("diskcache");
	TCase *tc = tcase_create("diskcache");
	tcase_set_timeout(tc, TU_TIMEOUT);
	tcase_add_unchecked_fixture(tc, root_setup, root_teardown);
	tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_miss_and_bad_keys);
	tcase_add_test(tc, test_key_parts);
	tcase_add_test(tc, test_corrupt_entries_are_removed);
	tcase_add_test(tc, test_lru_eviction);
	tcase_add_test(tc, test_stale_temporary_files);
	tcase_add_test(tc, test_unusable_directory);
	tcase_add_test(tc, test_default_directory);
	tcase_add_test(tc, test_concurrent_writers_never_tear);
	tcase_add_test(tc, test_cpu_blob_load_round_trip);
	tcase_add_test(tc, test_cpu_cache_id_and_bad_modules);
	suite_add_tcase(s, tc);
	return s;
}
