/* shm_refs.h: an infer request's references into its client's shared-memory regions
 * (shm_refs.c; loop thread, except dmn_shm_out_of, which the executor reads). */
#ifndef DMN_SHM_REFS_H
#define DMN_SHM_REFS_H

#include "types.h"
#include "util.h"

/* Resolve r's "shm" field (regions of its connection) and "sysshm" field (sys: the server's
 * system shared memory, Triton's; NULL when off), if any: their inputs appended to
 * r->pm.tensors as views over the mapped regions (an unsealed region's bytes copied out under
 * the SIGBUS guard instead), so the model's input checks see them as any other tensor, their
 * outputs noted in r->shm; every region named is held until r is freed. TSD_BAD_REQUEST with err
 * naming the reference (an unknown region, bytes outside it, a misaligned offset, a read-only
 * region for an output, a byte_size that disagrees, an unknown field). */
tsd_status dmn_shm_refs(dmn_req *r, const dmn_shm_set *sys, char *err, size_t errlen);
/* Once r's inputs are checked against version v (r->rows known): each output reference sized
 * and checked against its region. */
tsd_status dmn_shm_outputs(dmn_req *r, const dmn_mver *v, char *err, size_t errlen);
/* r's output reference for name, or NULL. */
const dmn_shm_out *dmn_shm_out_of(const dmn_req *r, const char *name);
void dmn_shm_use_free(dmn_shm_use *u); /* NULL allowed */
/* The region r holds that contains address p, or NULL (any thread: r's references are fixed
 * once it is queued). */
dmn_shm_region *dmn_shm_region_of(const dmn_req *r, const void *p);

#endif
