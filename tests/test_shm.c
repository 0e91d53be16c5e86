/* test_shm.c: the daemon's shared-memory regions (daemon/shm.c; suite `shm`): a sealed memfd
 * registered and mapped, refused when it is not a memfd, not sealed against shrinking, empty,
 * over the limits, read-only for a writable region, or named twice; spans checked against the
 * region (bounds, overflow, alignment); a region kept mapped by a reference after its set is
 * gone; the owner's ftruncate refused by the seal. The live path (the fd over unix://, infer
 * with references) is in the daemon suites. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>

#include "daemon/shm.h"
#include "daemon_harness.h"
#include "suites.h"

/* A memfd of size bytes filled with byte fill; sealed against shrinking when seal. */
static int memfd_of(size_t size, int fill, bool seal)
{
	int fd = memfd_create("tsd-test", MFD_ALLOW_SEALING | MFD_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
	if (size) {
		void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		ck_assert_ptr_ne(p, MAP_FAILED);
		memset(p, fill, size);
		munmap(p, size);
	}
	if (seal)
		ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	return fd;
}

static const dmn_shm_limits lim = {.regions_max = 2, .client_bytes_max = 1 << 20};

START_TEST(test_register_and_span)
{
	dmn_shm_set *set = dmn_shm_set_new();
	int fd = memfd_of(4096, 7, true);
	uint64_t size = 0;
	char err[256] = "";
	ck_assert_int_eq(dmn_shm_register(set, &lim, "cam", fd, false, &size, err, sizeof(err)), TSD_OK);
	close(fd); /* the mapping outlives the fd */
	ck_assert_uint_eq(size, 4096);
	ck_assert_int_eq(dmn_shm_set_count(set), 1);
	ck_assert_uint_eq(dmn_shm_set_bytes(set), 4096);
	dmn_shm_region *g = dmn_shm_find(set, "cam");
	ck_assert_ptr_nonnull(g);
	ck_assert(!dmn_shm_writable(g));
	const uint8_t *p = dmn_shm_span(g, 4000, 96, 4, "x", err, sizeof(err));
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(p[0], 7);
	ck_assert_int_eq(p[95], 7);
	/* one byte past the end, an offset past it, a sum that wraps, a misaligned offset */
	ck_assert_ptr_null(dmn_shm_span(g, 4000, 97, 1, "x", err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "outside region \"cam\" (4096 bytes)"));
	ck_assert_ptr_null(dmn_shm_span(g, 5000, 0, 1, "x", err, sizeof(err)));
	ck_assert_ptr_null(dmn_shm_span(g, 64, UINT64_MAX - 10, 1, "x", err, sizeof(err)));
	ck_assert_ptr_null(dmn_shm_span(g, 2, 4, 4, "in", err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "in: offset 2 is not a multiple of 4"));
	ck_assert_ptr_nonnull(dmn_shm_span(g, 4096, 0, 1, "x", err, sizeof(err))); /* empty at the end */
	/* the seal holds: the owner cannot shrink it under the mapping */
	fd = memfd_of(64, 0, true);
	ck_assert_int_ne(ftruncate(fd, 8), 0);
	close(fd);
	dmn_shm_set_free(set);
}
END_TEST

START_TEST(test_refused)
{
	dmn_shm_set *set = dmn_shm_set_new();
	uint64_t size;
	char err[256];
	int fd = memfd_of(4096, 0, false);
	ck_assert_int_eq(dmn_shm_register(set, &lim, "a", fd, false, &size, err, sizeof(err)), TSD_BAD_REQUEST);
	ck_assert_ptr_nonnull(strstr(err, "F_SEAL_SHRINK"));
	close(fd);
	char path[] = "/tmp/tsd-shm-XXXXXX";
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_assert_int_eq(ftruncate(fd, 4096), 0);
	ck_assert_int_eq(dmn_shm_register(set, &lim, "a", fd, false, &size, err, sizeof(err)), TSD_BAD_REQUEST);
	ck_assert_ptr_nonnull(strstr(err, "not a memfd"));
	close(fd);
	fd = memfd_of(0, 0, true);
	ck_assert_int_eq(dmn_shm_register(set, &lim, "a", fd, false, &size, err, sizeof(err)), TSD_BAD_REQUEST);
	ck_assert_ptr_nonnull(strstr(err, "empty"));
	close(fd);
	fd = memfd_of(4096, 0, true);
	ck_assert_int_eq(dmn_shm_register(set, &lim, "bad/name", fd, false, &size, err, sizeof(err)), TSD_BAD_REQUEST);
	/* writable needs a read-write fd */
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	int ro = open(proc, O_RDONLY);
	ck_assert_int_ge(ro, 0);
	ck_assert_int_eq(dmn_shm_register(set, &lim, "w", ro, true, &size, err, sizeof(err)), TSD_BAD_REQUEST);
	ck_assert_ptr_nonnull(strstr(err, "read-write"));
	ck_assert_int_eq(dmn_shm_register(set, &lim, "r", ro, false, &size, err, sizeof(err)), TSD_OK);
	close(ro);
	ck_assert_int_eq(dmn_shm_register(set, &lim, "r", fd, true, &size, err, sizeof(err)), TSD_BAD_REQUEST);
	ck_assert_ptr_nonnull(strstr(err, "registered already"));
	ck_assert_int_eq(dmn_shm_register(set, &lim, "w", fd, true, &size, err, sizeof(err)), TSD_OK);
	ck_assert(dmn_shm_writable(dmn_shm_find(set, "w")));
	/* the limits: regions per client, bytes per client */
	ck_assert_int_eq(dmn_shm_register(set, &lim, "x", fd, false, &size, err, sizeof(err)), TSD_TOO_LARGE);
	ck_assert_ptr_nonnull(strstr(err, "shm_regions_max"));
	close(fd);
	ck_assert_int_eq(dmn_shm_unregister(set, "r", err, sizeof(err)), TSD_OK);
	ck_assert_int_eq(dmn_shm_unregister(set, "r", err, sizeof(err)), TSD_BAD_REQUEST);
	fd = memfd_of((1 << 20) - 4095, 0, true);
	ck_assert_int_eq(dmn_shm_register(set, &lim, "big", fd, false, &size, err, sizeof(err)), TSD_TOO_LARGE);
	ck_assert_ptr_nonnull(strstr(err, "shm_client_bytes_max"));
	close(fd);
	dmn_shm_set_free(set);
}
END_TEST

START_TEST(test_reference_outlives_set)
{
	dmn_shm_set *set = dmn_shm_set_new();
	int fd = memfd_of(8192, 3, true);
	uint64_t size;
	char err[256];
	ck_assert_int_eq(dmn_shm_register(set, &lim, "out", fd, true, &size, err, sizeof(err)), TSD_OK);
	dmn_shm_region *g = dmn_shm_find(set, "out");
	dmn_shm_ref(g); /* a request in flight */
	dmn_shm_set_free(set); /* the client went */
	uint8_t *p = dmn_shm_span(g, 0, 8192, 1, "y", err, sizeof(err));
	ck_assert_ptr_nonnull(p);
	p[8191] = 42; /* still mapped, shared with the owner */
	uint8_t b = 0;
	ck_assert_int_eq(pread(fd, &b, 1, 8191), 1);
	ck_assert_int_eq(b, 42);
	dmn_shm_unref(g);
	close(fd);
}
END_TEST

/* ---- live ---- */

/* y = x * w: x [-1,4], w [4], batched */
#define TINY_SPEC                                                                                         \
	"{\"name\":\"tiny\",\"graph\":{\"nodes\":[{\"id\":\"x\",\"op\":\"input\",\"dtype\":\"float32\",\"shape\":[-1,4]}," \
	"{\"id\":\"w\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[4]},"                                 \
	"{\"id\":\"y\",\"op\":\"mul\",\"in\":[\"x\",\"w\"]}],\"outputs\":[\"y\"]},"                             \
	"\"batching\":{\"max\":8,\"delay_us\":2000,\"buckets\":[1,2,4,8]}}"
static const float tiny_w[4] = {1, -2, 0.5f, 4};

static tsd_client *unix_client(const dh_daemon *d)
{
	char url[400], err[256] = "";
	snprintf(url, sizeof(url), "unix://%s", d->unix_path);
	tsd_client *c = tsd_client_open(url, DH_TIMEOUT_MS, err, sizeof(err));
	ck_assert_msg(c, "open %s: %s", url, err);
	return c;
}

static void load_tiny(tsd_client *c)
{
	tsd_tensor w = DH_F32("w", tiny_w, 4);
	dh_load(c, TINY_SPEC, &w, 1);
}

/* infer of tiny with x (rows x 4) at in_off of in and y at out_off of out; the status, the
 * reply's error into why. */
static tsd_status shm_infer(tsd_client *c, const tsd_region *in, size_t in_off, int64_t rows, const tsd_region *out,
			    size_t out_off, char *why, size_t cap)
{
	cJSON *h = cJSON_CreateObject();
	cJSON_AddStringToObject(h, "verb", "infer");
	cJSON_AddStringToObject(h, "model", "tiny");
	ck_assert(tsd_shm_input(h, "x", TSD_F32, 2, (const int64_t[]){rows, 4}, in, in_off));
	if (out)
		ck_assert(tsd_shm_output(h, "y", out, out_off));
	tsd_reply *r = NULL;
	tsd_status st = tsd_client_call(c, h, NULL, 0, &r);
	snprintf(why, cap, "%s", tsd_client_message(c, r));
	if (st == TSD_OK && out) {
		tsd_tensor y;
		ck_assert_msg(tsd_reply_shm_output(r, out, "y", &y), "the reply names no y in region %s", tsd_region_name(out));
		ck_assert_int_eq(y.ndim, 2);
		ck_assert_int_eq(y.shape[0], rows);
		ck_assert_ptr_eq(y.data, (const uint8_t *)tsd_region_data(out) + out_off);
		ck_assert_int_eq(tsd_reply_ntensors(r), 0); /* nothing in the message */
	}
	tsd_reply_free(r);
	cJSON_Delete(h);
	return st;
}

START_TEST(test_live_infer)
{
	dh_daemon d = {0};
	dh_start(&d, NULL);
	tsd_client *c = unix_client(&d);
	load_tiny(c);
	tsd_region *in = tsd_region_create(c, "in", 1 << 16, false);
	ck_assert_msg(in, "region: %s", tsd_client_error(c));
	tsd_region *out = tsd_region_create(c, "out", 4096, true);
	ck_assert_msg(out, "region: %s", tsd_client_error(c));
	float *x = (float *)((uint8_t *)tsd_region_data(in) + 256);
	char why[512];
	for (int round = 0; round < 3; round++) {
		int rows = 1 + round * 3;
		for (int i = 0; i < rows * 4; i++)
			x[i] = (float)(i + round);
		ck_assert_msg(shm_infer(c, in, 256, rows, out, 64, why, sizeof(why)) == TSD_OK, "infer: %s", why);
		const float *y = (const float *)((const uint8_t *)tsd_region_data(out) + 64);
		for (int i = 0; i < rows * 4; i++)
			ck_assert_msg(y[i] == x[i] * tiny_w[i % 4], "y[%d] = %g, want %g", i, y[i], x[i] * tiny_w[i % 4]);
	}
	/* an input in a region, the output in the reply as usual */
	ck_assert_int_eq(shm_infer(c, in, 0, 2, NULL, 0, why, sizeof(why)), TSD_OK);
	/* the references checked, each named */
	struct {
		size_t in_off;
		int64_t rows;
		const tsd_region *out;
		size_t out_off;
		const char *needle;
	} bad[] = {
		{(1 << 16) - 8, 1, out, 0, "outside region \"in\""},
		{2, 1, out, 0, "not a multiple of 4"},
		{0, 1, out, 4088, "outside region \"out\""},
		{0, 1, in, 0, "read-only"},
	};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		tsd_status st = shm_infer(c, in, bad[k].in_off, bad[k].rows, bad[k].out, bad[k].out_off, why, sizeof(why));
		ck_assert_msg(st == TSD_BAD_REQUEST && strstr(why, bad[k].needle), "case %zu: %s: %s (want %s)", k,
			      tsd_status_name(st), why, bad[k].needle);
	}
	tsd_reply *r = NULL;
	ck_assert_int_eq(tsd_client_call_text(c, "{\"verb\":\"infer\",\"model\":\"tiny\",\"shm\":{\"inputs\":[{\"name\":\"x\","
					      "\"dtype\":\"float32\",\"shape\":[1,4],\"region\":\"nope\"}]}}", NULL, 0, &r),
			 TSD_BAD_REQUEST);
	ck_assert_ptr_nonnull(strstr(tsd_reply_error(r), "no region \"nope\""));
	tsd_reply_free(r);
	ck_assert_int_eq(tsd_client_call_text(c, "{\"verb\":\"infer\",\"model\":\"tiny\",\"shm\":{\"outputs\":[{\"name\":\"y\","
					      "\"region\":\"out\",\"size\":4}]}}", NULL, 0, &r),
			 TSD_BAD_REQUEST);
	ck_assert_ptr_nonnull(strstr(tsd_reply_error(r), "shm.outputs[0]: unknown field \"size\""));
	tsd_reply_free(r);
	ck_assert_int_eq(tsd_client_call_text(c, "{\"verb\":\"infer\",\"model\":\"tiny\",\"shm\":{\"inputs\":[7]}}", NULL, 0, &r),
			 TSD_BAD_REQUEST);
	ck_assert_ptr_nonnull(strstr(tsd_reply_error(r), "shm.inputs[0]: an object {name, dtype, shape, region, offset, byte_size}"));
	tsd_reply_free(r);
	/* a second region of the same name, shm.register without a descriptor */
	ck_assert_ptr_null(tsd_region_create(c, "in", 64, false));
	ck_assert_ptr_nonnull(strstr(tsd_client_error(c), "registered already"));
	ck_assert_int_eq(tsd_client_call_text(c, "{\"verb\":\"shm.register\",\"name\":\"z\"}", NULL, 0, &r), TSD_BAD_REQUEST);
	ck_assert_ptr_nonnull(strstr(tsd_reply_error(r), "no file descriptor"));
	tsd_reply_free(r);
	/* the daemon still serves: after unregistering, the name is unknown */
	tsd_region_destroy(out);
	ck_assert_int_eq(tsd_client_call_verb(c, "health", &r), TSD_OK);
	tsd_reply_free(r);
	tsd_region_destroy(in);
	ck_assert_int_eq(tsd_client_call_text(c, "{\"verb\":\"infer\",\"model\":\"tiny\",\"shm\":{\"inputs\":[{\"name\":\"x\","
					      "\"dtype\":\"float32\",\"shape\":[1,4],\"region\":\"in\"}]}}", NULL, 0, &r),
			 TSD_BAD_REQUEST);
	ck_assert_ptr_nonnull(strstr(tsd_reply_error(r), "no region \"in\""));
	tsd_reply_free(r);
	tsd_client_close(c);
	dh_stop(&d);
}
END_TEST

