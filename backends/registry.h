/* registry.h: the backends tensord is built with, the one place that names them. The engine
 * finds a backend by the name in a device spec ("CPU", "CL:1") and opens it with the options
 * its table entry declares; adding a backend is one line in registry.c. */
#ifndef BK_REGISTRY_H
#define BK_REGISTRY_H

#include <stdbool.h>

#include "backend.h"

/* One option a backend takes: its key, the environment variable that sets it when the context
 * does not (NULL: none), and a line of help. */
typedef struct bk_option_spec {
	const char *key, *env, *help;
} bk_option_spec;

typedef struct bk_backend {
	const char *name; /* the device name: "CPU", "CL" */
	bool bare_zero;   /* device 0 is called NAME (the host CPU), not NAME:0 */
	/* Open device number ordinal with opts (keys from options only); debug >= 2 times
	 * launches. On success *out is a device freed with out->ops->destroy. ENG_ENOTFOUND: no
	 * such device (or the driver is absent), with a message. */
	eng_status (*open)(int ordinal, const bk_opts *opts, int debug, bk_device *out, bk_err *err);
	/* One line per device, "NAME[:i] description", into out (truncated to len, NUL-terminated);
	 * *ndevices (may be NULL) gets the count. ENG_ENOTFOUND when there is none. */
	eng_status (*list)(char *out, size_t len, int *ndevices, bk_err *err);
	const bk_option_spec *options; /* terminated by a NULL key */
} bk_backend;

/* The backend named name (exact, case-sensitive), or NULL. */
const bk_backend *bk_backend_find(const char *name);
/* Why a known backend named by spec ("CUDA", "CUDA:1") is not in this build, or NULL. */
const char *bk_backend_absent(const char *spec);
/* The i-th registered backend, or NULL past the last one. */
const bk_backend *bk_backend_at(int i);

#endif
