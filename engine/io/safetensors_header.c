/* safetensors_header.c: reads, validates and writes the JSON header of safetensors files (see
 * safetensors_header.h); safetensors.c moves the tensor data. */
#include "safetensors_header.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "device/device.h"
#include "realize/realize.h"
#include "tensor/tensor.h"
#include "io_limits.h"

/* cJSON_ParseWithLengthOpts needs 1.7.13+; 1.7.15 is Debian 12's. Upstream 1.7.15-1.7.17 can
 * read past a buffer that is not NUL-terminated (CVE-2023-53154, fixed in 1.7.18 and in
 * Debian's 1.7.15-1+deb12u3): the header is always passed terminated, so that bug cannot reach
 * past it here. The other known cJSON bugs (CVE-2023-50471/50472, CVE-2024-31755,
 * CVE-2025-57052) are in functions this file does not call. A patched 1.7.15 reports the same
 * version as an unpatched one, so no check here can tell them apart. */
#if CJSON_VERSION_MAJOR * 10000 + CJSON_VERSION_MINOR * 100 + CJSON_VERSION_PATCH < 10715
#error "tensord needs cJSON 1.7.15 or newer (cJSON_ParseWithLengthOpts)"
#endif

/* Every safetensors dtype; engine -1 marks those the engine has no equivalent for. */
static const struct {
	const char *name;
	int engine;
} st_dtypes[] = {
	{"BOOL", ENG_BOOL}, {"U8", ENG_U8},  {"I32", ENG_I32}, {"I64", ENG_I64}, {"F16", ENG_F16},
	{"F32", ENG_F32},   {"I8", -1},	     {"I16", -1},      {"U16", -1},	 {"U32", -1},
	{"U64", -1},	    {"BF16", -1},    {"F64", -1},      {"F8_E4M3", -1},	 {"F8_E5M2", -1},
	{"F8_E8M0", -1},    {"F6_E2M3", -1}, {"F6_E3M2", -1},  {"F4", -1},	 {"C64", -1},
};
#define N_ST_DTYPES ((int)(sizeof(st_dtypes) / sizeof(st_dtypes[0])))

const char *eng_safetensors_dtype_name(eng_dtype dt)
{
	for (int i = 0; i < N_ST_DTYPES; i++)
		if (st_dtypes[i].engine == (int)dt)
			return st_dtypes[i].name;
	return "?";
}

/* Set "safetensors: PATH: <message>" as the context error. */
static eng_status bad(eng_ctx *ctx, eng_status code, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static eng_status bad(eng_ctx *ctx, eng_status code, const char *path, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return eng_set_error(ctx, code, "safetensors: %s: %s", path, msg);
}

bool eng_safetensors_utf8_valid(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	for (size_t i = 0; i < n;) {
		unsigned c = s[i];
		int len = c < 0x80	       ? 1
			  : (c & 0xe0) == 0xc0 ? 2
			  : (c & 0xf0) == 0xe0 ? 3
			  : (c & 0xf8) == 0xf0 ? 4
					       : 0;
		if (!len || i + (size_t)len > n)
			return false;
		uint32_t cp = len == 1 ? c : c & (0x7fu >> len);
		for (int k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3fu);
		}
		static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
		if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += (size_t)len;
	}
	return true;
}

ssize_t eng_safetensors_pread_all(int fd, void *buf, size_t n, uint64_t off)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/* A non-negative integral JSON number no larger than 2^53 (exact in a double). */
static bool json_uint(const cJSON *j, uint64_t *out)
{
	if (!cJSON_IsNumber(j))
		return false;
	double d = j->valuedouble;
	if (!(d >= 0 && d <= 9007199254740992.0) || d != floor(d))
		return false;
	*out = (uint64_t)d;
	return true;
}

void eng_safetensors_fmt_shape(char *buf, size_t len, int ndim, const int64_t *shape)
{
	size_t used = (size_t)snprintf(buf, len, "[");
	for (int i = 0; i < ndim && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? ", " : "",
					 (long long)shape[i]);
	if (used < len)
		snprintf(buf + used, len - used, "]");
}

