/* models.c: models' life on the loop: a load queued (its spec parsed into a new version), the
 * hot swap when it is ready (the old version freed on the executor once nothing runs on it),
 * unloads, and every finished job as it comes back on the inbox's DONE lane. */
#include "models.h"

#include "sequence.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-daemon.h>

#define BAD(...) dmn_bad(err, errlen, TSD_BAD_REQUEST, __VA_ARGS__)

tsd_status dmn_load(dmn_srv *s, const cJSON *spec, dmn_req *r, int preload, char *err, size_t errlen,
		    dmn_model **mout)
{
	const char *name = dmn_json_str(spec, "name"), *at = name ? strchr(name, '@') : NULL;
	char base[DMN_NAME_MAX + 1];
	bool alias = at && (preload == 3 || preload == 4) && (size_t)(at - name) < sizeof(base) &&
		     snprintf(base, sizeof(base), "%.*s", (int)(at - name), name) > 0 && dmn_name_ok(base) &&
		     dmn_alias_of(name, base) > 0; /* a repository's other version, NAME@V */
	if (!alias && !dmn_name_ok(name))
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
			dmn_model_remove(s, m);
			free(m);
		}
		return dmn_bad(err, errlen, TSD_OUT_OF_MEMORY, "out of memory");
	}
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
	for (int i = s->nmodels - 1; i >= 0; i--) /* the other versions served beside it go too */
		if (i < s->nmodels && dmn_alias_of(s->models[i]->name, m->name))
			dmn_model_unload(s, s->models[i]);
	dmn_flush_queues(s, m, TSD_CANCELLED, "the model was unloaded");
	dmn_model_remove(s, m);
	m->removed = true;
	if (m->cur)
		push_free(s, m->cur);
	m->cur = NULL;
	dmn_seqs_reset(s, m, "ended: the model was unloaded");
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
		/* numbered when ready: a failed load uses none; a repository's keeps its directory's */
		j->ver->version = j->ver->fixed_version ? j->ver->fixed_version : ++m->next_version;
		if (j->ver->version > m->next_version)
			m->next_version = j->ver->version;
		m->cur = j->ver;
		j->ver = NULL;
		if (old) {
			char why[96];
			snprintf(why, sizeof(why), "ended: the model was reloaded (version %d replaced %d)", m->cur->version,
				 old->version);
			dmn_seqs_reset(s, m, why);
			push_free(s, old);
		}
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
			dmn_model_remove(s, m);
			m->removed = true;
		}
		if (r) { /* the log keeps the server's paths; the client sees them relative to models_dir */
			dmn_models_scrub(&s->cfg, j->err);
			dmn_fail(s, r, j->st, "%s", j->err);
		}
		if (j->preload == 2 && !m->removed)
			m->spec_hash = 0; /* the next reload tries it again */
		if (j->preload == 1) {
			dmn_log(&s->log, DMN_LOG_ERROR, "a preloaded model failed to load; exiting");
			s->exit_status = 1;
			s->draining = true;
			s->drain_deadline = 0;
		}
	}
	if (j->preload == 2 && s->reload_pending > 0)
		s->reload_pending--;
	if ((j->preload == 1 || j->preload == 3) && --s->preload_pending == 0 && !s->draining) {
		dmn_log(&s->log, DMN_LOG_INFO, "ready");
		sd_notify(0, "READY=1");
	}
}

void dmn_model_job_done(dmn_srv *s, dmn_job *j)
{
	if (j->kind != DMN_J_FREE && j->kind != DMN_J_SEQFREE && s->cur_job == j) {
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
	case DMN_J_SEQFREE:
		break;
	default:
		dmn_batch_done(s, j);
		break;
	}
	if (j->model)
		dmn_model_release(s, j->model);
	dmn_job_free(j);
}

