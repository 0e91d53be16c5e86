/* util.h: the bottom layer's small helpers: error messages and JSON fields (json.c), replies
 * encoded into messages (reply.c), paths under models_dir (paths.c), and the malloc setting
 * the daemon re-executes itself for (malloc_tune.c). None knows the server. */
#ifndef DMN_UTIL_H
#define DMN_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include <nng/nng.h>

#include "config.h"
#include "message.h"

/* ---- json.c ---- */
/* A name of a model or region: 1..64 bytes of [A-Za-z0-9_.-] (s[0..n)). */
#define DMN_NAME_LEN_MAX 64
bool dmn_name_valid(const char *s, size_t n);
/* Format a message into err[errlen] and return st (the parsers' error path). */
tsd_status dmn_bad(char *err, size_t errlen, tsd_status st, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* A string field of j, or NULL (a view into j). */
const char *dmn_json_str(const cJSON *j, const char *key);
/* Whether a is a number or a non-empty array of at most max numbers; how many into *n. */
bool dmn_json_numbers(const cJSON *a, int max, int *n);
/* The name of obj's first field that is not among known[0..n), or NULL (a view into obj). */
const char *dmn_json_unknown(const cJSON *obj, const char *const *known, size_t n);

/* ---- reply.c: replies (any thread) ---- */
/* The reply to req: header {id, status, error} plus extra's fields (extra is taken; may be
 * NULL) and n tensors. A reply over max_len bytes or that cannot be encoded becomes an error
 * reply. NULL only when out of memory. */
nng_msg *dmn_reply_msg(const proto_msg *req, tsd_status st, const char *err, cJSON *extra,
		       const proto_out *ts, int n, size_t max_len);

/* ---- paths.c ---- */
/* An existing file under cfg's models_dir: rel relative, no control characters, no "..",
 * every component resolved (a symbolic link may point inside models_dir, never out), not a
 * directory. Its resolved absolute path into out[cap]; else the status and err, which names
 * rel only (never the server's absolute path). */
tsd_status dmn_models_path(const dmn_config *cfg, const char *rel, char *out, size_t cap, char *err, size_t errlen);
/* The same for a directory under models_dir (a model repository's). */
tsd_status dmn_models_dir(const dmn_config *cfg, const char *rel, char *out, size_t cap, char *err, size_t errlen);
/* The same for a file to create (model.save): its directory must exist, resolve inside
 * models_dir and be writable; the file need not exist (if it does, it is not a directory).
 * The directory's resolved path plus rel's last component into out[cap]. */
tsd_status dmn_models_path_new(const dmn_config *cfg, const char *rel, char *out, size_t cap, char *err,
			       size_t errlen);
/* Cut models_dir (as configured and resolved, with its "/") out of msg, in place: an engine
 * message about a file becomes one about its path relative to models_dir. */
void dmn_models_scrub(const dmn_config *cfg, char *msg);

/* ---- malloc_tune.c ---- */
/* Re-execute the daemon with glibc's per-thread malloc cache off, unless GLIBC_TUNABLES
 * already sets it; returns only when it need not or could not. */
void dmn_malloc_tune(char **argv);

#endif
