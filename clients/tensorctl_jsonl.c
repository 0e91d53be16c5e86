/* tensorctl_jsonl.c: replay's hand-written JSON Lines reader and writer: a log line's top-level
 * fields, its input rows parsed into the batch's buffers, output rows formatted without cJSON. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorctl_jsonl.h"

#define FAIL(...) (snprintf(err, errlen, __VA_ARGS__), false)

static const char *ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
		p++;
	return p;
}

/* The end of the string starting at p ('"'), past its closing quote; NULL when unterminated or
 * holding a control character or a bad escape. *esc: it has escapes. */
static const char *str_end(const char *p, const char *end, bool *esc)
{
	*esc = false;
	for (p++; p < end; p++) {
		unsigned char c = (unsigned char)*p;
		if (c == '"')
			return p + 1;
		if (c < 0x20)
			return NULL;
		if (c == '\\') {
			*esc = true;
			if (++p == end || !*p || !strchr("\"\\/bfnrtu", *p))
				return NULL;
			for (int k = 0; *p == 'u' && k < 4; k++)
				if (p + 1 + k >= end || !isxdigit((unsigned char)p[1 + k]))
					return NULL;
			p += *p == 'u' ? 4 : 0;
		}
	}
	return NULL;
}

/* The end of a JSON number at p (strict grammar), or NULL. */
static const char *num_end(const char *p, const char *end)
{
	if (p < end && *p == '-')
		p++;
	if (p == end || *p < '0' || *p > '9')
		return NULL;
	if (*p == '0')
		p++;
	else
		while (p < end && *p >= '0' && *p <= '9')
			p++;
	if (p < end && *p == '.') {
		if (++p == end || *p < '0' || *p > '9')
			return NULL;
		while (p < end && *p >= '0' && *p <= '9')
			p++;
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		if (++p < end && (*p == '+' || *p == '-'))
			p++;
		if (p == end || *p < '0' || *p > '9')
			return NULL;
		while (p < end && *p >= '0' && *p <= '9')
			p++;
	}
	return p;
}

/* The bytes value_end stops at inside objects and lists. */
static const bool special[256] =
	{['"'] = true, ['{'] = true, ['}'] = true, ['['] = true, [']'] = true};

/* The end of the value at p: strings, numbers and literals exactly, objects and arrays by
 * bracket depth (their contents checked later, or by cJSON for an id). NULL when malformed. */
static const char *value_end(const char *p, const char *end)
{
	bool esc;
	if (p == end)
		return NULL;
	if (*p == '"')
		return str_end(p, end, &esc);
	if (*p == '{' || *p == '[') {
		int depth = 0;
		for (; p < end; p++) {
			while (p < end && !special[(unsigned char)*p])
				p++;
			if (p == end)
				break;
			if (*p == '"') {
				if (!(p = str_end(p, end, &esc)))
					return NULL;
				p--;
			} else if (*p == '{' || *p == '[') {
				depth++;
			} else if ((*p == '}' || *p == ']') && --depth == 0) {
				return p + 1;
			}
		}
		return NULL;
	}
	static const char *const lit[] = {"true", "false", "null"};
	for (int i = 0; i < 3; i++) {
		size_t n = strlen(lit[i]);
		if ((size_t)(end - p) >= n && !memcmp(p, lit[i], n))
			return p + n;
	}
	return num_end(p, end);
}

/* The end of the JSON value at p checked strictly (objects and lists too, up to 64 deep), or
 * NULL. */
static const char *valid_end(const char *p, const char *end, int depth)
{
	if (p == end || depth > 64)
		return NULL;
	if (*p != '{' && *p != '[')
		return value_end(p, end);
	char close = *p == '{' ? '}' : ']';
	p = ws(p + 1, end);
	if (p < end && *p == close)
		return p + 1;
	for (;;) {
		if (close == '}') {
			bool esc;
			if (p == end || *p != '"' || !(p = str_end(p, end, &esc)))
				return NULL;
			p = ws(p, end);
			if (p == end || *p != ':')
				return NULL;
			p = ws(p + 1, end);
		}
		if (!(p = valid_end(p, end, depth + 1)))
			return NULL;
		p = ws(p, end);
		if (p < end && *p == close)
			return p + 1;
		if (p == end || *p != ',')
			return NULL;
		p = ws(p + 1, end);
	}
}

