/* oip_resp.c: a TSD1 reply turned into the Open Inference Protocol's answer to the request it
 * came from: infer outputs as JSON data or binary parts (Triton's binary tensor data), the
 * classification extension, readiness, server and model metadata, Triton's model configuration,
 * statistics and repository index from model.list, hello, health and stats. Loop thread. */
#include "oip.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h" /* DMN_VERSION */

void dmn_oip_answer_error(dmn_oip_answer *a, int code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	a->code = code;
	a->nparts = 0;
	a->empty = false;
	a->json.len = 0;
	a->json.oom = false;
	dmn_buf_str(&a->json, "{\"error\":");
	dmn_buf_json(&a->json, msg, strlen(msg));
	dmn_buf_str(&a->json, "}");
}

void dmn_oip_answer_free(dmn_oip_answer *a)
{
	dmn_buf_free(&a->json);
	dmn_buf_free(&a->extra);
}

/* One element of t as JSON. */
static void put_number(dmn_buf *b, const proto_tensor *t, size_t k)
{
	const uint8_t *p = (const uint8_t *)t->data;
	double d;
	switch (t->dtype) {
	case TSD_BOOL:
		dmn_buf_str(b, p[k] ? "true" : "false");
		return;
	case TSD_U8:
		dmn_buf_printf(b, "%u", p[k]);
		return;
	case TSD_I32: {
		int32_t v;
		memcpy(&v, p + 4 * k, 4);
		dmn_buf_printf(b, "%d", v);
		return;
	}
	case TSD_I64: {
		int64_t v;
		memcpy(&v, p + 8 * k, 8);
		dmn_buf_printf(b, "%lld", (long long)v);
		return;
	}
	case TSD_F16: {
		uint16_t h;
		memcpy(&h, p + 2 * k, 2);
		d = tsd_f16_to_double(h);
		break;
	}
	default: {
		float f;
		memcpy(&f, p + 4 * k, 4);
		d = f;
		break;
	}
	}
	/* JSON has no NaN or infinities; Python's json (tritonclient) and most parsers read these */
	if (isnan(d))
		dmn_buf_str(b, "NaN");
	else if (isinf(d))
		dmn_buf_str(b, d > 0 ? "Infinity" : "-Infinity");
	else
		dmn_buf_printf(b, "%.9g", d);
}

static size_t numel_of(const proto_tensor *t)
{
	size_t n = 1;
	for (int d = 0; d < t->ndim; d++)
		n *= (size_t)t->shape[d];
	return n;
}

static double value_at(const proto_tensor *t, size_t k)
{
	const uint8_t *p = (const uint8_t *)t->data;
	switch (t->dtype) {
	case TSD_BOOL:
	case TSD_U8:
		return p[k];
	case TSD_I32: {
		int32_t v;
		memcpy(&v, p + 4 * k, 4);
		return v;
	}
	case TSD_I64: {
		int64_t v;
		memcpy(&v, p + 8 * k, 8);
		return (double)v;
	}
	case TSD_F16: {
		uint16_t h;
		memcpy(&h, p + 2 * k, 2);
		return tsd_f16_to_double(h);
	}
	default: {
		float f;
		memcpy(&f, p + 4 * k, 4);
		return f;
	}
	}
}

/* Triton's classification: per row of the last axis, the top k as "value:index" (BYTES), into
 * a->extra (binary: each string after its u32 length) or the JSON as strings. */
