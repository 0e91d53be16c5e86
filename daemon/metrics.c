/* metrics.c: fixed-bucket histograms with quantile estimates, their stats JSON, and the
 * Prometheus text exposition writer (metrics.h). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

bool dmn_hist_init(dmn_hist *h, const double *bounds, int n)
{
	memset(h, 0, sizeof(*h));
	if (n < 1 || n > DMN_HIST_MAX_BOUNDS)
		return false;
	for (int b = 0; b < n; b++)
		if (!isfinite(bounds[b]) || (b && bounds[b] <= bounds[b - 1]))
			return false;
	memcpy(h->bounds, bounds, sizeof(double) * (size_t)n);
	h->nbounds = n;
	return true;
}

/* lo * mult[k % nmult] * base^(k / nmult) up to hi (with a relative tolerance for rounding). */
static bool init_series(dmn_hist *h, double lo, double hi, const double *mult, int nmult, double base)
{
	double b[DMN_HIST_MAX_BOUNDS];
	int n = 0;
	memset(h, 0, sizeof(*h));
	if (!(lo > 0) || !(hi >= lo) || !isfinite(hi))
		return false;
	for (double scale = lo;; scale *= base)
		for (int k = 0; k < nmult; k++) {
			double v = scale * mult[k];
			if (v > hi * (1 + 1e-9))
				return dmn_hist_init(h, b, n);
			if (n == DMN_HIST_MAX_BOUNDS)
				return false;
			b[n++] = v;
		}
}

bool dmn_hist_init_125(dmn_hist *h, double lo, double hi)
{
	static const double m[] = {1, 2, 5};
	return init_series(h, lo, hi, m, 3, 10);
}

bool dmn_hist_init_pow2(dmn_hist *h, double lo, double hi)
{
	static const double m[] = {1};
	return init_series(h, lo, hi, m, 1, 2);
}

