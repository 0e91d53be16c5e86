/* tensorctl_data.c: datasets and weights read on the client side: IDX files (gzip'd or raw,
 * MNIST style) and safetensors files into tensors, for train and load. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "tensorctl.h"

#define FAIL(...) (snprintf(err, errlen, __VA_ARGS__), false)
#define DATA_MAX  ((size_t)16 << 30)

bool tctl_idx_read(const char *path, tsd_tensor *t, char *err, size_t errlen)
{
	memset(t, 0, sizeof(*t));
	gzFile f = gzopen(path, "rb");
	if (!f)
		return FAIL("%s: %s", path, strerror(errno ? errno : ENOENT));
	uint8_t h[4], d[4];
	bool ok =
		gzread(f, h, 4) == 4 && h[0] == 0 && h[1] == 0 && h[3] >= 1 && h[3] <= TSD_MAX_DIMS;
	size_t numel = 1, es = 1;
	if (!ok) {
		gzclose(f);
		return FAIL("idx: %s: not an IDX file", path);
	}
	t->dtype = h[2] == 0x08	  ? TSD_U8
		   : h[2] == 0x0C ? TSD_I32
		   : h[2] == 0x0D ? TSD_F32
				  : TSD_DTYPE_COUNT;
	if (t->dtype == TSD_DTYPE_COUNT) {
		gzclose(f);
		return FAIL("idx: %s: element type 0x%02x (only u8, i32, f32)", path, h[2]);
	}
	es = tsd_dtype_size(t->dtype);
	t->ndim = h[3];
	for (int k = 0; ok && k < t->ndim; k++) {
		ok = gzread(f, d, 4) == 4;
		t->shape[k] = (int64_t)d[0] << 24 | d[1] << 16 | d[2] << 8 | d[3];
		numel *= (size_t)t->shape[k];
		ok = ok && numel * es <= DATA_MAX;
	}
	uint8_t *buf = ok ? malloc(numel * es + 1) : NULL;
	size_t got = 0;
	while (buf && got < numel * es) {
		size_t want = numel * es - got;
		int n = gzread(f, buf + got, want > (1u << 30) ? 1u << 30 : (unsigned)want);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	gzclose(f);
	if (!buf || got != numel * es) {
		free(buf);
		return FAIL("idx: %s: %s", path, ok ? "truncated data" : "bad dimensions");
	}
	for (size_t i = 0; es == 4 && i < numel; i++) { /* big-endian elements */
		uint8_t *p = buf + i * 4, x = p[0];
		p[0] = p[3], p[3] = x, x = p[1], p[1] = p[2], p[2] = x;
	}
	t->data = buf;
	t->nbytes = numel * es;
	return true;
}

static bool st_dtype(const char *s, tsd_dtype *dt)
{
	static const struct {
		const char *name;
		tsd_dtype dt;
	} m[] = {{"BOOL", TSD_BOOL}, {"U8", TSD_U8},   {"I32", TSD_I32},
		 {"I64", TSD_I64},   {"F16", TSD_F16}, {"F32", TSD_F32}};
	for (size_t k = 0; k < sizeof(m) / sizeof(m[0]); k++)
		if (!strcmp(s, m[k].name))
			return *dt = m[k].dt, true;
	return false;
}

bool tctl_safetensors_read(const char *path, tctl_inputs *in, char *err, size_t errlen)
{
	size_t len;
	char *buf = tctl_read_file(path, &len, err, errlen);
	if (!buf)
		return false;
	uint64_t hl = 0;
	for (int k = 0; len >= 8 && k < 8; k++)
		hl |= (uint64_t)(uint8_t)buf[k] << (8 * k);
	cJSON *h = len >= 8 && hl <= len - 8 ? cJSON_ParseWithLength(buf + 8, hl) : NULL;
	bool ok = cJSON_IsObject(h);
	if (!ok)
		snprintf(err, errlen, "%s: not a safetensors file", path);
	const char *data = buf + 8 + hl;
	size_t dlen = len - 8 - (ok ? hl : 0);
	for (const cJSON *e = ok ? h->child : NULL; ok && e; e = e->next) {
		if (!strcmp(e->string, "__metadata__"))
			continue;
		const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
		const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
		const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
		tsd_tensor t = {0};
		size_t numel = 1;
		ok = cJSON_IsString(dt) && st_dtype(dt->valuestring, &t.dtype) &&
		     cJSON_IsArray(sh) && cJSON_GetArraySize(sh) <= TSD_MAX_DIMS &&
		     cJSON_GetArraySize(off) == 2 && strlen(e->string) <= TCTL_NAME_MAX;
		for (const cJSON *d = ok ? sh->child : NULL; ok && d; d = d->next) {
			ok = cJSON_IsNumber(d) && d->valuedouble >= 0 && d->valuedouble < 1e12;
			t.shape[t.ndim++] = ok ? (int64_t)d->valuedouble : 0;
			numel *= ok ? (size_t)d->valuedouble : 1;
		}
		double b = ok ? cJSON_GetArrayItem(off, 0)->valuedouble : 0;
		double x = ok ? cJSON_GetArrayItem(off, 1)->valuedouble : 0;
		ok = ok && b >= 0 && x >= b && x <= (double)dlen &&
		     (size_t)(x - b) == numel * tsd_dtype_size(t.dtype);
		if (!ok) {
			snprintf(err, errlen, "%s: tensor %.128s: bad dtype, shape or offsets",
				 path, e->string);
			break;
		}
		void *copy = malloc((size_t)(x - b) + 1);
		char sh_text[160] = "";
		for (int d = 0, n = 0; d < t.ndim; d++)
			n += snprintf(sh_text + n, sizeof(sh_text) - (size_t)n, "%s%lld",
				      d ? "," : "", (long long)t.shape[d]);
		if (!copy) {
			ok = false;
			snprintf(err, errlen, "out of memory");
			break;
		}
		memcpy(copy, data + (size_t)b, (size_t)(x - b));
		ok = tctl_inputs_raw(in, e->string, tsd_dtype_name(t.dtype), sh_text, copy,
				     (size_t)(x - b), err, errlen);
	}
	cJSON_Delete(h);
	free(buf);
	return ok;
}
