/* verbs_repo.c: repo.index and repo.load, the model repository's verbs (repository.c; the Open
 * Inference Protocol's /v2/repository endpoints become these). Loop thread. */
#include "verbs_repo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "repository.h"

void dmn_v_repo_index(dmn_srv *s, dmn_req *r)
{
	cJSON *x = cJSON_CreateObject(), *a = x ? cJSON_AddArrayToObject(x, "models") : NULL;
	/* the models loaded (from the repository or not; each version served an entry, a NAME@V under
	 * its NAME), then the repository's others */
	for (int i = 0; a && i < s->nmodels; i++) {
		const dmn_model *m = s->models[i];
		const char *at = strchr(m->name, '@');
		cJSON *e = cJSON_CreateObject();
		cJSON_AddItemToArray(a, e);
		char name[DMN_NAME_MAX + 1];
		snprintf(name, sizeof(name), "%.*s", at ? (int)(at - m->name) : (int)strlen(m->name), m->name);
		cJSON_AddStringToObject(e, "name", name);
		if (m->cur)
			cJSON_AddNumberToObject(e, "version", m->cur->version);
		cJSON_AddStringToObject(e, "state", m->cur ? "READY" : "LOADING");
		cJSON_AddStringToObject(e, "reason", m->cur && m->loading ? "a new version is loading" : "");
	}
	char(*names)[DMN_NAME_LEN_MAX + 1] = s->cfg.repository != DMN_REPO_OFF ? malloc(DMN_REPO_MAX * sizeof(*names)) : NULL;
	int n = names ? dmn_repo_names(&s->cfg, names, DMN_REPO_MAX) : 0;
	for (int i = 0; a && i < n; i++) {
		if (dmn_model_find(s, names[i]))
			continue;
		cJSON *e = cJSON_CreateObject();
		cJSON_AddItemToArray(a, e);
		cJSON_AddStringToObject(e, "name", names[i]);
		cJSON_AddStringToObject(e, "state", "UNAVAILABLE");
		cJSON_AddStringToObject(e, "reason", "not loaded (repo.load; a load that failed is in the daemon's log)");
	}
	free(names);
	dmn_reply_ok(s, r, x, NULL, 0);
}

void dmn_v_repo_load(dmn_srv *s, dmn_req *r)
{
	const char *name = dmn_json_str(r->pm.json, "name");
	char err[600];
	tsd_status st;
	if (s->cfg.repository == DMN_REPO_OFF)
		st = dmn_bad(err, sizeof(err), TSD_BAD_REQUEST,
			     "repo.load: this daemon has no model repository (config repository: all or explicit, over models_dir)");
	else if (!name)
		st = dmn_bad(err, sizeof(err), TSD_BAD_REQUEST, "name: the model's directory in the repository (a string)");
	else
		st = dmn_repo_load(s, name, r, 0, err, sizeof(err)); /* answered when its default version is ready */
	if (st != TSD_OK)
		dmn_fail(s, r, st, "%s", err);
}
