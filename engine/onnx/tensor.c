/* tensor.c: ONNX TensorProto -> engine tensor: element types, dims and their limits, data from
 * raw_data, the typed fields or an external file confined to the model's directory. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/context.h"
#include "io/io_limits.h"
#include "onnx_int.h"

bool onx_dtype(int t, unsigned flags, bool *narrowed, eng_dtype *out)
{
	if (t == ONX_DOUBLE && (flags & ENG_ONNX_F64_AS_F32)) {
		if (narrowed)
			*narrowed = true;
		*out = ENG_F32;
		return true;
	}
	switch (t) {
	case ONX_FLOAT: *out = ENG_F32; return true;
	case ONX_UINT8: *out = ENG_U8; return true;
	case ONX_INT32: *out = ENG_I32; return true;
	case ONX_INT64: *out = ENG_I64; return true;
	case ONX_BOOL: *out = ENG_BOOL; return true;
	case ONX_FLOAT16: *out = ENG_F16; return true;
	case ONX_INT8:
	case ONX_INT16:
	case ONX_UINT16: *out = ENG_I32; return true; /* held widened: onx_narrow_of */
	case ONX_UINT32:
	case ONX_UINT64: *out = ENG_I64; return true; /* uint64: its bits; graph.c allows only ops blind to the sign */
	case ONX_BFLOAT16: *out = ENG_F32; return true; /* rounded to bfloat16 after every op */
	case ONX_INT4:
	case ONX_UINT4:
	case ONX_INT2:
	case ONX_UINT2: *out = ENG_I32; return true; /* packed 2 or 4 a byte when stored */
	case ONX_FLOAT8E4M3FN:
	case ONX_FLOAT8E4M3FNUZ:
	case ONX_FLOAT8E5M2:
	case ONX_FLOAT8E5M2FNUZ:
	case ONX_FLOAT4E2M1: *out = ENG_F32; return true; /* exact in float32: narrow.c */
	default: return false;
	}
}

/* Elements a byte holds for the packed types (int4, uint4, float4e2m1: 2; int2, uint2: 4), else 0. */
static int per_byte(int t) { return onx_narrow_bits(t) && onx_narrow_bits(t) < 8 ? 8 / onx_narrow_bits(t) : 0; }

/* Bytes an element of a narrow type takes in raw_data or an external file. */
static int narrow_size(int t) { return onx_narrow_bits(t) / 8; }

int onx_type_of(eng_dtype dt)
{
	static const int map[ENG_DTYPE_COUNT] = {[ENG_BOOL] = ONX_BOOL, [ENG_U8] = ONX_UINT8,
		[ENG_I32] = ONX_INT32, [ENG_I64] = ONX_INT64, [ENG_F16] = ONX_FLOAT16, [ENG_F32] = ONX_FLOAT};
	return (unsigned)dt < ENG_DTYPE_COUNT ? map[dt] : 0;
}

const char *onx_type_name(int t)
{
	static const char *const names[] = {"undefined", "float", "uint8", "int8", "uint16", "int16",
		"int32", "int64", "string", "bool", "float16", "double", "uint32", "uint64",
		"complex64", "complex128", "bfloat16", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz",
		"uint4", "int4", "float4e2m1", "float8e8m0", "uint2", "int2"};
	return t >= 0 && t < (int)(sizeof(names) / sizeof(names[0])) ? names[t] : "unknown";
}

