/* tensorctl.c: the command-line client of the tensord daemon: the command table, global options
 * and the small commands (status, models, load, unload, infer, realize, save, stats). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorctl.h"

static const char usage_text[] =
	"usage: tensorctl [--url URL] [--timeout MS] [--token-file F] COMMAND [ARGS]\n"
	"       tensorctl COMMAND --help\n"
	"\n"
	"commands:\n"
	"  status                       hello and health, human readable\n"
	"  models                       the loaded models as a table\n"
	"  load SPEC.json [--weights F | --upload F.safetensors | PARAM=F.npy]\n"
	"                               load a model (SPEC: the model.load object, or a\n"
	"                               bare graph with --name NAME)\n"
	"  unload NAME                  unload a model\n"
	"  infer MODEL INPUTS...        run a model (INPUTS: INPUT.json or NAME=FILE.npy)\n"
	"  realize GRAPH.json INPUTS... run a graph once\n"
	"  save NAME [PATH.safetensors | --out-dir DIR]\n"
	"                               save a model's weights\n"
	"  train MODEL --data FILE...   training steps over an IDX or safetensors dataset\n"
	"  stats                        the daemon's statistics as JSON\n"
	"  bench MODEL                  a load generator: concurrency sweep or fixed rate,\n"
	"                               over TSD1, or HTTP or gRPC (--protocol)\n"
	"  replay LOG [-o OUT]          replay logged requests (JSON Lines), resumable\n"
	"\n"
	"options:\n"
	"  --url URL      the daemon's address (default: $TENSORD_URL, else\n"
	"                 unix://$XDG_RUNTIME_DIR/tensord/tensord.sock, else\n"
	"                 unix:///run/tensord/tensord.sock; nng's ipc://PATH and\n"
	"                 tcp://HOST:PORT work too)\n"
	"  --timeout MS   bound each request (send and reply) to MS milliseconds (default 60000;\n"
	"                 0: forever)\n"
	"  --token-file F tcp:// only: send the token in F's first line with every request\n"
	"                 (default: $TENSORD_TOKEN_FILE, else $TENSORD_TOKEN itself); F must not\n"
	"                 be accessible by others\n"
	"  --help         this text\n"
	"\n"
	"exit status:\n"
	"  0  ok\n"
	"  1  the daemon answered an error\n"
	"  2  usage error: bad arguments, unreadable or malformed input files\n"
	"  3  cannot connect, or no reply (transport failure, timeout)\n"
	"  4  partial failure: some requests failed (replay lines, bench requests)\n"
	"  5  interrupted (SIGINT, SIGTERM, --stop-after); replay resumes when run again\n"
	"  6  an output file could not be written\n";

int tctl_cmd_status(tctl_ctx *ctx, int argc, char **argv);
int tctl_cmd_models(tctl_ctx *ctx, int argc, char **argv);
int tctl_cmd_stats(tctl_ctx *ctx, int argc, char **argv);
int tctl_cmd_load(tctl_ctx *ctx, int argc, char **argv);
int tctl_cmd_unload(tctl_ctx *ctx, int argc, char **argv);
int tctl_cmd_infer(tctl_ctx *ctx, int argc, char **argv);
int tctl_cmd_realize(tctl_ctx *ctx, int argc, char **argv);
int tctl_cmd_save(tctl_ctx *ctx, int argc, char **argv);
extern const char tctl_status_help[], tctl_models_help[], tctl_stats_help[], tctl_load_help[],
	tctl_unload_help[], tctl_infer_help[], tctl_realize_help[], tctl_save_help[];

static const struct command {
	const char *name;
	tctl_cmd_fn fn;
	const char *help;
	bool signals; /* takes SIGINT and SIGTERM itself: blocked before any thread starts */
} commands[] = {
	{"status", tctl_cmd_status, tctl_status_help, false},
	{"models", tctl_cmd_models, tctl_models_help, false},
	{"load", tctl_cmd_load, tctl_load_help, false},
	{"unload", tctl_cmd_unload, tctl_unload_help, false},
	{"infer", tctl_cmd_infer, tctl_infer_help, false},
	{"realize", tctl_cmd_realize, tctl_realize_help, false},
	{"save", tctl_cmd_save, tctl_save_help, false},
	{"train", tctl_cmd_train, tctl_train_help, true},
	{"stats", tctl_cmd_stats, tctl_stats_help, false},
	{"bench", tctl_cmd_bench, tctl_bench_help, true},
	{"replay", tctl_cmd_replay, tctl_replay_help, true},
};

int main(int argc, char **argv)
{
	char url[4096];
	const char *url_opt = NULL;
	long timeout = 60000;
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage_text, stdout);
			return 0;
		} else if (!strcmp(argv[i], "--url") && i + 1 < argc) {
			url_opt = argv[++i];
		} else if (!strcmp(argv[i], "--token-file") && i + 1 < argc) {
			/* the library reads it when a tcp:// client opens (every client of this run) */
			if (setenv("TENSORD_TOKEN_FILE", argv[++i], 1))
				return tctl_usage(NULL, "--token-file: out of memory");
		} else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) {
			if (!tctl_parse_long(argv[++i], 0, 86400000, &timeout))
				return tctl_usage(NULL,
						  "--timeout %s: not milliseconds (0..86400000)",
						  argv[i]);
		} else {
			return tctl_usage(NULL, "unknown option %s", argv[i]);
		}
	}
	if (i == argc)
		return tctl_usage(NULL, "no command");
	const struct command *cmd = NULL;
	for (size_t k = 0; k < sizeof(commands) / sizeof(commands[0]); k++)
		if (!strcmp(argv[i], commands[k].name))
			cmd = &commands[k];
	if (!cmd)
		return tctl_usage(NULL, "unknown command %s", argv[i]);
	for (int k = i + 1; k < argc; k++)
		if (!strcmp(argv[k], "--help") || !strcmp(argv[k], "-h")) {
			fputs(cmd->help, stdout);
			return 0;
		}
	if (!tsd_client_default_url(url_opt ? url_opt : getenv("TENSORD_URL"),
				    getenv("XDG_RUNTIME_DIR"), url, sizeof(url)))
		return tctl_usage(NULL, "the daemon's address is too long");
	if (cmd->signals) { /* nng's threads inherit the mask: the command polls with sigtimedwait */
		sigset_t sigs;
		sigemptyset(&sigs);
		sigaddset(&sigs, SIGINT);
		sigaddset(&sigs, SIGTERM);
		pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	}
	char err[512];
	tsd_client *c = tsd_client_open(url, (int)timeout, err, sizeof(err));
	if (!c) {
		fprintf(stderr, "tensorctl: %s\n", err);
		return TCTL_EXIT_TRANSPORT;
	}
	tctl_ctx ctx = {c, url, (int)timeout};
	int rc = cmd->fn(&ctx, argc - i - 1, argv + i + 1);
	tsd_client_close(c);
	return rc;
}
