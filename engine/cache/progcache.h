/* progcache.h: compiled kernels of one device, keyed by their rendered source, so the same
 * kernel from any graph compiles once per process. */
#ifndef ENG_PROGCACHE_H
#define ENG_PROGCACHE_H

#include <stdint.h>

#include "backends/backend.h"

typedef struct eng_progcache eng_progcache;

eng_progcache *eng_progcache_create(void);
/* Frees every program through dev's program_free. */
void eng_progcache_destroy(eng_progcache *c, bk_device *dev);
/* The program compiled from src, or NULL. */
bk_program *eng_progcache_get(eng_progcache *c, const char *src);
/* Store prog for src (copies src; the cache owns prog). Returns false on ENOMEM. */
bool eng_progcache_put(eng_progcache *c, const char *src, bk_program *prog);

#endif