static void classify(dmn_oip_answer *a, const proto_tensor *t, int k, bool binary, size_t *bin_len)
{
	size_t c = t->ndim ? (size_t)t->shape[t->ndim - 1] : 1, rows = c ? numel_of(t) / c : 0;
	size_t kk = (size_t)k < c ? (size_t)k : c;
	size_t start = a->extra.len;
	int *top = malloc((kk ? kk : 1) * sizeof(int));
	if (!top) {
		a->json.oom = true;
		return;
	}
	bool first = true;
	for (size_t r = 0; r < rows; r++) {
		size_t base = r * c;
		/* selection by insertion: k is small in practice (top-5) */
		size_t n = 0;
		for (size_t i = 0; i < c; i++) {
			double v = value_at(t, base + i);
			if (isnan(v))
				continue;
			size_t at = n < kk ? n++ : kk;
			while (at > 0 && value_at(t, base + (size_t)top[at - 1]) < v) {
				if (at < kk)
					top[at] = top[at - 1];
				at--;
			}
			if (at < kk)
				top[at] = (int)i;
		}
		for (size_t i = 0; i < kk; i++) {
			char s[64];
			int len = i < n ? snprintf(s, sizeof(s), "%f:%d", value_at(t, base + (size_t)top[i]), top[i])
					: snprintf(s, sizeof(s), "nan:-1");
			if (binary) {
				uint32_t l = (uint32_t)len;
				dmn_buf_put(&a->extra, &l, 4);
				dmn_buf_put(&a->extra, s, (size_t)len);
			} else {
				dmn_buf_str(&a->json, first ? "" : ",");
				dmn_buf_json(&a->json, s, (size_t)len);
				first = false;
			}
		}
	}
	free(top);
	*bin_len = a->extra.len - start;
}

static void put_shape(dmn_buf *b, const int64_t *shape, int ndim, int64_t last)
{
	dmn_buf_str(b, "[");
	for (int d = 0; d < ndim; d++)
		dmn_buf_printf(b, "%s%lld", d ? "," : "", (long long)(d == ndim - 1 && last >= 0 ? last : shape[d]));
	dmn_buf_str(b, "]");
}

static long long num(const cJSON *o, const char *k);

/* The reply's "shm_outputs" entry for output name (written into system shared memory), or NULL. */
static const cJSON *shm_output(const proto_msg *m, const char *name)
{
	const cJSON *e;
	cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(m->json, "shm_outputs"))
	{
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
		if (cJSON_IsString(n) && !strcmp(n->valuestring, name))
			return e;
	}
	return NULL;
}

/* An output the daemon wrote into a shared-memory region: its description, no data. */
static void put_shm_output(dmn_buf *b, const cJSON *e, bool first)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name"), *sh = cJSON_GetObjectItemCaseSensitive(e, "shape"), *d;
	const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype"), *rg = cJSON_GetObjectItemCaseSensitive(e, "region");
	tsd_dtype t = TSD_F32;
	tsd_dtype_parse(cJSON_IsString(dt) ? dt->valuestring : "", &t);
	dmn_buf_str(b, first ? "{\"name\":" : ",{\"name\":");
	dmn_buf_json(b, n->valuestring, strlen(n->valuestring));
	dmn_buf_printf(b, ",\"datatype\":\"%s\",\"shape\":[", dmn_oip_dtype(t));
	bool f = true;
	cJSON_ArrayForEach(d, sh)
	{
		dmn_buf_printf(b, "%s%lld", f ? "" : ",", (long long)d->valuedouble);
		f = false;
	}
	dmn_buf_str(b, "],\"parameters\":{\"shared_memory_region\":");
	const char *r = cJSON_IsString(rg) ? rg->valuestring : "";
	dmn_buf_json(b, r, strlen(r));
	dmn_buf_printf(b, ",\"shared_memory_byte_size\":%lld,\"shared_memory_offset\":%lld}}", num(e, "nbytes"),
		       num(e, "offset"));
}

