/* config.c: the config table, defaults, values from JSON (the file, the defaults, flags) with
 * their type and bounds checks, and the JSON dump. Cross-key checks are in config_check.c. */
#include "config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* clang-format off */
const dmn_cfg_key dmn_cfg_keys[] = {
#define DMN_CFG(key, type, lo, hi, choices, def, doc) \
	{#key, DMN_CFG_##type, (double)(lo), (double)(hi), choices, def, doc, offsetof(dmn_config, key)},
#include "config.def"
#undef DMN_CFG
};
const int dmn_cfg_nkeys = (int)(sizeof(dmn_cfg_keys) / sizeof(dmn_cfg_keys[0]));

static const char *const type_names[DMN_CFG_TYPE_COUNT] = {
	[DMN_CFG_STR] = "string", [DMN_CFG_INT] = "int", [DMN_CFG_U64] = "uint64",
	[DMN_CFG_BOOL] = "bool", [DMN_CFG_DBL] = "double", [DMN_CFG_ENUM] = "enum",
	[DMN_CFG_STR_LIST] = "string list", [DMN_CFG_INT_LIST] = "int list",
};
/* clang-format on */

const char *dmn_cfg_type_name(dmn_cfg_type type)
{
	return type >= 0 && type < DMN_CFG_TYPE_COUNT ? type_names[type] : "?";
}

const dmn_cfg_key *dmn_cfg_find(const char *name)
{
	for (int i = 0; i < dmn_cfg_nkeys; i++)
		if (!strcmp(dmn_cfg_keys[i].name, name))
			return &dmn_cfg_keys[i];
	return NULL;
}

/* Levenshtein distance over at most 64 bytes of each (keys are shorter; a longer typo is far
 * from everything anyway). */
static int edit_distance(const char *a, const char *b)
{
	int la = (int)strnlen(a, 64), lb = (int)strnlen(b, 64);
	int row[65];
	for (int j = 0; j <= lb; j++)
		row[j] = j;
	for (int i = 1; i <= la; i++) {
		int diag = row[0];
		row[0] = i;
		for (int j = 1; j <= lb; j++) {
			int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			diag = up;
			row[j] = best;
		}
	}
	return row[lb];
}

const dmn_cfg_key *dmn_cfg_nearest(const char *name)
{
	const dmn_cfg_key *best = &dmn_cfg_keys[0];
	int bd = edit_distance(name, best->name);
	for (int i = 1; i < dmn_cfg_nkeys; i++) {
		int d = edit_distance(name, dmn_cfg_keys[i].name);
		if (d < bd)
			bd = d, best = &dmn_cfg_keys[i];
	}
	return best;
}

dmn_cfg_status dmn_cfg_fail(char *err, size_t errlen, dmn_cfg_status st, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return st;
}

/* A number as written in messages: integers exactly, others with all their digits. */
static void fmt_num(char *out, size_t cap, double v)
{
	if (v == floor(v) && fabs(v) < 1e18)
		snprintf(out, cap, "%.0f", v);
	else
		snprintf(out, cap, "%.17g", v);
}

/* A JSON value as it appears in a message: its text, shortened. */
static void fmt_json(char *out, size_t cap, const cJSON *j)
{
	char *s = cJSON_PrintUnformatted(j);
	snprintf(out, cap, "%.60s%s", s ? s : "?", s && strlen(s) > 60 ? "..." : "");
	cJSON_free(s);
}

/* A parsed value of any type, owned until committed into a config. */
typedef union val {
	char *s;
	int64_t i;
	uint64_t u;
	bool b;
	double d;
	int e;
	dmn_strlist sl;
	dmn_intlist il;
} val;

static void val_free(const dmn_cfg_key *k, val *v)
{
	switch (k->type) {
	case DMN_CFG_STR:
		free(v->s);
		break;
	case DMN_CFG_STR_LIST:
		for (int i = 0; i < v->sl.n; i++)
			free(v->sl.v[i]);
		free(v->sl.v);
		break;
	case DMN_CFG_INT_LIST:
		free(v->il.v);
		break;
	default:
		break;
	}
	memset(v, 0, sizeof(*v));
}

/* One number of an integer key or list: integral and inside [lo, hi]. */
static dmn_cfg_status parse_int(const dmn_cfg_key *k, const cJSON *j, const char *where,
				double *out, char *err, size_t errlen)
{
	char got[80], lo[32], hi[32];
	fmt_json(got, sizeof(got), j);
	if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble) ||
	    j->valuedouble != floor(j->valuedouble))
		return dmn_cfg_fail(err, errlen, DMN_CFG_ETYPE, "%s: expected an integer, got %s", where,
			    got);
	fmt_num(lo, sizeof(lo), k->lo);
	fmt_num(hi, sizeof(hi), k->hi);
	if (j->valuedouble < k->lo || j->valuedouble > k->hi)
		return dmn_cfg_fail(err, errlen, DMN_CFG_ERANGE, "%s: %s is out of range [%s, %s]", where,
			    got, lo, hi);
	*out = j->valuedouble;
	return DMN_CFG_OK;
}

