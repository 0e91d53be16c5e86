/* safetensors.c: saving and loading named tensors (state dicts) as safetensors files: the entry
 * points of io.h and the tensor data; the JSON header is safetensors_header.c's. */
#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "device/device.h"
#include "realize/realize.h"
#include "tensor/tensor.h"
#include <tensord/io.h>
#include "io_limits.h"
#include "safetensors_header.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "safetensors data is little-endian: this host needs byte swapping");

/* Temporary file names of saves in progress: process id, thread id and this counter, so two
 * threads (or processes) saving the same path never write the same temporary file. The one
 * process-wide mutable of this file, an atomic. */
static atomic_ulong save_seq;

typedef struct name_key {
	const char *name;
	int i;
} name_key;

static int cmp_key(const void *a, const void *b)
{
	return strcmp(((const name_key *)a)->name, ((const name_key *)b)->name);
}

/* The caller's list: names non-empty, valid UTF-8 and unique, tensors non-NULL and of ctx.
 * On success *keys (caller frees) holds the names sorted. */
static eng_status check_named(eng_ctx *ctx, const char *fn, const char *path, const eng_named *ts,
			      int n, name_key **keys)
{
	*keys = NULL;
	if (!path || !*path)
		return eng_set_error(ctx, ENG_EINVAL, "safetensors %s: path is empty", fn);
	if (n < 0 || (n > 0 && !ts))
		return eng_set_error(ctx, ENG_EINVAL, "safetensors %s: %s: %d tensors at %p", fn,
				     path, n, (const void *)ts);
	name_key *k = malloc(sizeof(*k) * (size_t)(n ? n : 1));
	if (!k)
		return eng_set_error(ctx, ENG_ENOMEM, "safetensors %s: %s: out of memory", fn,
				     path);
	eng_status st = ENG_OK;
	for (int i = 0; i < n && !st; i++) {
		const char *name = ts[i].name;
		if (!name || !*name)
			st = eng_set_error(ctx, ENG_EINVAL,
					   "safetensors %s: %s: tensor %d has an empty name", fn,
					   path, i);
		else if (!eng_safetensors_utf8_valid(name, strlen(name)) || !strcmp(name, "__metadata__"))
			st = eng_set_error(
				ctx, ENG_EINVAL,
				"safetensors %s: %s: tensor name '%.200s' is not allowed", fn, path,
				name);
		else if (!ts[i].t)
			st = eng_set_error(ctx, ENG_EINVAL,
					   "safetensors %s: %s: tensor '%.200s' is NULL", fn, path,
					   name);
		else if (ts[i].t->ctx != ctx)
			st = eng_set_error(
				ctx, ENG_EINVAL,
				"safetensors %s: %s: tensor '%.200s' belongs to another context",
				fn, path, name);
		k[i] = (name_key){name, i};
	}
	if (!st) {
		qsort(k, (size_t)n, sizeof(*k), cmp_key);
		for (int i = 1; i < n && !st; i++)
			if (!strcmp(k[i].name, k[i - 1].name))
				st = eng_set_error(
					ctx, ENG_EINVAL,
					"safetensors %s: %s: tensor name '%.200s' is used twice",
					fn, path, k[i].name);
	}
	if (st)
		free(k);
	else
		*keys = k;
	return st;
}

