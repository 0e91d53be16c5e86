/* diskcache.h: a content-addressed blob store in a directory (compiled kernels across processes):
 * checksummed entries written atomically, least-recently-used eviction under a size limit. */
#ifndef ENG_DISKCACHE_H
#define ENG_DISKCACHE_H

#include <stddef.h>
#include <stdint.h>

#include <tensord/engine.h>

/* Version of the entry format; part of every key and every entry header, so bumping it makes
 * old entries unreachable (they age out through eviction). */
#define ENG_DISKCACHE_FORMAT 1

/* Entry file: a fixed header, then the payload. Integers are little-endian.
 *   0  "TSDK"        magic
 *   4  u32           ENG_DISKCACHE_FORMAT
 *   8  u64           payload length
 *   16 u64           checksum of the payload (eng_diskcache_checksum)
 *   24 char[32]      the entry's key (hex, no NUL)
 *   56 payload */
#define ENG_DISKCACHE_HEADER_SIZE 56

#define ENG_DISKCACHE_DEFAULT_MAX_BYTES ((uint64_t)1 << 30)

typedef struct eng_diskcache eng_diskcache;

/* Open (creating it and its parents with mode 0700 if missing) the cache directory dir; dir
 * NULL means $XDG_CACHE_HOME/tensord, else $HOME/.cache/tensord. max_bytes 0 means
 * ENG_DISKCACHE_DEFAULT_MAX_BYTES. Scans the directory once (size estimate, stale temporary files).
 * Returns NULL when the directory cannot be created or written, with one warning sentence in
 * msg[0..msglen) (the caller prints it and works without a disk cache). The caller frees the
 * handle with eng_diskcache_close. A handle is used by one thread at a time; several handles and
 * processes may share a directory. */
eng_diskcache *eng_diskcache_open(const char *dir, uint64_t max_bytes, char *msg, size_t msglen);
void eng_diskcache_close(eng_diskcache *dc);

/* The key of the byte strings parts[0..nparts) (lens[i] bytes each): 32 lowercase hex digits
 * of two independent 64-bit hashes over ENG_DISKCACHE_FORMAT and the length-prefixed parts, plus NUL. */
void eng_diskcache_key(const void *const parts[], const size_t lens[], int nparts, char out[33]);

/* Look key up. On a hit returns ENG_OK with *bytes (malloc'd, freed by the caller with free;
 * non-NULL even when *n is 0) and *n, and marks the entry recently used. A missing entry, or
 * one that fails any check (magic, version, key, length, checksum, truncation; such a file is
 * removed), gives ENG_ENOTFOUND with *bytes NULL. ENG_EINVAL for a malformed key. */
eng_status eng_diskcache_get(eng_diskcache *dc, const char key[33], void **bytes, size_t *n);

/* Store bytes[0..n) under key (copied; atomically replaces an existing entry, so concurrent
 * readers and writers of the same key never see a torn file), then evicts least-recently-used
 * entries if the directory may have grown past the limit. Returns ENG_OK, or ENG_EIO (disk
 * full, permissions...) / ENG_EINVAL / ENG_ENOMEM with eng_diskcache_errmsg saying why: the caller
 * logs it and carries on without the entry. */
eng_status eng_diskcache_put(eng_diskcache *dc, const char key[33], const void *bytes, size_t n);

/* The message of the last failed put or get (static "" when none). Owned by dc. */
const char *eng_diskcache_errmsg(const eng_diskcache *dc);
/* The cache directory (owned by dc). */
const char *eng_diskcache_dir(const eng_diskcache *dc);
/* The handle's estimate of the bytes the directory's entries take. */
uint64_t eng_diskcache_size_estimate(const eng_diskcache *dc);

/* The payload checksum stored in entry headers. */
uint64_t eng_diskcache_checksum(const void *bytes, size_t n);

#endif
