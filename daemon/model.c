/* model.c: models on the loop: a model.load object checked into a version description (graph,
 * inputs and outputs with their batch axes, batching policy, training), inputs of a request
 * checked against it, the registry of names, loads and hot swaps, unloads, and the preloads
 * named by the config. The engine side of a version is exec_model.c. */
#include "server.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <systemd/sd-daemon.h>

#define SPEC_FILE_MAX (64u << 20)

tsd_status dmn_bad(char *err, size_t errlen, tsd_status st, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return st;
}
#define BAD(...) dmn_bad(err, errlen, TSD_BAD_REQUEST, __VA_ARGS__)

bool dmn_name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	if (!n || n > DMN_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
		      c == '.' || c == '-'))
			return false;
	}
	return true;
}

dmn_model *dmn_model_find(dmn_srv *s, const char *name)
{
	for (int i = 0; i < s->nmodels; i++)
		if (!strcmp(s->models[i]->name, name))
			return s->models[i];
	return NULL;
}

dmn_model *dmn_model_add(dmn_srv *s, const char *name)
{
	if (s->nmodels == s->models_cap) {
		int cap = s->models_cap ? 2 * s->models_cap : 8;
		dmn_model **a = realloc(s->models, (size_t)cap * sizeof(*a));
		if (!a)
			return NULL;
		s->models = a;
		s->models_cap = cap;
	}
	dmn_model *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	snprintf(m->name, sizeof(m->name), "%s", name);
	dmn_hists_init(&m->hist);
	s->models[s->nmodels++] = m;
	return m;
}

static void registry_remove(dmn_srv *s, dmn_model *m)
{
	for (int i = 0; i < s->nmodels; i++)
		if (s->models[i] == m) {
			s->models[i] = s->models[--s->nmodels];
			return;
		}
}

void dmn_model_release(dmn_srv *s, dmn_model *m)
{
	(void)s;
	if (--m->refs == 0 && m->removed)
		free(m);
}

tsd_status dmn_models_path(const dmn_srv *s, const char *rel, char *out, size_t cap, char *err, size_t errlen)
{
	if (!s->cfg.models_dir[0])
		return BAD("loading files is off (the config's models_dir is empty)");
	if (!rel[0] || rel[0] == '/')
		return BAD("\"%.200s\": a path relative to models_dir is required", rel);
	for (const char *p = rel; *p; p = strchr(p, '/') ? strchr(p, '/') + 1 : p + strlen(p))
		if (!strncmp(p, "..", 2) && (p[2] == '/' || !p[2]))
			return BAD("\"%.200s\": \"..\" is not allowed", rel);
	int n = snprintf(out, cap, "%s/%s", s->cfg.models_dir, rel);
	if (n < 0 || (size_t)n >= cap)
		return dmn_bad(err, errlen, TSD_TOO_LARGE, "\"%.200s\": path too long", rel);
	/* a symbolic link may not lead out of models_dir */
	char real[PATH_MAX], root[PATH_MAX];
	if (realpath(out, real) && realpath(s->cfg.models_dir, root)) {
		size_t rl = strlen(root);
		if (strncmp(real, root, rl) || (real[rl] != '/' && real[rl]))
			return BAD("\"%.200s\" leads out of models_dir", rel);
	}
	return TSD_OK;
}

/* ---- a version's description ---- */

void dmn_mver_free(dmn_mver *v)
{
	if (!v)
		return;
	proto_graph_free(&v->g);
	cJSON_Delete(v->onnx_opts);
	free(v);
}

void dmn_mver_unbatched(dmn_mver *v)
{
	v->batched = false;
	v->batch_max = 1;
	v->nbuckets = 1;
	v->buckets[0] = 1;
}

/* The axis of the batch dimension in node i's shape, or -1. */
static int batch_axis(const proto_graph *g, int i)
{
	for (int d = 0; d < g->nodes[i].ndim; d++)
		if (g->nodes[i].shape[d] == PROTO_BATCH)
			return d;
	return -1;
}

/* A list of node names (inputs or outputs) into ports. */
static tsd_status parse_ports(const proto_graph *g, const cJSON *a, const char *key, dmn_port *ports, int *n,
			      char *err, size_t errlen)
{
	if (!cJSON_IsArray(a))
		return BAD("%s: an array of node ids", key);
	int k = 0;
	for (const cJSON *e = a->child; e; e = e->next, k++) {
		if (k == PROTO_GRAPH_MAX_OUTPUTS)
			return BAD("%s: at most %d", key, PROTO_GRAPH_MAX_OUTPUTS);
		int i = cJSON_IsString(e) ? proto_graph_find(g, e->valuestring) : -1;
		if (i < 0)
			return BAD("%s[%d]: not a node of the graph", key, k);
		for (int q = 0; q < k; q++)
			if (ports[q].node == i)
				return BAD("%s[%d] (%s): listed twice", key, k, e->valuestring);
		ports[k] = (dmn_port){.name = g->nodes[i].id, .node = i, .axis = batch_axis(g, i)};
	}
	if (!k)
		return BAD("%s: empty", key);
	*n = k;
	return TSD_OK;
}

