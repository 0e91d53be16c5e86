/* verbs_sysshm.h: the system shared-memory verbs' handlers (verbs_sysshm.c), called from the
 * verb table (verbs.c). Loop thread. */
#ifndef DMN_VERBS_SYSSHM_H
#define DMN_VERBS_SYSSHM_H

#include "request.h"
#include "types.h"

/* sysshm.register {name, key, offset, byte_size}: a POSIX shm object's span mapped as a region
 * of the server. */
void dmn_v_sysshm_register(dmn_srv *s, dmn_req *r);
/* sysshm.status {name?}: "regions": [{name, key, offset, byte_size}]. */
void dmn_v_sysshm_status(dmn_srv *s, dmn_req *r);
/* sysshm.unregister {name?}: that region, or every one. */
void dmn_v_sysshm_unregister(dmn_srv *s, dmn_req *r);

#endif
