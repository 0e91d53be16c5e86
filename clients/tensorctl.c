/* tensorctl.c: the command-line client of the tensord daemon: status, models, load, unload,
 * infer and stats over the C client library. Exit: 0 ok, 1 the daemon's error, 2 usage/transport. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorctl.h"

enum { EXIT_DAEMON = 1, EXIT_USAGE = 2 };

static const char usage_text[] =
	"usage: tensorctl [--url URL] [--timeout MS] COMMAND [ARGS]\n"
	"\n"
	"commands:\n"
	"  status                       hello and health, human readable\n"
	"  models                       the loaded models as a table\n"
	"  load SPEC.json [--weights FILE.safetensors]\n"
	"                               load a model (SPEC: the model.load object; FILE is a path\n"
	"                               the daemon reads, relative to its models_dir)\n"
	"  unload NAME                  unload a model\n"
	"  infer MODEL INPUT.json       run a model; INPUT: {\"x\": {\"dtype\", \"shape\", "
	"\"data\"}}\n"
	"  infer MODEL --raw FILE --name X --dtype DT --shape 1,4\n"
	"                               the same with one input of raw little-endian bytes\n"
	"  stats                        the daemon's statistics as JSON\n"
	"\n"
	"options:\n"
	"  --url URL      the daemon's address (default: $TENSORD_URL, else\n"
	"                 ipc://$XDG_RUNTIME_DIR/tensord/tensord.sock, else\n"
	"                 ipc:///run/tensord/tensord.sock)\n"
	"  --timeout MS   wait at most MS milliseconds to send and for each reply (default 60000;\n"
	"                 0: forever)\n"
	"  --help         this text\n"
	"\n"
	"exit status: 0 ok, 1 the daemon returned an error, 2 usage or transport error\n";

static int usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "tensorctl: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n(tensorctl --help for usage)\n");
	return EXIT_USAGE;
}

/* The outcome of a call: 0 when ok, else the message printed and the exit status. */
static int outcome(tsd_client *c, tsd_status s, const tsd_reply *r)
{
	if (s == TSD_OK)
		return 0;
	fprintf(stderr, "tensorctl: %s: %s\n", tsd_status_name(s), tsd_client_message(c, r));
	return r ? EXIT_DAEMON : EXIT_USAGE;
}

static const char *str_field(const cJSON *o, const char *key, const char *def)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsString(j) ? j->valuestring : def;
}

static double num_field(const cJSON *o, const char *key)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsNumber(j) ? j->valuedouble : cJSON_IsTrue(j) ? 1 : 0;
}

/* j printed on one line (a string as its text); "-" when absent. Static buffer of the caller. */
static const char *brief(const cJSON *j, char *buf, size_t cap)
{
	char *t = j && !cJSON_IsString(j) ? cJSON_PrintUnformatted(j) : NULL;
	snprintf(buf, cap, "%s", cJSON_IsString(j) ? j->valuestring : t ? t : "-");
	free(t);
	return buf;
}

static int cmd_status(tsd_client *c, int argc, char **argv)
{
	if (argc)
		return usage("status: unexpected argument %s", argv[0]);
	tsd_reply *r;
	tsd_status s = tsd_client_hello(c, &r);
	int rc = outcome(c, s, r);
	if (!rc) {
		const cJSON *h = tsd_reply_json(r);
		char dev[512], lim[1024];
		printf("daemon:    tensord %s, protocol %g\n", str_field(h, "daemon", "?"),
		       num_field(h, "protocol"));
		printf("devices:   %s\n",
		       brief(cJSON_GetObjectItemCaseSensitive(h, "devices"), dev, sizeof(dev)));
		printf("limits:    %s\n",
		       brief(cJSON_GetObjectItemCaseSensitive(h, "limits"), lim, sizeof(lim)));
	}
	tsd_reply_free(r);
	if (rc)
		return rc;
	s = tsd_client_call_verb(c, "health", &r);
	if (!(rc = outcome(c, s, r))) {
		const cJSON *h = tsd_reply_json(r);
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(h, "models");
		printf("ready:     %s%s\n", num_field(h, "ready") ? "yes" : "no",
		       num_field(h, "draining") ? " (draining)" : "");
		printf("models:    %g ready, %g loading, %g failed\n", num_field(m, "ready"),
		       num_field(m, "loading"), num_field(m, "failed"));
		printf("uptime:    %g s\n", num_field(h, "uptime_s"));
	}
	tsd_reply_free(r);
	return rc;
}

/* "x:float32[-1,4] y:..." of a model.list entry's inputs or outputs. */
static void io_list(const cJSON *arr, char *buf, size_t cap)
{
	size_t n = 0;
	buf[0] = '\0';
	for (const cJSON *e = cJSON_IsArray(arr) ? arr->child : NULL; e && n < cap; e = e->next) {
		char shape[256];
		n += (size_t)snprintf(
			buf + n, cap - n, "%s%s:%s%s", n ? " " : "", str_field(e, "name", "?"),
			str_field(e, "dtype", "?"),
			brief(cJSON_GetObjectItemCaseSensitive(e, "shape"), shape, sizeof(shape)));
	}
}

