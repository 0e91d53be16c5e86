/* hash.h: a fast, stable 64-bit string hash (FNV-1a) for cache keys and kernel names. Stable
 * across processes and machines: disk cache entries and kernel names depend on it. */
#ifndef ENG_HASH_H
#define ENG_HASH_H

#include <stdint.h>

uint64_t eng_hash_str(const char *s);

#endif
