/* tensorctl_npy.c: NumPy .npy files (format 1.0-3.0, C order, little-endian) read into and
 * written from tensors: infer's and realize's inputs and outputs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorctl.h"

static const struct {
	const char *descr;
	tsd_dtype dt;
} npy_types[] = {
	{"|b1", TSD_BOOL}, {"|u1", TSD_U8},  {"<i4", TSD_I32},
	{"<i8", TSD_I64},  {"<f2", TSD_F16}, {"<f4", TSD_F32},
};

#define FAIL(...) (snprintf(err, errlen, __VA_ARGS__), false)

/* The value text after 'key': in the header dict, or NULL. */
static const char *dict_value(const char *h, const char *key)
{
	char q[32];
	snprintf(q, sizeof(q), "'%s'", key);
	const char *p = strstr(h, q);
	if (!p)
		return NULL;
	p += strlen(q);
	while (*p == ' ' || *p == ':')
		p++;
	return p;
}

/* The header dict h parsed into t's dtype and shape. */
static bool parse_header(const char *h, tsd_tensor *t, const char *path, char *err, size_t errlen)
{
	const char *d = dict_value(h, "descr"), *f = dict_value(h, "fortran_order"),
		   *s = dict_value(h, "shape");
	if (!d || !f || !s || (*d != '\'' && *d != '"'))
		return FAIL("%s: not a .npy header (descr, fortran_order, shape)", path);
	if (strncmp(f, "False", 5))
		return FAIL("%s: Fortran order is not supported (save C order)", path);
	size_t k = 0;
	for (; k < sizeof(npy_types) / sizeof(npy_types[0]); k++) {
		const char *want = npy_types[k].descr;
		size_t n = strlen(want);
		/* |b1 and |u1 may also be written <b1 / <u1 */
		if ((!strncmp(d + 1, want, n) || (want[0] == '|' && (d[1] == '<' || d[1] == '=') &&
						  !strncmp(d + 2, want + 1, n - 1))) &&
		    d[n + 1] == *d)
			break;
	}
	if (k == sizeof(npy_types) / sizeof(npy_types[0]))
		return FAIL("%s: dtype %.8s is not one of bool, uint8, <i4, <i8, <f2, <f4", path,
			    d);
	t->dtype = npy_types[k].dt;
	if (*s != '(')
		return FAIL("%s: bad shape", path);
	t->ndim = 0;
	for (s++;;) {
		while (*s == ' ' || *s == ',')
			s++;
		if (*s == ')')
			break;
		char *e;
		long long v = strtoll(s, &e, 10);
		if (e == s || v < 0 || t->ndim == TSD_MAX_DIMS)
			return FAIL("%s: bad shape (at most %d sizes)", path, TSD_MAX_DIMS);
		t->shape[t->ndim++] = v;
		s = e;
		while (*s == 'L')
			s++;
	}
	return true;
}

bool tctl_npy_read(const char *path, tsd_tensor *t, char *err, size_t errlen)
{
	size_t len;
	char *buf = tctl_read_file(path, &len, err, errlen);
	memset(t, 0, sizeof(*t));
	if (!buf)
		return false;
	size_t hl, off;
	if (len < 10 || memcmp(buf, "\x93NUMPY", 6)) {
		free(buf);
		return FAIL("%s: not a .npy file", path);
	}
	uint8_t *u = (uint8_t *)buf;
	if (u[6] == 1) {
		hl = u[8] | (size_t)u[9] << 8;
		off = 10;
	} else if ((u[6] == 2 || u[6] == 3) && len >= 12) {
		hl = u[8] | (size_t)u[9] << 8 | (size_t)u[10] << 16 | (size_t)u[11] << 24;
		off = 12;
	} else {
		int v = u[6];
		free(buf);
		return FAIL("%s: .npy format %d is not supported", path, v);
	}
	if (hl > len - off) {
		free(buf);
		return FAIL("%s: truncated header", path);
	}
	char *h = malloc(hl + 1);
	if (!h) {
		free(buf);
		return FAIL("out of memory");
	}
	memcpy(h, buf + off, hl);
	h[hl] = '\0';
	bool ok = parse_header(h, t, path, err, errlen);
	free(h);
	size_t numel = 1;
	for (int d = 0; ok && d < t->ndim; d++) {
		if (t->shape[d] && numel > ((size_t)1 << 40) / (size_t)t->shape[d])
			ok = FAIL("%s: too many elements", path);
		numel *= (size_t)t->shape[d];
	}
	size_t nbytes = numel * tsd_dtype_size(t->dtype);
	if (ok && len - off - hl != nbytes)
		ok = FAIL("%s: %zu data bytes, the shape needs %zu", path, len - off - hl, nbytes);
	if (!ok) {
		free(buf);
		return false;
	}
	memmove(buf, buf + off + hl, nbytes);
	t->data = buf;
	t->nbytes = nbytes;
	return true;
}

bool tctl_npy_write(const char *path, const tsd_tensor *t, char *err, size_t errlen)
{
	const char *descr = NULL;
	for (size_t k = 0; k < sizeof(npy_types) / sizeof(npy_types[0]); k++)
		if (npy_types[k].dt == t->dtype)
			descr = npy_types[k].descr;
	if (!descr)
		return FAIL("%s: dtype %s has no .npy form", path, tsd_dtype_name(t->dtype));
	char dict[512];
	int n = snprintf(dict, sizeof(dict), "{'descr': '%s', 'fortran_order': False, 'shape': (",
			 descr);
	for (int d = 0; d < t->ndim; d++)
		n += snprintf(dict + n, sizeof(dict) - (size_t)n, "%lld%s", (long long)t->shape[d],
			      t->ndim == 1	? ","
			      : d + 1 < t->ndim ? ", "
						: "");
	n += snprintf(dict + n, sizeof(dict) - (size_t)n, "), }");
	size_t total = 10 + (size_t)n + 1, pad = (64 - total % 64) % 64;
	size_t hl = (size_t)n + pad + 1;
	uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)hl, (uint8_t)(hl >> 8)};
	FILE *f = fopen(path, "wb");
	if (!f)
		return FAIL("%s: %s", path, strerror(errno));
	bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(dict, 1, (size_t)n, f) == (size_t)n;
	for (size_t i = 0; ok && i < pad; i++)
		ok = fputc(' ', f) != EOF;
	ok = ok && fputc('\n', f) != EOF;
	size_t es = tsd_dtype_size(t->dtype), numel = 1;
	for (int d = 0; d < t->ndim; d++)
		numel *= (size_t)t->shape[d];
	ok = ok && fwrite(t->data, 1, numel * es, f) == numel * es;
	if (fclose(f) || !ok)
		return FAIL("%s: %s", path, strerror(errno ? errno : EIO));
	return true;
}

int tctl_write_outputs_npy(const tsd_reply *r, const char *dir)
{
	for (int i = 0; i < tsd_reply_ntensors(r); i++) {
		const tsd_tensor *t = tsd_reply_tensor(r, i);
		char path[4096], err[512];
		if (strchr(t->name, '/') || !strcmp(t->name, "..") || !strcmp(t->name, ".")) {
			fprintf(stderr, "tensorctl: output %s: not a file name\n", t->name);
			return TCTL_EXIT_IO;
		}
		snprintf(path, sizeof(path), "%s/%s.npy", dir, t->name);
		if (!tctl_npy_write(path, t, err, sizeof(err))) {
			fprintf(stderr, "tensorctl: %s\n", err);
			return TCTL_EXIT_IO;
		}
		printf("%s\n", path);
	}
	return TCTL_EXIT_OK;
}
