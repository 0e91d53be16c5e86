/* verbs_repo.h: the model repository's verbs (verbs_repo.c), called from the verb table
 * (verbs.c). Loop thread. */
#ifndef DMN_VERBS_REPO_H
#define DMN_VERBS_REPO_H

#include "models.h"
#include "request.h"
#include "types.h"

/* repo.index: "models": [{name, version (when loaded), state READY|LOADING|UNAVAILABLE, reason}]. */
void dmn_v_repo_index(dmn_srv *s, dmn_req *r);
/* repo.load {name}: the repository's model, its version_policy's version; answered as model.load. */
void dmn_v_repo_load(dmn_srv *s, dmn_req *r);

#endif
