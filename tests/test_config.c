/* test_config.c: the daemon's config layer (daemon/config.*): defaults from the table, the
 * shipped config file, every rejection and its message, flags over the file, --help, paths. */
#include <check.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/config.h"
#include "testutil.h"

#define NO_XDG ((dmn_env){NULL, 4242})

static void defaults(dmn_config *c)
{
	char err[512];
	ck_assert_msg(dmn_config_defaults(c, err, sizeof(err)) == DMN_CFG_OK, "%s", err);
}

/* Apply json over the defaults, then finish with no XDG_RUNTIME_DIR; expect status st and a
 * message holding every one of the NULL-terminated substrings. */
static void expect(const char *json, dmn_cfg_status st, ...)
{
	dmn_config c;
	char err[1024] = "";
	dmn_env env = NO_XDG;
	defaults(&c);
	dmn_cfg_status got =
		dmn_config_apply_json(&c, json, strlen(json), "t.json", err, sizeof(err));
	if (got == DMN_CFG_OK)
		got = dmn_config_finish(&c, &env, err, sizeof(err));
	ck_assert_msg(got == st, "%s: status %d, want %d (%s)", json, got, st, err);
	va_list ap;
	va_start(ap, st);
	for (const char *s; (s = va_arg(ap, const char *));)
		ck_assert_msg(strstr(err, s), "%s: message \"%s\" lacks \"%s\"", json, err, s);
	va_end(ap);
	dmn_config_free(&c);
}

START_TEST(defaults_come_from_the_table)
{
	dmn_config c;
	defaults(&c);
	ck_assert_int_eq(c.batch_max, 32);
	ck_assert_int_eq(c.batch_delay_us, 500);
	ck_assert_int_eq(c.queue_max, 1024);
	ck_assert_uint_eq(c.max_message_bytes, 256u << 20);
	ck_assert_uint_eq(c.mem_limit_bytes, 0);
	ck_assert_int_eq(c.drain_seconds, 10);
	ck_assert_int_eq(c.log_level, DMN_LOG_INFO);
	ck_assert_str_eq(c.device, "CPU");
	ck_assert(!c.tcp_allow_remote && !c.tcp_listen.n && !c.http_listen[0]);
	ck_assert_int_eq(c.batch_buckets.n, 6);
	for (int i = 0; i < 6; i++)
		ck_assert_int_eq(c.batch_buckets.v[i], 1 << i);
	/* every key's value in the dump is its default as written in config.def */
	char *js = dmn_config_json(&c, false);
	cJSON *o = cJSON_Parse(js);
	ck_assert(o && cJSON_GetArraySize(o) == dmn_cfg_nkeys);
	for (int i = 0; i < dmn_cfg_nkeys; i++) {
		const dmn_cfg_key *k = &dmn_cfg_keys[i];
		cJSON *want = cJSON_Parse(k->def);
		ck_assert_msg(
			cJSON_Compare(cJSON_GetObjectItemCaseSensitive(o, k->name), want, true),
			"%s", k->name);
		cJSON_Delete(want);
		ck_assert_ptr_eq(dmn_cfg_find(k->name), k);
		ck_assert_ptr_nonnull(k->doc);
	}
	cJSON_Delete(o);
	free(js);
	dmn_config_free(&c);
	dmn_config_free(&c); /* a second free is harmless */
}
END_TEST

START_TEST(shipped_config_equals_the_defaults)
{
	dmn_config a, b;
	char err[512];
	defaults(&a);
	defaults(&b);
	/* start b from non-defaults, so the file must set every key to pass */
	ck_assert_int_eq(dmn_config_set(&b, "queue_max", "7", err, sizeof(err)), DMN_CFG_OK);
	ck_assert_int_eq(dmn_config_set(&b, "listen", "", err, sizeof(err)), DMN_CFG_OK);
	ck_assert_msg(dmn_config_apply_file(&b, "config/tensord.json", err, sizeof(err)) ==
			      DMN_CFG_OK,
		      "%s", err);
	char *ja = dmn_config_json(&a, true), *jb = dmn_config_json(&b, true);
	ck_assert_str_eq(ja, jb);
	free(ja);
	free(jb);
	/* and it names every key of the table */
	FILE *f = fopen("config/tensord.json", "r");
	ck_assert_ptr_nonnull(f);
	char buf[8192];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	cJSON *o = cJSON_Parse(buf);
	ck_assert_int_eq(cJSON_GetArraySize(o), dmn_cfg_nkeys);
	cJSON_Delete(o);
	dmn_env env = NO_XDG;
	ck_assert_msg(dmn_config_finish(&b, &env, err, sizeof(err)) == DMN_CFG_OK, "%s", err);
	dmn_config_free(&a);
	dmn_config_free(&b);
}
END_TEST