/* One string of a string key or list, its length inside [lo, hi]; *out is a copy. */
static dmn_cfg_status parse_str(const dmn_cfg_key *k, const cJSON *j, const char *where, char **out,
				char *err, size_t errlen)
{
	char got[80];
	fmt_json(got, sizeof(got), j);
	if (!cJSON_IsString(j))
		return dmn_cfg_fail(err, errlen, DMN_CFG_ETYPE, "%s: expected a string, got %s", where,
			    got);
	size_t len = strlen(j->valuestring);
	if ((double)len < k->lo || (double)len > k->hi)
		return dmn_cfg_fail(err, errlen, DMN_CFG_ERANGE,
			    "%s: %s is %zu bytes long; the length must be within [%.0f, %.0f]",
			    where, got, len, k->lo, k->hi);
	if (!(*out = strdup(j->valuestring)))
		return dmn_cfg_fail(err, errlen, DMN_CFG_ENOMEM, "%s: out of memory", where);
	return DMN_CFG_OK;
}

static dmn_cfg_status parse_list(const dmn_cfg_key *k, const cJSON *j, const char *where, val *v,
				 char *err, size_t errlen)
{
	char got[80], at[160];
	fmt_json(got, sizeof(got), j);
	if (!cJSON_IsArray(j))
		return dmn_cfg_fail(err, errlen, DMN_CFG_ETYPE, "%s: expected a JSON array (%s), got %s",
			    where, dmn_cfg_type_name(k->type), got);
	int n = cJSON_GetArraySize(j);
	if (n > DMN_CFG_LIST_MAX)
		return dmn_cfg_fail(err, errlen, DMN_CFG_ERANGE, "%s: %d elements, at most %d", where, n,
			    DMN_CFG_LIST_MAX);
	bool str = k->type == DMN_CFG_STR_LIST;
	void *arr = n ? calloc((size_t)n, str ? sizeof(char *) : sizeof(int64_t)) : NULL;
	if (n && !arr)
		return dmn_cfg_fail(err, errlen, DMN_CFG_ENOMEM, "%s: out of memory", where);
	if (str)
		v->sl = (dmn_strlist){0, arr};
	else
		v->il = (dmn_intlist){0, arr};
	int i = 0;
	for (const cJSON *e = j->child; e; e = e->next, i++) {
		snprintf(at, sizeof(at), "%s[%d]", where, i);
		dmn_cfg_status st;
		if (str) {
			st = parse_str(k, e, at, &v->sl.v[i], err, errlen);
			v->sl.n += st == DMN_CFG_OK;
		} else {
			double d = 0;
			st = parse_int(k, e, at, &d, err, errlen);
			v->il.v[i] = (int64_t)d;
			v->il.n += st == DMN_CFG_OK;
		}
		if (st != DMN_CFG_OK) {
			val_free(k, v);
			return st;
		}
	}
	return DMN_CFG_OK;
}

