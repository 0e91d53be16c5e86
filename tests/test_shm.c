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
#include <unistd.h>

#include <check.h>

#include "daemon/shm.h"
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

Suite *shm_suite(void)
{
	Suite *s = suite_create("shm");
	TCase *t = tcase_create("regions");
	tcase_add_test(t, test_register_and_span);
	tcase_add_test(t, test_refused);
	tcase_add_test(t, test_reference_outlives_set);
	suite_add_tcase(s, t);
	return s;
}