static eng_status parse_dtype(eng_ctx *ctx, const char *path, const char *name, const cJSON *j,
			      eng_dtype *out)
{
	if (!cJSON_IsString(j))
		return bad(ctx, ENG_EINVAL, path,
			   "tensor '%.200s': \"dtype\" missing or not a string", name);
	for (int i = 0; i < N_ST_DTYPES; i++) {
		if (strcmp(j->valuestring, st_dtypes[i].name))
			continue;
		if (st_dtypes[i].engine < 0)
			return bad(ctx, ENG_EDTYPE, path,
				   "tensor '%.200s': dtype %s is not supported (only F32, F16, "
				   "I64, I32, U8, BOOL)",
				   name, st_dtypes[i].name);
		*out = (eng_dtype)st_dtypes[i].engine;
		return ENG_OK;
	}
	return bad(ctx, ENG_EDTYPE, path, "tensor '%.200s': unknown dtype '%.64s'", name,
		   j->valuestring);
}

/* One "name": {"dtype", "shape", "data_offsets"} entry. */
static eng_status parse_entry(eng_ctx *ctx, const char *path, const cJSON *item, uint64_t data_size,
			      eng_safetensors_entry *e)
{
	const char *name = item->string;
	if (!cJSON_IsObject(item))
		return bad(ctx, ENG_EINVAL, path, "tensor '%.200s': entry is not an object", name);
	eng_status st = parse_dtype(ctx, path, name,
				    cJSON_GetObjectItemCaseSensitive(item, "dtype"), &e->dtype);
	if (st)
		return st;

	const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
	if (!cJSON_IsArray(shape))
		return bad(ctx, ENG_EINVAL, path,
			   "tensor '%.200s': \"shape\" missing or not an array", name);
	int ndim = cJSON_GetArraySize(shape);
	if (ndim > ENG_MAX_DIMS)
		return bad(ctx, ENG_EINVAL, path,
			   "tensor '%.200s': shape has %d dimensions (at most %d)", name, ndim,
			   ENG_MAX_DIMS);
	e->ndim = ndim;
	for (int d = 0; d < ndim; d++) {
		uint64_t v;
		if (!json_uint(cJSON_GetArrayItem(shape, d), &v))
			return bad(ctx, ENG_EINVAL, path,
				   "tensor '%.200s': shape entry %d is not a non-negative integer",
				   name, d);
		e->shape[d] = (int64_t)v;
	}
	char sh[160];
	eng_safetensors_fmt_shape(sh, sizeof(sh), ndim, e->shape);
	int64_t numel;
	if (!eng_shape_numel(ndim, e->shape, &numel))
		return bad(ctx, ENG_ERANGE, path,
			   "tensor '%.200s': shape %s has too many elements (limit 2^40)", name,
			   sh);

	const cJSON *offs = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
	if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 ||
	    !json_uint(cJSON_GetArrayItem(offs, 0), &e->begin) ||
	    !json_uint(cJSON_GetArrayItem(offs, 1), &e->end))
		return bad(ctx, ENG_EINVAL, path,
			   "tensor '%.200s': \"data_offsets\" missing or not two non-negative "
			   "integers",
			   name);
	unsigned long long b = e->begin, en = e->end;
	if (e->begin > e->end)
		return bad(ctx, ENG_EINVAL, path,
			   "tensor '%.200s': data_offsets [%llu, %llu] end before begin", name, b,
			   en);
	if (e->end > data_size)
		return bad(
			ctx, ENG_EINVAL, path,
			"tensor '%.200s': data_offsets [%llu, %llu] outside the data (%llu bytes)",
			name, b, en, (unsigned long long)data_size);
	uint64_t want = (uint64_t)numel * eng_dtype_size(e->dtype);
	if (e->end - e->begin != want)
		return bad(ctx, ENG_EINVAL, path,
			   "tensor '%.200s': data_offsets [%llu, %llu] hold %llu bytes but shape "
			   "%s of %s needs %llu",
			   name, b, en, en - b, sh, eng_safetensors_dtype_name(e->dtype),
			   (unsigned long long)want);
	return ENG_OK;
}

