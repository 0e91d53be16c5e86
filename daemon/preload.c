/* preload.c: the models named by the config's preload, loaded at start and again at a reload
 * when their spec file (or the weights file it names) changed (counted for readiness: health.c). */
#include "models.h"
#include "repository.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <systemd/sd-daemon.h>

#define SPEC_FILE_MAX (64u << 20)

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

tsd_status dmn_repo_load(dmn_srv *s, const char *name, dmn_req *r, int preload, char *err, size_t errlen)
{
	cJSON *spec = NULL;
	int sel[DMN_REPO_VERSIONS], n = 0, queued = 0;
	dmn_model *m;
	tsd_status st = dmn_repo_spec(&s->cfg, name, 0, &spec, sel, &n, err, errlen);
	if (st != TSD_OK)
		return st;
	/* the other versions its policy serves, each beside it as NAME@V (loaded unless it serves),
	 * queued first: loads run in order, so when the default version's load answers r they are done */
	for (int i = 0; i < n - 1; i++) {
		char alias[DMN_NAME_MAX + 1], e2[600];
		cJSON *vs = NULL;
		int sel2[DMN_REPO_VERSIONS], n2;
		if (!dmn_alias_name(name, sel[i], alias, sizeof(alias)))
			continue;
		if ((m = dmn_model_find(s, alias)) && m->cur && m->cur->version == sel[i] && !m->loading)
			continue;
		tsd_status st2 = dmn_repo_spec(&s->cfg, name, sel[i], &vs, sel2, &n2, e2, sizeof(e2));
		if (st2 == TSD_OK) {
			cJSON_ReplaceItemInObjectCaseSensitive(vs, "name", cJSON_CreateString(alias));
			st2 = dmn_load(s, vs, NULL, preload == 3 ? 3 : 4, e2, sizeof(e2), &m);
		}
		cJSON_Delete(vs);
		if (st2 != TSD_OK)
			dmn_log(&s->log, DMN_LOG_ERROR, "repository model %s version %d: %s: %s", name, sel[i],
				tsd_status_name(st2), e2);
		else
			queued++;
	}
	/* versions no longer served (a policy or a directory that changed) */
	for (int i = s->nmodels - 1; i >= 0; i--) {
		int v = i < s->nmodels ? dmn_alias_of(s->models[i]->name, name) : 0;
		bool keep = false;
		for (int k = 0; v && k < n - 1; k++)
			keep |= sel[k] == v;
		if (v && !keep)
			dmn_model_unload(s, s->models[i]);
	}
	st = dmn_load(s, spec, r, preload, err, errlen, &m);
	cJSON_Delete(spec);
	queued += st == TSD_OK;
	if (preload == 3)
		s->preload_pending += queued;
	return st;
}

/* At start with repository "all": every model of the repository, counted for readiness (a
 * failure is logged, the others serve). */
static int repo_preload(dmn_srv *s)
{
	char(*names)[DMN_NAME_LEN_MAX + 1] = malloc(DMN_REPO_MAX * sizeof(*names));
	int n = names ? dmn_repo_names(&s->cfg, names, DMN_REPO_MAX) : 0, queued = 0;
	for (int i = 0; i < n; i++) {
		char err[600];
		tsd_status st = dmn_repo_load(s, names[i], NULL, 3, err, sizeof(err));
		if (st != TSD_OK) {
			dmn_log(&s->log, DMN_LOG_ERROR, "repository model %s: %s: %s", names[i], tsd_status_name(st), err);
			continue;
		}
		queued++;
	}
	if (n)
		dmn_log(&s->log, DMN_LOG_INFO, "repository %s: %d model(s) found, %d loading", s->cfg.models_dir, n, queued);
	free(names);
	return queued;
}

int dmn_preload(dmn_srv *s, bool reload)
{
	int queued = 0;
	if (!reload && s->cfg.repository == DMN_REPO_ALL)
		queued += repo_preload(s);
	for (int i = 0; i < s->cfg.preload.n; i++) {
		char path[4096], err[600];
		uint64_t h = 0;
		if (dmn_models_path(&s->cfg, s->cfg.preload.v[i], path, sizeof(path), err, sizeof(err))) {
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
		if (w && !dmn_models_path(&s->cfg, w, wp, sizeof(wp), err, sizeof(err)) && !stat(wp, &st)) {
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
		else
			s->reload_pending++;
		queued++;
	}
	if (!reload && !s->preload_pending) {
		dmn_log(&s->log, DMN_LOG_INFO, "ready");
		sd_notify(0, "READY=1");
	}
	return queued;
}
