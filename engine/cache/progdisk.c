/* progdisk.c: the disk layer of the program cache (see progdisk.h). Index entry payload: the
 * module's 32-character key, then the kernel's symbol (NUL-terminated). */
#include "progdisk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diskcache.h"

/* The device's disk cache, opened on first use; NULL when disabled or unusable. */
static eng_diskcache *disk(eng_device *dev)
{
	const bk_device_ops *ops = dev->bk.ops;
	if (dev->disk_state == 0) {
		dev->disk_state = -1;
		if (!dev->disk_enabled || !ops->cache_id || !ops->program_blob || !ops->load)
			return NULL;
		const char *id = ops->cache_id(dev->bk.ctx);
		if (!id || !*id)
			return NULL;
		char msg[512] = "";
		dev->disk = eng_diskcache_open(dev->disk_dir[0] ? dev->disk_dir : NULL, dev->disk_max, msg, sizeof(msg));
		if (!dev->disk) {
			eng_logmsg(dev->ctx, 0, "tensord: %s", msg);
			return NULL;
		}
		dev->disk_state = 1;
	}
	return dev->disk_state > 0 ? dev->disk : NULL;
}

eng_diskcache *eng_progdisk_cache(eng_device *dev) { return disk(dev); }

static void kernel_key(eng_device *dev, const char *src, char key[33])
{
	const char *id = dev->bk.ops->cache_id(dev->bk.ctx);
	const void *parts[3] = {"kernel", id, src};
	size_t lens[3] = {6, strlen(id), strlen(src)};
	eng_diskcache_key(parts, lens, 3, key);
}

static void module_key(eng_device *dev, const void *bytes, size_t n, char key[33])
{
	const char *id = dev->bk.ops->cache_id(dev->bk.ctx);
	const void *parts[3] = {"module", id, bytes};
	size_t lens[3] = {6, strlen(id), n};
	eng_diskcache_key(parts, lens, 3, key);
}

int eng_progdisk_lookup(eng_device *dev, const char *const *srcs, const char *const *names, bk_program **progs, int n)
{
	eng_diskcache *dc = disk(dev);
	if (!dc || n <= 0)
		return 0;
	char (*mod)[33] = calloc(n, sizeof(*mod));
	bool *want = calloc(n, sizeof(bool));
	const char **lnames = calloc(n, sizeof(*lnames));
	bk_program **lprogs = calloc(n, sizeof(*lprogs));
	int *which = calloc(n, sizeof(int)), loaded = 0;
	if (!mod || !want || !lnames || !lprogs || !which)
		goto out;
	for (int i = 0; i < n; i++) {
		if (progs[i])
			continue;
		char key[33];
		void *p;
		size_t len;
		kernel_key(dev, srcs[i], key);
		if (eng_diskcache_get(dc, key, &p, &len))
			continue;
		/* payload: module key (32 hex), the symbol, NUL */
		if (len > 33 && len < 1024 && ((char *)p)[len - 1] == 0 && strlen((char *)p + 32) == len - 33 &&
		    !strcmp((char *)p + 32, names[i])) {
			memcpy(mod[i], p, 32);
			mod[i][32] = 0;
			want[i] = true;
		}
		free(p);
	}
	for (int i = 0; i < n; i++) {
		if (!want[i])
			continue;
		int m = 0; /* every wanted kernel of this module, loaded together */
		for (int k = i; k < n; k++)
			if (want[k] && !strcmp(mod[k], mod[i])) {
				which[m] = k;
				lnames[m++] = names[k];
				want[k] = false;
			}
		void *bytes;
		size_t len;
		if (eng_diskcache_get(dc, mod[i], &bytes, &len))
			continue;
		bk_err err;
		if (!dev->bk.ops->load(dev->bk.ctx, bytes, len, lnames, m, lprogs, &err)) {
			for (int k = 0; k < m; k++)
				progs[which[k]] = lprogs[k];
			loaded += m;
		} else {
			eng_logmsg(dev->ctx, 1, "tensord: cached module %s did not load (%s); compiling instead", mod[i],
				   err.msg);
		}
		free(bytes);
	}
out:
	free(mod);
	free(want);
	free(lnames);
	free(lprogs);
	free(which);
	return loaded;
}

static void warn_once(eng_device *dev, eng_diskcache *dc)
{
	if (!dev->disk_warned)
		eng_logmsg(dev->ctx, 0, "tensord: kernel disk cache: %s (further write errors not reported)",
			   eng_diskcache_errmsg(dc));
	dev->disk_warned = true;
}

void eng_progdisk_store(eng_device *dev, const char *const *srcs, bk_program *const *progs, int n)
{
	eng_diskcache *dc = disk(dev);
	if (!dc)
		return;
	const void *last = NULL;
	char mkey[33] = "";
	for (int i = 0; i < n; i++) {
		const void *bytes;
		size_t len;
		const char *symbol;
		bk_err err;
		if (!progs[i] || dev->bk.ops->program_blob(dev->bk.ctx, progs[i], &bytes, &len, &symbol, &err))
			continue;
		if (bytes != last) { /* kernels of one module come together: store it once */
			module_key(dev, bytes, len, mkey);
			if (eng_diskcache_put(dc, mkey, bytes, len)) {
				warn_once(dev, dc);
				last = NULL;
				continue;
			}
			last = bytes;
		}
		size_t sl = strlen(symbol);
		char *payload = malloc(32 + sl + 1);
		if (!payload)
			continue;
		memcpy(payload, mkey, 32);
		memcpy(payload + 32, symbol, sl + 1);
		char kkey[33];
		kernel_key(dev, srcs[i], kkey);
		if (eng_diskcache_put(dc, kkey, payload, 32 + sl + 1))
			warn_once(dev, dc);
		free(payload);
	}
}