static bool write_all(int fd, const void *buf, size_t n)
{
	while (n) {
		ssize_t w = write(fd, buf, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		buf = (const char *)buf + w;
		n -= (size_t)w;
	}
	return true;
}

static size_t nbytes_of(const eng_tensor *t)
{
	return (size_t)eng_numel(t) * eng_dtype_size(eng_tensor_dtype(t));
}

/* Header then data of ts in the order ord, to the open file fd. */
static eng_status write_file(eng_ctx *ctx, const char *tmp, int fd, const eng_named *ts,
			     const int *ord, int n)
{
	eng_strbuf hdr;
	eng_strbuf_init(&hdr);
	eng_safetensors_header_write(&hdr, ts, ord, n);
	size_t maxbytes = 0;
	for (int i = 0; i < n; i++)
		maxbytes = nbytes_of(ts[i].t) > maxbytes ? nbytes_of(ts[i].t) : maxbytes;
	void *buf = malloc(maxbytes ? maxbytes : 1);
	eng_status st = ENG_OK;
	if (hdr.failed || !buf) {
		st = eng_set_error(ctx, ENG_ENOMEM, "safetensors save: %s: out of memory", tmp);
		goto out;
	}
	unsigned char lenb[8];
	for (int i = 0; i < 8; i++)
		lenb[i] = (unsigned char)((uint64_t)hdr.len >> (8 * i));
	if (!write_all(fd, lenb, 8) || !write_all(fd, hdr.s, hdr.len))
		goto io_fail;
	for (int k = 0; k < n; k++) {
		eng_tensor *t = ts[ord[k]].t;
		size_t nb = nbytes_of(t);
		if ((st = eng_tensor_read(t, buf, nb)))
			goto out;
		if (!write_all(fd, buf, nb))
			goto io_fail;
	}
	if (fsync(fd) < 0)
		goto io_fail;
	goto out;
io_fail:
	st = eng_set_error(ctx, ENG_EIO, "safetensors save: cannot write %s: %s", tmp,
			   strerror(errno));
out:
	free(buf);
	eng_strbuf_free(&hdr);
	return st;
}

/* Make a rename durable: fsync the directory holding path (best effort). */
static void sync_dir(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
	int fd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
	free(dir);
}

eng_status eng_safetensors_save(eng_ctx *ctx, const char *path, const eng_named *ts, int n)
{
	if (!ctx)
		return ENG_EINVAL;
	name_key *keys;
	eng_status st = check_named(ctx, "save", path, ts, n, &keys);
	if (st)
		return st;
	free(keys);
	eng_tensor **all = malloc(sizeof(*all) * (size_t)(n ? n : 1));
	int *ord = malloc(sizeof(*ord) * (size_t)(n ? n : 1));
	size_t tlen = strlen(path) + 80;
	char *tmp = malloc(tlen);
	if (!all || !ord || !tmp) {
		st = eng_set_error(ctx, ENG_ENOMEM, "safetensors save: %s: out of memory", path);
		goto out;
	}
	for (int i = 0; i < n; i++)
		all[i] = ts[i].t;
	if (n && (st = eng_realize(all, n)))
		goto out;
	/* wider elements first (stable), as the reference does, so every tensor's data is aligned
	 * to its element size */
	int m = 0;
	for (size_t sz = 8; sz >= 1; sz /= 2)
		for (int i = 0; i < n; i++)
			if (eng_dtype_size(eng_tensor_dtype(ts[i].t)) == sz)
				ord[m++] = i;
	assert(m == n);
	snprintf(tmp, tlen, "%s.tmp.%ld.%ld.%lu", path, (long)getpid(), (long)gettid(),
		 atomic_fetch_add(&save_seq, 1));
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		st = eng_set_error(ctx, ENG_EIO, "safetensors save: %s: cannot create %s: %s", path,
				   tmp, strerror(errno));
		goto out;
	}
	st = write_file(ctx, tmp, fd, ts, ord, n);
	if (close(fd) < 0 && !st)
		st = eng_set_error(ctx, ENG_EIO, "safetensors save: cannot write %s: %s", tmp,
				   strerror(errno));
	if (!st && rename(tmp, path) < 0)
		st = eng_set_error(ctx, ENG_EIO, "safetensors save: cannot rename %s to %s: %s",
				   tmp, path, strerror(errno));
	if (st)
		unlink(tmp);
	else
		sync_dir(path);
out:
	free(tmp);
	free(ord);
	free(all);
	return st;
}

/* The most bytes read per pread: data goes from the file to the device buffer through this. */
#define ST_CHUNK ((uint64_t)1 << 20)

/* One tensor's data as a new tensor in the current scope, read straight into its buffer in
 * pieces through buf (cap bytes): no host copy of the whole tensor. */
static eng_tensor *read_tensor(eng_ctx *ctx, const char *path, int fd, const eng_safetensors_header *h,
			       const eng_safetensors_entry *e, unsigned char *buf, uint64_t cap)
{
	uint64_t nb = e->end - e->begin;
	eng_tensor *t = eng_empty(ctx, e->dtype, e->ndim, e->shape); /* shape checked in the header */
	if (!t)
		return NULL;
	for (uint64_t off = 0; off < nb;) {
		size_t n = (size_t)(nb - off < cap ? nb - off : cap);
		errno = 0;
		if (eng_safetensors_pread_all(fd, buf, n, h->data_start + e->begin + off) != (ssize_t)n) {
			eng_set_error(ctx, ENG_EIO,
				      "safetensors: %s: tensor '%.200s': cannot read its data: %s", path,
				      e->name, errno ? strerror(errno) : "file shrank while reading");
			goto fail;
		}
		if (e->dtype == ENG_BOOL)
			for (size_t i = 0; i < n; i++)
				if (buf[i] > 1) {
					eng_set_error(ctx, ENG_EINVAL,
						      "safetensors: %s: tensor '%.200s': BOOL element "
						      "%llu is %u (not 0 or 1)",
						      path, e->name, (unsigned long long)(off + i), buf[i]);
					goto fail;
				}
		if (eng_buffer_write_at(t->node->buf, (size_t)off, buf, n))
			goto fail;
		off += n;
	}
	return t;
fail:
	eng_tensor_free(t);
	return NULL;
}