static bool key_is(const char *k, size_t n, const char *want)
{
	return strlen(want) == n && !memcmp(k, want, n);
}

/* The flag of l that key k[kn] sets (sequence_start, _end, _state), or NULL. */
static bool *seq_flag(tctl_line *l, const char *k, size_t kn)
{
	return key_is(k, kn, "sequence_start")	 ? &l->seq_start
	       : key_is(k, kn, "sequence_end")	 ? &l->seq_end
	       : key_is(k, kn, "sequence_state") ? &l->seq_state
						 : NULL;
}

bool tctl_jsonl_scan(const char *p, const char *end, tctl_line *l, char *err, size_t errlen)
{
	const char *start = p;
	bool *f;
	memset(l, 0, sizeof(*l));
	p = ws(p, end);
	if (p == end)
		return FAIL("empty line");
	if (*p != '{')
		return FAIL("not a JSON object");
	p = ws(p + 1, end);
	if (p < end && *p == '}')
		p++;
	else
		for (;;) {
			bool esc;
			const char *k = p,
				   *ke = p < end && *p == '"' ? str_end(p, end, &esc) : NULL;
			if (!ke)
				return FAIL("malformed JSON at byte %zu (expected a key)",
					    (size_t)(p - start));
			p = ws(ke, end);
			if (p == end || *p != ':')
				return FAIL("malformed JSON at byte %zu (expected ':')",
					    (size_t)(p - start));
			k++;
			size_t kn = (size_t)(ke - k) - 1;
			/* inputs are checked as they are parsed; the rest strictly here */
			const char *v = ws(p + 1, end), *ve = key_is(k, kn, "inputs")
								      ? value_end(v, end)
								      : valid_end(v, end, 0);
			if (!ve)
				return FAIL("malformed JSON at byte %zu (a bad value)",
					    (size_t)(v - start));
			if (key_is(k, kn, "id")) {
				l->id = (tctl_span){v, (size_t)(ve - v)};
			} else if (key_is(k, kn, "model")) {
				if (*v != '"' || memchr(v, '\\', (size_t)(ve - v)))
					return FAIL("model: not a model name string");
				l->model = (tctl_span){v + 1, (size_t)(ve - v) - 2};
			} else if (key_is(k, kn, "inputs")) {
				if (*v != '{' || ve[-1] != '}') /* the inside is parsed later */
					return FAIL("inputs: not an object");
				l->inputs = (tctl_span){v, (size_t)(ve - v)};
			} else if (key_is(k, kn, "sequence_id")) {
				l->seq_id = (tctl_span){v, (size_t)(ve - v)};
			} else if ((f = seq_flag(l, k, kn))) {
				if (ve - v == 4 && !memcmp(v, "true", 4))
					*f = true;
				else if (!(ve - v == 5 && !memcmp(v, "false", 5)))
					return FAIL("%.*s: true or false", (int)kn, k);
			}
			p = ws(ve, end);
			if (p < end && *p == ',') {
				p = ws(p + 1, end);
				continue;
			}
			if (p < end && *p == '}') {
				p++;
				break;
			}
			return FAIL("malformed JSON at byte %zu (expected ',' or '}')",
				    (size_t)(p - start));
		}
	if (ws(p, end) != end)
		return FAIL("malformed JSON: text after the object");
	if (!l->model.p)
		return FAIL("no \"model\"");
	if (!l->inputs.p)
		return FAIL("no \"inputs\"");
	if (!l->seq_id.p && (l->seq_start || l->seq_end || l->seq_state))
		return FAIL("sequence_start, sequence_end, sequence_state: need a sequence_id");
	return true;
}