START_TEST(unknown_key_names_the_nearest)
{
	expect("{\"batch_mx\": 3}", DMN_CFG_EKEY, "t.json", "unknown key \"batch_mx\"",
	       "did you mean \"batch_max\"", NULL);
	expect("{\"queuemax\": 3}", DMN_CFG_EKEY, "\"queuemax\"", "\"queue_max\"", NULL);
	ck_assert_str_eq(dmn_cfg_nearest("log-level")->name, "log_level");
	ck_assert_str_eq(dmn_cfg_nearest("tcp_allow_remot")->name, "tcp_allow_remote");
}
END_TEST

START_TEST(wrong_types_are_named)
{
	expect("{\"batch_max\": \"32\"}", DMN_CFG_ETYPE, "t.json: batch_max", "expected an integer",
	       "\"32\"", NULL);
	expect("{\"batch_max\": 1.5}", DMN_CFG_ETYPE, "batch_max", "1.5", NULL);
	expect("{\"tcp_allow_remote\": 1}", DMN_CFG_ETYPE, "tcp_allow_remote", "true or false",
	       NULL);
	expect("{\"device\": 3}", DMN_CFG_ETYPE, "device", "expected a string", NULL);
	expect("{\"listen\": \"ipc:///x\"}", DMN_CFG_ETYPE, "listen", "JSON array", NULL);
	expect("{\"log_level\": 2}", DMN_CFG_ETYPE, "log_level", "error|warn|info|debug", NULL);
	expect("{\"mem_limit_bytes\": null}", DMN_CFG_ETYPE, "mem_limit_bytes", "null", NULL);
}
END_TEST

START_TEST(out_of_range_values_are_named_with_bounds)
{
	expect("{\"batch_max\": 5000}", DMN_CFG_ERANGE, "batch_max", "5000", "[1, 4096]", NULL);
	expect("{\"batch_max\": 0}", DMN_CFG_ERANGE, "batch_max", "[1, 4096]", NULL);
	expect("{\"max_message_bytes\": 512}", DMN_CFG_ERANGE, "max_message_bytes", "512",
	       "[1024, 4294967296]", NULL);
	expect("{\"max_message_bytes\": 1e300}", DMN_CFG_ERANGE, "max_message_bytes", NULL);
	expect("{\"drain_seconds\": -1}", DMN_CFG_ERANGE, "drain_seconds", "[0, 3600]", NULL);
	expect("{\"log_level\": \"verbose\"}", DMN_CFG_ERANGE, "log_level", "\"verbose\"", NULL);
	expect("{\"device\": \"\"}", DMN_CFG_ERANGE, "device", "[1, 63]", NULL);
	/* the largest values in bounds pass */
	expect("{\"max_message_bytes\": 4294967296, \"batch_delay_us\": 1000000, \"queue_max\": "
	       "1000000}",
	       DMN_CFG_OK, NULL);
}
END_TEST

START_TEST(bad_list_elements_are_named)
{
	expect("{\"batch_buckets\": [1, \"2\"]}", DMN_CFG_ETYPE, "batch_buckets[1]", "\"2\"", NULL);
	expect("{\"allowed_uids\": [-1]}", DMN_CFG_ERANGE, "allowed_uids[0]", "-1", NULL);
	expect("{\"allowed_gids\": [4294967295]}", DMN_CFG_ERANGE, "allowed_gids[0]", NULL);
	expect("{\"preload\": [\"a\", 3]}", DMN_CFG_ETYPE, "preload[1]", NULL);
	expect("{\"tcp_listen\": [\"\"]}", DMN_CFG_ERANGE, "tcp_listen[0]", NULL);
	char big[4096] = "{\"allowed_gids\": [";
	for (int i = 0; i <= DMN_CFG_LIST_MAX; i++)
		strcat(big, i ? ",1" : "1");
	strcat(big, "]}");
	expect(big, DMN_CFG_ERANGE, "allowed_gids", "at most 256", NULL);
}
END_TEST