/* Check j against key k and make it a value. where names it in messages ("file: key", "--key"). */
static dmn_cfg_status parse_val(const dmn_cfg_key *k, const cJSON *j, const char *where, val *v,
				char *err, size_t errlen)
{
	char got[80], lo[32], hi[32];
	double d = 0;
	dmn_cfg_status st;
	memset(v, 0, sizeof(*v));
	fmt_json(got, sizeof(got), j);
	switch (k->type) {
	case DMN_CFG_STR:
		return parse_str(k, j, where, &v->s, err, errlen);
	case DMN_CFG_INT:
		st = parse_int(k, j, where, &d, err, errlen);
		v->i = (int64_t)d;
		return st;
	case DMN_CFG_U64:
		st = parse_int(k, j, where, &d, err, errlen);
		v->u = (uint64_t)d;
		return st;
	case DMN_CFG_BOOL:
		if (!cJSON_IsBool(j))
			return dmn_cfg_fail(err, errlen, DMN_CFG_ETYPE,
				    "%s: expected true or false, got %s", where, got);
		v->b = cJSON_IsTrue(j);
		return DMN_CFG_OK;
	case DMN_CFG_DBL:
		if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble))
			return dmn_cfg_fail(err, errlen, DMN_CFG_ETYPE, "%s: expected a number, got %s",
				    where, got);
		fmt_num(lo, sizeof(lo), k->lo);
		fmt_num(hi, sizeof(hi), k->hi);
		if (j->valuedouble < k->lo || j->valuedouble > k->hi)
			return dmn_cfg_fail(err, errlen, DMN_CFG_ERANGE, "%s: %s is out of range [%s, %s]",
				    where, got, lo, hi);
		v->d = j->valuedouble;
		return DMN_CFG_OK;
	case DMN_CFG_ENUM:
		if (cJSON_IsString(j)) {
			size_t len = strlen(j->valuestring);
			int idx = 0;
			for (const char *c = k->choices; *c; idx++) {
				size_t cl = strcspn(c, "|");
				if (cl == len && !strncmp(c, j->valuestring, len)) {
					v->e = idx;
					return DMN_CFG_OK;
				}
				c += cl + (c[cl] == '|');
			}
		}
		return dmn_cfg_fail(err, errlen, cJSON_IsString(j) ? DMN_CFG_ERANGE : DMN_CFG_ETYPE,
			    "%s: expected one of %s, got %s", where, k->choices, got);
	case DMN_CFG_STR_LIST:
	case DMN_CFG_INT_LIST:
		return parse_list(k, j, where, v, err, errlen);
	default:
		return dmn_cfg_fail(err, errlen, DMN_CFG_EINVALID, "%s: key of unknown type", where);
	}
}

/* Move v into cfg's field for k, freeing what was there. */
static void commit(dmn_config *cfg, const dmn_cfg_key *k, val *v)
{
	char *f = (char *)cfg + k->offset;
	val old;
	memset(&old, 0, sizeof(old));
	switch (k->type) {
	case DMN_CFG_STR:
		old.s = *(char **)f;
		*(char **)f = v->s;
		break;
	case DMN_CFG_INT:
		*(int64_t *)f = v->i;
		break;
	case DMN_CFG_U64:
		*(uint64_t *)f = v->u;
		break;
	case DMN_CFG_BOOL:
		*(bool *)f = v->b;
		break;
	case DMN_CFG_DBL:
		*(double *)f = v->d;
		break;
	case DMN_CFG_ENUM:
		*(int *)f = v->e;
		break;
	case DMN_CFG_STR_LIST:
		old.sl = *(dmn_strlist *)f;
		*(dmn_strlist *)f = v->sl;
		break;
	case DMN_CFG_INT_LIST:
		old.il = *(dmn_intlist *)f;
		*(dmn_intlist *)f = v->il;
		break;
	default:
		break;
	}
	val_free(k, &old);
	memset(v, 0, sizeof(*v));
}

