/* tensorctl_tensor.c: tensorctl's tensors: built from the JSON form {"dtype", "shape", "data"}
 * or from raw bytes, and printed back as JSON. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorctl.h"

void tctl_inputs_free(tctl_inputs *in)
{
	for (int i = 0; i < in->n; i++) {
		free((char *)in->t[i].name);
		free((void *)in->t[i].data);
	}
	in->n = 0;
}

void tctl_value_store(tsd_dtype dt, double v, void *dst)
{
	switch (dt) {
	case TSD_BOOL:
		*(uint8_t *)dst = v != 0;
		break;
	case TSD_U8:
		*(uint8_t *)dst = (uint8_t)v;
		break;
	case TSD_I32: {
		int32_t x = (int32_t)v;
		memcpy(dst, &x, 4);
		break;
	}
	case TSD_I64: {
		int64_t x = (int64_t)v;
		memcpy(dst, &x, 8);
		break;
	}
	case TSD_F16: {
		uint16_t x = tsd_f16_bits(v);
		memcpy(dst, &x, 2);
		break;
	}
	default: {
		float x = (float)v;
		memcpy(dst, &x, 4);
		break;
	}
	}
}

double tctl_value_load(tsd_dtype dt, const void *src)
{
	switch (dt) {
	case TSD_BOOL:
	case TSD_U8:
		return *(const uint8_t *)src;
	case TSD_I32: {
		int32_t x;
		memcpy(&x, src, 4);
		return x;
	}
	case TSD_I64: {
		int64_t x;
		memcpy(&x, src, 8);
		return (double)x;
	}
	case TSD_F16: {
		uint16_t x;
		memcpy(&x, src, 2);
		return tsd_f16_to_double(x);
	}
	default: {
		float x;
		memcpy(&x, src, 4);
		return x;
	}
	}
}

bool tctl_value_fits(tsd_dtype dt, double v)
{
	double lo = dt == TSD_I32 ? -2147483648.0 : dt == TSD_I64 ? -9223372036854775808.0 : 0;
	double hi = dt == TSD_U8 ? 255 : dt == TSD_I32 ? 2147483647.0 : 9223372036854775807.0;
	if (!isfinite(v))
		return false;
	if (dt == TSD_F16 || dt == TSD_F32)
		return true;
	return v == floor(v) && v >= lo && (dt == TSD_BOOL ? v <= 1 : v <= hi);
}

/* Flatten j (a number, a bool or nested arrays) into buf: *k counts the elements seen. */
static bool flatten(const cJSON *j, tsd_dtype dt, uint8_t *buf, size_t numel, size_t *k,
		    const char *name, char *err, size_t errlen)
{
	if (cJSON_IsArray(j)) {
		for (const cJSON *e = j->child; e; e = e->next)
			if (!flatten(e, dt, buf, numel, k, name, err, errlen))
				return false;
		return true;
	}
	double v = cJSON_IsBool(j) ? cJSON_IsTrue(j) : j->valuedouble;
	if (!cJSON_IsNumber(j) && !cJSON_IsBool(j)) {
		snprintf(err, errlen, "%s.data[%zu]: not a number", name, *k);
		return false;
	}
	if (!tctl_value_fits(dt, v)) {
		snprintf(err, errlen, "%s.data[%zu]: %g is not a value of %s", name, *k, v,
			 tsd_dtype_name(dt));
		return false;
	}
	if (*k < numel)
		tctl_value_store(dt, v, buf + *k * tsd_dtype_size(dt));
	++*k;
	return true;
}

/* Room for one more tensor named name (copied), or false with err set. */
static tsd_tensor *add(tctl_inputs *in, const char *name, char *err, size_t errlen)
{
	if (in->n == TCTL_MAX_TENSORS) {
		snprintf(err, errlen, "%s: more than %d tensors", name, TCTL_MAX_TENSORS);
		return NULL;
	}
	tsd_tensor *t = &in->t[in->n];
	memset(t, 0, sizeof(*t));
	if (!(t->name = strdup(name))) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	in->n++;
	return t;
}

/* numel of t's shape into *numel; false (err set) past 2^40 elements. */
static bool count(const tsd_tensor *t, size_t *numel, char *err, size_t errlen)
{
	*numel = 1;
	for (int d = 0; d < t->ndim; d++) {
		if (t->shape[d] < 0 ||
		    (t->shape[d] && *numel > ((size_t)1 << 40) / (size_t)t->shape[d])) {
			snprintf(err, errlen, "%s: bad shape", t->name);
			return false;
		}
		*numel *= (size_t)t->shape[d];
	}
	return true;
}

