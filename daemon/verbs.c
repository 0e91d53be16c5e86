/* verbs.c: the verb table (verbs.def) and each verb's handler: it checks the request's fields
 * and either answers at once (hello, health, stats, model.list, model.unload) or queues the
 * work for the executor (model.load, model.save, infer, realize, train.step). */
#include "verbs.h"
#include "health.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sequence.h"
#include "shm_refs.h"
#include "verbs_shm.h"
#include "verbs_repo.h"
#include "verbs_sysshm.h"

/* No tensors for a verb that takes none. */
static bool no_tensors(dmn_srv *s, dmn_req *r)
{
	if (!r->pm.ntensors)
		return true;
	dmn_fail(s, r, TSD_BAD_REQUEST, "tensors: %s takes none", dmn_verb_name(r->verb));
	return false;
}

/* The model named by field key, ready; else the request is answered. */
static dmn_model *ready_model(dmn_srv *s, dmn_req *r, const char *key)
{
	const char *name = dmn_json_str(r->pm.json, key);
	if (!name) {
		dmn_fail(s, r, TSD_BAD_REQUEST, "%s: a model name (string) is required", key);
		return NULL;
	}
	dmn_model *m = dmn_model_find(s, name);
	if (m && !m->cur) { /* its first version loads (a replica starting): nothing ran, ask again */
		dmn_fail(s, r, TSD_UNAVAILABLE, "%s: model \"%.64s\" is still loading", key, name);
		return NULL;
	}
	if (!m) {
		dmn_fail(s, r, TSD_UNKNOWN_MODEL, "%s: no model \"%.64s\" is loaded", key, name);
		return NULL;
	}
	return m;
}

/* timeout_ms, priority, latest_only: optional fields common to the computing verbs. */
static bool common_fields(dmn_srv *s, dmn_req *r)
{
	const cJSON *j = r->pm.json, *v;
	if ((v = cJSON_GetObjectItemCaseSensitive(j, "timeout_ms"))) {
		int64_t ms;
		if (!proto_json_int(v, 0, 3600000, &ms)) {
			dmn_fail(s, r, TSD_BAD_REQUEST, "timeout_ms: an integer in [0, 3600000] milliseconds");
			return false;
		}
		r->deadline = ms ? r->t_arrive + (uint64_t)ms * 1000000u : 0;
	}
	if ((v = cJSON_GetObjectItemCaseSensitive(j, "priority"))) {
		static const char *const names[DMN_NPRIO] = {"realtime", "normal", "bulk"};
		int p = -1;
		for (int k = 0; k < DMN_NPRIO && cJSON_IsString(v); k++)
			if (!strcmp(v->valuestring, names[k]))
				p = k;
		if (p < 0) {
			dmn_fail(s, r, TSD_BAD_REQUEST, "priority: one of \"realtime\", \"normal\", \"bulk\"");
			return false;
		}
		r->prio = p;
	}
	if ((v = cJSON_GetObjectItemCaseSensitive(j, "latest_only"))) {
		if (!cJSON_IsBool(v)) {
			dmn_fail(s, r, TSD_BAD_REQUEST, "latest_only: true or false");
			return false;
		}
		r->latest_only = cJSON_IsTrue(v);
	}
	return true;
}

static dmn_job *job_new(dmn_srv *s, dmn_job_kind kind, dmn_req *r)
{
	dmn_job *j = calloc(1, sizeof(*j));
	dmn_req **reqs = calloc(1, sizeof(*reqs));
	if (!j || !reqs) {
		free(j);
		free(reqs);
		dmn_fail(s, r, TSD_OUT_OF_MEMORY, "out of memory");
		return NULL;
	}
	j->kind = kind;
	j->srv = s;
	j->reqs = reqs;
	j->reqs[0] = r;
	j->nreq = 1;
	j->prio = r->prio;
	j->t_arrive = r->t_arrive;
	return j;
}

