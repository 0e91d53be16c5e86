/* idx.c: loading IDX files (the MNIST and Fashion-MNIST format) as uint8 tensors (see io.h);
 * zlib's gzread reads gzip-compressed and raw files alike. Files are untrusted input. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "device/device.h"
#include "tensor/tensor.h"
#include <tensord/io.h>
#include "io_limits.h"

/* The most bytes moved per read: data goes from zlib to the device buffer through this. */
#define IDX_CHUNK ((uint64_t)1 << 20)
/* A gzip stream's length is unknown until it is read: the tensor's buffer is allocated once
 * 1/IDX_STAGE of the data has actually been decompressed (into a staging buffer that grows
 * with it), so a small file cannot make the loader allocate more than IDX_STAGE times the
 * data it really holds, and the peak stays near (1 + 1/IDX_STAGE) times the tensor. */
#define IDX_STAGE 8

static const char *idx_type_name(unsigned t)
{
	switch (t) {
	case 0x08:
		return "unsigned byte";
	case 0x09:
		return "signed byte";
	case 0x0b:
		return "short";
	case 0x0c:
		return "int";
	case 0x0d:
		return "float";
	case 0x0e:
		return "double";
	default:
		return "unknown";
	}
}

/* zlib's message without the "path: " it starts with. */
static const char *gz_msg(const char *m, const char *path)
{
	size_t n = strlen(path);
	return !strncmp(m, path, n) && !strncmp(m + n, ": ", 2) ? m + n + 2 : m;
}

/* Read up to n bytes: the count read (short only at the end of the data), or -1 on an error
 * (*err receives errno or zlib's message). */
static int64_t gz_read_all(gzFile f, const char *path, void *buf, uint64_t n, const char **err)
{
	uint64_t got = 0;
	while (got < n) {
		unsigned chunk = n - got > (1u << 30) ? 1u << 30 : (unsigned)(n - got);
		errno = 0;
		int r = gzread(f, (char *)buf + got, chunk);
		if (r < 0) {
			int zerr;
			const char *m = gzerror(f, &zerr);
			*err = zerr == Z_ERRNO ? strerror(errno) : gz_msg(m, path);
			return -1;
		}
		if (r == 0)
			break;
		got += (uint64_t)r;
	}
	return (int64_t)got;
}

/* zlib's note on why a read came up short (a truncated gzip stream), or "". */
static const char *gz_short_reason(gzFile f, const char *path)
{
	int zerr;
	const char *m = gzerror(f, &zerr);
	return zerr != Z_OK && m && *m ? gz_msg(m, path) : "";
}

static void truncated(eng_ctx *ctx, gzFile f, const char *path, uint64_t got, uint64_t numel)
{
	const char *why = f ? gz_short_reason(f, path) : "";
	eng_set_error(ctx, ENG_EIO,
		      "idx: %s: truncated: %llu data bytes missing (%llu of %llu present)%s%s", path,
		      (unsigned long long)(numel - got), (unsigned long long)got,
		      (unsigned long long)numel, *why ? "; " : "", why);
}

/* One open file: the magic number and dimensions read and checked. */
typedef struct idx_file {
	eng_ctx *ctx;
	const char *path;
	gzFile f;
	uint64_t size; /* of the file on disk */
	int ndim;
	int64_t shape[ENG_MAX_DIMS];
	uint64_t numel;
} idx_file;