void dmn_config_free(dmn_config *cfg)
{
	for (int i = 0; i < dmn_cfg_nkeys; i++) {
		val zero;
		memset(&zero, 0, sizeof(zero));
		commit(cfg, &dmn_cfg_keys[i], &zero); /* frees the old value */
	}
	memset(cfg, 0, sizeof(*cfg));
}

dmn_cfg_status dmn_config_defaults(dmn_config *cfg, char *err, size_t errlen)
{
	memset(cfg, 0, sizeof(*cfg));
	for (int i = 0; i < dmn_cfg_nkeys; i++) {
		const dmn_cfg_key *k = &dmn_cfg_keys[i];
		char where[96];
		snprintf(where, sizeof(where), "the default of %s", k->name);
		cJSON *j = cJSON_Parse(k->def);
		if (!j) {
			dmn_config_free(cfg);
			return dmn_cfg_fail(err, errlen, DMN_CFG_EPARSE, "%s: %s is not JSON (config.def)",
				    where, k->def);
		}
		val v;
		dmn_cfg_status st = parse_val(k, j, where, &v, err, errlen);
		cJSON_Delete(j);
		if (st != DMN_CFG_OK) {
			dmn_config_free(cfg);
			return st;
		}
		commit(cfg, k, &v);
	}
	return DMN_CFG_OK;
}

/* Line and column (from 1) of byte pos in text. */
static void line_col(const char *text, size_t pos, int *line, int *col)
{
	*line = 1, *col = 1;
	for (size_t i = 0; i < pos; i++) {
		if (text[i] == '\n')
			++*line, *col = 1;
		else
			++*col;
	}
}

dmn_cfg_status dmn_config_apply_json(dmn_config *cfg, const char *text, size_t len,
				     const char *origin, char *err, size_t errlen)
{
	if (memchr(text, 0, len))
		return dmn_cfg_fail(err, errlen, DMN_CFG_EPARSE,
			    "%s: malformed JSON: a NUL byte at offset %zu", origin,
			    (size_t)((const char *)memchr(text, 0, len) - text));
	/* cJSON checks for trailing garbage only up to a terminating NUL inside the length. */
	char *buf = malloc(len + 1);
	if (!buf)
		return dmn_cfg_fail(err, errlen, DMN_CFG_ENOMEM, "%s: out of memory", origin);
	memcpy(buf, text, len);
	buf[len] = 0;
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(buf, len + 1, &end, true);
	if (!root) {
		size_t pos = end && end >= buf && end <= buf + len ? (size_t)(end - buf) : len;
		int line, col;
		line_col(buf, pos, &line, &col);
		char near[24];
		size_t m = 0;
		for (size_t i = pos; i < len && m < 20 && buf[i] != '\n'; i++)
			near[m++] = buf[i] >= 32 && buf[i] < 127 ? buf[i] : '?';
		near[m] = 0;
		free(buf);
		return dmn_cfg_fail(err, errlen, DMN_CFG_EPARSE, "%s:%d:%d: malformed JSON near \"%s\"",
			    origin, line, col, near);
	}
	free(buf);
	dmn_cfg_status st = DMN_CFG_OK;
	val vals[sizeof(dmn_cfg_keys) / sizeof(dmn_cfg_keys[0])];
	bool seen[sizeof(dmn_cfg_keys) / sizeof(dmn_cfg_keys[0])] = {0};
	if (!cJSON_IsObject(root)) {
		st = dmn_cfg_fail(err, errlen, DMN_CFG_EPARSE, "%s: the top level must be a JSON object",
			  origin);
		goto out;
	}
	/* Check everything first, commit after: a rejected file changes nothing. */
	for (const cJSON *c = root->child; c; c = c->next) {
		const dmn_cfg_key *k = dmn_cfg_find(c->string);
		if (!k) {
			st = dmn_cfg_fail(err, errlen, DMN_CFG_EKEY,
				  "%s: unknown key \"%.64s\" (did you mean \"%s\"?)", origin,
				  c->string, dmn_cfg_nearest(c->string)->name);
			goto out;
		}
		int i = (int)(k - dmn_cfg_keys);
		if (seen[i]) {
			st = dmn_cfg_fail(err, errlen, DMN_CFG_EKEY, "%s: duplicate key \"%s\"", origin,
				  k->name);
			goto out;
		}
		char where[4200];
		snprintf(where, sizeof(where), "%s: %s", origin, k->name);
		if ((st = parse_val(k, c, where, &vals[i], err, errlen)) != DMN_CFG_OK)
			goto out;
		seen[i] = true;
	}
	for (int i = 0; i < dmn_cfg_nkeys; i++)
		if (seen[i])
			commit(cfg, &dmn_cfg_keys[i], &vals[i]), seen[i] = false;
out:
	for (int i = 0; i < dmn_cfg_nkeys; i++)
		if (seen[i])
			val_free(&dmn_cfg_keys[i], &vals[i]);
	cJSON_Delete(root);
	return st;
}