/* ---- input rows ---- */

typedef struct rowp {
	const char *p, *end;
	const tctl_port *port;
	uint8_t *dst;
	size_t k; /* elements stored */
	char *err;
	size_t errlen;
} rowp;

/* One number (or true/false) at r->p stored as element k of the row. */
static bool row_number(rowp *r)
{
	char *err = r->err;
	size_t errlen = r->errlen;
	const char *p = r->p, *e;
	tsd_dtype dt = r->port->dtype;
	double v;
	if (r->k >= r->port->row_numel)
		return FAIL("inputs.%s: more values than a row holds", r->port->name);
	if (p < r->end && (*p == 't' || *p == 'f')) {
		if (!(e = value_end(p, r->end))) /* "true" or "false" */
			return FAIL("inputs.%s[%zu]: not a number", r->port->name, r->k);
		v = *p == 't';
	} else if (p == r->end || !(*p == '-' || (*p >= '0' && *p <= '9'))) {
		return FAIL("inputs.%s[%zu]: not a number", r->port->name, r->k);
	} else {
		const char *q = p + (*p == '-'), *d0 = q;
		int64_t iv = 0;
		while (q < r->end && *q >= '0' && *q <= '9' && q - d0 < 17)
			iv = iv * 10 + (*q++ - '0');
		e = q;
		if (q == d0 || (*d0 == '0' && q - d0 > 1))
			return FAIL("inputs.%s[%zu]: not a number", r->port->name, r->k);
		if (q < r->end &&
		    (*q == '.' || *q == 'e' || *q == 'E' || (*q >= '0' && *q <= '9')) &&
		    !(e = num_end(p, r->end)))
			return FAIL("inputs.%s[%zu]: not a number", r->port->name, r->k);
		if (q == e) { /* an integer of at most 17 digits */
			iv = *p == '-' ? -iv : iv;
			if (dt == TSD_I32 && iv >= INT32_MIN && iv <= INT32_MAX) {
				int32_t x = (int32_t)iv;
				memcpy(r->dst + r->k++ * 4, &x, 4);
				r->p = e;
				return true;
			}
			if (dt == TSD_I64) {
				memcpy(r->dst + r->k++ * 8, &iv, 8);
				r->p = e;
				return true;
			}
			v = (double)iv;
		} else {
			char tok[64];
			size_t n = (size_t)(e - p);
			if (n >= sizeof(tok))
				return FAIL("inputs.%s[%zu]: number too long", r->port->name, r->k);
			memcpy(tok, p, n);
			tok[n] = '\0';
			v = strtod(tok, NULL);
			if (dt == TSD_I64 && !strpbrk(tok, ".eE")) { /* exact past 2^53 */
				char *end;
				errno = 0;
				long long x = strtoll(tok, &end, 10);
				if (errno || *end)
					return FAIL("inputs.%s[%zu]: %s is not a value of int64",
						    r->port->name, r->k, tok);
				memcpy(r->dst + r->k++ * 8, &x, 8);
				r->p = e;
				return true;
			}
		}
	}
	if (dt == TSD_F32 && isfinite(v)) {
		float x = (float)v;
		memcpy(r->dst + r->k++ * 4, &x, 4);
	} else if (tctl_value_fits(dt, v)) {
		tctl_value_store(dt, v, r->dst + r->k++ * tsd_dtype_size(dt));
	} else {
		return FAIL("inputs.%s[%zu]: %.17g is not a value of %s", r->port->name, r->k, v,
			    tsd_dtype_name(dt));
	}
	r->p = e;
	return true;
}