static void infer_answer(const dmn_oip_ask *ask, const proto_msg *m, dmn_oip_answer *a)
{
	const proto_tensor *out[PROTO_GRAPH_MAX_OUTPUTS];
	const dmn_oip_sel *sel[PROTO_GRAPH_MAX_OUTPUTS];
	const cJSON *in_shm[PROTO_GRAPH_MAX_OUTPUTS];
	int n = 0, nshm = 0;
	if (ask->nsel) {
		for (int i = 0; i < ask->nsel; i++) {
			const proto_tensor *t = proto_msg_tensor(m, ask->sel[i].name);
			const cJSON *e = t ? NULL : shm_output(m, ask->sel[i].name);
			if (e) {
				in_shm[nshm++] = e;
				continue;
			}
			if (!t) {
				dmn_oip_answer_error(a, 400, "unexpected inference output '%s' for model '%s'", ask->sel[i].name,
						     ask->model);
				return;
			}
			out[n] = t;
			sel[n++] = &ask->sel[i];
		}
	} else {
		for (int i = 0; i < m->ntensors && i < PROTO_GRAPH_MAX_OUTPUTS; i++) {
			out[n] = &m->tensors[i];
			sel[n++] = NULL;
		}
		const cJSON *e;
		cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(m->json, "shm_outputs"))
		{
			if (nshm < PROTO_GRAPH_MAX_OUTPUTS && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "name")))
				in_shm[nshm++] = e;
		}
	}
	/* where each binary part lies: into the reply (extra_off < 0) or a->extra */
	ptrdiff_t extra_off[DMN_OIP_PARTS];
	dmn_buf *b = &a->json;
	dmn_buf_str(b, "{\"model_name\":");
	dmn_buf_json(b, ask->model, strlen(ask->model));
	const cJSON *ver = cJSON_GetObjectItemCaseSensitive(m->json, "version");
	if (cJSON_IsNumber(ver))
		dmn_buf_printf(b, ",\"model_version\":\"%lld\"", (long long)ver->valuedouble);
	else if (ask->version)
		dmn_buf_printf(b, ",\"model_version\":\"%lld\"", (long long)ask->version);
	if (ask->has_id) {
		dmn_buf_str(b, ",\"id\":");
		dmn_buf_json(b, ask->id, strlen(ask->id));
	}
	dmn_buf_str(b, ",\"outputs\":[");
	a->nparts = 0;
	for (int i = 0; i < n; i++) {
		const proto_tensor *t = out[i];
		bool binary = sel[i] && sel[i]->binary >= 0 ? sel[i]->binary : ask->binary_out;
		int classes = sel[i] ? sel[i]->classes : 0;
		dmn_buf_str(b, i ? ",{\"name\":" : "{\"name\":");
		dmn_buf_json(b, t->name, strlen(t->name));
		size_t c = t->ndim ? (size_t)t->shape[t->ndim - 1] : 1;
		int64_t last = classes ? (int64_t)((size_t)classes < c ? (size_t)classes : c) : -1;
		dmn_buf_printf(b, ",\"datatype\":\"%s\",\"shape\":", classes ? "BYTES" : dmn_oip_dtype(t->dtype));
		if (classes && !t->ndim) {
			dmn_buf_str(b, "[1]");
		} else {
			put_shape(b, t->shape, t->ndim, last);
		}
		if (binary) {
			size_t len = t->nbytes;
			if (classes) {
				extra_off[a->nparts] = (ptrdiff_t)a->extra.len;
				classify(a, t, classes, true, &len);
				a->part[a->nparts] = NULL;
			} else {
				extra_off[a->nparts] = -1;
				a->part[a->nparts] = t->data;
			}
			a->part_len[a->nparts++] = len;
			dmn_buf_printf(b, ",\"parameters\":{\"binary_data_size\":%zu}}", len);
		} else {
			dmn_buf_str(b, ",\"data\":[");
			if (classes) {
				size_t unused;
				classify(a, t, classes, false, &unused);
			} else {
				size_t ne = numel_of(t);
				for (size_t k = 0; k < ne; k++) {
					if (k)
						dmn_buf_put(b, ",", 1);
					put_number(b, t, k);
				}
			}
			dmn_buf_str(b, "]}");
		}
	}
	for (int i = 0; i < nshm; i++)
		put_shm_output(b, in_shm[i], !n && !i);
	dmn_buf_str(b, "]}");
	for (int i = 0; i < a->nparts; i++)
		if (extra_off[i] >= 0)
			a->part[i] = a->extra.p + extra_off[i];
	a->code = 200;
}