static tsd_status parse_io(dmn_srv *s, const cJSON *spec, dmn_mver *v, char *err, size_t errlen)
{
	(void)s;
	const proto_graph *g = &v->g;
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(spec, "inputs");
	tsd_status st;
	if (a) {
		if ((st = parse_ports(g, a, "inputs", v->in, &v->nin, err, errlen)))
			return st;
	} else {
		for (int i = 0; i < g->nnodes; i++)
			if (g->nodes[i].op == PROTO_G_INPUT)
				v->in[v->nin++] = (dmn_port){.name = g->nodes[i].id, .node = i, .axis = batch_axis(g, i)};
	}
	if (v->nin != g->ninputs)
		return BAD("inputs: every input node of the graph must be listed (%d of %d)", v->nin, g->ninputs);
	for (int k = 0, gk = 0; k < g->nnodes; k++) {
		if (g->nodes[k].op != PROTO_G_INPUT)
			continue;
		int mk = -1;
		for (int q = 0; q < v->nin; q++)
			if (v->in[q].node == k)
				mk = q;
		if (mk < 0)
			return BAD("inputs: node \"%s\" is not an input node", g->nodes[k].id);
		v->in_order[gk++] = mk;
	}
	for (int q = 0; q < v->nin; q++)
		if (g->nodes[v->in[q].node].op != PROTO_G_INPUT)
			return BAD("inputs[%d] (%s): not an input node", q, v->in[q].name);
	a = cJSON_GetObjectItemCaseSensitive(spec, "outputs");
	if (a) {
		if ((st = parse_ports(g, a, "outputs", v->out, &v->nout, err, errlen)))
			return st;
	} else {
		for (int k = 0; k < g->noutputs; k++) {
			int i = g->outputs[k];
			v->out[v->nout++] = (dmn_port){.name = g->nodes[i].id, .node = i, .axis = batch_axis(g, i)};
		}
	}
	for (int q = 0; q < v->nout; q++) {
		bool listed = false;
		for (int k = 0; k < g->noutputs; k++)
			listed |= g->outputs[k] == v->out[q].node;
		proto_gop op = g->nodes[v->out[q].node].op;
		if (!listed)
			return BAD("outputs[%d] (%s): not among the graph's outputs", q, v->out[q].name);
		if (op == PROTO_G_INPUT || op == PROTO_G_PARAM)
			return BAD("outputs[%d] (%s): an %s node cannot be an output", q, v->out[q].name, proto_gop_name(op));
	}
	v->batched = g->batched;
	if (!v->batched)
		return TSD_OK;
	int in_axis[PROTO_GRAPH_MAX_OUTPUTS], out_axis[PROTO_GRAPH_MAX_OUTPUTS], in_nodes[PROTO_GRAPH_MAX_OUTPUTS],
		out_nodes[PROTO_GRAPH_MAX_OUTPUTS];
	for (int q = 0; q < v->nin; q++)
		in_nodes[q] = v->in[q].node;
	for (int q = 0; q < v->nout; q++)
		out_nodes[q] = v->out[q].node;
	proto_err e;
	if ((st = proto_graph_batch_check(g, in_nodes, v->nin, out_nodes, v->nout, in_axis, out_axis, &e)))
		return dmn_bad(err, errlen, st, "graph: cannot batch: %s", e.msg);
	for (int q = 0; q < v->nin; q++)
		v->in[q].axis = in_axis[q];
	for (int q = 0; q < v->nout; q++)
		v->out[q].axis = out_axis[q];
	return TSD_OK;
}

