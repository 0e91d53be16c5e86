/* diskcache.c: the disk cache's entries: opening the directory, checked reads, atomic writes
 * (temporary file + rename) and least-recently-used eviction by file modification time. */
#include "diskcache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define KEY_LEN	  32
#define STALE_TMP 3600 /* seconds after which a leftover temporary file is removed */
#define TMP_MARK  ".tmp."

struct eng_diskcache {
	char *dir;
	uint64_t max;	/* size limit */
	uint64_t total; /* estimate of the entries' bytes */
	char msg[512];	/* last error */
};

/* One entry file found by a scan. */
typedef struct dc_file {
	struct timespec mtime;
	uint64_t size;
	char rel[KEY_LEN + 4]; /* "xx/<key>" */
} dc_file;

static eng_status dc_fail(eng_diskcache *dc, eng_status st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static eng_status dc_fail(eng_diskcache *dc, eng_status st, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(dc->msg, sizeof(dc->msg), fmt, ap);
	va_end(ap);
	return st;
}

static bool is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

static bool key_ok(const char *key) { return is_hex(key, KEY_LEN) && key[KEY_LEN] == 0; }

static void put_le(unsigned char *p, uint64_t v, int nbytes)
{
	for (int i = 0; i < nbytes; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int nbytes)
{
	uint64_t v = 0;
	for (int i = nbytes - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void entry_path(const eng_diskcache *dc, const char *key, char path[PATH_MAX])
{
	snprintf(path, PATH_MAX, "%s/%.2s/%s", dc->dir, key, key);
}

/* mkdir -p with mode 0700. Returns 0 or -1 with errno. */
static int mkdir_p(const char *dir)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s", dir);
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = 0;
			if (mkdir(p, 0700) < 0 && errno != EEXIST)
				return -1;
			*s = '/';
		}
	return mkdir(p, 0700) < 0 && errno != EEXIST ? -1 : 0;
}

static bool read_full(int fd, void *buf, size_t n)
{
	for (char *p = buf; n;) {
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		p += r;
		n -= (size_t)r;
	}
	return true;
}

static bool write_full(int fd, const void *buf, size_t n)
{
	for (const char *p = buf; n;) {
		ssize_t r = write(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return false;
		p += r;
		n -= (size_t)r;
	}
	return true;
}

static int cmp_mtime(const void *x, const void *y)
{
	const dc_file *a = x, *b = y;
	if (a->mtime.tv_sec != b->mtime.tv_sec)
		return a->mtime.tv_sec < b->mtime.tv_sec ? -1 : 1;
	if (a->mtime.tv_nsec != b->mtime.tv_nsec)
		return a->mtime.tv_nsec < b->mtime.tv_nsec ? -1 : 1;
	return strcmp(a->rel, b->rel);
}

/* Scan one fan-out directory: entries are appended to *files (when the array can grow),
 * temporary files older than STALE_TMP are removed. Returns the entries' bytes. */
static uint64_t scan_sub(eng_diskcache *dc, const char *sub, dc_file **files, size_t *n, size_t *cap)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", dc->dir, sub);
	DIR *d = opendir(path);
	if (!d)
		return 0;
	uint64_t total = 0;
	time_t now = time(NULL);
	struct dirent *e;
	struct stat st;
	while ((e = readdir(d))) {
		bool entry = strlen(e->d_name) == KEY_LEN && is_hex(e->d_name, KEY_LEN);
		bool tmp = !entry && strstr(e->d_name, TMP_MARK);
		if ((!entry && !tmp) || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		if (tmp) {
			if (st.st_mtime < now - STALE_TMP)
				unlinkat(dirfd(d), e->d_name, 0);
			continue;
		}
		total += (uint64_t)st.st_size;
		if (*files && *n == *cap) {
			dc_file *f = realloc(*files, 2 * *cap * sizeof(*f));
			if (!f) /* without the list, eviction waits for a later scan */
				free(*files);
			*files = f;
			*cap *= 2;
		}
		if (!*files)
			continue;
		dc_file *f = &(*files)[(*n)++];
		f->mtime = st.st_mtim;
		f->size = (uint64_t)st.st_size;
		snprintf(f->rel, sizeof(f->rel), "%.2s/%.32s", sub, e->d_name);
	}
	closedir(d);
	return total;
}

/* Measure the directory (exact total), drop stale temporary files, and if it holds more than
 * the limit remove the least recently used entries until it is under 90% of it. */
static void dc_scan(eng_diskcache *dc)
{
	DIR *d = opendir(dc->dir);
	if (!d)
		return;
	dc_file *files = malloc(256 * sizeof(*files));
	size_t n = 0, cap = files ? 256 : 0;
	uint64_t total = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (strlen(e->d_name) == 2 && is_hex(e->d_name, 2))
			total += scan_sub(dc, e->d_name, &files, &n, &cap);
	closedir(d);
	if (total > dc->max && files) {
		qsort(files, n, sizeof(*files), cmp_mtime);
		uint64_t target = dc->max / 10 * 9;
		char path[PATH_MAX];
		for (size_t i = 0; i < n && total > target; i++) {
			snprintf(path, sizeof(path), "%s/%s", dc->dir, files[i].rel);
			if (unlink(path) == 0 || errno == ENOENT)
				total -= files[i].size;
		}
	}
	free(files);
	dc->total = total;
}

/* Create dir and check that files can be made in it; on failure one sentence into msg. */
static bool dir_usable(const char *dir, char *msg, size_t msglen)
{
	struct stat st;
	const char *why = mkdir_p(dir) < 0 ? strerror(errno)
			  : stat(dir, &st) < 0 || !S_ISDIR(st.st_mode) ? "it is not a directory" : NULL;
	if (why) {
		snprintf(msg, msglen, "kernel disk cache disabled: cannot create the directory %s (%s).", dir, why);
		return false;
	}
	char probe[PATH_MAX];
	snprintf(probe, sizeof(probe), "%.4000s/probe" TMP_MARK "XXXXXX", dir); /* dir is checked shorter */
	int fd = mkostemp(probe, O_CLOEXEC);
	if (fd < 0) {
		snprintf(msg, msglen, "kernel disk cache disabled: the directory %s is not writable (%s).", dir,
			 strerror(errno));
		return false;
	}
	close(fd);
	unlink(probe);
	return true;
}

eng_diskcache *eng_diskcache_open(const char *dir, uint64_t max_bytes, char *msg, size_t msglen)
{
	char def[PATH_MAX];
	if (!dir) {
		const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
		if (xdg && xdg[0] == '/')
			snprintf(def, sizeof(def), "%s/tensord", xdg);
		else if (home && *home)
			snprintf(def, sizeof(def), "%s/.cache/tensord", home);
		else {
			snprintf(msg, msglen, "kernel disk cache disabled: neither XDG_CACHE_HOME nor HOME is set.");
			return NULL;
		}
		dir = def;
	}
	/* room for "/xx/<key>.tmp.XXXXXX" below it */
	if (!*dir || strlen(dir) + 2 * KEY_LEN >= PATH_MAX) {
		snprintf(msg, msglen, "kernel disk cache disabled: the directory name '%.200s' is empty or too long.", dir);
		return NULL;
	}
	if (!dir_usable(dir, msg, msglen))
		return NULL;
	eng_diskcache *dc = calloc(1, sizeof(*dc));
	if (!dc || !(dc->dir = strdup(dir))) {
		free(dc);
		snprintf(msg, msglen, "kernel disk cache disabled: out of memory.");
		return NULL;
	}
	dc->max = max_bytes ? max_bytes : ENG_DISKCACHE_DEFAULT_MAX_BYTES;
	dc_scan(dc);
	return dc;
}

void eng_diskcache_close(eng_diskcache *dc)
{
	if (!dc)
		return;
	free(dc->dir);
	free(dc);
}

const char *eng_diskcache_errmsg(const eng_diskcache *dc) { return dc->msg; }
const char *eng_diskcache_dir(const eng_diskcache *dc) { return dc->dir; }
uint64_t eng_diskcache_size_estimate(const eng_diskcache *dc) { return dc->total; }

/* Validate the header of an entry of file_size bytes under key. */
static bool header_ok(const unsigned char *h, const char *key, uint64_t file_size)
{
	return !memcmp(h, "TSDK", 4) && get_le(h + 4, 4) == ENG_DISKCACHE_FORMAT &&
	       get_le(h + 8, 8) == file_size - ENG_DISKCACHE_HEADER_SIZE && !memcmp(h + 24, key, KEY_LEN);
}

/* Remove a bad entry, unless another process has already replaced the file we read. */
static void discard(eng_diskcache *dc, const char *path, const struct stat *read_st)
{
	struct stat now;
	if (stat(path, &now) == 0 && now.st_ino == read_st->st_ino && now.st_dev == read_st->st_dev &&
	    unlink(path) == 0)
		dc->total -= dc->total < (uint64_t)now.st_size ? dc->total : (uint64_t)now.st_size;
}

eng_status eng_diskcache_get(eng_diskcache *dc, const char key[33], void **bytes, size_t *n)
{
	*bytes = NULL;
	*n = 0;
	if (!key_ok(key))
		return dc_fail(dc, ENG_EINVAL, "disk cache: malformed key");
	char path[PATH_MAX];
	entry_path(dc, key, path);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ENG_ENOTFOUND;
	struct stat st;
	unsigned char h[ENG_DISKCACHE_HEADER_SIZE];
	void *buf = NULL;
	eng_status res = ENG_ENOTFOUND;
	bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= ENG_DISKCACHE_HEADER_SIZE &&
		  read_full(fd, h, sizeof(h)) && header_ok(h, key, (uint64_t)st.st_size);
	size_t len = ok ? (size_t)(st.st_size - ENG_DISKCACHE_HEADER_SIZE) : 0;
	if (ok && !(buf = malloc(len ? len : 1))) {
		res = dc_fail(dc, ENG_ENOMEM, "disk cache: out of memory reading %zu bytes", len);
		close(fd);
		return res;
	}
	ok = ok && read_full(fd, buf, len) && eng_diskcache_checksum(buf, len) == get_le(h + 16, 8);
	if (ok) {
		futimens(fd, NULL); /* recently used: eviction goes by modification time */
		*bytes = buf;
		*n = len;
		res = ENG_OK;
	} else {
		free(buf);
		if (fstat(fd, &st) == 0) /* st may be unset when the first fstat failed */
			discard(dc, path, &st);
	}
	close(fd);
	return res;
}

eng_status eng_diskcache_put(eng_diskcache *dc, const char key[33], const void *bytes, size_t n)
{
	if (!key_ok(key))
		return dc_fail(dc, ENG_EINVAL, "disk cache: malformed key");
	uint64_t size = (uint64_t)n + ENG_DISKCACHE_HEADER_SIZE;
	if (size > dc->max)
		return dc_fail(dc, ENG_EINVAL, "disk cache: an entry of %zu bytes exceeds the limit of %llu", n,
			       (unsigned long long)dc->max);
	char sub[PATH_MAX], tmp[PATH_MAX], path[PATH_MAX];
	snprintf(sub, sizeof(sub), "%s/%.2s", dc->dir, key);
	snprintf(tmp, sizeof(tmp), "%s/%.2s/%s" TMP_MARK "XXXXXX", dc->dir, key, key);
	entry_path(dc, key, path);
	int fd = mkdir_p(sub) < 0 ? -1 : mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return dc_fail(dc, ENG_EIO, "disk cache: cannot create a file in %s: %s", sub, strerror(errno));
	unsigned char h[ENG_DISKCACHE_HEADER_SIZE];
	memcpy(h, "TSDK", 4);
	put_le(h + 4, ENG_DISKCACHE_FORMAT, 4);
	put_le(h + 8, n, 8);
	put_le(h + 16, eng_diskcache_checksum(bytes, n), 8);
	memcpy(h + 24, key, KEY_LEN);
	bool ok = write_full(fd, h, sizeof(h)) && write_full(fd, bytes, n);
	int err = errno;
	if (close(fd) < 0 && ok) {
		ok = false;
		err = errno;
	}
	struct stat old;
	uint64_t replaced = ok && stat(path, &old) == 0 ? (uint64_t)old.st_size : 0;
	if (ok && rename(tmp, path) < 0) {
		ok = false;
		err = errno;
	}
	if (!ok) {
		unlink(tmp);
		return dc_fail(dc, ENG_EIO, "disk cache: cannot write %s: %s", path, strerror(err));
	}
	dc->total += size;
	dc->total = replaced < dc->total ? dc->total - replaced : 0;
	if (dc->total > dc->max)
		dc_scan(dc);
	return ENG_OK;
}