START_TEST(malformed_json_and_duplicates)
{
	expect("{\"batch_max\": 32,\n \"x\": }", DMN_CFG_EPARSE, "t.json:2:7", "malformed JSON",
	       NULL);
	expect("{\"batch_max\": 32", DMN_CFG_EPARSE, "malformed JSON", NULL);
	expect("{} trailing", DMN_CFG_EPARSE, "malformed JSON", NULL);
	expect("", DMN_CFG_EPARSE, "malformed JSON", NULL);
	expect("[1, 2]", DMN_CFG_EPARSE, "must be a JSON object", NULL);
	expect("{\"batch_max\": 32, \"batch_max\": 16}", DMN_CFG_EKEY,
	       "duplicate key \"batch_max\"", NULL);
	dmn_config c;
	char err[256];
	defaults(&c);
	ck_assert_int_eq(dmn_config_apply_json(&c, "{}\0{}", 5, "t.json", err, sizeof(err)),
			 DMN_CFG_EPARSE);
	ck_assert_msg(strstr(err, "NUL"), "%s", err);
	/* not a NUL-terminated buffer: only len bytes are read */
	ck_assert_int_eq(
		dmn_config_apply_json(&c, "{\"queue_max\": 9}xx", 16, "t.json", err, sizeof(err)),
		DMN_CFG_OK);
	ck_assert_int_eq(c.queue_max, 9);
	ck_assert_int_eq(dmn_config_apply_file(&c, "/nonexistent/tensord.json", err, sizeof(err)),
			 DMN_CFG_EIO);
	ck_assert_msg(strstr(err, "/nonexistent/tensord.json"), "%s", err);
	ck_assert_int_eq(dmn_config_apply_file(&c, "/", err, sizeof(err)), DMN_CFG_EIO);
	dmn_config_free(&c);
}
END_TEST

START_TEST(a_rejected_file_changes_nothing)
{
	dmn_config c;
	char err[256];
	defaults(&c);
	const char *js = "{\"queue_max\": 7, \"device\": \"CL\", \"batch_max\": 0}";
	ck_assert_int_eq(dmn_config_apply_json(&c, js, strlen(js), "t.json", err, sizeof(err)),
			 DMN_CFG_ERANGE);
	ck_assert_int_eq(c.queue_max, 1024);
	ck_assert_str_eq(c.device, "CPU");
	ck_assert_int_eq(dmn_config_set(&c, "batch_buckets", "1,x", err, sizeof(err)),
			 DMN_CFG_ETYPE);
	ck_assert_int_eq(c.batch_buckets.n, 6);
	dmn_config_free(&c);
}
END_TEST

START_TEST(tcp_and_http_must_be_loopback)
{
	expect("{\"tcp_listen\": [\"tcp://0.0.0.0:7878\"]}", DMN_CFG_EINVALID, "tcp_listen[0]",
	       "0.0.0.0", "not a loopback address", "tcp_allow_remote", NULL);
	expect("{\"tcp_listen\": [\"tcp://127.0.0.1:1\", \"tcp://[::]:2\"]}", DMN_CFG_EINVALID,
	       "tcp_listen[1]", NULL);
	expect("{\"tcp_listen\": [\"tcp://192.168.1.4:7878\"]}", DMN_CFG_EINVALID, "loopback",
	       NULL);
	expect("{\"http_listen\": \"http://0.0.0.0:9090\"}", DMN_CFG_EINVALID, "http_listen",
	       "loopback", NULL);
	expect("{\"tcp_listen\": [\"tcp://127.0.0.1:7878\", \"tcp://[::1]:7879\", "
	       "\"tcp://localhost:0\", "
	       "\"tcp://127.1.2.3:7880\"], \"http_listen\": \"http://127.0.0.1:9090\"}",
	       DMN_CFG_OK, NULL);
	expect("{\"tcp_listen\": [\"tcp://0.0.0.0:7878\"], \"http_listen\": \"http://[::]:9090\", "
	       "\"tcp_allow_remote\": true, \"tcp_token_file\": \"/etc/tensord/token\"}",
	       DMN_CFG_OK, NULL);
	/* tcp off loopback needs the token file (the file itself is read at start); http alone not */
	expect("{\"tcp_listen\": [\"tcp://127.0.0.1:1\", \"tcp://0.0.0.0:7878\"], \"tcp_allow_remote\": true}",
	       DMN_CFG_EINVALID, "tcp_listen[1]", "tcp_token_file", "tcp_allow_remote", NULL);
	expect("{\"tcp_listen\": [\"tcp://127.0.0.1:1\"], \"http_listen\": \"http://[::]:9090\", "
	       "\"tcp_allow_remote\": true}",
	       DMN_CFG_OK, NULL);
	expect("{\"tcp_token_file\": \"token\"}", DMN_CFG_EINVALID, "tcp_token_file", "absolute", NULL);
	/* malformed addresses, whatever tcp_allow_remote says */
	expect("{\"tcp_listen\": [\"tcp://127.0.0.1\"], \"tcp_allow_remote\": true}",
	       DMN_CFG_EINVALID, "HOST:PORT", NULL);
	expect("{\"tcp_listen\": [\"tcp://127.0.0.1:70000\"]}", DMN_CFG_EINVALID, "HOST:PORT",
	       NULL);
	expect("{\"tcp_listen\": [\"ipc:///x\"]}", DMN_CFG_EINVALID, "must start with tcp://",
	       NULL);
	expect("{\"listen\": [\"tcp://127.0.0.1:1\"]}", DMN_CFG_EINVALID, "listen[0]", "tcp_listen",
	       NULL);
	expect("{\"listen\": []}", DMN_CFG_EINVALID, "nothing to listen on", NULL);
	expect("{\"listen\": [], \"tcp_listen\": [\"tcp://127.0.0.1:7878\"]}", DMN_CFG_OK, NULL);
}
END_TEST