static tsd_status parse_batching(dmn_srv *s, const cJSON *spec, dmn_mver *v, char *err, size_t errlen)
{
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(spec, "batching"), *f;
	int64_t x;
	v->batch_max = (int)s->cfg.batch_max;
	v->delay_us = s->cfg.batch_delay_us;
	v->queue_max = (int)s->cfg.queue_max;
	v->nbuckets = s->cfg.batch_buckets.n < DMN_MAX_BUCKETS ? s->cfg.batch_buckets.n : DMN_MAX_BUCKETS;
	for (int k = 0; k < v->nbuckets; k++)
		v->buckets[k] = (int)s->cfg.batch_buckets.v[k];
	if (b && !cJSON_IsObject(b))
		return BAD("batching: an object");
	for (f = b ? b->child : NULL; f; f = f->next) {
		if (!strcmp(f->string, "max")) {
			if (!proto_json_int(f, 1, 4096, &x))
				return BAD("batching.max: an integer in [1, 4096]");
			v->batch_max = (int)x;
		} else if (!strcmp(f->string, "delay_us")) {
			if (!proto_json_int(f, 0, 1000000, &x))
				return BAD("batching.delay_us: an integer in [0, 1000000]");
			v->delay_us = x;
		} else if (!strcmp(f->string, "queue_max")) {
			if (!proto_json_int(f, 1, 1000000, &x))
				return BAD("batching.queue_max: an integer in [1, 1000000]");
			v->queue_max = (int)x;
		} else if (!strcmp(f->string, "buckets")) {
			int k = 0;
			if (!cJSON_IsArray(f))
				return BAD("batching.buckets: an array of integers");
			for (const cJSON *e = f->child; e; e = e->next, k++) {
				if (k == DMN_MAX_BUCKETS)
					return BAD("batching.buckets: at most %d", DMN_MAX_BUCKETS);
				if (!proto_json_int(e, 1, 4096, &x) || (k && x <= v->buckets[k - 1]))
					return BAD("batching.buckets[%d]: integers in [1, 4096], strictly increasing", k);
				v->buckets[k] = (int)x;
			}
			if (!k)
				return BAD("batching.buckets: empty");
			v->nbuckets = k;
		} else {
			return BAD("batching.%.64s: unknown field (max, delay_us, buckets, queue_max)", f->string);
		}
	}
	if (!v->batched) { /* one request a launch */
		dmn_mver_unbatched(v);
		return TSD_OK;
	}
	/* buckets given without max, or max without buckets: keep them consistent */
	if (!cJSON_GetObjectItemCaseSensitive(b, "buckets")) {
		while (v->nbuckets > 1 && v->buckets[v->nbuckets - 1] > v->batch_max)
			v->nbuckets--;
		if (v->buckets[v->nbuckets - 1] < v->batch_max && v->nbuckets < DMN_MAX_BUCKETS)
			v->buckets[v->nbuckets++] = v->batch_max;
		else if (v->buckets[v->nbuckets - 1] > v->batch_max)
			v->buckets[v->nbuckets - 1] = v->batch_max;
	} else if (!cJSON_GetObjectItemCaseSensitive(b, "max")) {
		v->batch_max = v->buckets[v->nbuckets - 1];
	}
	if (v->buckets[v->nbuckets - 1] != v->batch_max)
		return BAD("batching.buckets: the last (%d) must equal max (%d)", v->buckets[v->nbuckets - 1],
			   v->batch_max);
	return TSD_OK;
}

static bool num_field(const cJSON *o, const char *key, double lo, double hi, double *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!v)
		return true;
	if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
		return false;
	*out = v->valuedouble;
	return true;
}

