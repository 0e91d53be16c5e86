/* tensorctl_info.c: tensorctl's read-only commands: status (hello and health), models (the
 * model.list table) and stats (the daemon's statistics as JSON). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorctl.h"

const char tctl_status_help[] =
	"usage: tensorctl status\n\nThe daemon's version, devices, limits, readiness, model counts "
	"and uptime.\n";
const char tctl_models_help[] =
	"usage: tensorctl models\n\nThe loaded models: name, version, state, device, batching, "
	"queue, inputs and outputs\n(NAME:DTYPE[SHAPE], -1 the batch dimension).\n";
const char tctl_stats_help[] = "usage: tensorctl stats\n\nThe daemon's statistics "
			       "(docs/PROTOCOL.md, \"stats\") as JSON on "
			       "stdout.\n";

static int usage(const char *fmt, const char *arg)
{
	return tctl_usage(NULL, fmt, arg);
}

static int outcome(tsd_client *c, tsd_status s, const tsd_reply *r)
{
	return tctl_outcome(c, s, r);
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

int tctl_cmd_status(tctl_ctx *ctx, int argc, char **argv)
{
	tsd_client *c = ctx->c;
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

int tctl_cmd_models(tctl_ctx *ctx, int argc, char **argv)
{
	tsd_client *c = ctx->c;
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

int tctl_cmd_stats(tctl_ctx *ctx, int argc, char **argv)
{
	tsd_client *c = ctx->c;
	if (argc)
		return usage("stats: unexpected argument %s", argv[0]);
	tsd_reply *r;
	tsd_status s = tsd_client_call_verb(c, "stats", &r);
	int rc = outcome(c, s, r);
	if (!rc)
		print_header(r);
	tsd_reply_free(r);
	return rc;
}
