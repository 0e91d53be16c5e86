/* test_beam.c: the search over kernel options (engine/realize/beam.c): searched kernels give the
 * reference result, a second process takes the recorded choice without searching, and corrupt,
 * stale or foreign records are ignored (a fresh search runs and the result stays right). */
#include <check.h>
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tensord/jit.h>

#include "cache/diskcache.h"
#include "realize/beamcache.h"
#include "testutil.h"

/* The running test's cache directory and context (both gone after the teardown, also when the
 * test failed half-way with CK_FORK=no). */
static char dir[64];
static eng_ctx *live;

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path) < 0 ? -1 : 0;
}

static void dir_setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/tensord-beam-XXXXXX");
	ck_assert_msg(mkdtemp(dir) != NULL, "mkdtemp failed");
}

static void dir_teardown(void)
{
	eng_ctx_destroy(live);
	live = NULL;
	if (dir[0])
		nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
	dir[0] = 0;
}

/* What the log said, for checks on the search's lines. */
typedef struct logbuf {
	char text[1 << 16];
	size_t n;
} logbuf;

static void log_to(void *arg, int level, const char *msg)
{
	logbuf *l = arg;
	if (level > 0 && strncmp(msg, "beam:", 5) && !strstr(msg, "opts:"))
		return;
	int w = snprintf(l->text + l->n, sizeof(l->text) - l->n, "%s\n", msg);
	if (w > 0 && l->n + (size_t)w < sizeof(l->text))
		l->n += (size_t)w;
}

/* A context on device searching with beam width `beam` (below 0: off, whatever the environment
 * says) and budget seconds per kernel, on the suite's cache directory; NULL with err set if
 * the device does not open. */
static eng_ctx *beam_ctx_on(const char *device, int beam, int debug, double budget, char *err, size_t errlen)
{
	eng_ctx_opts o;
	eng_ctx_opts_default(&o);
	o.debug = debug;
	o.device = device;
	o.cache_dir = dir;
	o.beam = beam;
	o.beam_budget = budget;
	return eng_ctx_create(&o, err, errlen);
}

static eng_ctx *beam_ctx(int debug, double budget)
{
	char err[256];
	return beam_ctx_on("CPU", 2, debug, budget, err, sizeof(err));
}

/* A searched matmul and a convolution (a reduction over channels and a window) match the
 * reference evaluator; each was searched once and the search said what it chose. */
START_TEST(test_searched_kernels_match_reference)
{
	eng_ctx *ctx = live = beam_ctx(3, 3.0);
	ck_assert_ptr_nonnull(ctx);
	static logbuf lg;
	lg.n = 0;
	eng_set_log(ctx, log_to, &lg);
	tu_rng r = {7};
	int64_t sa[2] = {48, 32}, sb[2] = {32, 64}, sx[4] = {1, 4, 10, 10}, sw[4] = {8, 4, 3, 3};
	eng_tensor *a = tu_rand(ctx, &r, ENG_F32, 2, sa, -1, 1),
		   *b = tu_rand(ctx, &r, ENG_F32, 2, sb, -1, 1);
	eng_tensor *x = tu_rand(ctx, &r, ENG_F32, 4, sx, -1, 1),
		   *w = tu_rand(ctx, &r, ENG_F32, 4, sw, -1, 1);
	tu_batch *bt = tu_batch_new(ctx);
	tu_batch_ref(bt, eng_matmul(a, b), 1e-4, 1e-4, "matmul");
	tu_batch_ref(bt, eng_conv2d(x, w, NULL, NULL, NULL, NULL, 1), 1e-4, 1e-4, "conv2d");
	tu_batch_check(bt);
	eng_stats st;
	eng_get_stats(ctx, &st);
	ck_assert_uint_ge(st.searches, 2);
	ck_assert_msg(strstr(lg.text, "variants timed"), "no search line in the log:\n%s", lg.text);
	/* the same kernels again (a new graph, so no schedule-cache hit): the choices come from
	 * memory, no second search */
	eng_tensor *a2 = tu_rand(ctx, &r, ENG_F32, 2, sa, -1, 1);
	tu_batch *b2 = tu_batch_new(ctx);
	tu_batch_ref(b2, eng_matmul(a2, b), 1e-4, 1e-4, "matmul again");
	tu_batch_check(b2);
	eng_stats st2;
	eng_get_stats(ctx, &st2);
	ck_assert_uint_eq(st2.searches, st.searches);
	ck_assert_uint_ge(st2.search_hits, st.search_hits + 1);
	eng_ctx_destroy(ctx);
	live = NULL;
}
END_TEST