/* The model.list entry for ask's model, or NULL with the answer an error. */
static const cJSON *find_model(const dmn_oip_ask *ask, const proto_msg *m, dmn_oip_answer *a)
{
	const cJSON *ms = cJSON_GetObjectItemCaseSensitive(m->json, "models"), *e;
	cJSON_ArrayForEach(e, ms)
	{
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
		if (!cJSON_IsString(n) || strcmp(n->valuestring, ask->model))
			continue;
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, "version"), *o;
		if (!ask->version || (cJSON_IsNumber(v) && (int64_t)v->valuedouble == ask->version))
			return e;
		cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(e, "versions")) /* served beside it */
		{
			const cJSON *ov = cJSON_GetObjectItemCaseSensitive(o, "version");
			if (cJSON_IsNumber(ov) && (int64_t)ov->valuedouble == ask->version)
				return o;
		}
		dmn_oip_answer_error(a, 404, "Request for unknown model: '%s' version %lld is not found (version %lld is the default)",
				     ask->model, (long long)ask->version, cJSON_IsNumber(v) ? (long long)v->valuedouble : 0ll);
		return NULL;
	}
	dmn_oip_answer_error(a, 404, "Request for unknown model: '%s' is not found", ask->model);
	return NULL;
}

static long long num(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsNumber(v) ? (long long)v->valuedouble : 0;
}

static const char *str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : "";
}

/* A port's OIP datatype from the model.list "dtype". */
static const char *port_dtype(const cJSON *p)
{
	tsd_dtype dt;
	return tsd_dtype_parse(str(p, "dtype"), &dt) ? dmn_oip_dtype(dt) : "?";
}

/* Ports from model.list: model metadata's [{"name", "datatype", "shape"}] or, config, Triton's
 * [{"name", "data_type": "TYPE_...", "dims"}] (skip_batch: without the leading batch dimension). */
static void put_ports(dmn_buf *b, const cJSON *ports, bool config, bool skip_batch)
{
	const cJSON *p;
	bool first = true;
	dmn_buf_str(b, "[");
	cJSON_ArrayForEach(p, ports)
	{
		dmn_buf_str(b, first ? "{\"name\":" : ",{\"name\":");
		first = false;
		const char *n = str(p, "name");
		dmn_buf_json(b, n, strlen(n));
		dmn_buf_printf(b, config ? ",\"data_type\":\"TYPE_%s\",\"dims\":[" : ",\"datatype\":\"%s\",\"shape\":[",
			       port_dtype(p));
		const cJSON *d;
		int i = 0;
		bool f = true;
		cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(p, "shape"))
		{
			if (!(skip_batch && i++ == 0)) {
				dmn_buf_printf(b, "%s%lld", f ? "" : ",", (long long)d->valuedouble);
				f = false;
			}
		}
		dmn_buf_str(b, "]}");
	}
	dmn_buf_str(b, "]");
}

static const char *platform(const cJSON *e)
{
	return !strcmp(str(e, "format"), "onnx") ? "tensord_onnx" : "tensord_graph";
}

/* Whether every port's batch dimension (-1) is its first: Triton's max_batch_size form. */
static bool batch_first(const cJSON *e)
{
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "batched")))
		return false;
	const char *const lists[] = {"inputs", "outputs"};
	for (int l = 0; l < 2; l++) {
		const cJSON *p;
		cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(e, lists[l]))
		{
			const cJSON *d0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(p, "shape"), 0);
			if (!cJSON_IsNumber(d0) || d0->valuedouble != -1)
				return false;
		}
	}
	return true;
}

