/* device.c: the devices of a context: opening one by name (tinygrad's DEV syntax: "CPU",
 * "CPU:1", "CL", "CL:1", any registered backend), its options from the context and the
 * environment, its target, listing what the machine offers, and marking a failed device unusable. */
#include "device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/registry.h"

/* Parse "NAME" or "NAME:n" into the backend and ordinal; false if malformed or unknown. */
static bool parse_spec(const char *spec, const bk_backend **be, int *ordinal)
{
	char name[16];
	const char *colon = strchr(spec, ':');
	size_t kl = colon ? (size_t)(colon - spec) : strlen(spec);
	if (kl == 0 || kl >= sizeof(name))
		return false;
	memcpy(name, spec, kl);
	name[kl] = 0;
	*ordinal = 0;
	if (colon) {
		char *end;
		long v = strtol(colon + 1, &end, 10);
		if (end == colon + 1 || *end || v < 0 || v > 64)
			return false;
		*ordinal = (int)v;
	}
	return (*be = bk_backend_find(name)) != NULL;
}

/* "CPU, CPU:n, CL or CL:n" from the registry. */
static void spec_help(char *out, size_t len)
{
	size_t l = 0;
	out[0] = 0;
	for (int i = 0; bk_backend_at(i) && l < len; i++) {
		const char *n = bk_backend_at(i)->name;
		l += (size_t)snprintf(out + l, len - l, "%s%s, %s:n", i ? (bk_backend_at(i + 1) ? ", " : " or ") : "", n, n);
	}
}

/* The options of backend be: "NAME.key=value" entries of the context's list (comma or space
 * separated), else the option's environment variable. Values point into buf or the
 * environment. false with a message for a malformed entry or a key be does not take. */
static bool gather_opts(const eng_ctx *ctx, const bk_backend *be, bk_opts *o, char *buf, size_t cap, char *err,
			size_t errlen)
{
	memset(o, 0, sizeof(*o));
	snprintf(buf, cap, "%s", ctx->backend_opts);
	size_t nl = strlen(be->name);
	for (char *save = NULL, *tok = strtok_r(buf, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save)) {
		char *dot = strchr(tok, '.'), *eq = strchr(tok, '=');
		if (!dot || !eq || eq < dot) {
			snprintf(err, errlen, "backend option '%s': want BACKEND.key=value", tok);
			return false;
		}
		if ((size_t)(dot - tok) != nl || strncmp(tok, be->name, nl))
			continue; /* another backend's (checked when that one opens) */
		*eq = 0;
		const char *key = dot + 1;
		const bk_option_spec *s = be->options;
		while (s && s->key && strcmp(s->key, key))
			s++;
		if (!s || !s->key) {
			char keys[256] = "";
			for (s = be->options; s && s->key; s++)
				snprintf(keys + strlen(keys), sizeof(keys) - strlen(keys), "%s%s", s == be->options ? "" : ", ", s->key);
			snprintf(err, errlen, "%s takes no option '%s' (it takes: %s)", be->name, key, *keys ? keys : "none");
			return false;
		}
		if (o->n == BK_MAX_OPTS) {
			snprintf(err, errlen, "more than %d options for %s", BK_MAX_OPTS, be->name);
			return false;
		}
		o->key[o->n] = s->key;
		o->value[o->n++] = eq + 1;
	}
	for (const bk_option_spec *s = be->options; s && s->key; s++) {
		const char *v = s->env ? getenv(s->env) : NULL;
		if (v && *v && !bk_opts_get(o, s->key) && o->n < BK_MAX_OPTS) {
			o->key[o->n] = s->key;
			o->value[o->n++] = v;
		}
	}
	return true;
}

/* Parse spec into the backend, ordinal and canonical name; false with a message. */
static bool resolve(const char *spec, const bk_backend **be, int *ordinal, char name[32], char *err, size_t errlen)
{
	if (!spec || !parse_spec(spec, be, ordinal)) {
		char help[256];
		spec_help(help, sizeof(help));
		const char *why = bk_backend_absent(spec);
		if (why)
			snprintf(err, errlen, "device '%s': %s", spec, why);
		else
			snprintf(err, errlen, "unknown device '%s' (use %s)", spec ? spec : "(null)", help);
		return false;
	}
	if ((*be)->bare_zero && *ordinal == 0)
		snprintf(name, 32, "%s", (*be)->name);
	else
		snprintf(name, 32, "%s:%d", (*be)->name, *ordinal);
	return true;
}