void dmn_hist_observe(dmn_hist *h, double v)
{
	if (isnan(v))
		return;
	int lo = 0, hi = h->nbounds; /* the first bucket whose bound is >= v */
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (h->bounds[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	h->counts[lo]++;
	h->count++;
	h->sum += v;
}

uint64_t dmn_hist_cumulative(const dmn_hist *h, int b)
{
	uint64_t c = 0;
	for (int k = 0; k <= b && k <= h->nbounds; k++)
		c += h->counts[k];
	return c;
}

double dmn_hist_quantile(const dmn_hist *h, double q)
{
	if (!h->count)
		return NAN;
	q = q < 0 ? 0 : q > 1 ? 1 : q;
	double rank = q * (double)h->count;
	uint64_t before = 0;
	for (int b = 0; b <= h->nbounds; b++) {
		uint64_t c = h->counts[b];
		if (!c || (double)(before + c) < rank) {
			before += c;
			continue;
		}
		if (b == h->nbounds)
			return h->nbounds ? h->bounds[b - 1] : INFINITY;
		double upper = h->bounds[b], lower = b ? h->bounds[b - 1] : upper > 0 ? 0 : upper;
		return lower + (upper - lower) * (rank - (double)before) / (double)c;
	}
	return h->nbounds ? h->bounds[h->nbounds - 1] : INFINITY; /* not reached: rank <= count */
}

cJSON *dmn_hist_json(const dmn_hist *h)
{
	cJSON *o = cJSON_CreateObject(), *buckets = cJSON_CreateArray();
	bool ok = o && buckets && cJSON_AddNumberToObject(o, "count", (double)h->count) &&
		  cJSON_AddNumberToObject(o, "sum", h->sum);
	for (int k = 0; k < 2 && ok; k++) {
		const char *key = k ? "p99" : "p50";
		double v = dmn_hist_quantile(h, k ? 0.99 : 0.5);
		ok = isfinite(v) ? cJSON_AddNumberToObject(o, key, v) != NULL : cJSON_AddNullToObject(o, key) != NULL;
	}
	uint64_t cum = 0;
	for (int b = 0; b < h->nbounds && ok; b++) {
		cum += h->counts[b];
		cJSON *pair = cJSON_CreateArray(), *le = cJSON_CreateNumber(h->bounds[b]);
		cJSON *c = cJSON_CreateNumber((double)cum);
		if (!(ok = pair && le && c)) {
			cJSON_Delete(pair);
			cJSON_Delete(le);
			cJSON_Delete(c);
			break;
		}
		cJSON_AddItemToArray(pair, le);
		cJSON_AddItemToArray(pair, c);
		cJSON_AddItemToArray(buckets, pair);
	}
	if (ok && cJSON_AddItemToObject(o, "buckets", buckets))
		return o;
	cJSON_Delete(buckets);
	cJSON_Delete(o);
	return NULL;
}

/* --- the Prometheus text format --- */

static void prom_fail(dmn_prom *p, dmn_prom_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void prom_fail(dmn_prom *p, dmn_prom_status s, const char *fmt, ...)
{
	if (p->status)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->msg, sizeof(p->msg), fmt, ap);
	va_end(ap);
	p->status = s;
}

static bool reserve(dmn_prom *p, size_t more)
{
	if (p->status)
		return false;
	if (p->len + more + 1 <= p->cap)
		return true;
	size_t cap = p->cap ? p->cap : 1024;
	while (cap < p->len + more + 1)
		cap *= 2;
	char *b = realloc(p->buf, cap);
	if (!b) {
		prom_fail(p, DMN_PROM_ENOMEM, "no memory for %zu bytes of metrics", cap);
		return false;
	}
	p->buf = b;
	p->cap = cap;
	return true;
}

static void put(dmn_prom *p, const char *s, size_t n)
{
	if (!reserve(p, n))
		return;
	memcpy(p->buf + p->len, s, n);
	p->len += n;
	p->buf[p->len] = 0;
}

static void puts_(dmn_prom *p, const char *s)
{
	put(p, s, strlen(s));
}

/* s with backslash and newline escaped, and double quote too when quote (label values). */
static void put_escaped(dmn_prom *p, const char *s, bool quote)
{
	for (; *s; s++) {
		if (*s == '\\')
			put(p, "\\\\", 2);
		else if (*s == '\n')
			put(p, "\\n", 2);
		else if (*s == '"' && quote)
			put(p, "\\\"", 2);
		else
			put(p, s, 1);
	}
}

/* The shortest of %.15g and %.17g that reads back as v; NaN, +Inf, -Inf as Prometheus spells them. */
static const char *fmt_num(char *buf, size_t len, double v)
{
	if (isnan(v))
		return "NaN";
	if (isinf(v))
		return v > 0 ? "+Inf" : "-Inf";
	snprintf(buf, len, "%.15g", v);
	if (strtod(buf, NULL) != v)
		snprintf(buf, len, "%.17g", v);
	return buf;
}

/* [a-zA-Z_:][a-zA-Z0-9_:]* for metric names (colons allowed), without colons for labels. */
static bool valid_name(const char *s, bool metric)
{
	if (!s || !*s || (*s >= '0' && *s <= '9'))
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      *s == '_' || (metric && *s == ':')))
			return false;
	return true;
}