/* Triton's model configuration (model_config.proto's JSON form) of what tensord runs. */
static void config_answer(const cJSON *e, dmn_buf *b)
{
	bool bf = batch_first(e);
	bool batched = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "batched"));
	const char *n = str(e, "name"), *at = strchr(n, '@'); /* another version served beside: NAME@V */
	dmn_buf_str(b, "{\"name\":");
	dmn_buf_json(b, n, at ? (size_t)(at - n) : strlen(n));
	dmn_buf_printf(b, ",\"platform\":\"%s\",\"backend\":\"tensord\",\"version_policy\":{\"latest\":{\"num_versions\":1}}"
		       ",\"max_batch_size\":%lld,\"input\":", platform(e), bf ? num(e, "batch_max") : 0ll);
	put_ports(b, cJSON_GetObjectItemCaseSensitive(e, "inputs"), true, bf);
	dmn_buf_str(b, ",\"output\":");
	put_ports(b, cJSON_GetObjectItemCaseSensitive(e, "outputs"), true, bf);
	if (batched) {
		dmn_buf_str(b, ",\"dynamic_batching\":{\"preferred_batch_size\":[");
		const cJSON *k;
		bool f = true;
		cJSON_ArrayForEach(k, cJSON_GetObjectItemCaseSensitive(e, "buckets"))
		{
			dmn_buf_printf(b, "%s%lld", f ? "" : ",", (long long)k->valuedouble);
			f = false;
		}
		dmn_buf_printf(b, "],\"max_queue_delay_microseconds\":%lld,\"priority_levels\":3,\"default_priority_level\":2"
			       ",\"default_queue_policy\":{\"max_queue_size\":%lld}}", num(e, "delay_us"), num(e, "queue_max"));
	}
	const cJSON *seq = cJSON_GetObjectItemCaseSensitive(e, "sequence");
	if (seq) { /* Triton's sequence batcher, "oldest" strategy, with implicit state */
		dmn_buf_printf(b, ",\"sequence_batching\":{\"max_sequence_idle_microseconds\":%lld,\"oldest\":"
			       "{\"max_candidate_sequences\":%lld,\"max_queue_delay_microseconds\":%lld},\"state\":[",
			       num(seq, "max_sequence_idle_us"), num(seq, "max"), num(e, "delay_us"));
		const cJSON *k;
		bool f = true;
		cJSON_ArrayForEach(k, cJSON_GetObjectItemCaseSensitive(seq, "state"))
		{
			const char *in = str(k, "input"), *out = str(k, "output");
			dmn_buf_str(b, f ? "{\"input_name\":" : ",{\"input_name\":");
			dmn_buf_json(b, in, strlen(in));
			dmn_buf_str(b, ",\"output_name\":");
			dmn_buf_json(b, out, strlen(out));
			dmn_buf_str(b, "}");
			f = false;
		}
		dmn_buf_str(b, "]}");
	}
	const char *dev = str(e, "device");
	dmn_buf_printf(b, ",\"instance_group\":[{\"name\":\"%s\",\"kind\":\"%s\",\"count\":1}]",
		       strncmp(dev, "CL", 2) && strncmp(dev, "CUDA", 4) ? "cpu" : "gpu",
		       strncmp(dev, "CL", 2) && strncmp(dev, "CUDA", 4) ? "KIND_CPU" : "KIND_GPU");
	/* what tensord knows beyond Triton's fields */
	dmn_buf_str(b, ",\"parameters\":{\"tensord_device\":{\"string_value\":");
	dmn_buf_json(b, dev, strlen(dev));
	dmn_buf_printf(b, "},\"tensord_batched\":{\"string_value\":\"%s\"}}}", batched ? "true" : "false");
}

static void duration(dmn_buf *b, const char *name, long long count, double us, bool comma)
{
	dmn_buf_printf(b, "%s\"%s\":{\"count\":%lld,\"ns\":%.0f}", comma ? "," : "", name, count, us * 1000.0);
}

