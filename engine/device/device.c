/* device.c: the devices of a context: opening one by name (tinygrad's DEV syntax: "CPU",
 * "CPU:1", "CL", "CL:1"), the default device, listing what the machine offers, moving tensors
 * between devices, and marking a failed device unusable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/diskcache.h"
#include "core/context.h"
#include "cache/progcache.h"
#include "schedule/schedcache.h"

/* Parse "KIND" or "KIND:n" into kind ("CPU", "CL") and ordinal; false if malformed. */
static bool parse_spec(const char *spec, char kind[8], int *ordinal)
{
	const char *colon = strchr(spec, ':');
	size_t kl = colon ? (size_t)(colon - spec) : strlen(spec);
	if (kl == 0 || kl >= 8)
		return false;
	memcpy(kind, spec, kl);
	kind[kl] = 0;
	*ordinal = 0;
	if (colon) {
		char *end;
		long v = strtol(colon + 1, &end, 10);
		if (end == colon + 1 || *end || v < 0 || v > 64)
			return false;
		*ordinal = (int)v;
	}
	return !strcmp(kind, "CPU") || !strcmp(kind, "CL");
}

static void canonical_name(const char *kind, int ordinal, char *out, size_t len)
{
	if (!strcmp(kind, "CPU") && ordinal == 0)
		snprintf(out, len, "CPU");
	else
		snprintf(out, len, "%s:%d", kind, ordinal);
}

static eng_status backend_create(eng_ctx *ctx, const char *kind, int ordinal, bk_device *out, bk_err *err)
{
	const eng_ctx_opts *o = &ctx->dopts;
	if (!strcmp(kind, "CPU"))
		return bk_cpu_create(o->cc, o->nthreads, ctx->debug, out, err);
	return bk_cl_create(ordinal, ctx->debug, out, err);
}

int eng_device_add(eng_ctx *ctx, const char *spec, char *err, size_t errlen)
{
	char kind[8], name[32];
	int ordinal;
	if (!spec || !parse_spec(spec, kind, &ordinal)) {
		snprintf(err, errlen, "unknown device '%s' (use CPU, CPU:n, CL or CL:n)", spec ? spec : "(null)");
		return -1;
	}
	canonical_name(kind, ordinal, name, sizeof(name));
	for (int i = 0; i < ctx->ndevs; i++)
		if (!strcmp(ctx->devs[i]->name, name))
			return i;
	if (ctx->ndevs == ENG_MAX_DEVICES) {
		snprintf(err, errlen, "%s: a context holds at most %d devices", name, ENG_MAX_DEVICES);
		return -1;
	}
	eng_device *d = calloc(1, sizeof(*d));
	bk_err berr = {{0}};
	if (!d) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (backend_create(ctx, kind, ordinal, &d->bk, &berr) != ENG_OK) {
		snprintf(err, errlen, "%s: %s", name, berr.msg);
		free(d);
		return -1;
	}
	if (bk_device_check(&d->bk, &berr) != ENG_OK) {
		snprintf(err, errlen, "%s: %s", name, berr.msg);
		d->bk.ops->destroy(d->bk.ctx);
		free(d);
		return -1;
	}
	const eng_ctx_opts *o = &ctx->dopts;
	snprintf(d->name, sizeof(d->name), "%s", name);
	d->ctx = ctx;
	d->index = ctx->ndevs;
	const char *env = getenv("TENSORD_DISK_CACHE"), *dir = o->cache_dir ? o->cache_dir : getenv("TENSORD_CACHE_DIR");
	d->disk_enabled = !o->no_disk_cache && !(env && !strcmp(env, "0"));
	snprintf(d->disk_dir, sizeof(d->disk_dir), "%s", dir ? dir : "");
	d->disk_max = o->disk_cache_max;
	d->progs = eng_progcache_create();
	d->scache = o->no_schedule_cache ? NULL : eng_sc_create(0);
	if (!d->progs || (!o->no_schedule_cache && !d->scache)) {
		eng_device_destroy(d);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	ctx->devs[ctx->ndevs++] = d;
	return d->index;
}

void eng_device_destroy(eng_device *d)
{
	if (!d)
		return;
	eng_sc_destroy(d->scache);
	eng_dc_close(d->disk);
	if (d->progs)
		eng_progcache_destroy(d->progs, &d->bk);
	d->bk.ops->destroy(d->bk.ctx);
	free(d);
}

eng_status eng_device_fail(eng_device *d, eng_status s, const char *msg)
{
	if (!d->failed) {
		d->failed = true;
		snprintf(d->failmsg, sizeof(d->failmsg), "%s", msg);
	}
	return eng_set_error(d->ctx, s, "%s: device failed and is no longer used: %s", d->name, msg);
}

/* ---- public API ---- */

int eng_device_open(eng_ctx *ctx, const char *spec)
{
	char err[512];
	int i = eng_device_add(ctx, spec, err, sizeof(err));
	if (i < 0)
		eng_set_error(ctx, ENG_EDEVICE, "device_open: %s", err);
	return i;
}

int eng_device_count(const eng_ctx *ctx) { return ctx->ndevs; }

const char *eng_device_name(const eng_ctx *ctx, int dev)
{
	return dev >= 0 && dev < ctx->ndevs ? ctx->devs[dev]->name : NULL;
}

eng_status eng_set_default_device(eng_ctx *ctx, int dev)
{
	if (dev < 0 || dev >= ctx->ndevs)
		return eng_set_error(ctx, ENG_EINVAL, "set_default_device: no device %d (%d open)", dev, ctx->ndevs);
	ctx->default_dev = dev;
	return ENG_OK;
}

int eng_default_device(const eng_ctx *ctx) { return ctx->default_dev; }

int eng_tensor_device(const eng_tensor *t)
{
	if (!t)
		return -1;
	return t->node->dev >= 0 ? t->node->dev : t->ctx->default_dev;
}

eng_tensor *eng_to_device(const eng_tensor *t, int dev)
{
	if (!t)
		return NULL;
	eng_ctx *ctx = t->ctx;
	if (dev < 0 || dev >= ctx->ndevs) {
		eng_set_error(ctx, ENG_EINVAL, "to_device: no device %d (%d open)", dev, ctx->ndevs);
		return NULL;
	}
	eng_node *n = t->node;
	if (n->dev == dev || n->dev < 0) /* there already; constants go wherever they are used */
		return eng_tensor_wrap(ctx, eng_node_ref(n));
	eng_node_desc d = {.op = ENG_OP_COPY, .dtype = n->dtype, .ndim = n->ndim, .shape = n->shape, .src = {n},
			   .dev = dev};
	return eng_tensor_wrap(ctx, eng_node_get(ctx->graph, &d));
}

eng_status eng_devices_list(char *out, size_t len)
{
	if (!out || !len)
		return ENG_EINVAL;
	size_t l = (size_t)snprintf(out, len, "CPU | generated C compiled by cc | %ld cores\n",
				    sysconf(_SC_NPROCESSORS_ONLN));
	bk_err err;
	if (l < len && bk_cl_list(out + l, len - l, NULL, &err) != ENG_OK)
		snprintf(out + l, len - l, "CL: none (%s)\n", err.msg);
	return ENG_OK;
}