/* The nested lists of the row's dimensions from depth on (one number past the last). */
static bool row_nested(rowp *r, int depth, int ndim, const int64_t *dims)
{
	char *err = r->err;
	size_t errlen = r->errlen;
	r->p = ws(r->p, r->end);
	if (depth == ndim)
		return row_number(r);
	if (r->p == r->end || *r->p != '[')
		return FAIL("inputs.%s: expected a list of %lld at depth %d", r->port->name,
			    (long long)dims[depth], depth);
	r->p++;
	for (int64_t i = 0; i < dims[depth]; i++) {
		if (i) {
			r->p = ws(r->p, r->end);
			if (r->p == r->end || *r->p != ',')
				return FAIL(
					"inputs.%s: a list of %lld expected at depth %d, got %lld",
					r->port->name, (long long)dims[depth], depth, (long long)i);
			r->p++;
		}
		if (!row_nested(r, depth + 1, ndim, dims))
			return false;
	}
	r->p = ws(r->p, r->end);
	if (r->p == r->end || *r->p != ']')
		return FAIL("inputs.%s: a list of %lld expected at depth %d, got more",
			    r->port->name, (long long)dims[depth], depth);
	r->p++;
	return true;
}

bool tctl_jsonl_inputs(tctl_span inputs, const tctl_model *m, uint64_t implicit, void *const *rows,
		       char *err, size_t errlen)
{
	const char *p = inputs.p + 1, *end = inputs.p + inputs.n - 1; /* inside the braces */
	uint64_t seen = 0;
	int nseen = 0;
	for (p = ws(p, end); p < end;) {
		bool esc;
		const char *ke = *p == '"' ? str_end(p, end, &esc) : NULL;
		if (!ke)
			return FAIL("inputs: malformed JSON");
		const char *k = p + 1;
		size_t kn = (size_t)(ke - k) - 1;
		int i = 0;
		while (i < m->nin && !key_is(k, kn, m->in[i].name))
			i++;
		if (i == m->nin)
			return FAIL("inputs.%.*s: not an input of model %s",
				    (int)(kn < 128 ? kn : 128), k, m->name);
		if (seen & (1ull << i))
			return FAIL("inputs.%s: given twice", m->in[i].name);
		if (implicit & (1ull << i))
			return FAIL("inputs.%s: the sequence's state: the daemon holds it, "
				    "a step does not carry it",
				    m->in[i].name);
		p = ws(ke, end);
		if (p == end || *p != ':')
			return FAIL("inputs: malformed JSON");
		const tctl_port *pt = &m->in[i];
		int64_t dims[TSD_MAX_DIMS];
		int nd = 0;
		for (int d = 0; d < pt->ndim; d++)
			if (d != pt->batch_axis)
				dims[nd++] = pt->shape[d];
		rowp r = {p + 1, end, pt, rows[i], 0, err, errlen};
		if (!row_nested(&r, 0, nd, dims))
			return false;
		if (r.k != pt->row_numel)
			return FAIL("inputs.%s: %zu values, a row has %zu", pt->name, r.k,
				    pt->row_numel);
		seen |= 1ull << i;
		nseen++;
		p = ws(r.p, end);
		if (p < end && *p == ',') {
			p = ws(p + 1, end);
			if (p == end) /* a trailing comma */
				return FAIL("inputs: malformed JSON");
		} else if (p != end) {
			return FAIL("inputs: malformed JSON");
		}
	}
	if (nseen != m->nin)
		for (int i = 0; i < m->nin; i++)
			if (!(seen & (1ull << i)) && !(implicit & (1ull << i)))
				return FAIL("inputs.%s: missing", m->in[i].name);
	return true;
}

/* ---- output ---- */

bool tctl_buf_reserve(tctl_buf *b, size_t extra)
{
	if (b->n + extra <= b->cap)
		return true;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->n + extra)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

void tctl_buf_put(tctl_buf *b, const char *s, size_t n)
{
	if (!tctl_buf_reserve(b, n))
		return;
	memcpy(b->p + b->n, s, n);
	b->n += n;
}

void tctl_buf_puts(tctl_buf *b, const char *s)
{
	tctl_buf_put(b, s, strlen(s));
}