/* On OpenCL (where the machine has it; else "beam: opencl SKIPPED"): work-group sizes are among
 * the options, and a row sum that runs in work-groups and a matmul still match the reference. */
START_TEST(test_searched_on_opencl)
{
	char err[256];
	eng_ctx *ctx = live = beam_ctx_on("CL", 2, 0, 4.0, err, sizeof(err));
	if (!ctx) {
		fprintf(stderr, "beam: opencl SKIPPED (%s)\n", err);
		return;
	}
	tu_rng r = {11};
	int64_t sr[2] = {4, 8192}, sa[2] = {32, 48}, sb[2] = {48, 32};
	int axes[1] = {1};
	tu_batch *bt = tu_batch_new(ctx);
	tu_batch_ref(bt, eng_sum(tu_rand(ctx, &r, ENG_F32, 2, sr, -1, 1), axes, 1, false), 1e-4,
		     1e-3, "row sums");
	tu_batch_ref(bt,
		     eng_matmul(tu_rand(ctx, &r, ENG_F32, 2, sa, -1, 1),
				tu_rand(ctx, &r, ENG_F32, 2, sb, -1, 1)),
		     1e-4, 1e-4, "matmul");
	tu_batch_check(bt);
	eng_stats st;
	eng_get_stats(ctx, &st);
	ck_assert_uint_ge(st.searches, 2);
	eng_ctx_destroy(ctx);
	live = NULL;
}
END_TEST

static eng_status jit_step(eng_ctx *ctx, eng_tensor *const *in, int nin, eng_tensor **out, int nout,
			   void *user)
{
	out[0] = eng_relu(eng_matmul(in[0], in[1]));
	return out[0] ? ENG_OK : eng_error(ctx);
}

/* A JIT step searches once, when its kernel is first scheduled; the capture and the replays run
 * the chosen program and compute the right values every call. */
START_TEST(test_jit_replays_the_choice)
{
	eng_ctx *ctx = live = beam_ctx(0, 2.0);
	ck_assert_ptr_nonnull(ctx);
	eng_jit *j = eng_jit_create(ctx, jit_step, NULL, 2, 1, NULL);
	ck_assert_ptr_nonnull(j);
	tu_rng r = {5};
	int64_t sa[2] = {24, 40}, sb[2] = {40, 32};
	for (int call = 0; call < 4; call++) {
		double va[24 * 40], vb[40 * 32];
		eng_tensor *in[2] = {tu_quant(ctx, &r, ENG_F32, 2, sa, -2, 2, 0.25, va),
				     tu_quant(ctx, &r, ENG_F32, 2, sb, -2, 2, 0.25, vb)},
			   *out[1];
		ck_assert_int_eq(eng_jit_call(j, in, out), ENG_OK);
		double *got = tu_read(out[0]);
		for (int i = 0; i < 24; i++)
			for (int k = 0; k < 32; k++) {
				double want = 0;
				for (int m = 0; m < 40; m++)
					want += va[i * 40 + m] * vb[m * 32 + k];
				want = want > 0 ? want : 0;
				ck_assert_msg(got[i * 32 + k] == want,
					      "call %d [%d,%d]: %g, want %g", call, i, k,
					      got[i * 32 + k], want);
			}
		free(got);
	}
	eng_jit_info ji;
	eng_jit_get_info(j, &ji);
	ck_assert_uint_ge(ji.replays, 2);
	eng_stats st;
	eng_get_stats(ctx, &st);
	ck_assert_uint_eq(st.searches, 1);
	eng_jit_destroy(j);
	eng_ctx_destroy(ctx);
	live = NULL;
}
END_TEST

/* Turned off: no search, no record. */
START_TEST(test_off)
{
	char err[256];
	eng_ctx *ctx = live = beam_ctx_on("CPU", -1, 0, 0, err, sizeof(err));
	ck_assert_ptr_nonnull(ctx);
	tu_rng r = {3};
	int64_t s[2] = {32, 32};
	tu_batch *bt = tu_batch_new(ctx);
	tu_batch_ref(bt,
		     eng_matmul(tu_rand(ctx, &r, ENG_F32, 2, s, -1, 1),
				tu_rand(ctx, &r, ENG_F32, 2, s, -1, 1)),
		     1e-4, 1e-4, "matmul");
	tu_batch_check(bt);
	eng_stats st;
	eng_get_stats(ctx, &st);
	ck_assert_uint_eq(st.searches, 0);
	ck_assert_uint_eq(st.search_hits, 0);
	eng_ctx_destroy(ctx);
	live = NULL;
}
END_TEST

