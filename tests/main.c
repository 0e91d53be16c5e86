/* main.c: the check runner for tensord's test suites (see suites.h); exits non-zero if any
 * test fails. CK_FORK, CK_RUN_SUITE and CK_RUN_CASE work as usual for check. With DH_SENDER_URL
 * set it is the daemon tests' client process instead (dh_spawn_sender). */
#include <stdlib.h>

#include "suites.h"
#ifndef TSD_TESTS_ENGINE_ONLY
#include "daemon_harness.h"
#endif

int main(void)
{
#ifndef TSD_TESTS_ENGINE_ONLY
	if (getenv("DH_SENDER_URL")) /* a client process of the daemon tests (dh_spawn_sender) */
		return dh_sender_main();
#endif
	SRunner *sr = srunner_create(NULL);
#define TEST_SUITE_ADD(name, part) TEST_PART_##part(srunner_add_suite(sr, name##_suite());)
	TEST_SUITES(TEST_SUITE_ADD)
#undef TEST_SUITE_ADD
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