static tsd_status parse_train(const cJSON *spec, dmn_mver *v, char *err, size_t errlen)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(spec, "train");
	if (!t)
		return TSD_OK;
	if (!cJSON_IsObject(t))
		return BAD("train: an object");
	static const char *const known[] = {"loss", "output", "target", "optimizer"};
	for (const cJSON *f = t->child; f; f = f->next) {
		bool ok = false;
		for (size_t k = 0; k < sizeof(known) / sizeof(*known); k++)
			ok |= !strcmp(f->string, known[k]);
		if (!ok)
			return BAD("train.%.64s: unknown field (loss, output, target, optimizer)", f->string);
	}
	const char *loss = dmn_json_str(t, "loss");
	if (!loss)
		return BAD("train.loss: \"mse\", \"cross_entropy\" or \"sparse_cross_entropy\"");
	if (!strcmp(loss, "mse"))
		v->loss = DMN_LOSS_MSE;
	else if (!strcmp(loss, "cross_entropy"))
		v->loss = DMN_LOSS_CE;
	else if (!strcmp(loss, "sparse_cross_entropy"))
		v->loss = DMN_LOSS_SPARSE_CE;
	else
		return BAD("train.loss: \"mse\", \"cross_entropy\" or \"sparse_cross_entropy\", not \"%.32s\"", loss);
	const char *out = dmn_json_str(t, "output");
	v->train_out = 0;
	if (cJSON_GetObjectItemCaseSensitive(t, "output")) {
		v->train_out = -1;
		for (int q = 0; out && q < v->nout; q++)
			if (!strcmp(v->out[q].name, out))
				v->train_out = q;
		if (v->train_out < 0)
			return BAD("train.output: one of the model's outputs");
	}
	const char *target = cJSON_GetObjectItemCaseSensitive(t, "target") ? dmn_json_str(t, "target") : "target";
	if (!target || !target[0] || strlen(target) > PROTO_MAX_NAME)
		return BAD("train.target: a tensor name");
	for (int q = 0; q < v->nin; q++)
		if (!strcmp(v->in[q].name, target))
			return BAD("train.target: \"%s\" is an input's name", target);
	snprintf(v->target, sizeof(v->target), "%s", target);
	const proto_gnode *o = &v->g.nodes[v->out[v->train_out].node];
	if (o->dtype != ENG_F32 && o->dtype != ENG_F16)
		return BAD("train.output: \"%s\" is %s; training needs a float output", o->id, eng_dtype_name(o->dtype));
	if (v->loss == DMN_LOSS_SPARSE_CE) {
		if (o->ndim != 2)
			return BAD("train: sparse_cross_entropy needs logits [N, C]; \"%s\" has rank %d", o->id, o->ndim);
		v->target_dtype = ENG_I32;
		v->target_ndim = 1;
		v->target_shape[0] = o->shape[0];
	} else {
		v->target_dtype = o->dtype;
		v->target_ndim = o->ndim;
		memcpy(v->target_shape, o->shape, sizeof(v->target_shape));
	}
	for (int i = 0; i < v->g.nnodes; i++)
		if (v->g.nodes[i].op == PROTO_G_PARAM && v->g.nodes[i].dtype != ENG_F32 && v->g.nodes[i].dtype != ENG_F16)
			return BAD("train: param \"%s\" is %s; trained params must be float", v->g.nodes[i].id,
				   eng_dtype_name(v->g.nodes[i].dtype));
	const cJSON *op = cJSON_GetObjectItemCaseSensitive(t, "optimizer");
	const char *kind = op ? dmn_json_str(op, "kind") : "sgd";
	eng_optim_kind k;
	if (kind && !strcmp(kind, "sgd"))
		k = ENG_OPTIM_SGD;
	else if (kind && !strcmp(kind, "adam"))
		k = ENG_OPTIM_ADAM;
	else if (kind && !strcmp(kind, "adamw"))
		k = ENG_OPTIM_ADAMW;
	else
		return BAD("train.optimizer.kind: \"sgd\", \"adam\" or \"adamw\"");
	eng_optim_opts_default(&v->optim, k);
	const cJSON *nest = op ? cJSON_GetObjectItemCaseSensitive(op, "nesterov") : NULL;
	if (op && (!num_field(op, "lr", 1e-12, 1e3, &v->optim.lr) ||
		   !num_field(op, "momentum", 0, 0.999999, &v->optim.momentum) ||
		   !num_field(op, "weight_decay", 0, 10, &v->optim.weight_decay) ||
		   !num_field(op, "beta1", 0, 0.999999, &v->optim.beta1) ||
		   !num_field(op, "beta2", 0, 0.999999999, &v->optim.beta2) ||
		   !num_field(op, "eps", 1e-30, 1, &v->optim.eps) || (nest && !cJSON_IsBool(nest))))
		return BAD("train.optimizer: lr in (0, 1000], momentum, beta1, beta2 in [0, 1), weight_decay in "
			   "[0, 10], eps in (0, 1], nesterov a bool");
	v->optim.nesterov = nest && cJSON_IsTrue(nest);
	if (v->optim.nesterov && !(v->optim.momentum > 0))
		return BAD("train.optimizer.nesterov: needs momentum > 0");
	v->trainable = true;
	return TSD_OK;
}

/* A model.load of an ONNX file: its own fields, then batching and device as for graphs. */
static tsd_status parse_onnx(dmn_srv *s, const cJSON *spec, const proto_msg *pm, dmn_mver *v, char *err, size_t errlen)
{
	tsd_status st = dmn_onnx_spec(s, spec, pm, v, err, errlen);
	return st ? st : parse_batching(s, spec, v, err, errlen);
}