static double hist_sum(const cJSON *model, const char *h)
{
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(model, "histograms"), h);
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, "sum");
	return cJSON_IsNumber(s) ? s->valuedouble : 0;
}

/* Triton's statistics from the stats reply's per-model counters and histograms (sums in us). */
static void stats_answer(const dmn_oip_ask *ask, const proto_msg *m, dmn_oip_answer *a)
{
	const cJSON *ms = cJSON_GetObjectItemCaseSensitive(m->json, "models"), *e;
	dmn_buf *b = &a->json;
	dmn_buf_str(b, "{\"model_stats\":[");
	bool first = true, found = false;
	cJSON_ArrayForEach(e, ms)
	{
		/* another version served beside a model is NAME@V: reported as NAME, version V */
		const char *at = strchr(e->string, '@');
		size_t nl = at ? (size_t)(at - e->string) : strlen(e->string);
		if (ask->model[0] && (strlen(ask->model) != nl || strncmp(e->string, ask->model, nl)))
			continue;
		if (ask->version && num(e, "version") != ask->version)
			continue;
		found = true;
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "counters");
		if (!c)
			c = e;
		dmn_buf_str(b, first ? "{\"name\":" : ",{\"name\":");
		first = false;
		dmn_buf_json(b, e->string, nl);
		long long ok = num(c, "ok");
		dmn_buf_printf(b, ",\"version\":\"%lld\",\"last_inference\":0,\"inference_count\":%lld,\"execution_count\":%lld"
			       ",\"inference_stats\":{", num(e, "version"), num(c, "rows"), num(c, "batches"));
		duration(b, "success", ok, hist_sum(e, "total_us"), false);
		duration(b, "fail", num(c, "errors"), 0, true);
		duration(b, "queue", ok, hist_sum(e, "queue_us"), true);
		duration(b, "compute_input", ok, 0, true);
		duration(b, "compute_infer", ok, hist_sum(e, "compute_us"), true);
		duration(b, "compute_output", ok, 0, true);
		duration(b, "cache_hit", 0, 0, true);
		duration(b, "cache_miss", 0, 0, true);
		dmn_buf_str(b, "},\"batch_stats\":[]}");
	}
	dmn_buf_str(b, "]}");
	if (ask->model[0] && !found)
		dmn_oip_answer_error(a, 404, "Request for unknown model: '%s'%s is not found", ask->model,
				     ask->version ? " (that version)" : "");
	else
		a->code = 200;
}

