/* verbs_shm.h: the shared-memory verbs' handlers (verbs_shm.c), called from the verb table
 * (verbs.c). Loop thread. */
#ifndef DMN_VERBS_SHM_H
#define DMN_VERBS_SHM_H

#include "request.h"
#include "types.h"

/* shm.register: the request's descriptor mapped as a region of its client. */
void dmn_v_shm_register(dmn_srv *s, dmn_req *r);
/* shm.unregister: a region of the client forgotten. */
void dmn_v_shm_unregister(dmn_srv *s, dmn_req *r);

#endif