static eng_status fail(char *err, size_t errlen, eng_status code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static eng_status fail(char *err, size_t errlen, eng_status code, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

static bool parse_u64(const char *s, uint64_t *out)
{
	if (!s || !*s)
		return false;
	uint64_t v = 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return true;
}

/* Read nbytes of tp's external data into *dst, allocated here (the caller frees it) once the file
 * is known to hold them: dims that claim more than the file has allocate nothing. The location
 * must be a relative path without ".." whose real path stays inside dir (the model's directory,
 * already a real path). */
static eng_status read_external(const Onnx__TensorProto *tp, const char *dir, const char *tname,
				void **dst, uint64_t nbytes, char *err, size_t errlen)
{
	const char *loc = NULL;
	uint64_t off = 0, len = nbytes;
	bool has_len = false;
	for (size_t i = 0; i < tp->n_external_data; i++) {
		const Onnx__StringStringEntryProto *e = tp->external_data[i];
		const char *k = e->key ? e->key : "";
		if (!strcmp(k, "location"))
			loc = e->value;
		else if (!strcmp(k, "offset") && !parse_u64(e->value, &off))
			return fail(err, errlen, ENG_EINVAL, "tensor '%.200s': external data offset '%.40s' is not a number", tname, e->value ? e->value : "");
		else if (!strcmp(k, "length")) {
			if (!parse_u64(e->value, &len))
				return fail(err, errlen, ENG_EINVAL, "tensor '%.200s': external data length '%.40s' is not a number", tname, e->value ? e->value : "");
			has_len = true;
		}
	}
	if (!dir)
		return fail(err, errlen, ENG_EINVAL, "tensor '%.200s': external data is not allowed here (no model directory)", tname);
	if (!loc || !*loc)
		return fail(err, errlen, ENG_EINVAL, "tensor '%.200s': external data without a location", tname);
	if (loc[0] == '/')
		return fail(err, errlen, ENG_EINVAL, "tensor '%.200s': external data location '%.200s' is absolute", tname, loc);
	for (const char *p = loc; *p;) {
		size_t seg = strcspn(p, "/");
		if (seg == 2 && p[0] == '.' && p[1] == '.')
			return fail(err, errlen, ENG_EINVAL, "tensor '%.200s': external data location '%.200s' leaves the model directory", tname, loc);
		p += seg;
		while (*p == '/')
			p++;
	}
	if (has_len && len != nbytes)
		return fail(err, errlen, ENG_ESHAPE, "tensor '%.200s': external data length %llu but its dims need %llu bytes", tname, (unsigned long long)len, (unsigned long long)nbytes);
	char joined[PATH_MAX], real[PATH_MAX];
	if (snprintf(joined, sizeof(joined), "%s/%s", dir, loc) >= (int)sizeof(joined))
		return fail(err, errlen, ENG_EINVAL, "tensor '%.200s': external data path too long", tname);
	if (!realpath(joined, real))
		return fail(err, errlen, ENG_EIO, "tensor '%.200s': external data '%.200s': %s", tname, loc, strerror(errno));
	size_t dl = strlen(dir);
	if (strncmp(real, dir, dl) || (real[dl] != '/' && strcmp(dir, "/")))
		return fail(err, errlen, ENG_EINVAL, "tensor '%.200s': external data '%.200s' resolves outside the model directory", tname, loc);
	int fd = open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return fail(err, errlen, ENG_EIO, "tensor '%.200s': external data '%.200s': %s", tname, loc, strerror(errno));
	struct stat st;
	eng_status s = ENG_OK;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode))
		s = fail(err, errlen, ENG_EIO, "tensor '%.200s': external data '%.200s' is not a regular file", tname, loc);
	else if (off > (uint64_t)st.st_size || (uint64_t)st.st_size - off < nbytes)
		s = fail(err, errlen, ENG_ESHAPE, "tensor '%.200s': external data '%.200s' holds %lld bytes, %llu needed at offset %llu", tname, loc, (long long)st.st_size, (unsigned long long)nbytes, (unsigned long long)off);
	else if (!(*dst = malloc(nbytes ? nbytes : 1)))
		s = fail(err, errlen, ENG_ENOMEM, "tensor '%.200s': out of memory for %llu bytes", tname, (unsigned long long)nbytes);
	for (uint64_t done = 0; !s && done < nbytes;) {
		ssize_t r = pread(fd, (char *)*dst + done, nbytes - done > (1u << 30) ? (1u << 30) : nbytes - done, (off_t)(off + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			s = fail(err, errlen, ENG_EIO, "tensor '%.200s': external data '%.200s': short read", tname, loc);
		else
			done += (uint64_t)r;
	}
	close(fd);
	return s;
}

/* How many values the typed field holding type's data has. */
static size_t typed_count(const Onnx__TensorProto *tp, int type)
{
	switch (type) {
	case ONX_FLOAT: return tp->n_float_data;
	case ONX_DOUBLE: return tp->n_double_data;
	case ONX_INT64: return tp->n_int64_data;
	case ONX_UINT32:
	case ONX_UINT64: return tp->n_uint64_data;
	default: return tp->n_int32_data; /* int32, uint8, bool, float16, int8, int16, uint16 */
	}
}

/* Convert the typed field's values (typed_count of them: checked before) into dst. */
static eng_status from_typed(const Onnx__TensorProto *tp, int type, eng_dtype dt, void *dst, uint64_t numel,
			     const char *tname, char *err, size_t errlen)
{
	for (uint64_t i = 0; i < numel; i++) {
		switch (dt) {
		case ENG_F32:
			if (onx_minifloat(type)) {
				((float *)dst)[i] = onx_minifloat_value(type, (unsigned)tp->int32_data[i] & 0xff);
			} else if (type == ONX_BFLOAT16) { /* the 16 bits in int32_data: a float's upper half */
				uint32_t u = (uint32_t)(uint16_t)tp->int32_data[i] << 16;
				memcpy((float *)dst + i, &u, 4);
			} else {
				((float *)dst)[i] = type == ONX_DOUBLE ? (float)tp->double_data[i] : tp->float_data[i];
			}
			break;
		case ENG_I64:
			((int64_t *)dst)[i] = type == ONX_UINT32 ? (int64_t)(uint32_t)tp->uint64_data[i]
					    : type == ONX_UINT64 ? (int64_t)tp->uint64_data[i] : tp->int64_data[i];
			break;
		case ENG_I32: ((int32_t *)dst)[i] = tp->int32_data[i]; break;
		case ENG_U8: ((uint8_t *)dst)[i] = (uint8_t)tp->int32_data[i]; break;
		case ENG_BOOL: ((uint8_t *)dst)[i] = tp->int32_data[i] != 0; break;
		case ENG_F16: ((uint16_t *)dst)[i] = (uint16_t)tp->int32_data[i]; break;
		default: return fail(err, errlen, ENG_EDTYPE, "tensor '%.200s': bad dtype", tname);
		}
	}
	return ENG_OK;
}

eng_status onx_tensor_decode(eng_ctx *ctx, const Onnx__TensorProto *tp, const char *dir, unsigned flags,
			     bool *narrowed, eng_tensor **out, char *err, size_t errlen)
{
	*out = NULL;
	const char *tname = tp->name ? tp->name : "";
	int type = tp->has_data_type ? tp->data_type : 0;
	eng_dtype dt;
	if (!onx_dtype(type, flags, narrowed, &dt))
		return fail(err, errlen, type == 0 ? ENG_EINVAL : ENG_ENOTSUP, "tensor '%.200s': element type %s (%d) is not supported", tname, onx_type_name(type), type);
	if (tp->n_dims > ENG_MAX_DIMS)
		return fail(err, errlen, ENG_ENOTSUP, "tensor '%.200s': %zu dims (at most %d)", tname, tp->n_dims, ENG_MAX_DIMS);
	bool f64 = type == ONX_DOUBLE; /* stored as 8 bytes, narrowed to float32 after reading */
	int nw = onx_narrow_of(type); /* stored as 1 or 2 bytes, widened to int32 after reading */
	uint64_t numel = 1, maxb = eng_io_max_bytes(ctx), isz = f64 ? 8 : nw ? (uint64_t)narrow_size(nw) : eng_dtype_size(dt);
	int64_t shape[ENG_MAX_DIMS];
	for (size_t i = 0; i < tp->n_dims; i++) {
		int64_t d = tp->dims[i];
		if (d < 0)
			return fail(err, errlen, ENG_ESHAPE, "tensor '%.200s': dim %zu is %lld", tname, i, (long long)d);
		shape[i] = d;
		if (d && numel > maxb / (uint64_t)d)
			return fail(err, errlen, ENG_ERANGE, "tensor '%.200s': dims describe more than %llu bytes", tname, (unsigned long long)maxb);
		numel *= (uint64_t)d;
	}
	int pk = per_byte(type);
	uint64_t nbytes = pk ? (numel + (uint64_t)pk - 1) / (uint64_t)pk : numel * isz;
	if (nbytes > maxb || (nw && numel * (nw == ONX_UINT32 || nw == ONX_UINT64 ? 8 : 4) > maxb)) /* room once widened */
		return fail(err, errlen, ENG_ERANGE, "tensor '%.200s': %llu bytes is past the limit of %llu", tname, (unsigned long long)nbytes, (unsigned long long)maxb);
	bool external = tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
	/* Check the inline length before allocating anything. */
	if (!external && tp->has_raw_data && tp->raw_data.len != nbytes)
		return fail(err, errlen, ENG_ESHAPE, "tensor '%.200s': raw_data holds %zu bytes but its dims need %llu", tname, tp->raw_data.len, (unsigned long long)nbytes);
	if (!external && !tp->has_raw_data && typed_count(tp, type) != (pk ? nbytes : numel)) /* packed: a byte a value */
		return fail(err, errlen, ENG_ESHAPE, "tensor '%.200s': %zu values but its dims hold %llu", tname, typed_count(tp, type), (unsigned long long)numel);
	void *buf = NULL;
	eng_status s = ENG_OK;
	int wide = nw == ONX_UINT32 || nw == ONX_UINT64 ? 8 : 4; /* the engine type holding a narrow one */
	uint64_t room = nw ? numel * (uint64_t)wide : nbytes; /* the typed field's values, widened */
	if (external)
		s = read_external(tp, dir, tname, &buf, nbytes, err, errlen);
	else if (!(buf = malloc(room ? room : 1)))
		return fail(err, errlen, ENG_ENOMEM, "tensor '%.200s': out of memory for %llu bytes", tname, (unsigned long long)nbytes);
	else if (tp->has_raw_data) {
		if (nbytes)
			memcpy(buf, tp->raw_data.data, nbytes);
	} else if (pk) {
		for (uint64_t i = 0; i < nbytes; i++)
			((uint8_t *)buf)[i] = (uint8_t)tp->int32_data[i];
	} else
		s = from_typed(tp, type, dt, buf, numel, tname, err, errlen);
	if (!s && pk) { /* low bits first; the signed types sign-extended */
		int32_t *w = malloc(numel ? numel * 4 : 1);
		int bits = 8 / pk;
		bool sgn = type == ONX_INT4 || type == ONX_INT2;
		if (!w)
			s = fail(err, errlen, ENG_ENOMEM, "tensor '%.200s': out of memory", tname);
		for (uint64_t i = 0; w && i < numel; i++) {
			int v = (((const uint8_t *)buf)[i / (uint64_t)pk] >> (int)(i % (uint64_t)pk) * bits) & ((1 << bits) - 1);
			if (type == ONX_FLOAT4E2M1) {
				float f = onx_minifloat_value(type, (unsigned)v);
				memcpy(w + i, &f, 4);
			} else {
				w[i] = sgn && v >= 1 << (bits - 1) ? v - (1 << bits) : v;
			}
		}
		if (w) {
			free(buf);
			buf = w;
		}
	}
	if (!s && f64 && (external || tp->has_raw_data))
		for (uint64_t i = 0; i < numel; i++) {
			double v;
			memcpy(&v, (char *)buf + i * 8, 8);
			((float *)buf)[i] = (float)v;
		}
	if (!s && nw && !pk && (external || tp->has_raw_data)) { /* little-endian narrow values, widened */
		void *w = malloc(numel ? numel * (uint64_t)wide : 1);
		if (!w)
			s = fail(err, errlen, ENG_ENOMEM, "tensor '%.200s': out of memory", tname);
		for (uint64_t i = 0; w && i < numel; i++) {
			const uint8_t *q = (const uint8_t *)buf + i * (uint64_t)narrow_size(nw);
			uint16_t u = (uint16_t)(q[0] | (nw == ONX_INT8 ? 0 : q[1] << 8));
			if (nw == ONX_UINT64) {
				memcpy((int64_t *)w + i, q, 8); /* little-endian bits, as int64's */
			} else if (nw == ONX_UINT32) {
				((int64_t *)w)[i] = (int64_t)((uint32_t)u | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24);
			} else if (nw == ONX_BFLOAT16) {
				uint32_t f = (uint32_t)u << 16;
				memcpy((float *)w + i, &f, 4);
			} else if (onx_minifloat(nw)) {
				((float *)w)[i] = onx_minifloat_value(nw, q[0]);
			} else
				((int32_t *)w)[i] = nw == ONX_INT8 ? (int8_t)q[0] : nw == ONX_INT16 ? (int16_t)u : (int32_t)u;
		}
		if (w) {
			free(buf);
			buf = w;
		}
	}
	if (!s && dt == ENG_BOOL)
		for (uint64_t i = 0; i < numel; i++)
			((uint8_t *)buf)[i] = ((uint8_t *)buf)[i] != 0;
	if (!s) {
		*out = eng_from_data(ctx, dt, (int)tp->n_dims, shape, buf);
		if (!*out) {
			s = eng_error(ctx) ? eng_error(ctx) : ENG_ENOMEM;
			fail(err, errlen, s, "tensor '%.200s': %s", tname, eng_errmsg(ctx));
		}
	}
	free(buf);
	return s;
}

eng_tensor *eng_onnx_tensor_load_mem(eng_ctx *ctx, const void *data, size_t len, unsigned flags,
				     char *name, size_t namelen, char *err, size_t errlen)
{
	if (!ctx || (!data && len)) {
		fail(err, errlen, ENG_EINVAL, "onnx tensor: no context or data");
		return NULL;
	}
	if (!onx_pb_depth_ok(&onnx__tensor_proto__descriptor, data, len, ONX_MAX_NESTING)) {
		fail(err, errlen, ENG_EINVAL, "onnx tensor: messages nested too deep");
		return NULL;
	}
	Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, len, data);
	if (!tp) {
		fail(err, errlen, ENG_EINVAL, "onnx tensor: not a valid TensorProto (%zu bytes)", len);
		return NULL;
	}
	if (name && namelen)
		snprintf(name, namelen, "%s", tp->name ? tp->name : "");
	eng_tensor *t = NULL;
	onx_tensor_decode(ctx, tp, NULL, flags, NULL, &t, err, errlen);
	onnx__tensor_proto__free_unpacked(tp, NULL);
	return t;
}

/* onx_read_file's failure: "onnx: PATH: why" in err. */
static void *read_fail(char *err, size_t errlen, const char *path, const char *why)
{
	fail(err, errlen, ENG_EINVAL, "onnx: %s: %s", path, why);
	return NULL;
}

void *onx_read_file(const char *path, size_t *len, char *err, size_t errlen)
{
	if (!path || !*path)
		return read_fail(err, errlen, "", "path is empty");
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return read_fail(err, errlen, path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return read_fail(err, errlen, path, "not a regular file");
	}
	if ((uint64_t)st.st_size > ONX_MAX_FILE) {
		close(fd);
		char why[96];
		snprintf(why, sizeof(why), "%lld bytes is past the limit of %llu", (long long)st.st_size,
			 (unsigned long long)ONX_MAX_FILE);
		return read_fail(err, errlen, path, why);
	}
	*len = (size_t)st.st_size;
	uint8_t *buf = malloc(*len ? *len : 1);
	if (!buf) {
		close(fd);
		return read_fail(err, errlen, path, "out of memory");
	}
	size_t done = 0;
	while (done < *len) {
		ssize_t r = read(fd, buf + done, *len - done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		done += (size_t)r;
	}
	close(fd);
	if (done != *len) {
		free(buf);
		return read_fail(err, errlen, path, "short read");
	}
	return buf;
}

eng_tensor *eng_onnx_tensor_load(eng_ctx *ctx, const char *path, unsigned flags, char *name, size_t namelen, char *err,
				 size_t errlen)
{
	size_t len;
	void *buf = onx_read_file(path, &len, err, errlen);
	eng_tensor *t = buf ? eng_onnx_tensor_load_mem(ctx, buf, len, flags, name, namelen, err, errlen) : NULL;
	free(buf);
	return t;
}