void tctl_buf_free(tctl_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

void tctl_jsonl_string(tctl_buf *b, const char *s)
{
	tctl_buf_put(b, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[8];
		if (c == '"' || c == '\\') {
			esc[0] = '\\', esc[1] = (char)c;
			tctl_buf_put(b, esc, 2);
		} else if (c < 0x20) {
			snprintf(esc, sizeof(esc), "\\u%04x", c);
			tctl_buf_put(b, esc, 6);
		} else {
			tctl_buf_put(b, s, 1);
		}
	}
	tctl_buf_put(b, "\"", 1);
}

/* v in decimal at p (room for 21 bytes); returns the length. */
static size_t fmt_int(char *p, int64_t v)
{
	char tmp[24];
	size_t n = 0, k = 0;
	uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	do
		tmp[n++] = (char)('0' + u % 10);
	while (u /= 10);
	if (v < 0)
		p[k++] = '-';
	while (n)
		p[k++] = tmp[--n];
	return k;
}

/* One element at p (room for 32 bytes); returns the length. */
static size_t fmt_elem(char *p, tsd_dtype dt, const uint8_t *src)
{
	switch (dt) {
	case TSD_BOOL:
	case TSD_U8:
		return fmt_int(p, *src);
	case TSD_I32: {
		int32_t x;
		memcpy(&x, src, 4);
		return fmt_int(p, x);
	}
	case TSD_I64: {
		int64_t x;
		memcpy(&x, src, 8);
		return fmt_int(p, x);
	}
	default: {
		double v = tctl_value_load(dt, src);
		if (!isfinite(v)) {
			memcpy(p, "null", 4);
			return 4;
		}
		if (v == (double)(int64_t)v && fabs(v) < 1e9 && (v != 0 || !signbit(v)))
			return fmt_int(p, (int64_t)v); /* what %.9g prints for these */
		if (dt == TSD_F32 && fabs(v) < 1e5 && v * 8 == (double)(int64_t)(v * 8)) {
			/* eighths (x.5, x.25, ...): at most 8 digits, exact, as %.9g prints them */
			static const char *const frac[8] = {"",	 "125", "25", "375",
							    "5", "625", "75", "875"};
			int64_t e8 = (int64_t)(fabs(v) * 8);
			size_t n = 0;
			if (v < 0)
				p[n++] = '-';
			n += fmt_int(p + n, e8 / 8);
			p[n++] = '.';
			memcpy(p + n, frac[e8 % 8], strlen(frac[e8 % 8]));
			return n + strlen(frac[e8 % 8]);
		}
		return (size_t)snprintf(p, 32, dt == TSD_F16 ? "%.5g" : "%.9g", v);
	}
	}
}

void tctl_jsonl_row(tctl_buf *b, tsd_dtype dt, const void *src, const int64_t *dims, int ndim)
{
	size_t numel = 1, es = tsd_dtype_size(dt);
	for (int d = 0; d < ndim; d++)
		numel *= (size_t)dims[d];
	if (!tctl_buf_reserve(b, numel * (24 + 2 * (size_t)ndim) + 2 * (size_t)ndim + 2))
		return;
	char *p = b->p + b->n;
	int64_t idx[TSD_MAX_DIMS] = {0};
	for (int d = 0; d < ndim; d++)
		*p++ = '[';
	for (size_t i = 0; i < numel; i++) {
		p += fmt_elem(p, dt, (const uint8_t *)src + i * es);
		int d = ndim - 1; /* close the lists this element ends, open the next ones */
		while (d >= 0 && ++idx[d] == dims[d]) {
			idx[d--] = 0;
			*p++ = ']';
		}
		if (d >= 0 && i + 1 < numel) {
			*p++ = ',';
			for (int e = d + 1; e < ndim; e++)
				*p++ = '[';
		}
	}
	if (!numel) /* a zero dimension: empty lists */
		for (int d = 0; d < ndim; d++)
			*p++ = ']';
	b->n = (size_t)(p - b->p);
}