void dmn_oip_answer_make(const dmn_oip_ask *ask, const void *reply, size_t len, dmn_oip_answer *a)
{
	*a = (dmn_oip_answer){.code = 500};
	proto_msg *m = malloc(sizeof(*m));
	proto_err pe;
	if (!m) {
		dmn_oip_answer_error(a, 503, "out of memory");
		return;
	}
	tsd_status st = proto_decode(reply, len, len, PROTO_REPLY, m, &pe);
	if (st != TSD_OK) {
		free(m);
		dmn_oip_answer_error(a, 500, "the daemon's reply did not decode: %s", pe.msg);
		return;
	}
	a->status = m->status;
	if (m->status != TSD_OK) {
		if (ask->kind == DMN_OIP_READY || ask->kind == DMN_OIP_LIVE || ask->kind == DMN_OIP_MODEL_READY)
			a->empty = true;
		dmn_oip_answer_error(a, dmn_oip_http_code(m->status), "%s", m->error ? m->error : tsd_status_name(m->status));
		goto out;
	}
	dmn_buf *b = &a->json;
	const cJSON *e;
	a->code = 200;
	switch (ask->kind) {
	case DMN_OIP_INFER:
		infer_answer(ask, m, a);
		break;
	case DMN_OIP_READY:
	case DMN_OIP_LIVE:
		a->empty = true;
		if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m->json, ask->kind == DMN_OIP_LIVE ? "live" : "ready"))) {
			e = cJSON_GetObjectItemCaseSensitive(m->json, "reason");
			dmn_oip_answer_error(a, 503, "%s", cJSON_IsString(e) ? e->valuestring : "not ready");
		}
		break;
	case DMN_OIP_SERVER_META:
		dmn_buf_printf(b, "{\"name\":\"tensord\",\"version\":\"%s\",\"extensions\":[\"binary_tensor_data\","
			       "\"classification\",\"model_configuration\",\"model_repository\",\"statistics\",\"parameters\",\"sequence\",\"system_shared_memory\"]}", DMN_VERSION);
		break;
	case DMN_OIP_MODEL_READY:
		a->empty = true;
		find_model(ask, m, a);
		break;
	case DMN_OIP_MODEL_META:
		if (!(e = find_model(ask, m, a)))
			break;
		dmn_buf_str(b, "{\"name\":");
		dmn_buf_json(b, ask->model, strlen(ask->model));
		dmn_buf_printf(b, ",\"versions\":[\"%lld\"", num(e, "version"));
		const cJSON *o;
		cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(e, "versions")) /* the others served */
			dmn_buf_printf(b, ",\"%lld\"", num(o, "version"));
		dmn_buf_printf(b, "],\"platform\":\"%s\",\"inputs\":", platform(e));
		put_ports(b, cJSON_GetObjectItemCaseSensitive(e, "inputs"), false, false);
		dmn_buf_str(b, ",\"outputs\":");
		put_ports(b, cJSON_GetObjectItemCaseSensitive(e, "outputs"), false, false);
		dmn_buf_str(b, "}");
		break;
	case DMN_OIP_MODEL_CONFIG:
		if ((e = find_model(ask, m, a)))
			config_answer(e, b);
		break;
	case DMN_OIP_STATS:
		stats_answer(ask, m, a);
		break;
	case DMN_OIP_REPO_INDEX: {
		bool first = true;
		dmn_buf_str(b, "[");
		cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(m->json, "models"))
		{
			const char *n = str(e, "name");
			dmn_buf_str(b, first ? "{\"name\":" : ",{\"name\":");
			first = false;
			dmn_buf_json(b, n, strlen(n));
			if (cJSON_GetObjectItemCaseSensitive(e, "version"))
				dmn_buf_printf(b, ",\"version\":\"%lld\"", num(e, "version"));
			const char *st = str(e, "state"), *why = str(e, "reason");
			dmn_buf_str(b, ",\"state\":");
			dmn_buf_json(b, st, strlen(st));
			dmn_buf_str(b, ",\"reason\":");
			dmn_buf_json(b, why, strlen(why));
			dmn_buf_str(b, "}");
		}
		dmn_buf_str(b, "]");
		break;
	}
	case DMN_OIP_UNLOAD:
	case DMN_OIP_LOAD:
	case DMN_OIP_SHM_REGISTER:
	case DMN_OIP_SHM_UNREGISTER:
		a->empty = true;
		break;
	case DMN_OIP_SHM_STATUS: {
		bool first = true;
		dmn_buf_str(b, "[");
		cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(m->json, "regions"))
		{
			const char *n = str(e, "name"), *k = str(e, "key");
			dmn_buf_str(b, first ? "{\"name\":" : ",{\"name\":");
			first = false;
			dmn_buf_json(b, n, strlen(n));
			dmn_buf_str(b, ",\"key\":");
			dmn_buf_json(b, k, strlen(k));
			dmn_buf_printf(b, ",\"offset\":%lld,\"byte_size\":%lld}", num(e, "offset"), num(e, "byte_size"));
		}
		dmn_buf_str(b, "]");
		break;
	}
	}
	if (a->json.oom || a->extra.oom)
		dmn_oip_answer_error(a, 503, "out of memory");
out:
	proto_msg_free(m);
	free(m);
}