tsd_status dmn_mver_parse(dmn_srv *s, const cJSON *spec, const proto_msg *pm, dmn_mver **out, char *err, size_t errlen)
{
	static const char *const known[] = {"verb", "id", "tensors", "name", "graph", "weights", "inputs",
					    "outputs", "device", "batching", "train", "format", "file", "shapes",
					    "constants", "f64_as_f32"};
	for (const cJSON *f = spec->child; f; f = f->next) {
		bool ok = false;
		for (size_t k = 0; k < sizeof(known) / sizeof(*known); k++)
			ok |= !strcmp(f->string, known[k]);
		if (!ok)
			return BAD("%.64s: unknown field of model.load", f->string);
	}
	dmn_mver *v = calloc(1, sizeof(*v));
	if (!v)
		return dmn_bad(err, errlen, TSD_OUT_OF_MEMORY, "out of memory");
	const cJSON *g = cJSON_GetObjectItemCaseSensitive(spec, "graph");
	const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(spec, "format");
	proto_err e;
	tsd_status st;
	uint64_t cap = s->cfg.mem_limit_bytes ? s->cfg.mem_limit_bytes : UINT64_C(1) << 40;
	const char *dev = dmn_json_str(spec, "device"), *w = dmn_json_str(spec, "weights");
	if (fmt && (!cJSON_IsString(fmt) || (strcmp(fmt->valuestring, "graph") && strcmp(fmt->valuestring, "onnx")))) {
		free(v);
		return BAD("format: \"graph\" (the default) or \"onnx\"");
	}
	if (fmt && !strcmp(fmt->valuestring, "onnx")) {
		if ((st = parse_onnx(s, spec, pm, v, err, errlen)))
			goto fail;
		goto device;
	}
	static const char *const onnx_only[] = {"file", "shapes", "constants", "f64_as_f32"};
	for (size_t k = 0; k < sizeof(onnx_only) / sizeof(*onnx_only); k++)
		if (cJSON_GetObjectItemCaseSensitive(spec, onnx_only[k])) {
			free(v);
			return BAD("%s: a field of ONNX models (\"format\": \"onnx\")", onnx_only[k]);
		}
	if (!cJSON_IsObject(g)) {
		free(v);
		return BAD("graph: an object is required");
	}
	if ((st = proto_graph_parse(g, cap, &v->g, &e)) != TSD_OK) {
		free(v);
		return dmn_bad(err, errlen, st, "graph: %s", e.msg);
	}
	if ((st = parse_io(s, spec, v, err, errlen)) || (st = parse_batching(s, spec, v, err, errlen)) ||
	    (st = parse_train(spec, v, err, errlen)))
		goto fail;
device:
	if (cJSON_GetObjectItemCaseSensitive(spec, "device") && (!dev || strcmp(dev, s->exec.name))) {
		st = BAD("device: this daemon has \"%s\"", s->exec.name);
		goto fail;
	}
	if (cJSON_GetObjectItemCaseSensitive(spec, "weights")) {
		if (!w) {
			st = BAD("weights: a safetensors file name relative to models_dir");
			goto fail;
		}
		char e2[400];
		if ((st = dmn_models_path(s, w, v->weights_path, sizeof(v->weights_path), e2, sizeof(e2)))) {
			dmn_bad(err, errlen, st, "weights: %s", e2);
			goto fail;
		}
	}
	*out = v;
	return TSD_OK;
fail:
	dmn_mver_free(v);
	return st;
}

/* ---- inputs of a request ---- */

static tsd_status check_port(const proto_gnode *n, const proto_tensor *t, const char *what, int64_t *rows,
			     char *err, size_t errlen)
{
	if (t->dtype != n->dtype)
		return dmn_bad(err, errlen, TSD_SHAPE_MISMATCH, "tensors (%s): dtype %s, the %s wants %s", t->name,
			   eng_dtype_name(t->dtype), what, eng_dtype_name(n->dtype));
	bool ok = t->ndim == n->ndim;
	for (int d = 0; ok && d < n->ndim; d++) {
		if (n->shape[d] != PROTO_BATCH) {
			ok = t->shape[d] == n->shape[d];
		} else if (*rows < 0) {
			*rows = t->shape[d];
		} else {
			ok = t->shape[d] == *rows;
		}
	}
	if (!ok) {
		char a[160], b[160];
		int at = 0, bt = 0;
		for (int d = 0; d < t->ndim && at < 140; d++)
			at += snprintf(a + at, sizeof(a) - (size_t)at, "%s%lld", d ? "," : "", (long long)t->shape[d]);
		for (int d = 0; d < n->ndim && bt < 140; d++)
			bt += snprintf(b + bt, sizeof(b) - (size_t)bt, "%s%lld", d ? "," : "", (long long)n->shape[d]);
		a[at] = b[bt] = 0;
		return dmn_bad(err, errlen, TSD_SHAPE_MISMATCH,
			   "tensors (%s): shape [%s], the %s wants [%s] (-1: the batch size, the same in every input)",
			   t->name, a, what, b);
	}
	return TSD_OK;
}

tsd_status dmn_check_inputs(const dmn_mver *v, const proto_msg *m, bool train, int64_t *rows, char *err, size_t errlen)
{
	int64_t b = -1;
	tsd_status st;
	for (int q = 0; q < v->nin; q++) {
		const proto_tensor *t = proto_msg_tensor(m, v->in[q].name);
		if (!t)
			return BAD("tensors: input \"%s\" is missing", v->in[q].name);
		if ((st = check_port(&v->g.nodes[v->in[q].node], t, "model", &b, err, errlen)))
			return st;
	}
	int expect = v->nin;
	if (train) {
		const proto_tensor *t = proto_msg_tensor(m, v->target);
		if (!t)
			return BAD("tensors: the train target \"%s\" is missing", v->target);
		proto_gnode tn = {.dtype = v->target_dtype, .ndim = v->target_ndim};
		memcpy(tn.shape, v->target_shape, sizeof(tn.shape));
		if ((st = check_port(&tn, t, "train target", &b, err, errlen)))
			return st;
		expect++;
	}
	if (m->ntensors != expect)
		for (int k = 0; k < m->ntensors; k++) {
			bool known = train && !strcmp(m->tensors[k].name, v->target);
			for (int q = 0; q < v->nin; q++)
				known |= !strcmp(m->tensors[k].name, v->in[q].name);
			if (!known)
				return BAD("tensors[%d] (%s): not an input of the model", k, m->tensors[k].name);
		}
	if (!v->batched) {
		*rows = 1;
		return TSD_OK;
	}
	if (b < 1)
		return dmn_bad(err, errlen, TSD_SHAPE_MISMATCH, "tensors: the batch size is %lld; at least 1", (long long)b);
	if (b > v->batch_max)
		return dmn_bad(err, errlen, TSD_TOO_LARGE, "tensors: %lld rows, the model's batch max is %d (split the request)",
			   (long long)b, v->batch_max);
	*rows = b;
	return TSD_OK;
}