static void v_hello(dmn_srv *s, dmn_req *r)
{
	int64_t v;
	const cJSON *jv = cJSON_GetObjectItemCaseSensitive(r->pm.json, "version");
	if (!no_tensors(s, r))
		return;
	if (!proto_json_int(jv, 0, INT32_MAX, &v)) {
		dmn_fail(s, r, TSD_BAD_REQUEST, "version: the client's protocol version (integer) is required");
		return;
	}
	if (v != TSD_PROTOCOL_VERSION) {
		dmn_fail(s, r, TSD_VERSION_MISMATCH, "version: the client speaks protocol %lld, this daemon %d",
			 (long long)v, TSD_PROTOCOL_VERSION);
		return;
	}
	cJSON *x = cJSON_CreateObject(), *lim = cJSON_CreateObject(), *devs = cJSON_CreateArray();
	cJSON_AddNumberToObject(x, "protocol", TSD_PROTOCOL_VERSION);
	cJSON_AddStringToObject(x, "daemon", DMN_VERSION);
	cJSON_AddItemToArray(devs, cJSON_CreateString(s->exec.name));
	cJSON_AddItemToObject(x, "devices", devs);
	cJSON_AddNumberToObject(lim, "max_message_bytes", (double)s->cfg.max_message_bytes);
	cJSON_AddNumberToObject(lim, "max_header_bytes", (double)s->cfg.max_header_bytes);
	cJSON_AddNumberToObject(lim, "mem_limit_bytes", (double)s->mem_limit);
	cJSON_AddNumberToObject(lim, "max_tensors", PROTO_MAX_TENSORS);
	cJSON_AddNumberToObject(lim, "max_graph_nodes", PROTO_GRAPH_MAX_NODES);
	cJSON_AddNumberToObject(lim, "batch_max", (double)s->cfg.batch_max);
	cJSON_AddNumberToObject(lim, "queue_max", (double)s->cfg.queue_max);
	cJSON_AddNumberToObject(lim, "client_inflight_max", (double)s->cfg.client_inflight_max);
	cJSON_AddItemToObject(x, "limits", lim);
	dmn_reply_ok(s, r, x, NULL, 0);
}

static void v_health(dmn_srv *s, dmn_req *r)
{
	if (!no_tensors(s, r))
		return;
	int ready = 0, loading = 0;
	for (int i = 0; i < s->nmodels; i++) {
		ready += s->models[i]->cur != NULL;
		loading += s->models[i]->loading > 0;
	}
	cJSON *x = cJSON_CreateObject(), *m = cJSON_CreateObject();
	dmn_health h;
	dmn_health_get(s, eng_now_ns(), &h);
	cJSON_AddBoolToObject(x, "ready", h.ready);
	cJSON_AddBoolToObject(x, "live", h.live);
	cJSON_AddBoolToObject(x, "draining", s->draining);
	cJSON_AddBoolToObject(x, "stopping", s->stopping || s->draining);
	if (h.why[0])
		cJSON_AddStringToObject(x, "reason", h.why);
	cJSON_AddNumberToObject(m, "ready", ready);
	cJSON_AddNumberToObject(m, "loading", loading);
	cJSON_AddItemToObject(x, "models", m);
	cJSON_AddNumberToObject(x, "uptime_s", (double)(eng_now_ns() - s->t_start) / 1e9);
	dmn_reply_ok(s, r, x, NULL, 0);
}

/* A reading verb that arrives after the running job's replies went out, before the job is back
 * on the loop, waits for it (dmn_run_deferred): its client, who may have had one of those
 * replies, sees that job's counters. */
static bool defer_read(dmn_srv *s, dmn_req *r)
{
	if (!s->cur_job || !atomic_load(&s->cur_job->replied))
		return false;
	r->next = NULL;
	if (s->deferred_tail)
		s->deferred_tail->next = r;
	else
		s->deferred = r;
	s->deferred_tail = r;
	return true;
}

void dmn_run_deferred(dmn_srv *s)
{
	if (!s->deferred || (s->cur_job && atomic_load(&s->cur_job->replied)))
		return;
	dmn_req *r = s->deferred;
	s->deferred = s->deferred_tail = NULL;
	for (dmn_req *n; r; r = n) {
		n = r->next;
		r->next = NULL;
		dmn_verb_run(s, r);
	}
}

static void v_stats(dmn_srv *s, dmn_req *r)
{
	if (no_tensors(s, r) && !defer_read(s, r))
		dmn_reply_ok(s, r, dmn_stats_json(s), NULL, 0);
}

static void v_model_list(dmn_srv *s, dmn_req *r)
{
	if (!no_tensors(s, r) || defer_read(s, r))
		return;
	cJSON *x = cJSON_CreateObject(), *a = cJSON_CreateArray();
	for (int i = 0; i < s->nmodels; i++) /* another version's NAME@V is in its model's "versions" */
		if (s->models[i]->cur && !strchr(s->models[i]->name, '@'))
			cJSON_AddItemToArray(a, dmn_model_json(s, s->models[i]));
	cJSON_AddItemToObject(x, "models", a);
	dmn_reply_ok(s, r, x, NULL, 0);
}

