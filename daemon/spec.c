/* spec.c: a model.load object checked into a new version's description (loop): the graph,
 * inputs and outputs with their batch axes, the batching policy (defaults from the config),
 * training, the weights file, the device; an ONNX model's own fields are spec_onnx.c's. */
#include "registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BAD(...) dmn_bad(err, errlen, TSD_BAD_REQUEST, __VA_ARGS__)

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
	const char *unknown = dmn_json_unknown(t, known, sizeof(known) / sizeof(*known));
	if (unknown)
		return BAD("train.%.64s: unknown field (loss, output, target, optimizer)", unknown);
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
	if (!st)
		st = parse_batching(s, spec, v, err, errlen);
	return st ? st : dmn_seq_spec(s, spec, v, err, errlen); /* its pairs are resolved at load */
}

tsd_status dmn_mver_parse(dmn_srv *s, const cJSON *spec, const proto_msg *pm, dmn_mver **out, char *err, size_t errlen)
{
	static const char *const known[] = {"verb", "id", "tensors", "name", "graph", "weights", "inputs",
					    "outputs", "device", "batching", "train", "format", "file", "shapes",
					    "constants", "f64_as_f32", "version", "sequence"};
	const char *unknown = dmn_json_unknown(spec, known, sizeof(known) / sizeof(*known));
	if (unknown)
		return BAD("%.64s: unknown field of model.load", unknown);
	const cJSON *jv = cJSON_GetObjectItemCaseSensitive(spec, "version");
	int64_t fixed = 0;
	if (jv && !proto_json_int(jv, 1, INT32_MAX, &fixed))
		return BAD("version: the number it serves under, an integer from 1 (a repository's version directory)");
	dmn_mver *v = calloc(1, sizeof(*v));
	if (!v)
		return dmn_bad(err, errlen, TSD_OUT_OF_MEMORY, "out of memory");
	v->fixed_version = (int)fixed;
	const cJSON *g = cJSON_GetObjectItemCaseSensitive(spec, "graph");
	const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(spec, "format");
	proto_err e;
	tsd_status st;
	uint64_t cap = s->mem_limit ? s->mem_limit : UINT64_C(1) << 40;
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
	    (st = parse_train(spec, v, err, errlen)) || (st = dmn_seq_spec(s, spec, v, err, errlen)) ||
	    (st = dmn_state_resolve(v, err, errlen)))
		goto fail;
	if (v->nstate && v->trainable) {
		st = BAD("sequence: a model with state is not trained by train.step");
		goto fail;
	}
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
		if ((st = dmn_models_path(&s->cfg, w, v->weights_path, sizeof(v->weights_path), e2, sizeof(e2)))) {
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

