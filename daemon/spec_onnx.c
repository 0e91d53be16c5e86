/* spec_onnx.c: the ONNX fields of a model.load ("format": "onnx"), on the loop: the file or
 * the uploaded bytes, shapes, constants and f64_as_f32 checked into the version. The engine
 * side, on the executor, is exec_onnx.c. */
#include "registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensord/onnx.h>

#define BAD(...) dmn_bad(err, errlen, TSD_BAD_REQUEST, __VA_ARGS__)

tsd_status dmn_onnx_spec(dmn_srv *s, const cJSON *spec, const proto_msg *pm, dmn_mver *v, char *err, size_t errlen)
{
	static const char *const not_onnx[] = {"graph", "weights", "inputs", "outputs", "train"};
	for (size_t k = 0; k < sizeof(not_onnx) / sizeof(*not_onnx); k++)
		if (cJSON_GetObjectItemCaseSensitive(spec, not_onnx[k]))
			return BAD("%s: not a field of an ONNX model (the file holds its graph, weights and ports)", not_onnx[k]);
	const cJSON *file = cJSON_GetObjectItemCaseSensitive(spec, "file");
	const proto_tensor *up = pm ? proto_msg_tensor(pm, "onnx") : NULL;
	if (file && up)
		return BAD("file: give the model as \"file\" or as the tensor \"onnx\", not both");
	if (file) {
		char e2[400];
		tsd_status st;
		if (!cJSON_IsString(file))
			return BAD("file: an .onnx file name relative to models_dir");
		if ((st = dmn_models_path(&s->cfg, file->valuestring, v->onnx_path, sizeof(v->onnx_path), e2, sizeof(e2))))
			return dmn_bad(err, errlen, st, "file: %s", e2);
	} else if (!up) {
		return BAD("file: an ONNX model needs \"file\" (relative to models_dir) or its bytes as the uint8 tensor \"onnx\"");
	} else if (up->dtype != ENG_U8 || up->ndim != 1) {
		return BAD("tensors (onnx): the model's bytes as a 1-D uint8 tensor");
	}
	for (int k = 0; pm && k < pm->ntensors; k++)
		if (strcmp(pm->tensors[k].name, "onnx"))
			return BAD("tensors[%d] (%s): an ONNX model takes only the tensor \"onnx\"", k, pm->tensors[k].name);
	const cJSON *shapes = cJSON_GetObjectItemCaseSensitive(spec, "shapes");
	const cJSON *consts = cJSON_GetObjectItemCaseSensitive(spec, "constants");
	const cJSON *f64 = cJSON_GetObjectItemCaseSensitive(spec, "f64_as_f32");
	if (shapes && !cJSON_IsObject(shapes))
		return BAD("shapes: an object {\"INPUT\": [dims, -1 for the batch], ...}");
	for (const cJSON *e = shapes ? shapes->child : NULL; e; e = e->next) {
		int nd = 0, nbatch = 0;
		bool ok = cJSON_IsArray(e);
		for (const cJSON *d = ok ? e->child : NULL; d && ok; d = d->next, nd++) {
			int64_t x;
			ok = nd < ENG_MAX_DIMS && proto_json_int(d, -1, INT32_MAX, &x) && x != 0 && (x > 0 || !nbatch++);
		}
		if (!ok)
			return BAD("shapes.%.64s: up to %d sizes >= 1, at most one -1 (the batch axis)", e->string, ENG_MAX_DIMS);
	}
	if (consts && !cJSON_IsObject(consts))
		return BAD("constants: an object {\"INPUT\": number or [numbers], ...}");
	for (const cJSON *e = consts ? consts->child : NULL; e; e = e->next) {
		int n;
		if (!dmn_json_numbers(e, DMN_ONNX_CONST_MAX, &n))
			return BAD("constants.%.64s: a number or an array of 1 to %d numbers", e->string, DMN_ONNX_CONST_MAX);
		if (cJSON_GetObjectItemCaseSensitive(shapes, e->string))
			return BAD("constants.%.64s: also in shapes", e->string);
	}
	if (f64 && !cJSON_IsBool(f64))
		return BAD("f64_as_f32: a bool");
	v->onnx = true;
	v->onnx_flags = cJSON_IsTrue(f64) ? ENG_ONNX_F64_AS_F32 : 0;
	v->onnx_opts = cJSON_CreateObject();
	if (!v->onnx_opts || (shapes && !cJSON_AddItemToObject(v->onnx_opts, "shapes", cJSON_Duplicate(shapes, true))) ||
	    (consts && !cJSON_AddItemToObject(v->onnx_opts, "constants", cJSON_Duplicate(consts, true))))
		return dmn_bad(err, errlen, TSD_OUT_OF_MEMORY, "out of memory");
	v->batched = true; /* until the file says otherwise (dmn_onnx_open) */
	return TSD_OK;
}

