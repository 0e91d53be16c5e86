/* models.h: the models layer's upper half (loop thread): loads, hot swaps and unloads, every
 * finished job as it comes back (models.c), and the config's preloads and readiness
 * (preload.c). */
#ifndef DMN_MODELS_H
#define DMN_MODELS_H

#include "batcher.h"
#include "executor.h"
#include "registry.h"
#include "request.h"
#include "types.h"

/* ---- models.c ---- */
/* Queue a load of spec (the model.load object) for its name; r: the request, or NULL for a
 * preload (preload 1 at start, 2 at a reload; 0 for a request). The model into *mout. */
tsd_status dmn_load(dmn_srv *s, const cJSON *spec, dmn_req *r, int preload, char *err, size_t errlen,
		    dmn_model **mout);
void dmn_model_unload(dmn_srv *s, dmn_model *m); /* with the versions served beside it (NAME@V) */
/* ---- preload.c ---- */
/* Load model name from the repository as its version_policy says: the highest version as NAME
 * (r, if any, answered when it is ready; preload: dmn_load's kind: 0 a request, 3 at start,
 * counted for readiness with the others), each other version as NAME@V (no request; a failure
 * is logged), and the versions it no longer serves unloaded. Not OK: the first load's error. */
tsd_status dmn_repo_load(dmn_srv *s, const char *name, dmn_req *r, int preload, char *err, size_t errlen);
/* A job came back (the DONE lane's handler): its bookkeeping, its requests answered, j freed. */
void dmn_model_job_done(dmn_srv *s, dmn_job *j);

/* ---- preload.c ---- */
/* Load every preload spec; at start (the executor running) and on reload. The loads queued,
 * or -1 at start when one is unusable. */
int dmn_preload(dmn_srv *s, bool reload);

#endif
