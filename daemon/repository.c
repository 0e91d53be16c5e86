/* repository.c: a Triton-style model repository under models_dir (config repository): each
 * directory NAME holding numbered version directories, each with model.onnx (an ONNX file) or
 * model.json (a tensord model.load object), and an optional NAME/config.json for what the files
 * cannot say (version_policy, ONNX shapes and constants, batching, device). A model's version is
 * chosen by its policy and loaded as a model.load of that file, serving under the directory's
 * number; the index lists every model found, loaded or not (docs/PROTOCOL.md, "Model
 * repository"). Loop thread. */
#include "repository.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define BAD(...) dmn_bad(err, errlen, TSD_BAD_REQUEST, __VA_ARGS__)
#define FILE_MAX (64u << 20) /* model.json and config.json */

/* A file under models_dir read whole as a JSON object; NULL with err. */
static cJSON *read_json(const dmn_config *cfg, const char *rel, char *err, size_t errlen)
{
	char path[4096], e2[512];
	if (dmn_models_path(cfg, rel, path, sizeof(path), e2, sizeof(e2))) {
		BAD("%s", e2);
		return NULL;
	}
	FILE *f = fopen(path, "rb");
	struct stat st;
	char *buf = NULL;
	cJSON *j = NULL;
	if (!f || fstat(fileno(f), &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > FILE_MAX) {
		BAD("%s: %s", rel, f ? "not a regular file of at most 64 MiB" : strerror(errno));
		goto out;
	}
	if (!(buf = malloc((size_t)st.st_size + 1)) || fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
		BAD("%s: cannot be read", rel);
		goto out;
	}
	if (!(j = cJSON_ParseWithLength(buf, (size_t)st.st_size)) || !cJSON_IsObject(j)) {
		cJSON_Delete(j);
		j = NULL;
		BAD("%s: not a JSON object", rel);
	}
out:
	free(buf);
	if (f)
		fclose(f);
	return j;
}

/* Whether rel (under models_dir, resolved inside it) exists and is what want says (S_IFDIR or
 * S_IFREG). */
static bool is(const dmn_config *cfg, const char *rel, unsigned want)
{
	char path[4096], e2[512];
	struct stat st;
	tsd_status r = want == S_IFDIR ? dmn_models_dir(cfg, rel, path, sizeof(path), e2, sizeof(e2))
				       : dmn_models_path(cfg, rel, path, sizeof(path), e2, sizeof(e2));
	return !r && !stat(path, &st) && (st.st_mode & S_IFMT) == want;
}

/* The version directories of model name that hold a model file, ascending; their count. */
static int versions_of(const dmn_config *cfg, const char *name, int *out, int max)
{
	char path[4096], e2[512];
	if (dmn_models_dir(cfg, name, path, sizeof(path), e2, sizeof(e2)))
		return 0;
	DIR *d = opendir(path);
	int n = 0;
	for (struct dirent *e; d && (e = readdir(d));) {
		char *end;
		long v = strtol(e->d_name, &end, 10);
		if (*end || e->d_name[0] < '1' || e->d_name[0] > '9' || v < 1 || v > INT32_MAX || strlen(e->d_name) > 10)
			continue;
		char rel[200];
		bool found = false;
		for (int k = 0; k < 2 && !found; k++) {
			snprintf(rel, sizeof(rel), "%s/%ld/%s", name, v, k ? "model.json" : "model.onnx");
			found = is(cfg, rel, S_IFREG);
		}
		if (!found)
			continue;
		int at = n < max ? n++ : max - 1;
		out[at] = (int)v;
		for (; at > 0 && out[at - 1] > out[at]; at--) { /* insertion: ascending */
			int t = out[at];
			out[at] = out[at - 1];
			out[at - 1] = t;
		}
	}
	if (d)
		closedir(d);
	return n;
}

int dmn_repo_names(const dmn_config *cfg, char (*names)[DMN_NAME_LEN_MAX + 1], int max)
{
	int n = 0, vs[1];
	DIR *d = cfg->models_dir[0] ? opendir(cfg->models_dir) : NULL;
	for (struct dirent *e; d && n < max && (e = readdir(d));) {
		size_t len = strlen(e->d_name); /* a valid name: at most DMN_NAME_LEN_MAX */
		if (e->d_name[0] != '.' && dmn_name_valid(e->d_name, len) && is(cfg, e->d_name, S_IFDIR) &&
		    versions_of(cfg, e->d_name, vs, 1) > 0) {
			memcpy(names[n], e->d_name, len + 1);
			n++;
		}
	}
	if (d)
		closedir(d);
	return n;
}

/* The versions (ascending, into sel: *nsel of them) that Triton's version_policy selects among
 * vs[0..n) (ascending): latest N (default 1), all, or specific ones (each present). */
static tsd_status pick(const cJSON *policy, const int *vs, int n, int *sel, int *nsel, char *err, size_t errlen)
{
	*nsel = 0;
	if (!policy) {
		sel[(*nsel)++] = vs[n - 1];
		return TSD_OK;
	}
	const cJSON *lt = cJSON_GetObjectItemCaseSensitive(policy, "latest");
	const cJSON *sp = cJSON_GetObjectItemCaseSensitive(policy, "specific");
	const cJSON *all = cJSON_GetObjectItemCaseSensitive(policy, "all");
	if (!cJSON_IsObject(policy) || (!!lt + !!sp + !!all) != 1)
		return BAD("config.json: version_policy: one of {\"latest\": {\"num_versions\": N}}, {\"specific\": {\"versions\": [V, ...]}}, {\"all\": {}}");
	int64_t k = 1;
	if (lt) {
		const cJSON *nv = cJSON_GetObjectItemCaseSensitive(lt, "num_versions");
		if (nv && !proto_json_int(nv, 1, DMN_REPO_VERSIONS, &k))
			return BAD("config.json: version_policy.latest.num_versions: an integer in [1, %d]", DMN_REPO_VERSIONS);
		for (int i = n - (int)(k < n ? k : n); i < n; i++)
			sel[(*nsel)++] = vs[i];
		return TSD_OK;
	}
	if (all) {
		if (n > DMN_REPO_VERSIONS)
			return BAD("config.json: version_policy \"all\": %d versions, at most %d served", n, DMN_REPO_VERSIONS);
		for (int i = 0; i < n; i++)
			sel[(*nsel)++] = vs[i];
		return TSD_OK;
	}
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(sp, "versions"), *e;
	int m = cJSON_GetArraySize(list);
	if (!cJSON_IsArray(list) || m < 1 || m > DMN_REPO_VERSIONS)
		return BAD("config.json: version_policy.specific.versions: 1 to %d version numbers", DMN_REPO_VERSIONS);
	for (int i = 0; i < n; i++) /* ascending, as vs */
		cJSON_ArrayForEach(e, list)
		{
			if (!proto_json_int(e, 1, INT32_MAX, &k))
				return BAD("config.json: version_policy.specific.versions: positive integers");
			if (k == vs[i]) {
				sel[(*nsel)++] = vs[i];
				break;
			}
		}
	cJSON_ArrayForEach(e, list)
	{
		bool found = false;
		for (int i = 0; i < *nsel; i++)
			found |= proto_json_int(e, 1, INT32_MAX, &k) && k == sel[i];
		if (!found)
			return BAD("config.json: version_policy.specific: version %lld has no model.onnx or model.json",
				   proto_json_int(e, 1, INT32_MAX, &k) ? (long long)k : -1ll);
	}
	return TSD_OK;
}

/* Copy field k of from into to (replacing it), when present. */
static void take(cJSON *to, const cJSON *from, const char *k)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(from, k);
	if (!f)
		return;
	cJSON_DeleteItemFromObjectCaseSensitive(to, k);
	cJSON_AddItemToObject(to, k, cJSON_Duplicate(f, true));
}

