/* registry.c: the loop's registry of model names: find, add, remove, release (a removed model
 * is freed when no job points to it), its model.list entry, and the teardown of them all. */
#include "registry.h"

#include "sequence.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool dmn_name_ok(const char *name)
{
	return name && dmn_name_valid(name, strlen(name));
}

dmn_model *dmn_model_find(dmn_srv *s, const char *name)
{
	for (int i = 0; i < s->nmodels; i++)
		if (!strcmp(s->models[i]->name, name))
			return s->models[i];
	return NULL;
}

bool dmn_alias_name(const char *base, int version, char *out, size_t cap)
{
	return (size_t)snprintf(out, cap, "%s@%d", base, version) < cap && strlen(out) <= DMN_NAME_MAX;
}

int dmn_alias_of(const char *name, const char *base)
{
	size_t n = strlen(base);
	if (strncmp(name, base, n) || name[n] != '@')
		return 0;
	char *end;
	long v = strtol(name + n + 1, &end, 10);
	return *end || v < 1 || v > INT32_MAX ? 0 : (int)v;
}

dmn_model *dmn_model_version(dmn_srv *s, dmn_model *m, int version)
{
	char alias[DMN_NAME_MAX + 1];
	if (m->cur && m->cur->version == version)
		return m;
	dmn_model *a = dmn_alias_name(m->name, version, alias, sizeof(alias)) ? dmn_model_find(s, alias) : NULL;
	return a && a->cur && a->cur->version == version ? a : NULL;
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

void dmn_model_remove(dmn_srv *s, dmn_model *m)
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
	cJSON *q = v->nstate ? dmn_seqs_json(m) : NULL; /* live, max, started, ended, idle_ended */
	if (q) {
		cJSON *pairs = cJSON_AddArrayToObject(q, "state");
		for (int k = 0; pairs && k < v->nstate; k++) {
			cJSON *e = cJSON_CreateObject();
			cJSON_AddItemToArray(pairs, e);
			cJSON_AddStringToObject(e, "input", v->state[k].input);
			cJSON_AddStringToObject(e, "output", v->state[k].output);
		}
		cJSON_AddNumberToObject(q, "max_sequence_idle_us", (double)v->seq_idle_us);
		cJSON_AddBoolToObject(q, "outlive_connection", v->seq_outlive);
		cJSON_AddItemToObject(o, "sequence", q);
	}
	cJSON_AddNumberToObject(o, "queued", m->queued);
	cJSON_AddItemToObject(o, "counters", dmn_counters_json(&m->c));
	/* the other versions served beside this one (a repository's version_policy): their entries */
	cJSON *vs = NULL;
	for (int i = 0; i < s->nmodels; i++) {
		if (!s->models[i]->cur || !dmn_alias_of(s->models[i]->name, m->name))
			continue;
		if (!vs)
			vs = cJSON_AddArrayToObject(o, "versions");
		if (vs)
			cJSON_AddItemToArray(vs, dmn_model_json(s, s->models[i]));
	}
	return o;
}

void dmn_registry_free(dmn_srv *s)
{
	for (int i = 0; i < s->nmodels; i++) {
		dmn_seqs_free(s->models[i]);
		dmn_mver_free(s->models[i]->cur);
		free(s->models[i]);
	}
	free(s->models);
	s->models = NULL;
	s->nmodels = 0;
}