/* HELP and TYPE when name starts a family; checks the names. False once p has failed. */
static bool family(dmn_prom *p, const char *name, const char *help, const char *type,
		   const dmn_label *labels, int nlabels)
{
	if (p->status)
		return false;
	if (!valid_name(name, true) || strlen(name) >= sizeof(p->family) - 8)
		prom_fail(p, DMN_PROM_EINVAL, "metric name '%.64s': not [a-zA-Z_:][a-zA-Z0-9_:]* of at most "
			  "%zu bytes", name ? name : "(null)", sizeof(p->family) - 9);
	for (int k = 0; k < nlabels; k++)
		if (!valid_name(labels[k].name, false) || !strcmp(labels[k].name, "le") || !labels[k].value)
			prom_fail(p, DMN_PROM_EINVAL, "%s: label '%.64s': not [a-zA-Z_][a-zA-Z0-9_]* (nor 'le'), or "
				  "no value", name, labels[k].name ? labels[k].name : "(null)");
	if (p->status || !strcmp(p->family, name))
		return !p->status;
	char line[160];
	snprintf(line, sizeof(line), "# TYPE %s ", name);
	size_t ll = strlen(line);
	for (const char *at = p->buf; at && (at = strstr(at, line)); at += ll)
		if (at == p->buf || at[-1] == '\n') {
			prom_fail(p, DMN_PROM_EINVAL, "%s: its family was written earlier, not in one group", name);
			return false;
		}
	snprintf(p->family, sizeof(p->family), "%s", name);
	puts_(p, "# HELP ");
	puts_(p, name);
	puts_(p, " ");
	put_escaped(p, help ? help : "", false);
	puts_(p, "\n");
	puts_(p, line);
	puts_(p, type);
	puts_(p, "\n");
	return !p->status;
}

/* name+suffix{labels[,le="le"]} value\n */
static void sample(dmn_prom *p, const char *name, const char *suffix, const dmn_label *labels,
		   int nlabels, const char *le, double value)
{
	char num[32];
	puts_(p, name);
	puts_(p, suffix);
	if (nlabels || le) {
		puts_(p, "{");
		for (int k = 0; k < nlabels; k++) {
			puts_(p, k ? "," : "");
			puts_(p, labels[k].name);
			puts_(p, "=\"");
			put_escaped(p, labels[k].value, true);
			puts_(p, "\"");
		}
		if (le) {
			puts_(p, nlabels ? ",le=\"" : "le=\"");
			puts_(p, le);
			puts_(p, "\"");
		}
		puts_(p, "}");
	}
	puts_(p, " ");
	puts_(p, fmt_num(num, sizeof(num), value));
	puts_(p, "\n");
}

void dmn_prom_init(dmn_prom *p)
{
	memset(p, 0, sizeof(*p));
}

void dmn_prom_free(dmn_prom *p)
{
	free(p->buf);
	memset(p, 0, sizeof(*p));
}

void dmn_prom_counter(dmn_prom *p, const char *name, const char *help, const dmn_label *labels,
		      int nlabels, double value)
{
	if (family(p, name, help, "counter", labels, nlabels))
		sample(p, name, "", labels, nlabels, NULL, value);
}

void dmn_prom_gauge(dmn_prom *p, const char *name, const char *help, const dmn_label *labels,
		    int nlabels, double value)
{
	if (family(p, name, help, "gauge", labels, nlabels))
		sample(p, name, "", labels, nlabels, NULL, value);
}

void dmn_prom_hist(dmn_prom *p, const char *name, const char *help, const dmn_label *labels,
		   int nlabels, const dmn_hist *h)
{
	if (!family(p, name, help, "histogram", labels, nlabels))
		return;
	char le[32];
	uint64_t cum = 0;
	for (int b = 0; b < h->nbounds; b++) {
		cum += h->counts[b];
		sample(p, name, "_bucket", labels, nlabels, fmt_num(le, sizeof(le), h->bounds[b]), (double)cum);
	}
	sample(p, name, "_bucket", labels, nlabels, "+Inf", (double)h->count);
	sample(p, name, "_sum", labels, nlabels, NULL, h->sum);
	sample(p, name, "_count", labels, nlabels, NULL, (double)h->count);
}

const char *dmn_prom_finish(dmn_prom *p, dmn_prom_status *status)
{
	if (!p->status && !p->buf)
		reserve(p, 0);
	if (p->buf && !p->status)
		p->buf[p->len] = 0;
	if (status)
		*status = p->status;
	return p->status ? NULL : p->buf;
}