/* the gRPC frontend's address: grpc://HOST:PORT, loopback unless tcp_allow_remote, then with the token */
START_TEST(oip_grpc_listen_checked)
{
	expect("{\"oip_grpc_listen\": \"grpc://127.0.0.1:0\"}", DMN_CFG_OK, NULL);
	expect("{\"oip_grpc_listen\": \"\"}", DMN_CFG_OK, NULL);
	expect("{\"oip_grpc_listen\": \"http://127.0.0.1:8001\"}", DMN_CFG_EINVALID, "oip_grpc_listen",
	       "must start with grpc://", NULL);
	expect("{\"oip_grpc_listen\": \"grpc://127.0.0.1\"}", DMN_CFG_EINVALID, "HOST:PORT", NULL);
	expect("{\"oip_grpc_listen\": \"grpc://0.0.0.0:8001\"}", DMN_CFG_EINVALID, "oip_grpc_listen", "loopback", NULL);
	expect("{\"oip_grpc_listen\": \"grpc://[::]:8001\", \"tcp_allow_remote\": true}", DMN_CFG_EINVALID,
	       "oip_grpc_listen", "tcp_token_file", NULL);
	expect("{\"oip_grpc_listen\": \"grpc://[::]:8001\", \"tcp_allow_remote\": true, "
	       "\"tcp_token_file\": \"/etc/tensord/token\"}",
	       DMN_CFG_OK, NULL);
}
END_TEST

START_TEST(buckets_checked_against_batch_max)
{
	expect("{\"batch_buckets\": [1, 8, 4, 32]}", DMN_CFG_EINVALID, "batch_buckets[2]",
	       "strictly increasing", NULL);
	expect("{\"batch_buckets\": [1, 4, 4, 32]}", DMN_CFG_EINVALID, "strictly increasing", NULL);
	expect("{\"batch_buckets\": [1, 64]}", DMN_CFG_EINVALID, "batch_buckets[1]", "64",
	       "batch_max (32)", NULL);
	expect("{\"batch_buckets\": [1, 16]}", DMN_CFG_EINVALID, "must equal batch_max", NULL);
	expect("{\"batch_buckets\": []}", DMN_CFG_EINVALID, "batch_buckets", NULL);
	expect("{\"batch_max\": 64, \"batch_buckets\": [1, 2, 64]}", DMN_CFG_OK, NULL);
}
END_TEST