dmn_cfg_status dmn_config_apply_file(dmn_config *cfg, const char *path, char *err, size_t errlen)
{
	/* O_NONBLOCK: a FIFO named as the config must not hang the start; only regular files pass. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return dmn_cfg_fail(err, errlen, DMN_CFG_EIO, "%s: cannot open: %s", path, strerror(errno));
	struct stat sb;
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) || sb.st_size > (off_t)DMN_CFG_FILE_MAX) {
		close(fd);
		return dmn_cfg_fail(err, errlen, DMN_CFG_EIO, "%s: not a regular file of at most %u bytes",
			    path, DMN_CFG_FILE_MAX);
	}
	size_t cap = (size_t)sb.st_size, len = 0;
	char *buf = malloc(cap + 1);
	if (!buf) {
		close(fd);
		return dmn_cfg_fail(err, errlen, DMN_CFG_ENOMEM, "%s: out of memory", path);
	}
	while (len < cap) {
		ssize_t r = read(fd, buf + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	int rerr = errno;
	close(fd);
	if (len < cap) {
		free(buf);
		return dmn_cfg_fail(err, errlen, DMN_CFG_EIO, "%s: read %zu of %zu bytes: %s", path, len,
			    cap, strerror(rerr));
	}
	dmn_cfg_status st = dmn_config_apply_json(cfg, buf, len, path, err, errlen);
	free(buf);
	return st;
}

/* A flag's value as JSON of the key's type (see dmn_config_set). A number that is not JSON
 * becomes a string, so the type check names it. */
static cJSON *flag_json(const dmn_cfg_key *k, const char *value)
{
	cJSON *j;
	switch (k->type) {
	case DMN_CFG_STR:
	case DMN_CFG_ENUM:
		return cJSON_CreateString(value);
	case DMN_CFG_STR_LIST:
	case DMN_CFG_INT_LIST:
		if (value[0] == '[')
			return (j = cJSON_Parse(value)) ? j : cJSON_CreateString(value);
		if (!(j = cJSON_CreateArray()))
			return NULL;
		for (const char *p = value; *value;) {
			size_t n = strcspn(p, ",");
			char *part = strndup(p, n);
			cJSON *e = NULL;
			if (part && k->type == DMN_CFG_INT_LIST && !(e = cJSON_Parse(part)))
				e = cJSON_CreateString(part);
			else if (part && k->type == DMN_CFG_STR_LIST)
				e = cJSON_CreateString(part);
			free(part);
			if (!e || !cJSON_AddItemToArray(j, e)) {
				cJSON_Delete(e);
				cJSON_Delete(j);
				return NULL;
			}
			if (!p[n])
				break;
			p += n + 1;
		}
		return j;
	default:
		return (j = cJSON_Parse(value)) ? j : cJSON_CreateString(value);
	}
}

dmn_cfg_status dmn_config_set(dmn_config *cfg, const char *key, const char *value, char *err,
			      size_t errlen)
{
	const dmn_cfg_key *k = dmn_cfg_find(key);
	if (!k)
		return dmn_cfg_fail(err, errlen, DMN_CFG_EKEY, "unknown flag --%.64s (did you mean --%s?)",
			    key, dmn_cfg_nearest(key)->name);
	char where[80];
	snprintf(where, sizeof(where), "--%s", k->name);
	cJSON *j = flag_json(k, value);
	if (!j)
		return dmn_cfg_fail(err, errlen, DMN_CFG_ENOMEM, "%s: out of memory", where);
	val v;
	dmn_cfg_status st = parse_val(k, j, where, &v, err, errlen);
	cJSON_Delete(j);
	if (st == DMN_CFG_OK)
		commit(cfg, k, &v);
	return st;
}

char *dmn_config_json(const dmn_config *cfg, bool fmt)
{
	cJSON *o = cJSON_CreateObject();
	for (int i = 0; o && i < dmn_cfg_nkeys; i++) {
		const dmn_cfg_key *k = &dmn_cfg_keys[i];
		const char *f = (const char *)cfg + k->offset;
		cJSON *v = NULL;
		switch (k->type) {
		case DMN_CFG_STR:
			v = cJSON_CreateString(*(char *const *)f ? *(char *const *)f : "");
			break;
		case DMN_CFG_INT:
			v = cJSON_CreateNumber((double)*(const int64_t *)f);
			break;
		case DMN_CFG_U64:
			v = cJSON_CreateNumber((double)*(const uint64_t *)f);
			break;
		case DMN_CFG_BOOL:
			v = cJSON_CreateBool(*(const bool *)f);
			break;
		case DMN_CFG_DBL:
			v = cJSON_CreateNumber(*(const double *)f);
			break;
		case DMN_CFG_ENUM: {
			const char *c = k->choices;
			for (int e = *(const int *)f; e > 0 && strchr(c, '|'); e--)
				c = strchr(c, '|') + 1;
			char name[64];
			snprintf(name, sizeof(name), "%.*s", (int)strcspn(c, "|"), c);
			v = cJSON_CreateString(name);
			break;
		}
		case DMN_CFG_STR_LIST: {
			const dmn_strlist *l = (const dmn_strlist *)f;
			v = cJSON_CreateArray();
			for (int e = 0; v && e < l->n; e++) {
				cJSON *s = cJSON_CreateString(l->v[e]);
				if (!s || !cJSON_AddItemToArray(v, s)) {
					cJSON_Delete(s);
					cJSON_Delete(v);
					v = NULL;
				}
			}
			break;
		}
		case DMN_CFG_INT_LIST: {
			const dmn_intlist *l = (const dmn_intlist *)f;
			v = cJSON_CreateArray();
			for (int e = 0; v && e < l->n; e++) {
				cJSON *s = cJSON_CreateNumber((double)l->v[e]);
				if (!s || !cJSON_AddItemToArray(v, s)) {
					cJSON_Delete(s);
					cJSON_Delete(v);
					v = NULL;
				}
			}
			break;
		}
		default:
			break;
		}
		if (!v || !cJSON_AddItemToObject(o, k->name, v)) {
			cJSON_Delete(v);
			cJSON_Delete(o);
			o = NULL;
		}
	}
	char *s = o ? (fmt ? cJSON_Print(o) : cJSON_PrintUnformatted(o)) : NULL;
	char *copy = s ? strdup(s) : NULL;
	cJSON_free(s);
	cJSON_Delete(o);
	return copy;
}
