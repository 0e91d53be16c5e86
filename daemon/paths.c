/* paths.c: files under the config's models_dir (weights, ONNX files, preload specs, saves):
 * relative paths of printable bytes, no "..", resolved so that no symbolic link leads out, and
 * messages that name the client's relative path only (never the server's absolute one). */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BAD(...) dmn_bad(err, errlen, TSD_BAD_REQUEST, __VA_ARGS__)

/* The checks on the client's text alone, and models_dir resolved into root[PATH_MAX]. */
static tsd_status check_rel(const dmn_config *cfg, const char *rel, char *root, char *err, size_t errlen)
{
	if (!cfg->models_dir[0])
		return BAD("loading files is off (the config's models_dir is empty)");
	/* first: a message may then quote rel */
	for (const unsigned char *p = (const unsigned char *)rel; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return BAD("byte %d of the path is a control character (below 0x20, or 0x7f): not allowed",
				   (int)(p - (const unsigned char *)rel));
	if (!rel[0] || rel[0] == '/')
		return BAD("\"%.200s\": a path relative to models_dir is required", rel);
	for (const char *p = rel; *p; p = strchr(p, '/') ? strchr(p, '/') + 1 : p + strlen(p))
		if (!strncmp(p, "..", 2) && (p[2] == '/' || !p[2]))
			return BAD("\"%.200s\": \"..\" is not allowed", rel);
	if (strlen(cfg->models_dir) + strlen(rel) + 2 > PATH_MAX)
		return dmn_bad(err, errlen, TSD_TOO_LARGE, "\"%.200s\": path too long", rel);
	if (!realpath(cfg->models_dir, root))
		return dmn_bad(err, errlen, TSD_INTERNAL, "the server's models_dir is unusable: %s", strerror(errno));
	return TSD_OK;
}

/* Whether real (resolved) is root or under it. */
static bool under(const char *real, const char *root)
{
	size_t rl = strlen(root);
	if (rl == 1) /* models_dir is "/" */
		return real[0] == '/';
	return !strncmp(real, root, rl) && (real[rl] == '/' || !real[rl]);
}

/* Why realpath failed for what (relative to models_dir), as a request error. */
static tsd_status resolve_error(int e, const char *what, const char *kind, char *err, size_t errlen)
{
	switch (e) {
	case ENOENT:
		return BAD("%s \"%.200s\" does not exist under models_dir", kind, what);
	case ENOTDIR:
		return BAD("\"%.200s\": a part of it is not a directory", what);
	case EACCES:
		return BAD("\"%.200s\": permission denied to the daemon", what);
	case ELOOP:
		return BAD("\"%.200s\": too many levels of symbolic links", what);
	case ENAMETOOLONG:
		return dmn_bad(err, errlen, TSD_TOO_LARGE, "\"%.200s\": path too long", what);
	default:
		return BAD("\"%.200s\": %s", what, strerror(e));
	}
}

/* rel resolved under models_dir; a directory when dir, else anything but one. */
static tsd_status resolve(const dmn_config *cfg, const char *rel, bool dir, char *out, size_t cap, char *err,
			  size_t errlen)
{
	char root[PATH_MAX], full[2 * PATH_MAX + 2], real[PATH_MAX];
	tsd_status st = check_rel(cfg, rel, root, err, errlen);
	if (st)
		return st;
	snprintf(full, sizeof(full), "%s/%s", root, rel);
	/* every component resolved: a symbolic link anywhere (a directory or the file) may point
	 * anywhere inside models_dir, never out of it */
	if (!realpath(full, real))
		return resolve_error(errno, rel, dir ? "directory" : "file", err, errlen);
	if (!under(real, root))
		return BAD("\"%.200s\" leads out of models_dir", rel);
	struct stat sb;
	if (!stat(real, &sb) && S_ISDIR(sb.st_mode) != dir)
		return BAD("\"%.200s\" is %sa directory", rel, dir ? "not " : "");
	if (strlen(real) >= cap)
		return dmn_bad(err, errlen, TSD_TOO_LARGE, "\"%.200s\": path too long", rel);
	snprintf(out, cap, "%s", real);
	return TSD_OK;
}

tsd_status dmn_models_path(const dmn_config *cfg, const char *rel, char *out, size_t cap, char *err, size_t errlen)
{
	return resolve(cfg, rel, false, out, cap, err, errlen);
}

tsd_status dmn_models_dir(const dmn_config *cfg, const char *rel, char *out, size_t cap, char *err, size_t errlen)
{
	return resolve(cfg, rel, true, out, cap, err, errlen);
}

tsd_status dmn_models_path_new(const dmn_config *cfg, const char *rel, char *out, size_t cap, char *err, size_t errlen)
{
	char root[PATH_MAX], dir[2 * PATH_MAX + 2], real[PATH_MAX], parent[PATH_MAX];
	tsd_status st = check_rel(cfg, rel, root, err, errlen);
	if (st)
		return st;
	const char *slash = strrchr(rel, '/'), *base = slash ? slash + 1 : rel;
	if (!base[0] || !strcmp(base, "."))
		return BAD("\"%.200s\": a file name is required after the last \"/\"", rel);
	/* the directory resolved (it must exist: realpath of a file not yet there fails, and a
	 * check skipped then let a symbolic link lead out), the file created inside it */
	snprintf(parent, sizeof(parent), "%.*s", slash ? (int)(slash - rel) : 0, rel);
	snprintf(dir, sizeof(dir), "%s/%s", root, parent);
	if (!realpath(dir, real))
		return resolve_error(errno, parent, "directory", err, errlen);
	if (!under(real, root))
		return BAD("\"%.200s\" leads out of models_dir", rel);
	struct stat sb;
	if (stat(real, &sb) || !S_ISDIR(sb.st_mode))
		return BAD("\"%.200s\" is not a directory", parent);
	if (faccessat(AT_FDCWD, real, W_OK | X_OK, AT_EACCESS))
		return BAD("directory \"%.200s\" is not writable by the daemon: %s", parent[0] ? parent : ".",
			   strerror(errno));
	int n = snprintf(out, cap, "%s/%s", strcmp(real, "/") ? real : "", base);
	if (n < 0 || (size_t)n >= cap)
		return dmn_bad(err, errlen, TSD_TOO_LARGE, "\"%.200s\": path too long", rel);
	/* a directory there would make the save's rename fail late, as an internal error */
	if (!lstat(out, &sb) && S_ISDIR(sb.st_mode))
		return BAD("\"%.200s\" is a directory", rel);
	return TSD_OK;
}

/* Remove every occurrence of prefix from msg (in place). */
static void cut_all(char *msg, const char *prefix)
{
	size_t n = strlen(prefix);
	if (n < 2)
		return;
	for (char *p; (p = strstr(msg, prefix));)
		memmove(p, p + n, strlen(p + n) + 1);
}

void dmn_models_scrub(const dmn_config *cfg, char *msg)
{
	if (!cfg->models_dir[0])
		return;
	char root[PATH_MAX + 1], given[PATH_MAX + 1];
	if (realpath(cfg->models_dir, root)) {
		strcat(root, "/");
		cut_all(msg, root);
	}
	snprintf(given, sizeof(given), "%s%s", cfg->models_dir,
		 cfg->models_dir[strlen(cfg->models_dir) - 1] == '/' ? "" : "/");
	cut_all(msg, given);
}
