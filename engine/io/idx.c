/* idx.c: loading IDX files (the MNIST and Fashion-MNIST format) as uint8 tensors (see io.h);
 * zlib's gzread reads gzip-compressed and raw files alike. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "device/device.h"
#include "realize/realize.h"
#include "tensor/tensor.h"
#include <tensord/io.h>

/* Elements an IDX file may hold (16 GiB of bytes). */
#define IDX_MAX_NUMEL ((uint64_t)1 << 34)

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

eng_tensor *eng_idx_load(eng_ctx *ctx, const char *path)
{
	if (!ctx)
		return NULL;
	if (!path || !*path) {
		eng_set_error(ctx, ENG_EINVAL, "idx: path is empty");
		return NULL;
	}
	errno = 0;
	gzFile f = gzopen(path, "rb");
	if (!f) {
		eng_set_error(ctx, ENG_EIO, "idx: %s: cannot open: %s", path,
			      errno ? strerror(errno) : "out of memory");
		return NULL;
	}
	unsigned char hdr[4 + 4 * ENG_MAX_DIMS];
	unsigned char *data = NULL;
	eng_tensor *t = NULL;
	const char *err = "";
	int64_t r = gz_read_all(f, path, hdr, 4, &err);
	if (r < 0) {
		eng_set_error(ctx, ENG_EIO, "idx: %s: cannot read: %s", path, err);
		goto out;
	}
	if (r < 4) {
		eng_set_error(ctx, ENG_EIO,
			      "idx: %s: %lld bytes, too short for the 4-byte IDX magic number",
			      path, (long long)r);
		goto out;
	}
	if (hdr[0] || hdr[1]) {
		eng_set_error(ctx, ENG_EINVAL,
			      "idx: %s: bad magic number %02x %02x %02x %02x (an IDX file starts "
			      "with two zero bytes)",
			      path, hdr[0], hdr[1], hdr[2], hdr[3]);
		goto out;
	}
	if (hdr[2] != 0x08) {
		eng_set_error(ctx, ENG_EDTYPE,
			      "idx: %s: element type 0x%02x (%s) is not supported, only 0x08 "
			      "(unsigned byte)",
			      path, hdr[2], idx_type_name(hdr[2]));
		goto out;
	}
	int ndim = hdr[3];
	if (ndim < 1 || ndim > ENG_MAX_DIMS) {
		eng_set_error(ctx, ENG_EINVAL, "idx: %s: %d dimensions (must be 1 to %d)", path,
			      ndim, ENG_MAX_DIMS);
		goto out;
	}
	r = gz_read_all(f, path, hdr + 4, 4 * (uint64_t)ndim, &err);
	if (r < 4 * ndim) {
		eng_set_error(ctx, ENG_EIO, "idx: %s: header truncated: %s", path,
			      r < 0 ? err : "fewer dimension sizes than the magic number says");
		goto out;
	}
	int64_t shape[ENG_MAX_DIMS];
	uint64_t numel = 1;
	for (int d = 0; d < ndim; d++) {
		const unsigned char *p = hdr + 4 + 4 * d;
		uint64_t v =
			(uint64_t)p[0] << 24 | (uint64_t)p[1] << 16 | (uint64_t)p[2] << 8 | p[3];
		shape[d] = (int64_t)v;
		numel = v && numel > IDX_MAX_NUMEL / v ? IDX_MAX_NUMEL + 1 : numel * v;
	}
	if (numel > IDX_MAX_NUMEL) {
		eng_set_error(ctx, ENG_ERANGE,
			      "idx: %s: dimensions describe more than 2^34 elements", path);
		goto out;
	}
	data = malloc(numel ? numel : 1);
	if (!data) {
		eng_set_error(ctx, ENG_ENOMEM, "idx: %s: out of memory for %llu bytes", path,
			      (unsigned long long)numel);
		goto out;
	}
	r = gz_read_all(f, path, data, numel, &err);
	if (r < 0) {
		eng_set_error(ctx, ENG_EIO, "idx: %s: cannot read the data: %s", path, err);
		goto out;
	}
	if ((uint64_t)r < numel) {
		const char *why = gz_short_reason(f, path);
		eng_set_error(
			ctx, ENG_EIO,
			"idx: %s: truncated: %llu data bytes missing (%lld of %llu present)%s%s",
			path, (unsigned long long)(numel - (uint64_t)r), (long long)r,
			(unsigned long long)numel, *why ? "; " : "", why);
		goto out;
	}
	unsigned char extra;
	r = gz_read_all(f, path, &extra, 1,
			&err); /* also makes zlib check the gzip trailer's CRC */
	if (r != 0) {
		if (r < 0)
			eng_set_error(ctx, ENG_EIO, "idx: %s: cannot read the data: %s", path, err);
		else
			eng_set_error(ctx, ENG_EIO,
				      "idx: %s: more data than the %llu bytes its dimensions hold",
				      path, (unsigned long long)numel);
		goto out;
	}
	if (*gz_short_reason(f, path)) { /* all data there, but the gzip trailer is cut off */
		eng_set_error(ctx, ENG_EIO, "idx: %s: truncated gzip stream: %s", path,
			      gz_short_reason(f, path));
		goto out;
	}
	t = eng_from_data(ctx, ENG_U8, ndim, shape, data);
out:
	free(data);
	gzclose(f);
	return t;
}
