/* progdisk.h: the disk layer under a device's in-memory program cache. A compiled module (e.g.
 * one shared object holding several kernels) is stored once, keyed by its bytes; each kernel
 * gets a small index entry, keyed by its source and the backend's cache_id (compiler, flags,
 * target), naming the module and its symbol. A kernel found on disk is loaded, never compiled. */
#ifndef ENG_PROGDISK_H
#define ENG_PROGDISK_H

#include "device/device.h"

/* For each i with progs[i] NULL, look srcs[i] up on disk and load what is there (kernels of
 * one module load together); progs[i] stays NULL on a miss. Returns how many were loaded.
 * Never fails: a broken or unreadable entry is a miss (and is removed by the store). */
int eng_progdisk_lookup(eng_device *dev, const char *const *srcs, const char *const *names, bk_program **progs, int n);

/* Store freshly compiled programs (their modules and index entries). Failures to write are
 * reported once per device on stderr and otherwise ignored. */
void eng_progdisk_store(eng_device *dev, const char *const *srcs, bk_program *const *progs, int n);

/* The device's disk cache (opened on first use; owned by the device), or NULL when it is off,
 * unusable, or the backend caches no programs: other records that belong with the programs
 * (the kernel search's choices) are kept there too. */
struct eng_diskcache *eng_progdisk_cache(eng_device *dev);

#endif