static int cmd_models(tsd_client *c, int argc, char **argv)
{
	if (argc)
		return usage("models: unexpected argument %s", argv[0]);
	tsd_reply *r;
	tsd_status s = tsd_client_call_verb(c, "model.list", &r);
	int rc = outcome(c, s, r); /* r is set by the call: not in the same expression */
	if (!rc) {
		const cJSON *ms = cJSON_GetObjectItemCaseSensitive(tsd_reply_json(r), "models");
		printf("%-20s %4s %-8s %-8s %-7s %6s  %-30s %s\n", "NAME", "VER", "STATE", "DEVICE",
		       "BATCHED", "QUEUED", "INPUTS", "OUTPUTS");
		for (const cJSON *m = cJSON_IsArray(ms) ? ms->child : NULL; m; m = m->next) {
			char in[512], out[512];
			io_list(cJSON_GetObjectItemCaseSensitive(m, "inputs"), in, sizeof(in));
			io_list(cJSON_GetObjectItemCaseSensitive(m, "outputs"), out, sizeof(out));
			printf("%-20s %4g %-8s %-8s %-7s %6g  %-30s %s\n",
			       str_field(m, "name", "?"), num_field(m, "version"),
			       str_field(m, "state", "?"), str_field(m, "device", "-"),
			       num_field(m, "batched") ? "yes" : "no", num_field(m, "queued"), in,
			       out);
		}
	}
	tsd_reply_free(r);
	return rc;
}

/* The JSON object in the file at path, or NULL with the message printed. */
static cJSON *json_file(const char *path)
{
	char err[512];
	size_t len;
	char *text = tctl_read_file(path, &len, err, sizeof(err));
	if (!text) {
		fprintf(stderr, "tensorctl: %s\n", err);
		return NULL;
	}
	cJSON *j = cJSON_ParseWithLength(text, len);
	free(text);
	if (!cJSON_IsObject(j)) {
		fprintf(stderr, "tensorctl: %s: not a JSON object\n", path);
		cJSON_Delete(j);
		return NULL;
	}
	return j;
}

/* Send h (owned, deleted here) with in's tensors; ok replies go to print. */
static int send_owned(tsd_client *c, cJSON *h, const tctl_inputs *in,
		      void (*print)(const tsd_reply *))
{
	tsd_reply *r;
	tsd_status s = tsd_client_call(c, h, in ? in->t : NULL, in ? in->n : 0, &r);
	int rc = outcome(c, s, r);
	if (!rc)
		print(r);
	tsd_reply_free(r);
	cJSON_Delete(h);
	return rc;
}

static void print_loaded(const tsd_reply *r)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(tsd_reply_json(r), "model");
	printf("loaded %s version %g on %s\n", str_field(m, "name", "?"), num_field(m, "version"),
	       str_field(m, "device", "?"));
}

static int cmd_load(tsd_client *c, int argc, char **argv)
{
	const char *spec = NULL, *weights = NULL;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--weights") && i + 1 < argc)
			weights = argv[++i];
		else if (!spec && argv[i][0] != '-')
			spec = argv[i];
		else
			return usage("load: unexpected argument %s", argv[i]);
	}
	if (!spec)
		return usage("load: %s", "needs SPEC.json");
	cJSON *h = json_file(spec);
	if (!h)
		return EXIT_USAGE;
	cJSON_DeleteItemFromObjectCaseSensitive(h, "verb");
	cJSON_AddStringToObject(h, "verb", "model.load");
	if (weights) {
		cJSON_DeleteItemFromObjectCaseSensitive(h, "weights");
		cJSON_AddStringToObject(h, "weights", weights);
	}
	return send_owned(c, h, NULL, print_loaded);
}

static void print_unloaded(const tsd_reply *r)
{
	printf("unloaded %s\n", str_field(tsd_reply_json(r), "name", "?"));
}

static int cmd_unload(tsd_client *c, int argc, char **argv)
{
	if (argc != 1)
		return usage("unload: %s", "needs NAME");
	cJSON *h = cJSON_CreateObject();
	cJSON_AddStringToObject(h, "verb", "model.unload");
	cJSON_AddStringToObject(h, "name", argv[0]);
	return send_owned(c, h, NULL, print_unloaded);
}

/* The reply's tensors as {"NAME": {"dtype", "shape", "data"}, ...}, pretty. */
static void print_outputs(const tsd_reply *r)
{
	cJSON *o = cJSON_CreateObject();
	for (int i = 0; o && i < tsd_reply_ntensors(r); i++) {
		const tsd_tensor *t = tsd_reply_tensor(r, i);
		cJSON_AddItemToObject(o, t->name, tctl_tensor_json(t));
	}
	char *text = o ? cJSON_Print(o) : NULL;
	puts(text ? text : "{}");
	free(text);
	cJSON_Delete(o);
}

