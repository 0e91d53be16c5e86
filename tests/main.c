/* main.c: the check runner for tensord's test suites (see suites.h); exits non-zero if any
 * test fails. CK_FORK, CK_RUN_SUITE and CK_RUN_CASE work as usual for check. */
#include <stdlib.h>

#include "suites.h"

int main(void)
{
	SRunner *sr = srunner_create(NULL);
#define TEST_SUITE_ADD(name) srunner_add_suite(sr, name##_suite());
	TEST_SUITES(TEST_SUITE_ADD)
#undef TEST_SUITE_ADD
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