/* Every tensor of the file, in the header's order, into out[0..h->n); all or nothing. The
 * total is bounded by the file's size (the header checked every range) and by the loaders'
 * cap (eng_io_max_bytes), checked before anything is allocated. */
static eng_status read_all(eng_ctx *ctx, const char *path, int fd, const eng_safetensors_header *h,
			   eng_tensor **out)
{
	uint64_t maxbytes = 1, total = 0;
	for (int i = 0; i < h->n; i++) {
		uint64_t nb = h->e[i].end - h->e[i].begin;
		maxbytes = nb > maxbytes ? nb : maxbytes;
		total += nb; /* no overflow: the ranges are disjoint inside the file */
	}
	if (total > eng_io_max_bytes(ctx))
		return eng_set_error(ctx, ENG_ENOMEM,
				     "safetensors: %s: the tensors hold %llu bytes, more than the "
				     "loader's limit of %llu",
				     path, (unsigned long long)total,
				     (unsigned long long)eng_io_max_bytes(ctx));
	uint64_t cap = maxbytes < ST_CHUNK ? maxbytes : ST_CHUNK;
	unsigned char *buf = malloc((size_t)cap);
	if (!buf)
		return eng_set_error(ctx, ENG_ENOMEM, "safetensors: %s: out of memory", path);
	int i = 0;
	for (; i < h->n; i++)
		if (!(out[i] = read_tensor(ctx, path, fd, h, &h->e[i], buf, cap)))
			break;
	free(buf);
	if (i == h->n)
		return ENG_OK;
	while (i > 0)
		eng_tensor_free(out[--i]);
	return eng_error(ctx) ? eng_error(ctx) : ENG_EIO;
}

/* Open path and read its header. Returns the descriptor, or -1 with the error set. */
static int open_file(eng_ctx *ctx, const char *path, eng_safetensors_header *h)
{
	memset(h, 0, sizeof(*h));
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
	if (fd < 0) {
		eng_set_error(ctx, ENG_EIO, "safetensors: %s: cannot open: %s", path,
			      strerror(errno));
		return -1;
	}
	if (eng_safetensors_header_read(ctx, path, fd, h)) {
		close(fd);
		return -1;
	}
	return fd;
}

eng_status eng_safetensors_load(eng_ctx *ctx, const char *path, eng_named **out, int *n)
{
	if (!ctx)
		return ENG_EINVAL;
	if (!out || !n)
		return eng_set_error(ctx, ENG_EINVAL, "safetensors load: out or n is NULL");
	*out = NULL;
	*n = 0;
	if (!path || !*path)
		return eng_set_error(ctx, ENG_EINVAL, "safetensors load: path is empty");
	eng_safetensors_header h;
	int fd = open_file(ctx, path, &h);
	if (fd < 0)
		return eng_error(ctx);
	eng_named *res = calloc((size_t)(h.n ? h.n : 1), sizeof(*res));
	eng_tensor **ts = calloc((size_t)(h.n ? h.n : 1), sizeof(*ts));
	eng_status st;
	if (!res || !ts)
		st = eng_set_error(ctx, ENG_ENOMEM, "safetensors: %s: out of memory", path);
	else
		st = read_all(ctx, path, fd, &h, ts);
	close(fd);
	if (!st) {
		for (int i = 0; i < h.n; i++) {
			res[i].name = h.e[i].name; /* moved out of the header */
			h.e[i].name = NULL;
			res[i].t = ts[i];
		}
		*out = h.n ? res : NULL;
		*n = h.n;
		if (!h.n)
			free(res);
	} else {
		free(res);
	}
	free(ts);
	eng_safetensors_header_free(&h);
	return st;
}