/* Open path (a regular file only: a FIFO or device could block or never end) for gzread. */
static eng_status idx_open(idx_file *x)
{
	/* O_NONBLOCK: opening a FIFO without a writer would otherwise wait for one */
	int fd = open(x->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return eng_set_error(x->ctx, ENG_EIO, "idx: %s: cannot open: %s", x->path,
				     strerror(errno));
	struct stat sb;
	eng_status st = ENG_OK;
	if (fstat(fd, &sb) < 0)
		st = eng_set_error(x->ctx, ENG_EIO, "idx: %s: cannot stat: %s", x->path,
				   strerror(errno));
	else if (!S_ISREG(sb.st_mode))
		st = eng_set_error(x->ctx, ENG_EIO,
				   "idx: %s: not a regular file (a FIFO, device or directory)",
				   x->path);
	if (st) {
		close(fd);
		return st;
	}
	x->size = (uint64_t)sb.st_size;
	if (!(x->f = gzdopen(fd, "rb"))) {
		close(fd);
		return eng_set_error(x->ctx, ENG_ENOMEM, "idx: %s: out of memory", x->path);
	}
	return ENG_OK;
}

/* Read and check the magic number and dimensions, up to max_bytes of data. */
static eng_status idx_header(idx_file *x, uint64_t max_bytes)
{
	eng_ctx *ctx = x->ctx;
	const char *path = x->path, *err = "";
	unsigned char hdr[4 + 4 * ENG_MAX_DIMS];
	int64_t r = gz_read_all(x->f, path, hdr, 4, &err);
	if (r < 0)
		return eng_set_error(ctx, ENG_EIO, "idx: %s: cannot read: %s", path, err);
	if (r < 4)
		return eng_set_error(ctx, ENG_EIO,
				     "idx: %s: %lld bytes, too short for the 4-byte IDX magic number",
				     path, (long long)r);
	if (hdr[0] || hdr[1])
		return eng_set_error(ctx, ENG_EINVAL,
				     "idx: %s: bad magic number %02x %02x %02x %02x (an IDX file "
				     "starts with two zero bytes)",
				     path, hdr[0], hdr[1], hdr[2], hdr[3]);
	if (hdr[2] != 0x08)
		return eng_set_error(ctx, ENG_EDTYPE,
				     "idx: %s: element type 0x%02x (%s) is not supported, only 0x08 "
				     "(unsigned byte)",
				     path, hdr[2], idx_type_name(hdr[2]));
	x->ndim = hdr[3];
	if (x->ndim < 1 || x->ndim > ENG_MAX_DIMS)
		return eng_set_error(ctx, ENG_EINVAL, "idx: %s: %d dimensions (must be 1 to %d)",
				     path, x->ndim, ENG_MAX_DIMS);
	r = gz_read_all(x->f, path, hdr + 4, 4 * (uint64_t)x->ndim, &err);
	if (r < 4 * x->ndim)
		return eng_set_error(ctx, ENG_EIO, "idx: %s: header truncated: %s", path,
				     r < 0 ? err
					   : "fewer dimension sizes than the magic number says");
	char dims[160];
	size_t used = 0;
	for (int d = 0; d < x->ndim; d++) {
		const unsigned char *p = hdr + 4 + 4 * d;
		x->shape[d] = (int64_t)((uint64_t)p[0] << 24 | (uint64_t)p[1] << 16 |
					(uint64_t)p[2] << 8 | p[3]);
		used += (size_t)snprintf(dims + used, sizeof(dims) - used, "%s%lld", d ? ", " : "",
					 (long long)x->shape[d]);
	}
	/* the engine's own shape rule, checked here so the message names the file */
	int64_t numel;
	if (!eng_shape_numel(x->ndim, x->shape, &numel))
		return eng_set_error(ctx, ENG_ERANGE,
				     "idx: %s: dimensions [%s] describe too many elements (the "
				     "non-zero ones may multiply to at most 2^40)",
				     path, dims);
	x->numel = (uint64_t)numel;
	if (x->numel > max_bytes)
		return eng_set_error(ctx, ENG_ENOMEM,
				     "idx: %s: dimensions [%s] describe %llu bytes, more than the "
				     "loader's limit of %llu",
				     path, dims, (unsigned long long)x->numel,
				     (unsigned long long)max_bytes);
	/* a raw file's data is all on disk: check its length before allocating for it */
	if (gzdirect(x->f)) {
		uint64_t hbytes = 4 + 4 * (uint64_t)x->ndim;
		uint64_t present = x->size > hbytes ? x->size - hbytes : 0;
		if (present < x->numel) {
			truncated(ctx, NULL, path, present, x->numel);
			return ENG_EIO;
		}
		if (present > x->numel)
			return eng_set_error(ctx, ENG_EIO,
					     "idx: %s: more data than the %llu bytes its dimensions "
					     "hold",
					     path, (unsigned long long)x->numel);
	}
	return ENG_OK;
}

/* Grow *buf (of *cap bytes) to want bytes. */
static bool grow(unsigned char **buf, uint64_t *cap, uint64_t want)
{
	if (want <= *cap)
		return true;
	unsigned char *p = realloc(*buf, (size_t)want);
	if (!p)
		return false;
	*buf = p;
	*cap = want;
	return true;
}

/* The data, read into a new tensor's buffer (raw files at once; gzip after 1/IDX_STAGE has
 * arrived), then the check that nothing follows it. */
static eng_tensor *idx_data(idx_file *x)
{
	eng_ctx *ctx = x->ctx;
	const char *path = x->path, *err = "";
	uint64_t numel = x->numel, stage = gzdirect(x->f) ? 0 : numel / IDX_STAGE;
	uint64_t got = 0, cap = 0;
	unsigned char *buf = NULL;
	eng_tensor *t = NULL;
	while (got < stage) { /* staging: grows with the data, doubling from 64 KiB */
		uint64_t want = cap ? 2 * cap : (uint64_t)1 << 16;
		if (!grow(&buf, &cap, want < stage ? want : stage))
			goto oom;
		int64_t r = gz_read_all(x->f, path, buf + got, cap - got, &err);
		if (r < 0)
			goto read_fail;
		bool short_read = (uint64_t)r < cap - got;
		got += (uint64_t)r;
		if (short_read) {
			truncated(ctx, x->f, path, got, numel);
			goto fail;
		}
	}
	if (!(t = eng_empty(ctx, ENG_U8, x->ndim, x->shape)))
		goto fail;
	eng_buffer *b = t->node->buf;
	if (got && eng_buffer_write_at(b, 0, buf, (size_t)got))
		goto fail;
	uint64_t chunk = numel - got < IDX_CHUNK ? numel - got : IDX_CHUNK;
	if (cap > IDX_CHUNK) { /* the staging buffer has served: keep a chunk's worth */
		unsigned char *p = realloc(buf, (size_t)IDX_CHUNK);
		buf = p ? p : buf;
		cap = p ? IDX_CHUNK : cap;
	}
	if (!grow(&buf, &cap, chunk ? chunk : 1))
		goto oom;
	while (got < numel) {
		uint64_t want = numel - got < cap ? numel - got : cap;
		int64_t r = gz_read_all(x->f, path, buf, want, &err);
		if (r < 0)
			goto read_fail;
		if (r && eng_buffer_write_at(b, (size_t)got, buf, (size_t)r))
			goto fail;
		got += (uint64_t)r;
		if ((uint64_t)r < want) {
			truncated(ctx, x->f, path, got, numel);
			goto fail;
		}
	}
	int64_t r = gz_read_all(x->f, path, buf, 1, &err); /* also checks the gzip trailer's CRC */
	if (r < 0)
		goto read_fail;
	if (r) {
		eng_set_error(ctx, ENG_EIO, "idx: %s: more data than the %llu bytes its dimensions hold",
			      path, (unsigned long long)numel);
		goto fail;
	}
	if (*gz_short_reason(x->f, path)) { /* all data there, but the gzip trailer is cut off */
		eng_set_error(ctx, ENG_EIO, "idx: %s: truncated gzip stream: %s", path,
			      gz_short_reason(x->f, path));
		goto fail;
	}
	free(buf);
	return t;
oom:
	eng_set_error(ctx, ENG_ENOMEM, "idx: %s: out of memory", path);
	goto fail;
read_fail:
	eng_set_error(ctx, ENG_EIO, "idx: %s: cannot read the data: %s", path, err);
fail:
	free(buf);
	eng_tensor_free(t);
	return NULL;
}

eng_tensor *eng_idx_load_max(eng_ctx *ctx, const char *path, uint64_t max_bytes)
{
	if (!ctx)
		return NULL;
	if (!path || !*path) {
		eng_set_error(ctx, ENG_EINVAL, "idx: path is empty");
		return NULL;
	}
	idx_file x = {.ctx = ctx, .path = path};
	if (idx_open(&x))
		return NULL;
	eng_tensor *t = idx_header(&x, max_bytes) ? NULL : idx_data(&x);
	gzclose(x.f);
	return t;
}

eng_tensor *eng_idx_load(eng_ctx *ctx, const char *path)
{
	return eng_idx_load_max(ctx, path, eng_io_max_bytes(ctx));
}