/* ---- other processes: a child computes a 32x32 @ 32x32 matmul on the cache directory and
 * says through its exit status whether it went as expected. */

enum {
	CHILD_OK = 0,
	CHILD_NO_CTX = 10,
	CHILD_ERROR,
	CHILD_WRONG,
	CHILD_SEARCHES,
	CHILD_HITS,
	CHILD_OPTS
};

#define N 32

/* In a child: realize the matmul, compare with a host computation, and check that it searched
 * `searches` kernels, took `hits` recorded choices and, if opts is given, that the DEBUG line of
 * the kernel's options has it. Exits with one of the codes above. */
static void child(int searches, int hits, const char *opts)
{
	eng_ctx *ctx = beam_ctx(3, 1.5);
	if (!ctx)
		_exit(CHILD_NO_CTX);
	static logbuf lg;
	eng_set_log(ctx, log_to, &lg);
	static float a[N * N], b[N * N], c[N * N];
	for (int i = 0; i < N * N; i++)
		a[i] = (float)((i * 7) % 13 - 6) / 8, b[i] = (float)((i * 5) % 11 - 5) / 4;
	int64_t s[2] = {N, N};
	eng_tensor *t = eng_matmul(eng_from_data(ctx, ENG_F32, 2, s, a),
				   eng_from_data(ctx, ENG_F32, 2, s, b));
	if (!t || eng_tensor_read(t, c, sizeof(c))) {
		fprintf(stderr, "child: %s\n", eng_errmsg(ctx));
		_exit(CHILD_ERROR);
	}
	int code = CHILD_OK;
	for (int i = 0; i < N && code == CHILD_OK; i++)
		for (int j = 0; j < N; j++) {
			double want = 0;
			for (int k = 0; k < N; k++)
				want += (double)a[i * N + k] * b[k * N + j];
			if (c[i * N + j] < want - 1e-3 || c[i * N + j] > want + 1e-3) {
				code = CHILD_WRONG;
				break;
			}
		}
	eng_stats st;
	eng_get_stats(ctx, &st);
	if (code == CHILD_OK && (int)st.searches != searches)
		code = CHILD_SEARCHES;
	if (code == CHILD_OK && (int)st.search_hits != hits)
		code = CHILD_HITS;
	if (code == CHILD_OK && opts && !strstr(lg.text, opts))
		code = CHILD_OPTS;
	if (code != CHILD_OK)
		fprintf(stderr, "child: code %d, %llu searches, %llu hits; log:\n%s\n", code,
			(unsigned long long)st.searches, (unsigned long long)st.search_hits,
			lg.text);
	eng_ctx_destroy(ctx);
	_exit(code);
}

/* Run child(searches, hits, opts) in a new process; its exit status. */
static int in_process(int searches, int hits, const char *opts)
{
	fflush(NULL);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		child(searches, hits, opts);
	int status = 0;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status), "the child died (status %d)", status);
	return WEXITSTATUS(status);
}

/* The search's records in the cache directory: entry files whose payload is a beam record.
 * Fills paths (at most max) and returns how many. */
static int records(char paths[][256], int max)
{
	int n = 0;
	DIR *top = opendir(dir);
	ck_assert_ptr_nonnull(top);
	struct dirent *e;
	while ((e = readdir(top))) {
		if (e->d_name[0] == '.' || strlen(e->d_name) != 2)
			continue;
		char sub[128];
		snprintf(sub, sizeof(sub), "%s/%.2s", dir, e->d_name);
		DIR *d = opendir(sub);
		struct dirent *f;
		while (d && (f = readdir(d))) {
			char p[256], magic[4];
			snprintf(p, sizeof(p), "%.128s/%.32s", sub, f->d_name);
			FILE *fp = strlen(f->d_name) == 32 ? fopen(p, "rb") : NULL;
			if (fp && !fseek(fp, ENG_DISKCACHE_HEADER_SIZE, SEEK_SET) &&
			    fread(magic, 1, 4, fp) == 4 && !memcmp(magic, "TSDB", 4) && n < max)
				snprintf(paths[n++], 256, "%s", p);
			if (fp)
				fclose(fp);
		}
		if (d)
			closedir(d);
	}
	closedir(top);
	return n;
}

/* The machine and kernel hashes a record carries (little-endian, bytes 8 and 16). */
static void record_hashes(const unsigned char *rec, uint64_t *mh, uint64_t *kh)
{
	*mh = *kh = 0;
	for (int i = 7; i >= 0; i--)
		*mh = *mh << 8 | rec[8 + i], *kh = *kh << 8 | rec[16 + i];
}

