/* config.h: the daemon's configuration: one table of keys (config.def) from which the defaults,
 * the config file parser, command-line flags, --help and the JSON dump all follow. */
#ifndef DMN_CONFIG_H
#define DMN_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DMN_VERSION	 "0.1.0"
#define DMN_CFG_LIST_MAX 256	    /* elements in one list key */
#define DMN_CFG_FILE_MAX (1u << 20) /* bytes in a config file */
#define DMN_IPC_PATH_MAX 107	    /* a Unix socket path: sun_path less its NUL */

/* Every function returns one of these, with a message in err naming where and why. */
typedef enum dmn_cfg_status {
	DMN_CFG_OK,
	DMN_CFG_EIO,	/* the file cannot be read (or is too large) */
	DMN_CFG_EPARSE, /* malformed JSON, or not an object */
	DMN_CFG_EKEY,	/* unknown key (the message names the nearest known one), or a duplicate */
	DMN_CFG_ETYPE,	/* a value (or a list element) of the wrong type */
	DMN_CFG_ERANGE, /* a number, length or list size outside the key's bounds */
	DMN_CFG_EINVALID, /* a value wrong by itself (address, path) or with another key */
	DMN_CFG_EUSAGE,	  /* a bad command line */
	DMN_CFG_ENOMEM,
	DMN_CFG_STATUS_COUNT
} dmn_cfg_status;

typedef enum dmn_cfg_type {
	DMN_CFG_STR,
	DMN_CFG_INT,
	DMN_CFG_U64,
	DMN_CFG_BOOL,
	DMN_CFG_DBL,
	DMN_CFG_ENUM,
	DMN_CFG_STR_LIST,
	DMN_CFG_INT_LIST,
	DMN_CFG_TYPE_COUNT
} dmn_cfg_type;

/* log_level's values, in the order of its choices in config.def. */
enum { DMN_LOG_ERROR, DMN_LOG_WARN, DMN_LOG_INFO, DMN_LOG_DEBUG };
/* repository's values, likewise. */
enum { DMN_REPO_OFF, DMN_REPO_ALL, DMN_REPO_EXPLICIT };

typedef struct dmn_strlist {
	int n;
	char **v; /* n strings, owned by the list */
} dmn_strlist;

typedef struct dmn_intlist {
	int n;
	int64_t *v; /* owned by the list */
} dmn_intlist;

#define DMN_CFG_CTYPE_STR      char *
#define DMN_CFG_CTYPE_INT      int64_t
#define DMN_CFG_CTYPE_U64      uint64_t
#define DMN_CFG_CTYPE_BOOL     bool
#define DMN_CFG_CTYPE_DBL      double
#define DMN_CFG_CTYPE_ENUM     int /* index into the key's choices */
#define DMN_CFG_CTYPE_STR_LIST dmn_strlist
#define DMN_CFG_CTYPE_INT_LIST dmn_intlist

/* The configuration: one field per key of config.def, named as the key. It owns its strings
 * and lists (never NULL once defaults are set; an empty string means "not set"). */
typedef struct dmn_config {
#define DMN_CFG(key, type, lo, hi, choices, def, doc) DMN_CFG_CTYPE_##type key;
#include "config.def"
#undef DMN_CFG
} dmn_config;

/* One key of the table. */
typedef struct dmn_cfg_key {
	const char *name;
	dmn_cfg_type type;
	double lo, hi;	     /* bounds (config.def says what they bound per type) */
	const char *choices; /* ENUM only: "a|b|c" */
	const char *def;     /* the default as JSON text */
	const char *doc;
	size_t offset; /* of the field in dmn_config */
} dmn_cfg_key;

extern const dmn_cfg_key dmn_cfg_keys[];
extern const int dmn_cfg_nkeys;

/* What the load takes from the process's environment, passed explicitly so that tests (and
 * threads) never need setenv. xdg_runtime_dir may be NULL (unset); it is borrowed. */
typedef struct dmn_env {
	const char *xdg_runtime_dir;
	uint32_t uid;
} dmn_env;

/* The current process's: getenv("XDG_RUNTIME_DIR") and getuid(). */
void dmn_env_current(dmn_env *env);

