/* paths.c: files under the config's models_dir (weights, ONNX files, preload specs, saves):
 * relative paths only, no "..", and no symbolic link leading out. */
#include "util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BAD(...) dmn_bad(err, errlen, TSD_BAD_REQUEST, __VA_ARGS__)

tsd_status dmn_models_path(const dmn_config *cfg, const char *rel, char *out, size_t cap, char *err, size_t errlen)
{
	if (!cfg->models_dir[0])
		return BAD("loading files is off (the config's models_dir is empty)");
	if (!rel[0] || rel[0] == '/')
		return BAD("\"%.200s\": a path relative to models_dir is required", rel);
	for (const char *p = rel; *p; p = strchr(p, '/') ? strchr(p, '/') + 1 : p + strlen(p))
		if (!strncmp(p, "..", 2) && (p[2] == '/' || !p[2]))
			return BAD("\"%.200s\": \"..\" is not allowed", rel);
	int n = snprintf(out, cap, "%s/%s", cfg->models_dir, rel);
	if (n < 0 || (size_t)n >= cap)
		return dmn_bad(err, errlen, TSD_TOO_LARGE, "\"%.200s\": path too long", rel);
	/* a symbolic link may not lead out of models_dir */
	char real[PATH_MAX], root[PATH_MAX];
	if (realpath(out, real) && realpath(cfg->models_dir, root)) {
		size_t rl = strlen(root);
		if (strncmp(real, root, rl) || (real[rl] != '/' && real[rl]))
			return BAD("\"%.200s\" leads out of models_dir", rel);
	}
	return TSD_OK;
}