/* The one record of the first child's search: its path, key and payload. */
static void the_record(char path[256], char key[33], unsigned char rec[ENG_BEAM_RECORD_SIZE])
{
	char paths[8][256];
	ck_assert_int_eq(records(paths, 8), 1);
	snprintf(path, 256, "%s", paths[0]);
	snprintf(key, 33, "%s", strrchr(path, '/') + 1);
	FILE *f = fopen(path, "rb");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fseek(f, ENG_DISKCACHE_HEADER_SIZE, SEEK_SET), 0);
	ck_assert_uint_eq(fread(rec, 1, ENG_BEAM_RECORD_SIZE, f), ENG_BEAM_RECORD_SIZE);
	fclose(f);
}

/* Replace the record under key with rec (a well-formed disk cache entry). */
static void plant(const char key[33], const unsigned char rec[ENG_BEAM_RECORD_SIZE])
{
	char msg[256];
	eng_diskcache *dc = eng_diskcache_open(dir, 0, msg, sizeof(msg));
	ck_assert_msg(dc != NULL, "%s", msg);
	ck_assert_int_eq(eng_diskcache_put(dc, key, rec, ENG_BEAM_RECORD_SIZE), ENG_OK);
	eng_diskcache_close(dc);
}

START_TEST(test_second_process_reuses_the_choice)
{
	ck_assert_int_eq(in_process(1, 0, "variants timed"), CHILD_OK);
	char path[256], key[33];
	unsigned char rec[ENG_BEAM_RECORD_SIZE];
	the_record(path, key, rec);
	/* no search, the choice from disk */
	ck_assert_int_eq(in_process(0, 1, NULL), CHILD_OK);
}
END_TEST

/* A recorded choice the heuristics would not make is what the kernel then runs with, and it
 * computes the same values: a wide tile of 4 on the output's columns, nothing else; then with
 * blocks, a packed panel, and packed blocks of rows. */
START_TEST(test_recorded_choice_is_applied)
{
	ck_assert_int_eq(in_process(1, 0, NULL), CHILD_OK);
	char path[256], key[33];
	unsigned char rec[ENG_BEAM_RECORD_SIZE];
	the_record(path, key, rec);
	uint64_t mh, kh;
	record_hashes(rec, &mh, &kh);
	eng_kernel_choice c = eng_choice_none();
	c.tiledim[0] = 1, c.tile[0] = 4;
	unsigned char mine[ENG_BEAM_RECORD_SIZE];
	eng_beam_encode(mh, kh, &c, mine);
	plant(key, mine);
	ck_assert_int_eq(in_process(0, 1, "SEARCHED wide d1x4"), CHILD_OK);
	/* the same with a narrow tile and the reduction blocked */
	c.tiledim[1] = 0, c.tile[1] = 2, c.kblock = 16, c.mblock = 2;
	eng_beam_encode(mh, kh, &c, mine);
	plant(key, mine);
	ck_assert_int_eq(in_process(0, 1, "SEARCHED wide d1x4 narrow d0x2 kblock 16 mblock 2"),
			 CHILD_OK);
	/* and with the right operand (buffer 1: the kernel's buffers are a, b, then the output)
	 * packed per reduction block */
	c.tiledim[1] = 0, c.tile[1] = 4, c.tile[0] = 16, c.mblock = 1, c.pack = 1;
	eng_beam_encode(mh, kh, &c, mine);
	plant(key, mine);
	ck_assert_int_eq(in_process(0, 1, "SEARCHED wide d1x16 narrow d0x4 kblock 16 mblock 1 pack buf 1"),
			 CHILD_OK);
	/* and with the left operand packed per block of 8 rows in tiles of 3, the last tile of each
	 * block overhanging it by one row */
	c.tile[1] = 3, c.mblock = 3, c.mrows = 8, c.rpack = 0;
	eng_beam_encode(mh, kh, &c, mine);
	plant(key, mine);
	ck_assert_int_eq(in_process(0, 1, "SEARCHED wide d1x16 narrow d0x3 kblock 16 mblock 3 pack buf 1 rpack buf 0 mrows 8"),
			 CHILD_OK);
	/* the lowering packed them: a block (per call) of 3 tiles x 3 rows x 16 steps of float32 */
	ck_assert_int_eq(in_process(0, 1, "scratch 576 bytes"), CHILD_OK);
}
END_TEST

/* A record with flipped bytes fails the disk cache's checksum: it is dropped, the kernel is
 * searched again and a good record written. */