/* The daemon's runtime directory: xdg_runtime_dir + "/tensord" when it is set and absolute
 * (the XDG spec says to ignore a relative one), else "/run/tensord". DMN_CFG_ERANGE if it does
 * not fit in cap bytes. */
dmn_cfg_status dmn_runtime_dir(const char *xdg_runtime_dir, char *out, size_t cap);

/* Whether url (scheme://HOST:PORT, as config_check accepts it) has a loopback host
 * (127.0.0.0/8, ::1, localhost); false for anything else or unparsable. */
bool dmn_cfg_url_loopback(const char *url);
/* scheme://HOST:PORT split: HOST without an IPv6 address's brackets; false when url is not of
 * that form. */
bool dmn_cfg_url_hostport(const char *url, char *host, size_t hcap, char *port, size_t pcap);

const char *dmn_cfg_type_name(dmn_cfg_type type);  /* "string", "int", ... */
const dmn_cfg_key *dmn_cfg_find(const char *name); /* NULL if no such key */
/* The config files' one way to fail: the message (printf format) into err[errlen] (either may
 * be 0), returning st. */
dmn_cfg_status dmn_cfg_fail(char *err, size_t errlen, dmn_cfg_status st, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* The known key closest to name (edit distance), for "did you mean". Never NULL. */
const dmn_cfg_key *dmn_cfg_nearest(const char *name);

/* Set every key to its default. cfg's old contents are overwritten, not freed: pass fresh
 * (even uninitialised) memory or a config already freed. On failure cfg is left zeroed. */
dmn_cfg_status dmn_config_defaults(dmn_config *cfg, char *err, size_t errlen);
/* Release what cfg owns and zero it. Safe on a zeroed or already freed cfg. */
void dmn_config_free(dmn_config *cfg);

/* Apply the JSON object in text[0..len) over cfg: unknown keys, duplicates, wrong types and
 * values out of bounds are rejected, and then cfg is unchanged. origin names the text in
 * messages (a path). text need not be NUL-terminated; it is not kept. */
dmn_cfg_status dmn_config_apply_json(dmn_config *cfg, const char *text, size_t len,
				     const char *origin, char *err, size_t errlen);
/* Threads: cJSON's parser writes a process-wide error position, so a parse must not run while
 * another thread parses JSON (the engine's safetensors loader serialises its own parses with a
 * private mutex). Load configs before the executors start, or on a reload under a lock the
 * server shares with model loading. */
/* The same for the file at path (a regular file of at most DMN_CFG_FILE_MAX bytes). */
dmn_cfg_status dmn_config_apply_file(dmn_config *cfg, const char *path, char *err, size_t errlen);
/* Set one key from a command-line value: a string as is; numbers and bools as JSON; a list as
 * a JSON array or comma-separated elements ("1,2,4", "ipc:///a,ipc:///b"; "" is empty). */
dmn_cfg_status dmn_config_set(dmn_config *cfg, const char *key, const char *value, char *err,
			      size_t errlen);

/* After the file and flags: replace ${RUNTIME_DIR}, fill allowed_uids with env's uid when
 * empty, and check what needs several keys or a whole value (addresses, paths, buckets against
 * batch_max). Call once on a config; on failure cfg is unchanged except for the expansion. */
dmn_cfg_status dmn_config_finish(dmn_config *cfg, const dmn_env *env, char *err, size_t errlen);

/* The config as a JSON object, keys in table order, formatted (fmt) or on one line. Returns a
 * string the caller frees with free(), or NULL when out of memory. */
char *dmn_config_json(const dmn_config *cfg, bool fmt);

/* ---- command line (config_cli.c) ---- */

typedef struct dmn_cli {
	const char *config_path; /* --config PATH (borrowed from argv), or NULL */
	bool help, version, check_config;
} dmn_cli;

/* The whole startup sequence: defaults, then the --config file, then every --key value flag in
 * order, then dmn_config_finish with env. --help and --version stop before any loading (cfg
 * then holds the defaults). The result is cfg's to free in every case. */
dmn_cfg_status dmn_config_from_args(dmn_config *cfg, dmn_cli *cli, int argc, char *const *argv,
				    const dmn_env *env, char *err, size_t errlen);

/* The --help text, generated from the table: usage, then every key with its type, default,
 * bounds and description. The caller frees it with free(); NULL when out of memory. */
char *dmn_config_help(const char *prog);

#endif