static bool one_from_json(tctl_inputs *in, const cJSON *o, char *err, size_t errlen)
{
	const char *name = o->string;
	const cJSON *dt = cJSON_GetObjectItemCaseSensitive(o, "dtype");
	const cJSON *sh = cJSON_GetObjectItemCaseSensitive(o, "shape");
	const cJSON *data = cJSON_GetObjectItemCaseSensitive(o, "data");
	tsd_dtype dtype = TSD_F32;
	if (dt && (!cJSON_IsString(dt) || !tsd_dtype_parse(dt->valuestring, &dtype))) {
		snprintf(err, errlen, "%s.dtype: not a dtype name", name);
		return false;
	}
	if (!cJSON_IsArray(sh) || cJSON_GetArraySize(sh) > TSD_MAX_DIMS || !data) {
		snprintf(err, errlen, "%s: needs \"shape\" (at most %d integers) and \"data\"",
			 name, TSD_MAX_DIMS);
		return false;
	}
	tsd_tensor *t = add(in, name, err, errlen);
	if (!t)
		return false;
	t->dtype = dtype;
	for (const cJSON *d = sh->child; d; d = d->next) {
		if (!cJSON_IsNumber(d) || d->valuedouble != floor(d->valuedouble)) {
			snprintf(err, errlen, "%s.shape: not integers", name);
			return false;
		}
		t->shape[t->ndim++] = (int64_t)d->valuedouble;
	}
	size_t numel, k = 0;
	if (!count(t, &numel, err, errlen))
		return false;
	void *buf = calloc(numel ? numel : 1, tsd_dtype_size(dtype));
	if (!(t->data = buf)) {
		snprintf(err, errlen, "%s: out of memory", name);
		return false;
	}
	if (!flatten(data, dtype, buf, numel, &k, name, err, errlen))
		return false;
	if (k != numel) {
		snprintf(err, errlen, "%s.data: %zu values for shape of %zu elements", name, k,
			 numel);
		return false;
	}
	return true;
}

bool tctl_inputs_from_json(tctl_inputs *in, const cJSON *obj, char *err, size_t errlen)
{
	if (!cJSON_IsObject(obj) || !obj->child) {
		snprintf(err, errlen, "inputs: not an object of tensors {\"NAME\": {...}}");
		return false;
	}
	for (const cJSON *o = obj->child; o; o = o->next)
		if (!one_from_json(in, o, err, errlen))
			return false;
	return true;
}

bool tctl_inputs_raw(tctl_inputs *in, const char *name, const char *dtype, const char *shape,
		     void *data, size_t len, char *err, size_t errlen)
{
	tsd_tensor *t = add(in, name, err, errlen);
	if (!t) {
		free(data);
		return false;
	}
	t->data = data;
	if (!tsd_dtype_parse(dtype, &t->dtype)) {
		snprintf(err, errlen, "--dtype %s: not a dtype name", dtype);
		return false;
	}
	for (const char *p = shape; *p; p += *p == ',') {
		char *end;
		errno = 0;
		long long v = strtoll(p, &end, 10);
		if (end == p || errno || v < 0 || (*end && *end != ',') ||
		    t->ndim == TSD_MAX_DIMS) {
			snprintf(err, errlen, "--shape %s: not up to %d comma-separated sizes",
				 shape, TSD_MAX_DIMS);
			return false;
		}
		t->shape[t->ndim++] = v;
		p = end;
	}
	size_t numel;
	if (!count(t, &numel, err, errlen))
		return false;
	if (numel * tsd_dtype_size(t->dtype) != len) {
		snprintf(err, errlen, "%s: %zu bytes, the shape needs %zu", name, len,
			 numel * tsd_dtype_size(t->dtype));
		return false;
	}
	return true;
}

cJSON *tctl_tensor_json(const tsd_tensor *t)
{
	cJSON *o = cJSON_CreateObject(), *sh = cJSON_CreateArray(), *data = cJSON_CreateArray();
	bool ok = o && sh && data && cJSON_AddStringToObject(o, "dtype", tsd_dtype_name(t->dtype));
	cJSON_AddItemToObject(o, "shape", sh);
	cJSON_AddItemToObject(o, "data", data);
	for (int d = 0; ok && d < t->ndim; d++)
		ok = cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->shape[d]));
	size_t es = tsd_dtype_size(t->dtype), numel = es ? t->nbytes / es : 0;
	for (size_t i = 0; ok && i < numel; i++)
		ok = cJSON_AddItemToArray(data,
					  cJSON_CreateNumber(tctl_value_load(
						  t->dtype, (const uint8_t *)t->data + i * es)));
	if (!ok) {
		cJSON_Delete(o);
		if (!o) {
			cJSON_Delete(sh);
			cJSON_Delete(data);
		}
		return NULL;
	}
	return o;
}

cJSON *tctl_json_file(const char *path, char *err, size_t errlen)
{
	size_t len;
	char *text = tctl_read_file(path, &len, err, errlen);
	if (!text)
		return NULL;
	cJSON *j = cJSON_ParseWithLength(text, len);
	free(text);
	if (!cJSON_IsObject(j)) {
		snprintf(err, errlen, "%s: not a JSON object", path);
		cJSON_Delete(j);
		return NULL;
	}
	return j;
}

bool tctl_inputs_npy(tctl_inputs *in, const char *name, const char *path, char *err, size_t errlen)
{
	tsd_tensor t;
	if (!tctl_npy_read(path, &t, err, errlen))
		return false;
	tsd_tensor *d = add(in, name, err, errlen);
	if (!d) {
		free((void *)t.data);
		return false;
	}
	t.name = d->name;
	*d = t;
	return true;
}

bool tctl_inputs_arg(tctl_inputs *in, const char *arg, char *err, size_t errlen)
{
	const char *eq = strchr(arg, '=');
	if (eq && eq > arg && (size_t)(eq - arg) <= TCTL_NAME_MAX) {
		char name[TCTL_NAME_MAX + 1];
		memcpy(name, arg, (size_t)(eq - arg));
		name[eq - arg] = '\0';
		return tctl_inputs_npy(in, name, eq + 1, err, errlen);
	}
	cJSON *j = tctl_json_file(arg, err, errlen);
	if (!j)
		return false;
	bool ok = tctl_inputs_from_json(in, j, err, errlen);
	cJSON_Delete(j);
	return ok;
}