static void v_model_unload(dmn_srv *s, dmn_req *r)
{
	dmn_model *m = no_tensors(s, r) ? ready_model(s, r, "name") : NULL;
	if (!m)
		return;
	cJSON *x = cJSON_CreateObject();
	cJSON_AddStringToObject(x, "name", m->name);
	dmn_model_unload(s, m);
	dmn_reply_ok(s, r, x, NULL, 0);
}

static void v_model_load(dmn_srv *s, dmn_req *r)
{
	char err[512];
	dmn_model *m;
	tsd_status st = dmn_load(s, r->pm.json, r, 0, err, sizeof(err), &m);
	if (st != TSD_OK)
		dmn_fail(s, r, st, "%s", err);
}

static void v_model_save(dmn_srv *s, dmn_req *r)
{
	dmn_model *m = no_tensors(s, r) ? ready_model(s, r, "name") : NULL;
	if (!m)
		return;
	if (m->cur->onnx) {
		dmn_fail(s, r, TSD_BAD_REQUEST, "name: %s is an ONNX model; its weights are its file", m->name);
		return;
	}
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(r->pm.json, "path");
	char path[4096] = "", err[512];
	if (p) {
		size_t n = cJSON_IsString(p) ? strlen(p->valuestring) : 0;
		if (n < 13 || strcmp(p->valuestring + n - 12, ".safetensors")) {
			dmn_fail(s, r, TSD_BAD_REQUEST, "path: a file name ending .safetensors");
			return;
		}
		tsd_status st = dmn_models_path_new(&s->cfg, p->valuestring, path, sizeof(path), err, sizeof(err));
		if (st != TSD_OK) {
			dmn_fail(s, r, st, "path: %s", err);
			return;
		}
	}
	dmn_job *j = job_new(s, DMN_J_SAVE, r);
	if (!j)
		return;
	j->model = m;
	snprintf(j->save_path, sizeof(j->save_path), "%s", path);
	dmn_ctl_push(s, j);
}

static void v_infer(dmn_srv *s, dmn_req *r)
{
	dmn_model *m = ready_model(s, r, "model");
	if (!m || !common_fields(s, r))
		return;
	const cJSON *jv = cJSON_GetObjectItemCaseSensitive(r->pm.json, "version");
	int64_t want = 0;
	if (jv && !proto_json_int(jv, 1, INT32_MAX, &want)) {
		dmn_fail(s, r, TSD_BAD_REQUEST, "version: a model version, an integer from 1");
		return;
	}
	if (want && want != m->cur->version) { /* another version served beside it (NAME@V)? */
		dmn_model *a = dmn_model_version(s, m, (int)want);
		if (!a) {
			dmn_fail(s, r, TSD_UNKNOWN_MODEL, "model \"%s\" version %lld is not served (version %d is the default)",
				 m->name, (long long)want, m->cur->version);
			return;
		}
		m = a;
	}
	char err[256];
	tsd_status st = dmn_shm_refs(r, s->sysshm, err, sizeof(err));
	if (st == TSD_OK)
		st = dmn_seq_model_ok(m, r, err, sizeof(err));
	if (st == TSD_OK)
		st = dmn_check_inputs(m->cur, &r->pm, false, dmn_seq_implicit(m->cur, r), &r->rows, err, sizeof(err));
	if (st == TSD_OK)
		st = dmn_shm_outputs(r, m->cur, err, sizeof(err));
	if (st == TSD_OK)
		st = dmn_seq_admit(s, m, r, err, sizeof(err));
	if (st != TSD_OK) {
		m->c.requests++;
		m->c.errors++;
		dmn_fail(s, r, st, "%s", err);
		return;
	}
	r->ver = m->cur->version;
	dmn_enqueue(s, m, r);
}