typedef struct sort_key {
	const char *name;
	uint64_t begin, end;
	int i;
} sort_key;

static int cmp_name(const void *a, const void *b)
{
	return strcmp(((const sort_key *)a)->name, ((const sort_key *)b)->name);
}

static int cmp_begin(const void *a, const void *b)
{
	const sort_key *x = a, *y = b;
	return x->begin < y->begin   ? -1
	       : x->begin > y->begin ? 1
				     : (x->end > y->end) - (x->end < y->end);
}

/* No name twice, no two non-empty byte ranges sharing a byte; fills h->by_name. */
static eng_status check_names_and_ranges(eng_ctx *ctx, const char *path, eng_safetensors_header *h)
{
	sort_key *k = malloc(sizeof(*k) * (size_t)(h->n ? h->n : 1));
	if (!k)
		return eng_set_error(ctx, ENG_ENOMEM, "safetensors: %s: out of memory", path);
	eng_status st = ENG_OK;
	for (int i = 0; i < h->n; i++)
		k[i] = (sort_key){h->e[i].name, h->e[i].begin, h->e[i].end, i};
	qsort(k, (size_t)h->n, sizeof(*k), cmp_name);
	for (int i = 0; i < h->n; i++) {
		h->by_name[i] = k[i].i;
		if (i && !strcmp(k[i].name, k[i - 1].name)) {
			st = bad(ctx, ENG_EINVAL, path,
				 "tensor '%.200s' appears twice in the header", k[i].name);
			goto out;
		}
	}
	qsort(k, (size_t)h->n, sizeof(*k), cmp_begin);
	int prev = -1;
	for (int i = 0; i < h->n; i++) {
		if (k[i].begin == k[i].end)
			continue; /* empty: shares no byte */
		if (prev >= 0 && k[i].begin < k[prev].end) {
			st = bad(ctx, ENG_EINVAL, path,
				 "tensors '%.200s' [%llu, %llu] and '%.200s' [%llu, %llu] overlap",
				 k[prev].name, (unsigned long long)k[prev].begin,
				 (unsigned long long)k[prev].end, k[i].name,
				 (unsigned long long)k[i].begin, (unsigned long long)k[i].end);
			goto out;
		}
		prev = i;
	}
out:
	free(k);
	return st;
}

static eng_status check_metadata(eng_ctx *ctx, const char *path, const cJSON *meta)
{
	if (!cJSON_IsObject(meta))
		return bad(ctx, ENG_EINVAL, path, "\"__metadata__\" is not an object");
	const cJSON *m;
	cJSON_ArrayForEach(m, meta)
	{
		if (!cJSON_IsString(m))
			return bad(ctx, ENG_EINVAL, path,
				   "\"__metadata__\" entry '%.200s' is not a string", m->string);
	}
	return ENG_OK;
}

/* Before cJSON sees the text: no NUL characters, raw or escaped (cJSON keeps strings as C
 * strings, so "__metadata__\u0000x" would become "__metadata__"), and no more top-level
 * entries or JSON values than the limits (cJSON allocates the whole tree first). A lexer that
 * only tracks strings, escapes and nesting. */
static eng_status prescan(eng_ctx *ctx, const char *path, const char *text, size_t len)
{
	bool in_str = false;
	int depth = 0;
	uint64_t top = 0, values = 1;
	for (size_t i = 0; i < len; i++) {
		char c = text[i];
		if (!c)
			return bad(ctx, ENG_EINVAL, path, "header has a NUL byte at byte %zu", i);
		if (in_str) {
			if (c == '"') {
				in_str = false;
			} else if (c == '\\' && i + 1 < len) {
				if (text[i + 1] == 'u' && i + 5 < len && !memcmp(text + i + 2, "0000", 4))
					return bad(ctx, ENG_EINVAL, path,
						   "header has a \\u0000 escape at byte %zu (names "
						   "and strings may not contain NUL characters)",
						   i);
				i++; /* the escaped character */
			}
			continue;
		}
		if (c == '"') {
			in_str = true;
		} else if (c == '{' || c == '[') {
			depth++;
			values++;
			top += depth == 1 && c == '{'; /* the first member, if any */
		} else if (c == '}' || c == ']') {
			depth--;
		} else if (c == ',') {
			values++;
			top += depth == 1;
		}
	}
	if (top > (uint64_t)ENG_SAFETENSORS_MAX_TENSORS + 1) /* + __metadata__ */
		return bad(ctx, ENG_EINVAL, path,
			   "header has %llu entries, more than the limit of %d tensors",
			   (unsigned long long)top, ENG_SAFETENSORS_MAX_TENSORS);
	if (values > ENG_SAFETENSORS_MAX_VALUES)
		return bad(ctx, ENG_EINVAL, path,
			   "header has about %llu JSON values, more than the limit of %llu",
			   (unsigned long long)values, (unsigned long long)ENG_SAFETENSORS_MAX_VALUES);
	return ENG_OK;
}