/* ---- list entries ---- */

static cJSON *ports_json(const dmn_mver *v, const dmn_port *ports, int n)
{
	cJSON *a = cJSON_CreateArray();
	for (int q = 0; q < n; q++) {
		const proto_gnode *g = &v->g.nodes[ports[q].node];
		cJSON *o = cJSON_CreateObject(), *sh = cJSON_CreateArray();
		cJSON_AddStringToObject(o, "name", ports[q].name);
		cJSON_AddStringToObject(o, "dtype", eng_dtype_name(g->dtype));
		for (int d = 0; d < g->ndim; d++)
			cJSON_AddItemToArray(sh, cJSON_CreateNumber(g->shape[d] == PROTO_BATCH ? -1.0 : (double)g->shape[d]));
		cJSON_AddItemToObject(o, "shape", sh);
		cJSON_AddItemToArray(a, o);
	}
	return a;
}

/* What a train.step needs to know: the loss, the output it applies to, the target tensor
 * (name, dtype, shape with -1 for the batch) and the optimizer with its rate. */
static cJSON *train_json(const dmn_mver *v)
{
	static const char *const losses[] = {"mse", "cross_entropy", "sparse_cross_entropy"};
	static const char *const optims[] = {"sgd", "adam", "adamw"};
	cJSON *t = cJSON_CreateObject(), *tg = cJSON_CreateObject(), *sh = cJSON_CreateArray();
	cJSON_AddStringToObject(t, "loss", losses[v->loss]);
	cJSON_AddStringToObject(t, "output", v->out[v->train_out].name);
	cJSON_AddStringToObject(tg, "name", v->target);
	cJSON_AddStringToObject(tg, "dtype", eng_dtype_name(v->target_dtype));
	for (int d = 0; d < v->target_ndim; d++)
		cJSON_AddItemToArray(sh, cJSON_CreateNumber(v->target_shape[d] == PROTO_BATCH ? -1.0 : (double)v->target_shape[d]));
	cJSON_AddItemToObject(tg, "shape", sh);
	cJSON_AddItemToObject(t, "target", tg);
	cJSON_AddStringToObject(t, "optimizer", optims[v->optim.kind]);
	cJSON_AddNumberToObject(t, "lr", v->optim.lr);
	return t;
}

cJSON *dmn_counters_json(const dmn_mcounters *c)
{
	cJSON *o = cJSON_CreateObject();
#define DMN_MC(f) cJSON_AddNumberToObject(o, #f, (double)c->f);
#include "model_counters.def"
#undef DMN_MC
	return o;
}

cJSON *dmn_model_json(const dmn_srv *s, const dmn_model *m)
{
	const dmn_mver *v = m->cur;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "name", m->name);
	cJSON_AddNumberToObject(o, "version", v->version);
	cJSON_AddStringToObject(o, "state", m->loading ? "ready, reloading" : "ready");
	cJSON_AddStringToObject(o, "device", s->exec.name);
	cJSON_AddStringToObject(o, "format", v->onnx ? "onnx" : "graph");
	cJSON_AddItemToObject(o, "inputs", ports_json(v, v->in, v->nin));
	cJSON_AddItemToObject(o, "outputs", ports_json(v, v->out, v->nout));
	cJSON_AddBoolToObject(o, "batched", v->batched);
	cJSON *b = cJSON_CreateArray();
	for (int k = 0; k < v->nbuckets; k++)
		cJSON_AddItemToArray(b, cJSON_CreateNumber(v->buckets[k]));
	cJSON_AddItemToObject(o, "buckets", b);
	cJSON_AddNumberToObject(o, "batch_max", v->batch_max);
	cJSON_AddNumberToObject(o, "delay_us", (double)v->delay_us);
	cJSON_AddNumberToObject(o, "queue_max", v->queue_max);
	cJSON_AddBoolToObject(o, "trainable", v->trainable);
	if (v->trainable) {
		cJSON_AddNumberToObject(o, "train_steps", (double)v->steps);
		cJSON_AddItemToObject(o, "train", train_json(v));
	}
	cJSON_AddNumberToObject(o, "queued", m->queued);
	cJSON_AddItemToObject(o, "counters", dmn_counters_json(&m->c));
	return o;
}

/* ---- loads, swaps, unloads ---- */