START_TEST(test_corrupt_record_is_ignored)
{
	ck_assert_int_eq(in_process(1, 0, NULL), CHILD_OK);
	char path[256], key[33];
	unsigned char rec[ENG_BEAM_RECORD_SIZE];
	the_record(path, key, rec);
	FILE *f = fopen(path, "r+b");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fseek(f, ENG_DISKCACHE_HEADER_SIZE + 40, SEEK_SET), 0);
	unsigned char junk[8] = {0x55, 0xaa, 0x55, 0xaa, 0x55, 0xaa, 0x55, 0xaa};
	ck_assert_uint_eq(fwrite(junk, 1, sizeof(junk), f), sizeof(junk));
	fclose(f);
	ck_assert_int_eq(in_process(1, 0, NULL), CHILD_OK);
	ck_assert_int_eq(in_process(0, 1, NULL), CHILD_OK); /* the new record */
}
END_TEST

/* Well-formed entries that are stale: another record format, another machine, a choice that no
 * longer fits the kernel (a tile that does not divide it), a record of another length. Each
 * is ignored: the kernel is searched again and computes the right values. */
START_TEST(test_stale_records_are_ignored)
{
	ck_assert_int_eq(in_process(1, 0, NULL), CHILD_OK);
	char path[256], key[33];
	unsigned char rec[ENG_BEAM_RECORD_SIZE], bad[ENG_BEAM_RECORD_SIZE];
	the_record(path, key, rec);
	for (int kind = 0; kind < 4; kind++) {
		memcpy(bad, rec, sizeof(bad));
		if (kind == 0)
			bad[4] ^= 0x7f; /* format */
		else if (kind == 1)
			bad[9] ^= 1; /* machine */
		else if (kind == 2) {
			uint64_t mh, kh;
			record_hashes(rec, &mh, &kh);
			eng_kernel_choice c = eng_choice_none();
			c.tiledim[0] = 1, c.tile[0] = 7;
			eng_beam_encode(mh, kh, &c, bad);
		}
		if (kind == 3) { /* a shorter payload under the key */
			char msg[256];
			eng_diskcache *dc = eng_diskcache_open(dir, 0, msg, sizeof(msg));
			ck_assert_ptr_nonnull(dc);
			ck_assert_int_eq(eng_diskcache_put(dc, key, rec, ENG_BEAM_RECORD_SIZE - 8),
					 ENG_OK);
			eng_diskcache_close(dc);
		} else {
			plant(key, bad);
		}
		ck_assert_msg(in_process(1, 0, NULL) == CHILD_OK, "stale record %d", kind);
	}
}
END_TEST

/* The record's encoding: what is written reads back; another format, machine or kernel does not. */
START_TEST(test_record_round_trip)
{
	eng_kernel_choice c = {.tiledim = {2, 0},
			       .tile = {16, 4},
			       .kblock = 128,
			       .mblock = 4,
			       .pack = 1,
			       .group = 0,
			       .mrows = 100,
			       .rpack = 0},
			  d;
	unsigned char rec[ENG_BEAM_RECORD_SIZE];
	eng_beam_encode(11, 22, &c, rec);
	ck_assert(eng_beam_decode(rec, sizeof(rec), 11, 22, &d));
	ck_assert(eng_choice_equal(&c, &d));
	ck_assert(!eng_beam_decode(rec, sizeof(rec), 12, 22, &d));
	ck_assert(!eng_beam_decode(rec, sizeof(rec), 11, 23, &d));
	ck_assert(!eng_beam_decode(rec, sizeof(rec) - 1, 11, 22, &d));
	rec[4]++;
	ck_assert(!eng_beam_decode(rec, sizeof(rec), 11, 22, &d));
}
END_TEST

Suite *beam_suite(void)
{
	Suite *s = suite_create("beam");
	TCase *tc = tcase_create("beam");
	tcase_set_timeout(tc, TU_TIMEOUT);
	tcase_add_checked_fixture(tc, dir_setup, dir_teardown);
	tcase_add_test(tc, test_record_round_trip);
	tcase_add_test(tc, test_off);
	tcase_add_test(tc, test_searched_kernels_match_reference);
	tcase_add_test(tc, test_searched_on_opencl);
	tcase_add_test(tc, test_jit_replays_the_choice);
	tcase_add_test(tc, test_second_process_reuses_the_choice);
	tcase_add_test(tc, test_recorded_choice_is_applied);
	tcase_add_test(tc, test_corrupt_record_is_ignored);
	tcase_add_test(tc, test_stale_records_are_ignored);
	suite_add_tcase(s, tc);
	return s;
}
