/* verbs.c: the typed verbs (include/tensord/verbs.h): each builds its header and calls
 * tsd_client_call or tsd_client_submit. */
#include <stdlib.h>

#include <tensord/verbs.h>

#include "client_impl.h"

/* Adders that keep going only while everything so far worked (ok false: out of memory). */
static bool add_str(cJSON *h, const char *k, const char *v)
{
	return !v || cJSON_AddStringToObject(h, k, v);
}

static bool add_num(cJSON *h, const char *k, double v)
{
	return cJSON_AddNumberToObject(h, k, v) != NULL;
}

static bool add_copy(cJSON *h, const char *k, const cJSON *v)
{
	cJSON *d = v ? cJSON_Duplicate(v, true) : NULL;
	if (v && (!d || !cJSON_AddItemToObject(h, k, d))) {
		cJSON_Delete(d);
		return false;
	}
	return true;
}

static bool add_strs(cJSON *h, const char *k, const char *const *v, int n)
{
	if (!v)
		return true;
	cJSON *a = cJSON_AddArrayToObject(h, k);
	for (int i = 0; a && i < n; i++) {
		cJSON *s = cJSON_CreateString(v[i] ? v[i] : "");
		if (!s || !cJSON_AddItemToArray(a, s))
			return false;
	}
	return a != NULL;
}

/* {"verb": verb}; NULL when out of memory. */
static cJSON *header(const char *verb)
{
	cJSON *h = cJSON_CreateObject();
	if (h && !cJSON_AddStringToObject(h, "verb", verb)) {
		cJSON_Delete(h);
		return NULL;
	}
	return h;
}

/* Call with h (built false: out of memory), deleted after. */
static tsd_status call(tsd_client *c, cJSON *h, bool built, const tsd_tensor *ts, int n,
		       tsd_reply **out)
{
	*out = NULL;
	tsd_status s = h && built ? tsd_client_call(c, h, ts, n, out)
				  : tsd_client_fail(c, TSD_OUT_OF_MEMORY, "out of memory");
	cJSON_Delete(h);
	return s;
}

tsd_status tsd_hello(tsd_client *c, tsd_reply **out)
{
	return tsd_client_hello(c, out);
}

tsd_status tsd_health(tsd_client *c, tsd_reply **out)
{
	return tsd_client_call_verb(c, "health", out);
}

tsd_status tsd_stats(tsd_client *c, tsd_reply **out)
{
	return tsd_client_call_verb(c, "stats", out);
}

tsd_status tsd_model_list(tsd_client *c, tsd_reply **out)
{
	return tsd_client_call_verb(c, "model.list", out);
}

tsd_status tsd_model_unload(tsd_client *c, const char *name, tsd_reply **out)
{
	cJSON *h = header("model.unload");
	return call(c, h, h && add_str(h, "name", name ? name : ""), NULL, 0, out);
}

tsd_status tsd_model_save(tsd_client *c, const char *name, const char *path, tsd_reply **out)
{
	cJSON *h = header("model.save");
	return call(c, h, h && add_str(h, "name", name ? name : "") && add_str(h, "path", path),
		    NULL, 0, out);
}

static bool add_batching(cJSON *h, const tsd_batching *b)
{
	if (!b)
		return true;
	cJSON *o = cJSON_AddObjectToObject(h, "batching");
	bool ok = o && (!b->max || add_num(o, "max", b->max)) &&
		  (b->delay_us < 0 || add_num(o, "delay_us", b->delay_us)) &&
		  (!b->queue_max || add_num(o, "queue_max", b->queue_max));
	if (ok && b->nbuckets > 0 && b->buckets) {
		cJSON *a = cJSON_AddArrayToObject(o, "buckets");
		ok = a != NULL;
		for (int i = 0; ok && i < b->nbuckets; i++) {
			cJSON *e = cJSON_CreateNumber(b->buckets[i]);
			ok = e && cJSON_AddItemToArray(a, e);
		}
	}
	return ok;
}

tsd_status tsd_model_load(tsd_client *c, const tsd_model_spec *sp, tsd_reply **out)
{
	*out = NULL;
	if (!sp || !sp->name || !cJSON_IsObject(sp->graph))
		return tsd_client_fail(c, TSD_BAD_REQUEST, "model.load: no name or no graph object");
	cJSON *h = header("model.load");
	bool ok = h && add_str(h, "name", sp->name) && add_copy(h, "graph", sp->graph) &&
		  add_str(h, "weights", sp->weights) &&
		  add_strs(h, "inputs", sp->inputs, sp->ninputs) &&
		  add_strs(h, "outputs", sp->outputs, sp->noutputs) &&
		  add_str(h, "device", sp->device) && add_batching(h, sp->batching) &&
		  add_copy(h, "train", sp->train) && add_copy(h, "sequence", sp->sequence);
	return call(c, h, ok, sp->params, sp->nparams, out);
}