tsd_status dmn_repo_spec(const dmn_config *cfg, const char *name, int want, cJSON **out, int *sel, int *nsel,
			 char *err, size_t errlen)
{
	*out = NULL;
	*nsel = 0;
	if (!cfg->models_dir[0])
		return BAD("no model repository: models_dir is not set");
	if (!dmn_name_valid(name, strlen(name)) || !is(cfg, name, S_IFDIR))
		return dmn_bad(err, errlen, TSD_UNKNOWN_MODEL, "no model \"%.64s\" in the repository", name);
	int vs[256], n = versions_of(cfg, name, vs, 256);
	if (!n)
		return dmn_bad(err, errlen, TSD_UNKNOWN_MODEL, "model \"%s\": no version directory with model.onnx or model.json",
			       name);
	char rel[256];
	cJSON *conf = NULL;
	snprintf(rel, sizeof(rel), "%s/config.json", name);
	if (is(cfg, rel, S_IFREG) && !(conf = read_json(cfg, rel, err, errlen)))
		return TSD_BAD_REQUEST;
	static const char *const known[] = {"version_policy", "shapes", "constants", "f64_as_f32", "batching", "device",
					    "sequence"};
	const char *bad = conf ? dmn_json_unknown(conf, known, sizeof(known) / sizeof(*known)) : NULL;
	int v = 0;
	cJSON *spec = NULL;
	tsd_status st = TSD_BAD_REQUEST;
	if (bad) {
		BAD("%s: unknown field \"%.64s\" (version_policy, shapes, constants, f64_as_f32, batching, device, sequence)", rel, bad);
		goto out;
	}
	if (pick(cJSON_GetObjectItemCaseSensitive(conf, "version_policy"), vs, n, sel, nsel, err, errlen))
		goto out;
	v = sel[*nsel - 1];
	for (int i = 0; want && i < *nsel; i++)
		if (sel[i] == want)
			v = want;
	if (want && v != want) {
		st = dmn_bad(err, errlen, TSD_UNKNOWN_MODEL, "model \"%s\": version %d is not among those its version_policy serves",
			     name, want);
		goto out;
	}
	snprintf(rel, sizeof(rel), "%s/%d/model.onnx", name, v);
	if (is(cfg, rel, S_IFREG)) {
		spec = cJSON_CreateObject();
		cJSON_AddStringToObject(spec, "format", "onnx");
		cJSON_AddStringToObject(spec, "file", rel);
		take(spec, conf, "shapes");
		take(spec, conf, "constants");
		take(spec, conf, "f64_as_f32");
	} else {
		snprintf(rel, sizeof(rel), "%s/%d/model.json", name, v);
		if (!(spec = read_json(cfg, rel, err, errlen)))
			goto out;
		/* its weights beside it, unless it names them from models_dir's top ("/"-free names stay) */
		const char *w = dmn_json_str(spec, "weights");
		if (w && !strchr(w, '/')) {
			char wp[512];
			snprintf(wp, sizeof(wp), "%s/%d/%s", name, v, w);
			cJSON_DeleteItemFromObjectCaseSensitive(spec, "weights");
			cJSON_AddStringToObject(spec, "weights", wp);
		}
	}
	take(spec, conf, "batching");
	take(spec, conf, "sequence");
	take(spec, conf, "device");
	cJSON_DeleteItemFromObjectCaseSensitive(spec, "name");
	cJSON_AddStringToObject(spec, "name", name);
	cJSON_DeleteItemFromObjectCaseSensitive(spec, "version");
	cJSON_AddNumberToObject(spec, "version", v);
	*out = spec;
	st = TSD_OK;
out:
	cJSON_Delete(conf);
	return st;
}