START_TEST(paths_are_checked)
{
	expect("{\"preload\": [\"m.json\"]}", DMN_CFG_EINVALID, "models_dir", NULL);
	expect("{\"models_dir\": \"/m\", \"preload\": [\"a/../../x\"]}", DMN_CFG_EINVALID,
	       "preload[0]", "..", NULL);
	expect("{\"models_dir\": \"/m\", \"preload\": [\"/etc/x\"]}", DMN_CFG_EINVALID,
	       "preload[0]", NULL);
	expect("{\"models_dir\": \"/m\", \"preload\": [\"a/b.json\", \"..c/d\"]}", DMN_CFG_OK,
	       NULL);
	expect("{\"models_dir\": \"m\"}", DMN_CFG_EINVALID, "models_dir", "absolute", NULL);
	expect("{\"cache_dir\": \"cache\"}", DMN_CFG_EINVALID, "cache_dir", "absolute", NULL);
	char js[400];
	snprintf(js, sizeof(js), "{\"listen\": [\"ipc:///%0120d\"]}", 0);
	expect(js, DMN_CFG_EINVALID, "listen[0]", "at most 107", NULL);
}
END_TEST

START_TEST(flags_override_the_file)
{
	char path[] = "/tmp/tensord-test-config-XXXXXX", err[512];
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	const char *js = "{\"batch_max\": 64, \"batch_buckets\": [1, 64], \"queue_max\": 10, "
			 "\"device\": \"CL\"}";
	ck_assert_int_eq(write(fd, js, strlen(js)), (ssize_t)strlen(js));
	close(fd);
	/* --config after a flag: the file still comes first */
	char *argv[] = {"tensord",
			"--queue_max",
			"20",
			"--config",
			path,
			"--batch-max=128",
			"--batch_buckets",
			"1,8,128",
			"--tcp_listen=tcp://127.0.0.1:1,tcp://[::1]:2",
			"--log_level",
			"debug",
			"--check-config",
			NULL};
	dmn_config c;
	dmn_cli cli;
	dmn_env env = {"/run/user/77", 77};
	dmn_cfg_status st = dmn_config_from_args(&c, &cli, 12, argv, &env, err, sizeof(err));
	ck_assert_msg(st == DMN_CFG_OK, "%s", err);
	ck_assert(cli.check_config && !cli.help && !cli.version);
	ck_assert_str_eq(cli.config_path, path);
	ck_assert_int_eq(c.queue_max, 20);
	ck_assert_int_eq(c.batch_max, 128);
	ck_assert_int_eq(c.batch_buckets.n, 3);
	ck_assert_int_eq(c.batch_buckets.v[2], 128);
	ck_assert_str_eq(c.device, "CL"); /* from the file */
	ck_assert_int_eq(c.tcp_listen.n, 2);
	ck_assert_str_eq(c.tcp_listen.v[1], "tcp://[::1]:2");
	ck_assert_int_eq(c.log_level, DMN_LOG_DEBUG);
	ck_assert_str_eq(c.listen.v[0], "unix:///run/user/77/tensord/tensord.sock");
	ck_assert_str_eq(c.listen.v[1], "ipc:///run/user/77/tensord/tensord-nng.sock");
	dmn_config_free(&c);
	/* a JSON array works as a list flag too, and "" empties a list */
	char *argv2[] = {"tensord",  "--config", path,		 "--batch_buckets",   "[1, 2, 64]",
			 "--listen", "",	 "--tcp_listen", "tcp://127.0.0.1:5", NULL};
	ck_assert_msg(dmn_config_from_args(&c, &cli, 9, argv2, &env, err, sizeof(err)) ==
			      DMN_CFG_OK,
		      "%s", err);
	ck_assert_int_eq(c.batch_buckets.n, 3);
	ck_assert_int_eq(c.listen.n, 0);
	dmn_config_free(&c);
	unlink(path);
}
END_TEST

/* Run from_args on argv and expect status st with want in the message. */
static void expect_args(int argc, char **argv, dmn_cfg_status st, const char *want)
{
	dmn_config c;
	dmn_cli cli;
	dmn_env env = NO_XDG;
	char err[512] = "";
	dmn_cfg_status got = dmn_config_from_args(&c, &cli, argc, argv, &env, err, sizeof(err));
	ck_assert_msg(got == st, "%s: status %d, want %d (%s)", argv[1], got, st, err);
	ck_assert_msg(!want || strstr(err, want), "\"%s\" lacks \"%s\"", err, want);
	dmn_config_free(&c);
}