/* The library's internal call with a descriptor (clients/client_impl.h; the test links the
 * static library). */
tsd_status tsd_call_run_fd(tsd_client *c, const cJSON *header, int fd, tsd_reply **out);

static tsd_status call_fd(tsd_client *c, const char *json, int fd, char *why, size_t cap)
{
	cJSON *h = cJSON_Parse(json);
	tsd_reply *r = NULL;
	tsd_status st = tsd_call_run_fd(c, h, fd, &r);
	snprintf(why, cap, "%s", tsd_client_message(c, r));
	tsd_reply_free(r);
	cJSON_Delete(h);
	return st;
}

/* Whether the daemon maps a memfd called name (its /proc/PID/maps names it "/memfd:NAME"). */
static bool daemon_maps(pid_t pid, const char *name)
{
	char path[64], line[512], want[128];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	snprintf(want, sizeof(want), "/memfd:%s ", name);
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	bool found = false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, want) != NULL;
	fclose(f);
	return found;
}

START_TEST(test_live_refused)
{
	dh_daemon d = {0};
	dh_start(&d, "{\"shm_regions_max\":2}");
	tsd_client *c = unix_client(&d);
	char why[512];
	/* a descriptor on another verb; an unsealed memfd; a plain file */
	int fd = memfd_of(4096, 0, true);
	ck_assert_int_eq(call_fd(c, "{\"verb\":\"health\"}", fd, why, sizeof(why)), TSD_BAD_REQUEST);
	ck_assert_msg(strstr(why, "file descriptors are not accepted"), "%s", why);
	close(fd);
	fd = memfd_of(4096, 0, false);
	ck_assert_int_eq(call_fd(c, "{\"verb\":\"shm.register\",\"name\":\"u\"}", fd, why, sizeof(why)), TSD_BAD_REQUEST);
	ck_assert_msg(strstr(why, "F_SEAL_SHRINK"), "%s", why);
	close(fd);
	/* the limit of regions per connection */
	tsd_region *a = tsd_region_create(c, "a", 4096, false), *b = tsd_region_create(c, "b", 4096, false);
	ck_assert(a && b);
	ck_assert_ptr_null(tsd_region_create(c, "x", 4096, false));
	ck_assert_msg(strstr(tsd_client_error(c), "shm_regions_max"), "%s", tsd_client_error(c));
	/* the owner cannot shrink a region under the daemon's mapping */
	int own = -1;
	char self[64];
	for (int k = 3; k < 1024 && own < 0; k++) { /* the region's memfd in this process */
		char link[256];
		snprintf(self, sizeof(self), "/proc/self/fd/%d", k);
		ssize_t n = readlink(self, link, sizeof(link) - 1);
		if (n > 0 && (link[n] = 0, strstr(link, "memfd:a ")))
			own = k;
	}
	ck_assert_int_ge(own, 0);
	ck_assert_int_ne(ftruncate(own, 16), 0);
	tsd_region_destroy(b);
	tsd_region_destroy(a);
	/* nng carries no descriptor */
	tsd_client *n = dh_client_nng(&d);
	ck_assert_ptr_null(tsd_region_create(n, "r", 4096, false));
	ck_assert_msg(strstr(tsd_client_error(n), "unix://"), "%s", tsd_client_error(n));
	dh_client_close(n);
	/* a client that dies holding a region: the daemon drops its mapping with the connection */
	pid_t kid = fork();
	ck_assert_int_ge(kid, 0);
	if (kid == 0) {
		tsd_client *k = unix_client(&d);
		_exit(tsd_region_create(k, "tsd-dead", 1 << 20, true) ? 0 : 1); /* no close, no destroy */
	}
	int wst;
	ck_assert_int_eq(waitpid(kid, &wst, 0), kid);
	ck_assert_msg(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "the child could not register its region");
	bool gone = false;
	for (int i = 0; i < 250 && !gone; i++) {
		gone = !daemon_maps(d.pid, "tsd-dead");
		if (!gone)
			usleep(20000);
	}
	ck_assert_msg(gone, "the daemon still maps the dead client's region");
	tsd_reply *r;
	ck_assert_int_eq(tsd_client_call_verb(c, "health", &r), TSD_OK);
	tsd_reply_free(r);
	tsd_client_close(c);
	dh_stop(&d);
}
END_TEST

Suite *shm_suite(void)
{
	Suite *s = suite_create("shm");
	TCase *t = tcase_create("regions");
	tcase_add_test(t, test_register_and_span);
	tcase_add_test(t, test_refused);
	tcase_add_test(t, test_reference_outlives_set);
	suite_add_tcase(s, t);
	dh_add_test(s, "live_infer", test_live_infer, 60);
	dh_add_test(s, "live_refused", test_live_refused, 60);
	return s;
}