static void v_train_step(dmn_srv *s, dmn_req *r)
{
	dmn_model *m = ready_model(s, r, "model");
	if (!m || !common_fields(s, r))
		return;
	char err[256];
	if (!m->cur->trainable) {
		dmn_fail(s, r, TSD_BAD_REQUEST, "model: \"%s\" was loaded without \"train\"", m->name);
		return;
	}
	const cJSON *lr = cJSON_GetObjectItemCaseSensitive(r->pm.json, "lr");
	if (lr && (!cJSON_IsNumber(lr) || !(lr->valuedouble > 0) || !isfinite(lr->valuedouble))) {
		dmn_fail(s, r, TSD_BAD_REQUEST, "lr: a positive number");
		return;
	}
	tsd_status st = dmn_check_inputs(m->cur, &r->pm, true, 0, &r->rows, err, sizeof(err));
	if (st != TSD_OK) {
		dmn_fail(s, r, st, "%s", err);
		return;
	}
	r->ver = m->cur->version;
	dmn_job *j = job_new(s, DMN_J_TRAIN, r);
	if (!j)
		return;
	j->model = m;
	dmn_ctl_push(s, j);
}

/* The bytes of g's outputs as inferred at validation, a batch dimension counted as 1 row. */
static uint64_t realize_out_bytes(const proto_graph *g)
{
	uint64_t total = 0;
	for (int k = 0; k < g->noutputs; k++) {
		const proto_gnode *n = &g->nodes[g->outputs[k]];
		uint64_t b = tsd_dtype_size(n->dtype); /* numel <= 2^40 (validated): no overflow */
		for (int d = 0; d < n->ndim; d++)
			b *= n->shape[d] == PROTO_BATCH ? 1 : (uint64_t)n->shape[d];
		total += b;
	}
	return total;
}

static void v_realize(dmn_srv *s, dmn_req *r)
{
	if (!common_fields(s, r) || !dmn_realize_budget(s, r))
		return;
	const cJSON *g = cJSON_GetObjectItemCaseSensitive(r->pm.json, "graph");
	if (!cJSON_IsObject(g)) {
		dmn_fail(s, r, TSD_BAD_REQUEST, "graph: an object is required");
		return;
	}
	dmn_job *j = job_new(s, DMN_J_REALIZE, r);
	if (!j)
		return;
	proto_err e;
	tsd_status st = proto_graph_parse(g, s->cfg.max_message_bytes, &j->graph, &e);
	if (st != TSD_OK) {
		dmn_job_free(j);
		dmn_fail(s, r, st, "graph: %s", e.msg);
		return;
	}
	/* outputs no reply could carry are refused before they are computed and copied out (each
	 * would cost its bytes twice outside the engine's limit: the copy and the reply) */
	uint64_t out_bytes = realize_out_bytes(&j->graph);
	if (out_bytes > s->cfg.max_message_bytes) {
		dmn_job_free(j);
		dmn_fail(s, r, TSD_TOO_LARGE, "graph: outputs of %llu bytes or more, past what a reply may hold (max_message_bytes %llu)",
			 (unsigned long long)out_bytes, (unsigned long long)s->cfg.max_message_bytes);
		return;
	}
	/* every input and param is given, nothing else */
	for (int i = 0; i < j->graph.nnodes; i++) {
		const proto_gnode *n = &j->graph.nodes[i];
		if ((n->op == PROTO_G_INPUT || n->op == PROTO_G_PARAM) && !proto_msg_tensor(&r->pm, n->id)) {
			dmn_fail(s, r, TSD_BAD_REQUEST, "tensors: no tensor for %s node \"%s\"",
				 proto_gop_name(n->op), n->id); /* n is in j->graph: before freeing j */
			dmn_job_free(j);
			return;
		}
	}
	for (int k = 0; k < r->pm.ntensors; k++) {
		int i = proto_graph_find(&j->graph, r->pm.tensors[k].name);
		if (i < 0 || (j->graph.nodes[i].op != PROTO_G_INPUT && j->graph.nodes[i].op != PROTO_G_PARAM)) {
			dmn_job_free(j);
			dmn_fail(s, r, TSD_BAD_REQUEST, "tensors[%d] (%s): not an input or param node of the graph",
				 k, r->pm.tensors[k].name);
			return;
		}
	}
	s->realize_graphs++;
	dmn_ctl_push(s, j);
}

typedef void (*verb_fn)(dmn_srv *, dmn_req *);
static const verb_fn verb_fns[] = {
#define DMN_VERB(e, name, fn) fn,
#include "verbs.def"
#undef DMN_VERB
};

void dmn_verb_run(dmn_srv *s, dmn_req *r)
{
	verb_fns[r->verb](s, r);
}