START_TEST(bad_command_lines)
{
	expect_args(3, (char *[]){"tensord", "--batch_mx", "3", NULL}, DMN_CFG_EKEY,
		    "did you mean --batch_max");
	expect_args(2, (char *[]){"tensord", "--batch_max", NULL}, DMN_CFG_EUSAGE, "needs a value");
	expect_args(2, (char *[]){"tensord", "serve", NULL}, DMN_CFG_EUSAGE,
		    "unexpected argument \"serve\"");
	expect_args(2, (char *[]){"tensord", "--help=yes", NULL}, DMN_CFG_EUSAGE, "takes no value");
	expect_args(3, (char *[]){"tensord", "--batch_max", "abc", NULL}, DMN_CFG_ETYPE,
		    "--batch_max: expected an integer");
	expect_args(3, (char *[]){"tensord", "--batch_max", "5000", NULL}, DMN_CFG_ERANGE,
		    "--batch_max: 5000");
	expect_args(3, (char *[]){"tensord", "--tcp_allow_remote", "yes", NULL}, DMN_CFG_ETYPE,
		    "true or false");
	expect_args(3, (char *[]){"tensord", "--config", "/nonexistent.json", NULL}, DMN_CFG_EIO,
		    "/nonexistent.json");
	expect_args(3, (char *[]){"tensord", "--tcp_listen", "tcp://0.0.0.0:1", NULL},
		    DMN_CFG_EINVALID, "loopback");
	/* --help and --version load nothing, so a missing file does not stop them */
	dmn_config c;
	dmn_cli cli;
	dmn_env env = NO_XDG;
	char err[256];
	char *argv[] = {"tensord", "--config", "/nonexistent.json", "--help", NULL};
	ck_assert_int_eq(dmn_config_from_args(&c, &cli, 4, argv, &env, err, sizeof(err)),
			 DMN_CFG_OK);
	ck_assert(cli.help);
	dmn_config_free(&c);
	char *argv2[] = {"tensord", "--version", NULL};
	ck_assert_int_eq(dmn_config_from_args(&c, &cli, 2, argv2, &env, err, sizeof(err)),
			 DMN_CFG_OK);
	ck_assert(cli.version);
	dmn_config_free(&c);
	/* nothing given: the defaults, finished */
	char *argv3[] = {"tensord", NULL};
	ck_assert_int_eq(dmn_config_from_args(&c, &cli, 1, argv3, &env, err, sizeof(err)),
			 DMN_CFG_OK);
	ck_assert_str_eq(c.listen.v[0], "unix:///run/tensord/tensord.sock");
	dmn_config_free(&c);
}
END_TEST

START_TEST(help_lists_every_key)
{
	char *h = dmn_config_help("tensord");
	ck_assert_ptr_nonnull(h);
	for (const char *f = "--config\0--check-config\0--help\0--version\0"; *f;
	     f += strlen(f) + 1)
		ck_assert_msg(strstr(h, f), "%s", f);
	for (int i = 0; i < dmn_cfg_nkeys; i++) {
		const dmn_cfg_key *k = &dmn_cfg_keys[i];
		char line[512];
		snprintf(line, sizeof(line), "  --%s <%s>  default %s  (", k->name,
			 dmn_cfg_type_name(k->type), k->def);
		const char *at = strstr(h, line);
		ck_assert_msg(at, "--help lacks \"%s\"", line);
		ck_assert_msg(strstr(at, k->doc), "--help lacks the description of %s", k->name);
		if (k->type == DMN_CFG_INT) {
			snprintf(line, sizeof(line), "(%.0f..%.0f)", k->lo, k->hi);
			ck_assert_msg(strstr(at, line), "--help lacks the bounds of %s", k->name);
		}
	}
	free(h);
}
END_TEST