/* Parse the JSON text (len bytes, NUL-terminated at text[len]) and fill h's entries. */
static eng_status parse_json(eng_ctx *ctx, const char *path, const char *text, size_t len,
			     eng_safetensors_header *h)
{
	if (!eng_safetensors_utf8_valid(text, len))
		return bad(ctx, ENG_EINVAL, path, "header is not valid UTF-8");
	eng_status pst = prescan(ctx, path, text, len);
	if (pst)
		return pst;
	const char *end = NULL;
	/* cJSON's parser writes a process-wide error position (global_error) on every call, so
	 * parses on different threads are serialised: a synchronised process-wide resource. */
	static pthread_mutex_t parse_mu = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&parse_mu);
	cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
	pthread_mutex_unlock(&parse_mu);
	if (!root)
		return bad(ctx, ENG_EINVAL, path,
			   "header is not valid JSON (error near byte %zu of %zu)",
			   end ? (size_t)(end - text) : (size_t)0, len);
	eng_status st = ENG_OK;
	for (const char *p = end; p < text + len; p++)
		if (!strchr(" \t\r\n", *p)) {
			st = bad(ctx, ENG_EINVAL, path,
				 "header has trailing bytes after the JSON (byte %zu of %zu)",
				 (size_t)(p - text), len);
			goto out;
		}
	if (!cJSON_IsObject(root)) {
		st = bad(ctx, ENG_EINVAL, path, "header is not a JSON object");
		goto out;
	}
	int count = cJSON_GetArraySize(root);
	if (count > ENG_SAFETENSORS_MAX_TENSORS + 1) { /* prescan counted the same, kept for safety */
		st = bad(ctx, ENG_EINVAL, path, "header has %d entries, more than the limit of %d tensors",
			 count, ENG_SAFETENSORS_MAX_TENSORS);
		goto out;
	}
	h->e = calloc((size_t)(count ? count : 1), sizeof(*h->e));
	h->by_name = calloc((size_t)(count ? count : 1), sizeof(*h->by_name));
	if (!h->e || !h->by_name) {
		st = eng_set_error(ctx, ENG_ENOMEM, "safetensors: %s: out of memory", path);
		goto out;
	}
	const cJSON *item;
	cJSON_ArrayForEach(item, root)
	{
		if (!item->string[0]) { /* eng_safetensors_save refuses it: do not load it either */
			st = bad(ctx, ENG_EINVAL, path, "a tensor has an empty name");
			goto out;
		}
		if (!strcmp(item->string, "__metadata__")) {
			if ((st = check_metadata(ctx, path, item)))
				goto out;
			continue;
		}
		if (h->n == ENG_SAFETENSORS_MAX_TENSORS) { /* prescan allowed one for __metadata__ */
			st = bad(ctx, ENG_EINVAL, path, "header has more than the limit of %d tensors",
				 ENG_SAFETENSORS_MAX_TENSORS);
			goto out;
		}
		eng_safetensors_entry *e = &h->e[h->n];
		if ((st = parse_entry(ctx, path, item, h->data_size, e)))
			goto out;
		if (!(e->name = strdup(item->string))) {
			st = eng_set_error(ctx, ENG_ENOMEM, "safetensors: %s: out of memory", path);
			goto out;
		}
		h->n++;
	}
	st = check_names_and_ranges(ctx, path, h);
