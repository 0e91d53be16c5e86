/* test_hostile_auth.c: the bearer token for tcp listeners (suite `hostileauth`, issue 25 finding
 * 10, docs/isolation/auth.md): the token file's reading rules and the constant-time compare. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/auth.h"
#include "suites.h"

static void write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	ck_assert_int_eq(chmod(path, mode), 0);
}

START_TEST(t_token_eq)
{
	const char *t = "0123456789abcdef";
	ck_assert_int_eq(dmn_auth_token_eq(t, 16, t, 16), 1);
	ck_assert_int_eq(dmn_auth_token_eq("0123456789abcdeX", 16, t, 16), 0);
	ck_assert_int_eq(dmn_auth_token_eq("X123456789abcdef", 16, t, 16), 0);
	ck_assert_int_eq(dmn_auth_token_eq(t, 15, t, 16), 0);
	ck_assert_int_eq(dmn_auth_token_eq("0123456789abcdef0", 17, t, 16), 0);
	ck_assert_int_eq(dmn_auth_token_eq("", 0, t, 16), 0);
}
END_TEST

START_TEST(t_token_file)
{
	char dir[] = "/tmp/tsd_auth_XXXXXX", path[256], tok[DMN_TOKEN_MAX + 1], err[512];
	size_t n = 0;
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/token", dir);
	ck_assert_int_eq(dmn_auth_read_token(path, tok, &n, err, sizeof err), -1);
	write_file(path, "0123456789abcdef  \nsecond line\n", 0600);
	ck_assert_int_eq(dmn_auth_read_token(path, tok, &n, err, sizeof err), 0);
	ck_assert_uint_eq(n, 16);
	ck_assert_str_eq(tok, "0123456789abcdef");
	write_file(path, "0123456789abcdef\n", 0604);
	ck_assert_int_eq(dmn_auth_read_token(path, tok, &n, err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "others"));
	write_file(path, "short\n", 0600);
	ck_assert_int_eq(dmn_auth_read_token(path, tok, &n, err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "at least"));
	char *big = malloc(DMN_TOKEN_MAX + 10);
	memset(big, 'a', DMN_TOKEN_MAX + 5);
	big[DMN_TOKEN_MAX + 5] = '\0';
	write_file(path, big, 0600);
	free(big);
	ck_assert_int_eq(dmn_auth_read_token(path, tok, &n, err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "longer"));
	unlink(path);
	rmdir(dir);
}
END_TEST

Suite *hostileauth_suite(void)
{
	Suite *s = suite_create("hostileauth");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, t_token_eq);
	tcase_add_test(tc, t_token_file);
	suite_add_tcase(s, tc);
	return s;
}