eng_device *eng_device_create(eng_ctx *ctx, const char *spec, char *err, size_t errlen)
{
	const bk_backend *be;
	char name[32];
	int ordinal;
	if (!resolve(spec, &be, &ordinal, name, err, errlen))
		return NULL;
	bk_opts opts;
	char optbuf[sizeof(ctx->backend_opts)], msg[512];
	if (!gather_opts(ctx, be, &opts, optbuf, sizeof(optbuf), msg, sizeof(msg))) {
		snprintf(err, errlen, "%s: %s", name, msg);
		return NULL;
	}
	eng_device *d = calloc(1, sizeof(*d));
	bk_err berr = {{0}};
	if (!d) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (be->open(ordinal, &opts, ctx->debug, &d->bk, &berr) != ENG_OK) {
		snprintf(err, errlen, "%s: %s", name, berr.msg);
		free(d);
		return NULL;
	}
	if (bk_device_check(&d->bk, &d->target, &berr) != ENG_OK) {
		snprintf(err, errlen, "%s: %s", name, berr.msg);
		d->bk.ops->destroy(d->bk.ctx);
		free(d);
		return NULL;
	}
	snprintf(d->name, sizeof(d->name), "%s", name);
	d->ctx = ctx;
	d->index = -1;
	return d;
}

int eng_device_add(eng_ctx *ctx, const char *spec, char *err, size_t errlen)
{
	const bk_backend *be;
	char name[32];
	int ordinal;
	if (!resolve(spec, &be, &ordinal, name, err, errlen))
		return -1;
	for (int i = 0; i < ctx->ndevs; i++)
		if (!strcmp(ctx->devs[i]->name, name))
			return i;
	if (ctx->ndevs == ENG_MAX_DEVICES) {
		snprintf(err, errlen, "%s: a context holds at most %d devices", name, ENG_MAX_DEVICES);
		return -1;
	}
	eng_device *d = eng_device_create(ctx, spec, err, errlen);
	if (!d)
		return -1;
	d->index = ctx->ndevs;
	ctx->devs[ctx->ndevs++] = d;
	return d->index;
}

const char *eng_device_default_spec(void) { return bk_backend_at(0)->name; }

void eng_device_destroy(eng_device *d)
{
	if (!d)
		return;
	eng_alloc_trim(d);
	d->bk.ops->destroy(d->bk.ctx);
	free(d);
}

eng_status eng_device_fail(eng_device *d, eng_status s, const char *msg)
{
	if (!d->failed) {
		d->failed = true;
		snprintf(d->failmsg, sizeof(d->failmsg), "%.*s", (int)sizeof(d->failmsg) - 1, msg);
	}
	return eng_set_error(d->ctx, s, "%s: device failed and is no longer used: %s", d->name, msg);
}

/* Wait for an asynchronous device: a realize returns when its values are computed, so its
 * errors surface here and timings around it are honest. */
eng_status eng_device_sync(eng_device *dev)
{
	if (!dev->bk.ops->synchronize || dev->failed)
		return ENG_OK;
	bk_err berr;
	eng_status s = dev->bk.ops->synchronize(dev->bk.ctx, &berr);
	if (s == ENG_EDEVICE)
		return eng_device_fail(dev, s, berr.msg);
	if (s)
		return eng_set_error(dev->ctx, s, "%s: %s", dev->name, berr.msg);
	return ENG_OK;
}

/* ---- public API ---- */

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

eng_status eng_devices_list(char *out, size_t len)
{
	if (!out || !len)
		return ENG_EINVAL;
	size_t l = 0;
	out[0] = 0;
	for (int i = 0; bk_backend_at(i) && l + 1 < len; i++) {
		const bk_backend *be = bk_backend_at(i);
		bk_err err;
		if (be->list(out + l, len - l, NULL, &err) != ENG_OK)
			snprintf(out + l, len - l, "%s: none (%s)\n", be->name, err.msg);
		l += strlen(out + l);
	}
	return ENG_OK;
}

eng_status eng_devices_options(char *out, size_t len)
{
	if (!out || !len)
		return ENG_EINVAL;
	size_t l = 0;
	out[0] = 0;
	for (int i = 0; bk_backend_at(i); i++)
		for (const bk_option_spec *s = bk_backend_at(i)->options; s && s->key && l + 1 < len; s++) {
			snprintf(out + l, len - l, "%s.%s%s%s%s: %s\n", bk_backend_at(i)->name, s->key, s->env ? " ($" : "",
				 s->env ? s->env : "", s->env ? ")" : "", s->help);
			l += strlen(out + l);
		}
	return ENG_OK;
}