void eng_named_free(eng_named *ts, int n)
{
	for (int i = 0; ts && i < n; i++)
		free((char *)ts[i].name);
	free(ts);
}

/* Append one mismatch to msg ("; "-separated, elided past ~3000 characters) and count it. */
static void note(eng_strbuf *msg, int *bad, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void note(eng_strbuf *msg, int *bad, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (msg->len < 3000) {
		eng_strbuf_puts(msg, *bad ? "; " : "");
		eng_strbuf_puts(msg, line);
	} else if (strcmp(msg->s + msg->len - 3, "...")) {
		eng_strbuf_puts(msg, "; ...");
	}
	(*bad)++;
}

/* Compare the model (keys: its names sorted) with the file; every mismatch goes into msg.
 * src[i] receives the entry index for ts[i]. Returns the number of mismatches. */
static int match(const eng_named *ts, const name_key *keys, int n, const eng_safetensors_header *h, int *src,
		 eng_strbuf *msg)
{
	int bad = 0, i = 0, j = 0;
	char fs[160], ms[160];
	while (i < n || j < h->n) {
		const eng_safetensors_entry *e = j < h->n ? &h->e[h->by_name[j]] : NULL;
		int c = i >= n ? 1 : !e ? -1 : strcmp(keys[i].name, e->name);
		if (c < 0) {
			note(msg, &bad, "'%.200s' missing in the file", keys[i].name);
			i++;
			continue;
		}
		if (c > 0) {
			note(msg, &bad, "'%.200s' in the file is not in the model", e->name);
			j++;
			continue;
		}
		const eng_tensor *t = ts[keys[i].i].t;
		src[keys[i].i] = h->by_name[j];
		if (eng_tensor_dtype(t) != e->dtype)
			note(msg, &bad, "'%.200s': dtype %s in the file, %s in the model", e->name,
			     eng_safetensors_dtype_name(e->dtype), eng_safetensors_dtype_name(eng_tensor_dtype(t)));
		if (eng_ndim(t) != e->ndim ||
		    memcmp(eng_shape(t), e->shape, sizeof(int64_t) * (size_t)e->ndim)) {
			eng_safetensors_fmt_shape(fs, sizeof(fs), e->ndim, e->shape);
			eng_safetensors_fmt_shape(ms, sizeof(ms), eng_ndim(t), eng_shape(t));
			note(msg, &bad, "'%.200s': shape %s in the file, %s in the model", e->name,
			     fs, ms);
		}
		i++;
		j++;
	}
	return bad;
}

eng_status eng_safetensors_load_into(eng_ctx *ctx, const char *path, const eng_named *ts, int n)
{
	if (!ctx)
		return ENG_EINVAL;
	name_key *keys;
	eng_status st = check_named(ctx, "load_into", path, ts, n, &keys);
	if (st)
		return st;
	eng_safetensors_header h;
	int fd = open_file(ctx, path, &h);
	if (fd < 0) {
		free(keys);
		return eng_error(ctx);
	}
	int *src = malloc(sizeof(*src) * (size_t)(n ? n : 1));
	eng_tensor **loaded = calloc((size_t)(h.n ? h.n : 1), sizeof(*loaded));
	eng_strbuf msg;
	eng_strbuf_init(&msg);
	if (!src || !loaded) {
		st = eng_set_error(ctx, ENG_ENOMEM, "safetensors: %s: out of memory", path);
		goto out;
	}
	int nbad = match(ts, keys, n, &h, src, &msg);
	if (nbad) {
		st = eng_set_error(
			ctx, ENG_EINVAL,
			"safetensors: %s: %d mismatch%s between the file and the model: %s", path,
			nbad, nbad == 1 ? "" : "es", msg.s ? msg.s : "");
		goto out;
	}
	if ((st = read_all(ctx, path, fd, &h, loaded)))
		goto out;
	/* every name matched: h.n == n and src is a bijection; give each target the loaded node */
	for (int i = 0; i < n; i++) {
		eng_tensor *tmp = loaded[src[i]];
		eng_node *old = ts[i].t->node;
		ts[i].t->node = tmp->node;
		tmp->node = old;
		eng_tensor_free(tmp); /* drops the target's old node */
	}
out:
	close(fd);
	eng_strbuf_free(&msg);
	free(loaded);
	free(src);
	free(keys);
	eng_safetensors_header_free(&h);
	return st;
}
