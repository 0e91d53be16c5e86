/* registry.h: the backends tensord is built with, the one place that names them. The engine
 * finds a backend by the name in a device spec ("CPU", "CL:1") and opens it with the options
 * its entry (bk_backend, backend.h) declares; adding a backend is one line in registry.c. */
#ifndef BK_REGISTRY_H
#define BK_REGISTRY_H

#include "backend.h"

/* The backend named name (exact, case-sensitive), or NULL. */
const bk_backend *bk_backend_find(const char *name);
/* Why a known backend named by spec ("CUDA", "CUDA:1") is not in this build, or NULL. */
const char *bk_backend_absent(const char *spec);
/* The i-th registered backend, or NULL past the last one. */
const bk_backend *bk_backend_at(int i);

#endif