tsd_status dmn_load(dmn_srv *s, const cJSON *spec, dmn_req *r, int preload, char *err, size_t errlen,
		    dmn_model **mout)
{
	const char *name = dmn_json_str(spec, "name");
	if (!dmn_name_ok(name))
		return BAD("name: 1 to %d characters of A-Z a-z 0-9 _ . -", DMN_NAME_MAX);
	dmn_mver *v;
	tsd_status st = dmn_mver_parse(s, spec, r ? &r->pm : NULL, &v, err, errlen);
	if (st != TSD_OK)
		return st;
	/* weights in the message: each names a param */
	for (int k = 0; r && !v->onnx && k < r->pm.ntensors; k++) {
		int i = proto_graph_find(&v->g, r->pm.tensors[k].name);
		if (i < 0 || v->g.nodes[i].op != PROTO_G_PARAM) {
			dmn_mver_free(v);
			return BAD("tensors[%d] (%s): not a param node of the graph", k, r->pm.tensors[k].name);
		}
	}
	if (!v->weights_path[0] && !v->onnx)
		for (int i = 0; i < v->g.nnodes; i++)
			if (v->g.nodes[i].op == PROTO_G_PARAM && (!r || !proto_msg_tensor(&r->pm, v->g.nodes[i].id))) {
				st = BAD("param \"%s\": no weights (give \"weights\" or a tensor of that name)",
					 v->g.nodes[i].id);
				dmn_mver_free(v);
				return st;
			}
	dmn_model *m = dmn_model_find(s, name);
	if (!m && !(m = dmn_model_add(s, name))) {
		dmn_mver_free(v);
		return dmn_bad(err, errlen, TSD_OUT_OF_MEMORY, "out of memory");
	}
	dmn_job *j = calloc(1, sizeof(*j));
	dmn_req **reqs = calloc(1, sizeof(*reqs));
	if (!j || !reqs) {
		free(j);
		free(reqs);
		dmn_mver_free(v);
		if (!m->cur && !m->loading) {
			registry_remove(s, m);
			free(m);
		}
		return dmn_bad(err, errlen, TSD_OUT_OF_MEMORY, "out of memory");
	}
	v->version = ++m->next_version;
	m->loading++;
	m->refs++;
	j->kind = DMN_J_LOAD;
	j->srv = s;
	j->model = m;
	j->ver = v;
	j->reqs = reqs;
	j->reqs[0] = r;
	j->nreq = r != NULL;
	j->prio = DMN_PRIO_NORMAL;
	j->preload = preload;
	j->t_arrive = r ? r->t_arrive : eng_now_ns();
	dmn_ctl_push(s, j);
	*mout = m;
	return TSD_OK;
}

static void push_free(dmn_srv *s, dmn_mver *v)
{
	dmn_job *j = calloc(1, sizeof(*j));
	if (!j) { /* leaks the version rather than freeing it under a running job */
		dmn_log(&s->log, DMN_LOG_ERROR, "out of memory freeing a model version");
		return;
	}
	j->kind = DMN_J_FREE;
	j->srv = s;
	j->ver = v;
	dmn_exec_push(s, j);
}

void dmn_model_unload(dmn_srv *s, dmn_model *m)
{
	dmn_flush_queues(s, m, TSD_CANCELLED, "the model was unloaded");
	registry_remove(s, m);
	m->removed = true;
	if (m->cur)
		push_free(s, m->cur);
	m->cur = NULL;
	dmn_log(&s->log, DMN_LOG_INFO, "model %s unloaded", m->name);
	m->refs++;
	dmn_model_release(s, m);
}

static void load_done(dmn_srv *s, dmn_job *j)
{
	dmn_model *m = j->model;
	dmn_req *r = j->nreq ? j->reqs[0] : NULL;
	m->loading--;
	if (j->st == TSD_OK && !m->removed) {
		dmn_mver *old = m->cur;
		m->cur = j->ver;
		j->ver = NULL;
		if (old)
			push_free(s, old);
		dmn_log(&s->log, DMN_LOG_INFO, "model %s version %d ready on %s (%d bucket(s), max %d; %.1f ms)%s",
			m->name, m->cur->version, s->exec.name, m->cur->nbuckets, m->cur->batch_max,
			(double)(j->t_end - j->t_start) / 1e6, old ? ", replacing the previous version" : "");
		if (r) {
			cJSON *x = cJSON_CreateObject();
			cJSON_AddItemToObject(x, "model", dmn_model_json(s, m));
			dmn_reply_ok(s, r, x, NULL, 0);
		}
	} else {
		if (j->st == TSD_OK) { /* unloaded while loading: its engine side goes too */
			j->st = TSD_CANCELLED;
			snprintf(j->err, sizeof(j->err), "the model was unloaded while it loaded");
			push_free(s, j->ver);
		} else { /* a failed load leaves no engine side (exec_model.c) */
			dmn_mver_free(j->ver);
		}
		dmn_log(&s->log, DMN_LOG_ERROR, "model %s: load failed: %s: %s", m->name, tsd_status_name(j->st), j->err);
		j->ver = NULL;
		if (!m->cur && !m->loading && !m->removed) {
			registry_remove(s, m);
			m->removed = true;
		}
		if (r)
			dmn_fail(s, r, j->st, "%s", j->err);
		if (j->preload == 2 && !m->removed)
			m->spec_hash = 0; /* the next reload tries it again */
		if (j->preload == 1) {
			dmn_log(&s->log, DMN_LOG_ERROR, "a preloaded model failed to load; exiting");
			s->exit_status = 1;
			s->draining = true;
			s->drain_deadline = 0;
		}
	}
	if (j->preload == 1 && --s->preload_pending == 0 && !s->draining) {
		dmn_log(&s->log, DMN_LOG_INFO, "ready");
		sd_notify(0, "READY=1");
	}
}