tsd_status tsd_model_load_onnx(tsd_client *c, const tsd_onnx_spec *sp, tsd_reply **out)
{
	*out = NULL;
	if (!sp || !sp->name || !sp->file == !sp->data)
		return tsd_client_fail(c, TSD_BAD_REQUEST, "model.load: an ONNX model needs a name and one of file or data");
	cJSON *h = header("model.load");
	bool ok = h && add_str(h, "name", sp->name) && add_str(h, "format", "onnx") && add_str(h, "file", sp->file) &&
		  add_copy(h, "shapes", sp->shapes) && add_copy(h, "constants", sp->constants) &&
		  (!sp->f64_as_f32 || cJSON_AddTrueToObject(h, "f64_as_f32")) && add_str(h, "device", sp->device) &&
		  add_batching(h, sp->batching) && add_copy(h, "sequence", sp->sequence);
	tsd_tensor t = {.name = "onnx", .dtype = TSD_U8, .ndim = 1, .shape = {(int64_t)sp->size}, .data = sp->data,
			.nbytes = sp->size};
	return call(c, h, ok, sp->data ? &t : NULL, sp->data ? 1 : 0, out);
}

static const char *const priority_name[] = {
	[TSD_PRIORITY_NORMAL] = "normal",
	[TSD_PRIORITY_REALTIME] = "realtime",
	[TSD_PRIORITY_BULK] = "bulk",
};

/* A sequence step's fields (none without an id). */
static bool add_sequence(cJSON *h, const tsd_infer_opts *o)
{
	if (!o->sequence_id && !o->sequence_name)
		return true;
	return (o->sequence_name ? add_str(h, "sequence_id", o->sequence_name)
				 : add_num(h, "sequence_id", (double)o->sequence_id)) &&
	       (!o->sequence_start || cJSON_AddTrueToObject(h, "sequence_start")) &&
	       (!o->sequence_end || cJSON_AddTrueToObject(h, "sequence_end")) &&
	       (!o->sequence_state || cJSON_AddTrueToObject(h, "sequence_state"));
}

/* infer's header; NULL when out of memory, *bad set for a bad option. */
static cJSON *infer_header(const char *model, const tsd_infer_opts *o, bool *bad)
{
	*bad = o && (unsigned)o->priority > TSD_PRIORITY_BULK;
	cJSON *h = *bad ? NULL : header("infer");
	bool ok = h && add_str(h, "model", model ? model : "");
	if (ok && o) {
		ok = (o->priority == TSD_PRIORITY_NORMAL ||
		      add_str(h, "priority", priority_name[o->priority])) &&
		     (!o->timeout_ms || add_num(h, "timeout_ms", o->timeout_ms)) &&
		     (!o->latest_only || cJSON_AddTrueToObject(h, "latest_only")) &&
		     add_str(h, "id", o->id) && add_sequence(h, o);
	}
	if (!ok) {
		cJSON_Delete(h);
		return NULL;
	}
	return h;
}

tsd_status tsd_infer(tsd_client *c, const char *model, const tsd_tensor *in, int n,
		     const tsd_infer_opts *o, tsd_reply **out)
{
	bool bad;
	cJSON *h = infer_header(model, o, &bad);
	if (bad)
		return *out = NULL, tsd_client_fail(c, TSD_BAD_REQUEST, "infer: unknown priority %d",
						    (int)o->priority);
	return call(c, h, h != NULL, in, n, out);
}

tsd_status tsd_infer_submit(tsd_client *c, const char *model, const tsd_tensor *in, int n,
			    const tsd_infer_opts *o, tsd_call_cb cb, void *arg, tsd_call **out)
{
	*out = NULL;
	bool bad;
	cJSON *h = infer_header(model, o, &bad);
	if (bad)
		return tsd_client_fail(c, TSD_BAD_REQUEST, "infer: unknown priority %d", (int)o->priority);
	if (!h)
		return tsd_client_fail(c, TSD_OUT_OF_MEMORY, "out of memory");
	tsd_status s = tsd_client_submit(c, h, in, n, cb, arg, out);
	cJSON_Delete(h);
	return s;
}

tsd_status tsd_realize(tsd_client *c, const cJSON *graph, const tsd_tensor *in, int n,
		       int timeout_ms, tsd_reply **out)
{
	*out = NULL;
	if (!cJSON_IsObject(graph))
		return tsd_client_fail(c, TSD_BAD_REQUEST, "realize: no graph object");
	cJSON *h = header("realize");
	bool ok = h && add_copy(h, "graph", graph) &&
		  (!timeout_ms || add_num(h, "timeout_ms", timeout_ms));
	return call(c, h, ok, in, n, out);
}

tsd_status tsd_train_step(tsd_client *c, const char *model, const tsd_tensor *in, int n,
			  double lr, int timeout_ms, tsd_reply **out)
{
	cJSON *h = header("train.step");
	bool ok = h && add_str(h, "model", model ? model : "") && (lr <= 0 || add_num(h, "lr", lr)) &&
		  (!timeout_ms || add_num(h, "timeout_ms", timeout_ms));
	return call(c, h, ok, in, n, out);
}
