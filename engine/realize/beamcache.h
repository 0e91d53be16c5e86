/* beamcache.h: the choices the kernel search (beam.c) found, per device: in memory, so a process
 * searches a kernel once, and in the disk cache, so a machine searches it once, ever. */
#ifndef ENG_BEAMCACHE_H
#define ENG_BEAMCACHE_H

#include "codegen/choice.h"
#include "device/device.h"

/* Version of the disk record below; part of every key and record: bumping it makes old records
 * unreachable (they age out through the disk cache's eviction). */
#define ENG_BEAM_FORMAT 2

/* Disk record (little-endian), the payload of a disk cache entry:
 *   0  "TSDB"   magic
 *   4  u32      ENG_BEAM_FORMAT
 *   8  u64      eng_hash_str of the machine's identity (eng_beamcache_machine)
 *   16 u64      eng_hash_str of the kernel's source under the default heuristics
 *   24 i32 x2   tiledim[0], tiledim[1]
 *   32 i64 x4   tile[0], tile[1], kblock, mblock
 *   64 i32 x2   pack (a buffer index, -1: none), group
 *   72 i64      mrows
 *   80 i32 x2   rpack (a buffer index, -1: none), 0 */
#define ENG_BEAM_RECORD_SIZE 88

typedef struct eng_beamcache eng_beamcache;

/* A device's memory cache of choices; NULL on ENOMEM. Freed with eng_beamcache_destroy. */
eng_beamcache *eng_beamcache_create(void);
void eng_beamcache_destroy(eng_beamcache *bc);

/* What identifies the machine and device a choice was timed on: backend, device name, the
 * backend's cache_id (compiler and version, flags, CPU model or OpenCL platform and driver) and
 * the target facts. Into out (len bytes; truncated past it). */
void eng_beamcache_machine(eng_device *dev, char *out, size_t len);

/* The choice recorded for the kernel rendered as src (under the default heuristics) on dev:
 * from memory, else from disk (which then joins memory). false when there is none, or the disk
 * record is not one of this format, machine and kernel (a corrupt entry never gets here: the
 * disk cache checks lengths and checksums and drops it). */
bool eng_beamcache_get(eng_device *dev, const char *src, eng_kernel_choice *out);
/* Record c for src in memory and, where dev has a disk cache, on disk (failures to write are
 * ignored: the search runs again next time). */
void eng_beamcache_put(eng_device *dev, const char *src, const eng_kernel_choice *c);
/* Drop src's record from memory (a choice that no longer lowers; the disk one is replaced by the
 * next put). */
void eng_beamcache_forget(eng_device *dev, const char *src);

/* The disk record of choice c for kernel hash kh on machine hash mh, and back: decode checks
 * the length, magic, format and both hashes. For tests, which plant stale records. */
void eng_beam_encode(uint64_t mh, uint64_t kh, const eng_kernel_choice *c,
		     unsigned char out[ENG_BEAM_RECORD_SIZE]);
bool eng_beam_decode(const void *bytes, size_t n, uint64_t mh, uint64_t kh, eng_kernel_choice *c);

#endif