void dmn_model_job_done(dmn_srv *s, dmn_job *j)
{
	if (j->kind != DMN_J_FREE && s->cur_job == j) {
		s->exec_busy = false;
		s->cur_job = NULL;
	}
	switch (j->kind) {
	case DMN_J_FREE:
		dmn_mver_free(j->ver);
		j->ver = NULL;
		break;
	case DMN_J_LOAD:
		load_done(s, j);
		break;
	default:
		dmn_batch_done(s, j);
		break;
	}
	if (j->model)
		dmn_model_release(s, j->model);
	dmn_job_free(j);
}

/* ---- preloads ---- */

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

/* Read, hash and parse one spec file; NULL (logged) on failure. */
static cJSON *read_spec(dmn_srv *s, const char *path, uint64_t *hash)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	cJSON *j = NULL;
	struct stat st;
	if (!f || fstat(fileno(f), &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > SPEC_FILE_MAX) {
		dmn_log(&s->log, DMN_LOG_ERROR, "preload %s: %s", path, f ? "not a regular file of at most 64 MiB" : strerror(errno));
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf || fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
		dmn_log(&s->log, DMN_LOG_ERROR, "preload %s: cannot read it", path);
		goto out;
	}
	buf[st.st_size] = 0;
	*hash = fnv1a(0xcbf29ce484222325ull, buf, (size_t)st.st_size);
	if (!(j = cJSON_ParseWithLength(buf, (size_t)st.st_size)) || !cJSON_IsObject(j)) {
		dmn_log(&s->log, DMN_LOG_ERROR, "preload %s: not a JSON object", path);
		cJSON_Delete(j);
		j = NULL;
	}
out:
	free(buf);
	if (f)
		fclose(f);
	return j;
}

int dmn_preload(dmn_srv *s, bool reload)
{
	int queued = 0;
	for (int i = 0; i < s->cfg.preload.n; i++) {
		char path[4096], err[600];
		uint64_t h = 0;
		if (dmn_models_path(s, s->cfg.preload.v[i], path, sizeof(path), err, sizeof(err))) {
			dmn_log(&s->log, DMN_LOG_ERROR, "preload %s: %s", s->cfg.preload.v[i], err);
			if (!reload)
				return -1;
			continue;
		}
		cJSON *spec = read_spec(s, path, &h);
		if (!spec) {
			if (!reload)
				return -1;
			continue;
		}
		/* the weights file's identity is part of what "changed" means */
		const char *w = dmn_json_str(spec, "weights");
		if (!w)
			w = dmn_json_str(spec, "file");
		char wp[4096];
		struct stat st;
		if (w && !dmn_models_path(s, w, wp, sizeof(wp), err, sizeof(err)) && !stat(wp, &st)) {
			h = fnv1a(h, &st.st_mtim, sizeof(st.st_mtim));
			h = fnv1a(h, &st.st_size, sizeof(st.st_size));
		}
		const char *name = dmn_json_str(spec, "name");
		dmn_model *m = name ? dmn_model_find(s, name) : NULL;
		if (reload && m && m->spec_hash == h && !strcmp(m->spec_path, path)) {
			cJSON_Delete(spec);
			continue;
		}
		tsd_status st2 = dmn_load(s, spec, NULL, reload ? 2 : 1, err, sizeof(err), &m);
		cJSON_Delete(spec);
		if (st2 != TSD_OK) {
			dmn_log(&s->log, DMN_LOG_ERROR, "preload %s: %s: %s", path, tsd_status_name(st2), err);
			if (!reload)
				return -1;
			continue;
		}
		snprintf(m->spec_path, sizeof(m->spec_path), "%s", path);
		m->spec_hash = h;
		if (!reload)
			s->preload_pending++;
		queued++;
	}
	if (!reload && !s->preload_pending) {
		dmn_log(&s->log, DMN_LOG_INFO, "ready");
		sd_notify(0, "READY=1");
	}
	return queued;
}
