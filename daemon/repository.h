/* repository.h: a Triton-style model repository under models_dir (repository.c): what it holds
 * and the model.load object of a model's chosen version. Knows no server: the loads are
 * preload.c's (at start) and verbs_repo.c's (repo.load). */
#ifndef DMN_REPOSITORY_H
#define DMN_REPOSITORY_H

#include "util.h"

#define DMN_REPO_MAX 1024 /* models one repository lists */

/* The names (at most max) of models_dir's directories that hold at least one version
 * directory with a model file; their count (0 without models_dir). */
int dmn_repo_names(const dmn_config *cfg, char (*names)[DMN_NAME_LEN_MAX + 1], int max);
#define DMN_REPO_VERSIONS 16 /* versions of one model served at once */
/* The versions of model name its version_policy serves (ascending into sel, *nsel of them,
 * at most DMN_REPO_VERSIONS), and the model.load object (*spec, the caller's) of version want
 * (0: the highest of them): NAME/V/model.onnx (with config.json's shapes, constants,
 * f64_as_f32) or NAME/V/model.json (its weights beside it), config.json's batching, sequence and
 * device, "version": V. TSD_UNKNOWN_MODEL when the repository has no such model or want is not
 * served; bad_request naming the file or field. */
tsd_status dmn_repo_spec(const dmn_config *cfg, const char *name, int want, cJSON **spec, int *sel, int *nsel,
			 char *err, size_t errlen);

#endif