START_TEST(runtime_dir_with_and_without_xdg)
{
	char d[64];
	ck_assert_int_eq(dmn_runtime_dir("/run/user/1000", d, sizeof(d)), DMN_CFG_OK);
	ck_assert_str_eq(d, "/run/user/1000/tensord");
	ck_assert_int_eq(dmn_runtime_dir(NULL, d, sizeof(d)), DMN_CFG_OK);
	ck_assert_str_eq(d, "/run/tensord");
	ck_assert_int_eq(dmn_runtime_dir("", d, sizeof(d)), DMN_CFG_OK);
	ck_assert_str_eq(d, "/run/tensord");
	ck_assert_int_eq(dmn_runtime_dir("relative/dir", d, sizeof(d)),
			 DMN_CFG_OK); /* ignored, as XDG says */
	ck_assert_str_eq(d, "/run/tensord");
	ck_assert_int_eq(dmn_runtime_dir("/run/user/1000", d, 8), DMN_CFG_ERANGE);
	/* finishing a config expands ${RUNTIME_DIR} in every string and fills allowed_uids */
	dmn_config c;
	char err[256];
	defaults(&c);
	ck_assert_int_eq(dmn_config_set(&c, "listen",
					"ipc://${RUNTIME_DIR}/a.sock,ipc:///tmp/b.sock", err,
					sizeof(err)),
			 DMN_CFG_OK);
	ck_assert_int_eq(dmn_config_set(&c, "cache_dir", "${RUNTIME_DIR}/cache", err, sizeof(err)),
			 DMN_CFG_OK);
	dmn_env env = {"/run/user/5", 5};
	ck_assert_msg(dmn_config_finish(&c, &env, err, sizeof(err)) == DMN_CFG_OK, "%s", err);
	ck_assert_str_eq(c.listen.v[0], "ipc:///run/user/5/tensord/a.sock");
	ck_assert_str_eq(c.listen.v[1], "ipc:///tmp/b.sock");
	ck_assert_str_eq(c.cache_dir, "/run/user/5/tensord/cache");
	ck_assert_int_eq(c.allowed_uids.n, 1);
	ck_assert_int_eq(c.allowed_uids.v[0], 5);
	dmn_config_free(&c);
	/* allowed_uids given: kept as is */
	defaults(&c);
	ck_assert_int_eq(dmn_config_set(&c, "allowed_uids", "1000,1001", err, sizeof(err)),
			 DMN_CFG_OK);
	env = NO_XDG;
	ck_assert_int_eq(dmn_config_finish(&c, &env, err, sizeof(err)), DMN_CFG_OK);
	ck_assert_int_eq(c.allowed_uids.n, 2);
	ck_assert_str_eq(c.listen.v[0], "unix:///run/tensord/tensord.sock");
	dmn_config_free(&c);
}
END_TEST

START_TEST(the_dump_is_a_config_file)
{
	dmn_config a, b;
	char err[256];
	dmn_env env = {"/run/user/9", 9};
	defaults(&a);
	const char *js = "{\"batch_max\": 8, \"batch_buckets\": [2, 8], \"log_level\": \"warn\", "
			 "\"tcp_allow_remote\": "
			 "true, \"mem_limit_bytes\": 1099511627776, \"allowed_gids\": [20, 30]}";
	ck_assert_int_eq(dmn_config_apply_json(&a, js, strlen(js), "t.json", err, sizeof(err)),
			 DMN_CFG_OK);
	ck_assert_msg(dmn_config_finish(&a, &env, err, sizeof(err)) == DMN_CFG_OK, "%s", err);
	char *ja = dmn_config_json(&a, true);
	defaults(&b);
	ck_assert_msg(dmn_config_apply_json(&b, ja, strlen(ja), "dump", err, sizeof(err)) ==
			      DMN_CFG_OK,
		      "%s", err);
	ck_assert_msg(dmn_config_finish(&b, &env, err, sizeof(err)) == DMN_CFG_OK, "%s", err);
	char *jb = dmn_config_json(&b, true);
	ck_assert_str_eq(ja, jb);
	ck_assert_uint_eq(b.mem_limit_bytes, 1ull << 40);
	ck_assert_int_eq(b.log_level, DMN_LOG_WARN);
	free(ja);
	free(jb);
	dmn_config_free(&a);
	dmn_config_free(&b);
}
END_TEST

Suite *config_suite(void)
{
	const TTest *const tests[] = {
		defaults_come_from_the_table,
		shipped_config_equals_the_defaults,
		unknown_key_names_the_nearest,
		wrong_types_are_named,
		out_of_range_values_are_named_with_bounds,
		bad_list_elements_are_named,
		malformed_json_and_duplicates,
		a_rejected_file_changes_nothing,
		tcp_and_http_must_be_loopback,
		oip_grpc_listen_checked,
		buckets_checked_against_batch_max,
		paths_are_checked,
		flags_override_the_file,
		bad_command_lines,
		help_lists_every_key,
		runtime_dir_with_and_without_xdg,
		the_dump_is_a_config_file,
	};
	return tu_suite("config", tests, (int)(sizeof(tests) / sizeof(tests[0])), 30);
}