out:
	cJSON_Delete(root);
	return st;
}

eng_status eng_safetensors_header_read(eng_ctx *ctx, const char *path, int fd, eng_safetensors_header *h)
{
	memset(h, 0, sizeof(*h));
	struct stat sb;
	if (fstat(fd, &sb) < 0)
		return bad(ctx, ENG_EIO, path, "cannot stat: %s", strerror(errno));
	if (!S_ISREG(sb.st_mode))
		return bad(ctx, ENG_EIO, path, "not a regular file");
	uint64_t size = (uint64_t)sb.st_size;
	unsigned char lenb[8];
	if (size < 8)
		return bad(ctx, ENG_EIO, path,
			   "file is %llu bytes, too short for the 8-byte header length",
			   (unsigned long long)size);
	errno = 0;
	if (eng_safetensors_pread_all(fd, lenb, 8, 0) != 8)
		return bad(ctx, ENG_EIO, path, "cannot read the header length: %s",
			   errno ? strerror(errno) : "short read");
	uint64_t hlen = 0;
	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | lenb[i];
	if (hlen > ENG_SAFETENSORS_MAX_HEADER)
		return bad(ctx, ENG_EINVAL, path,
			   "header length %llu exceeds the limit of %llu bytes",
			   (unsigned long long)hlen, (unsigned long long)ENG_SAFETENSORS_MAX_HEADER);
	if (hlen > size - 8)
		return bad(ctx, ENG_EIO, path,
			   "header length %llu exceeds the file (%llu bytes after the length)",
			   (unsigned long long)hlen, (unsigned long long)(size - 8));
	h->data_start = 8 + hlen;
	h->data_size = size - h->data_start;
	char *text = malloc(hlen + 1); /* terminated: see the cJSON note at the top */
	if (!text)
		return eng_set_error(ctx, ENG_ENOMEM,
				     "safetensors: %s: out of memory for the header", path);
	text[hlen] = '\0';
	eng_status st;
	errno = 0;
	if (eng_safetensors_pread_all(fd, text, hlen, 8) != (ssize_t)hlen)
		st = bad(ctx, ENG_EIO, path, "cannot read the header: %s",
			 errno ? strerror(errno) : "short read");
	else
		st = parse_json(ctx, path, text, hlen, h);
	free(text);
	if (st)
		eng_safetensors_header_free(h);
	return st;
}

void eng_safetensors_header_free(eng_safetensors_header *h)
{
	for (int i = 0; i < h->n; i++)
		free(h->e[i].name);
	free(h->e);
	free(h->by_name);
	memset(h, 0, sizeof(*h));
}

static void put_json_string(eng_strbuf *out, const char *s)
{
	eng_strbuf_puts(out, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			eng_strbuf_printf(out, "\\%c", c);
		else if (c < 0x20)
			eng_strbuf_printf(out, "\\u%04x", c);
		else
			eng_strbuf_printf(out, "%c", c);
	}
	eng_strbuf_puts(out, "\"");
}

void eng_safetensors_header_write(eng_strbuf *out, const eng_named *ts, const int *ord, int n)
{
	size_t start = out->len;
	uint64_t off = 0;
	eng_strbuf_puts(out, "{");
	for (int k = 0; k < n; k++) {
		const eng_named *t = &ts[ord[k]];
		uint64_t nbytes =
			(uint64_t)eng_numel(t->t) * eng_dtype_size(eng_tensor_dtype(t->t));
		if (k)
			eng_strbuf_puts(out, ",");
		put_json_string(out, t->name);
		eng_strbuf_printf(out, ":{\"dtype\":\"%s\",\"shape\":[",
			      eng_safetensors_dtype_name(eng_tensor_dtype(t->t)));
		for (int d = 0; d < eng_ndim(t->t); d++)
			eng_strbuf_printf(out, "%s%lld", d ? "," : "", (long long)eng_shape(t->t)[d]);
		eng_strbuf_printf(out, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
			      (unsigned long long)(off + nbytes));
		off += nbytes;
	}
	eng_strbuf_puts(out, "}");
	while ((out->len - start) % 8)
		eng_strbuf_puts(out, " ");
}