/* infer's inputs: INPUT.json, or --raw FILE --name X --dtype DT --shape S. */
static int infer_inputs(int argc, char **argv, tctl_inputs *in)
{
	const char *file = NULL, *raw = NULL, *name = NULL, *dtype = "float32", *shape = NULL;
	for (int i = 0; i < argc; i++) {
		const char **opt = !strcmp(argv[i], "--raw")	 ? &raw
				   : !strcmp(argv[i], "--name")	 ? &name
				   : !strcmp(argv[i], "--dtype") ? &dtype
				   : !strcmp(argv[i], "--shape") ? &shape
								 : NULL;
		if (opt && i + 1 < argc)
			*opt = argv[++i];
		else if (!opt && !file && argv[i][0] != '-')
			file = argv[i];
		else
			return usage("infer: unexpected argument %s", argv[i]);
	}
	if (!file == !raw || (raw && (!name || !shape)))
		return usage("infer: %s", "needs INPUT.json or --raw FILE --name X --shape S");
	char err[512];
	size_t len;
	if (raw) {
		char *data = tctl_read_file(raw, &len, err, sizeof(err));
		if (data && tctl_inputs_raw(in, name, dtype, shape, data, len, err, sizeof(err)))
			return 0;
	} else {
		cJSON *j = json_file(file);
		if (!j)
			return EXIT_USAGE;
		bool ok = tctl_inputs_from_json(in, j, err, sizeof(err));
		cJSON_Delete(j);
		if (ok)
			return 0;
	}
	fprintf(stderr, "tensorctl: %s\n", err);
	return EXIT_USAGE;
}

static int cmd_infer(tsd_client *c, int argc, char **argv)
{
	if (argc < 2 || argv[0][0] == '-')
		return usage("infer: %s", "needs MODEL and INPUT.json or --raw ...");
	tctl_inputs in = {0};
	int rc = infer_inputs(argc - 1, argv + 1, &in);
	if (!rc) {
		cJSON *h = cJSON_CreateObject();
		cJSON_AddStringToObject(h, "verb", "infer");
		cJSON_AddStringToObject(h, "model", argv[0]);
		rc = send_owned(c, h, &in, print_outputs);
	}
	tctl_inputs_free(&in);
	return rc;
}

/* The reply header less id and status, pretty. */
static void print_header(const tsd_reply *r)
{
	cJSON *h = cJSON_Duplicate(tsd_reply_json(r), true);
	cJSON_DeleteItemFromObjectCaseSensitive(h, "id");
	cJSON_DeleteItemFromObjectCaseSensitive(h, "status");
	char *text = h ? cJSON_Print(h) : NULL;
	puts(text ? text : "{}");
	free(text);
	cJSON_Delete(h);
}

static int cmd_stats(tsd_client *c, int argc, char **argv)
{
	if (argc)
		return usage("stats: unexpected argument %s", argv[0]);
	cJSON *h = cJSON_CreateObject();
	cJSON_AddStringToObject(h, "verb", "stats");
	return send_owned(c, h, NULL, print_header);
}

static const struct command {
	const char *name;
	int (*fn)(tsd_client *c, int argc, char **argv); /* the arguments after the command */
} commands[] = {
	{"status", cmd_status}, {"models", cmd_models}, {"load", cmd_load},
	{"unload", cmd_unload}, {"infer", cmd_infer},	{"stats", cmd_stats},
};

int main(int argc, char **argv)
{
	char url[4096];
	const char *url_opt = NULL;
	long timeout = 60000;
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		char *end;
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage_text, stdout);
			return 0;
		} else if (!strcmp(argv[i], "--url") && i + 1 < argc) {
			url_opt = argv[++i];
		} else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) {
			timeout = strtol(argv[++i], &end, 10);
			if (*end || end == argv[i] || timeout < 0 || timeout > 86400000)
				return usage("--timeout %s: not milliseconds (0..86400000)",
					     argv[i]);
		} else {
			return usage("unknown option %s", argv[i]);
		}
	}
	if (i == argc)
		return usage("%s", "no command");
	const struct command *cmd = NULL;
	for (size_t k = 0; k < sizeof(commands) / sizeof(commands[0]); k++)
		if (!strcmp(argv[i], commands[k].name))
			cmd = &commands[k];
	if (!cmd)
		return usage("unknown command %s", argv[i]);
	if (!tsd_client_default_url(url_opt ? url_opt : getenv("TENSORD_URL"),
				    getenv("XDG_RUNTIME_DIR"), url, sizeof(url)))
		return usage("%s", "the daemon's address is too long");
	char err[512];
	tsd_client *c = tsd_client_open(url, (int)timeout, err, sizeof(err));
	if (!c) {
		fprintf(stderr, "tensorctl: %s\n", err);
		return EXIT_USAGE;
	}
	int rc = cmd->fn(c, argc - i - 1, argv + i + 1);
	tsd_client_close(c);
	return rc;
}
