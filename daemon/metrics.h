/* metrics.h: the daemon's measurements: fixed-bucket histograms (latencies, batch sizes) with
 * quantile estimates, the Prometheus text exposition of /metrics, and histograms as stats JSON. */
#ifndef DMN_METRICS_H
#define DMN_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#define DMN_HIST_MAX_BOUNDS 48 /* finite bucket bounds of one histogram */

/* A histogram with fixed upper bounds ("le", inclusive: a value equal to a bound counts in that
 * bucket) and a last +Inf bucket. A plain struct: no allocation, copy it freely; not
 * thread-safe (the thread that owns it observes and reads it). */
typedef struct dmn_hist {
	int nbounds;
	double bounds[DMN_HIST_MAX_BOUNDS];     /* strictly increasing, finite */
	uint64_t counts[DMN_HIST_MAX_BOUNDS + 1]; /* per bucket (not cumulative); [nbounds]: +Inf */
	uint64_t count;
	double sum;
} dmn_hist;

/* Empty h with the n given bounds (1..DMN_HIST_MAX_BOUNDS, finite, strictly increasing);
 * false (h zeroed: every value lands in +Inf) if they are not. */
bool dmn_hist_init(dmn_hist *h, const double *bounds, int n);
/* Log-spaced bounds lo * {1, 2, 5} * 10^k up to hi (microseconds 1..1e7: 1, 2, 5, 10, ..., 1e7);
 * false as dmn_hist_init, or when lo <= 0 or hi < lo or there would be too many. */
bool dmn_hist_init_125(dmn_hist *h, double lo, double hi);
/* Bounds lo * 2^k up to hi (batch sizes 1..4096: 1, 2, 4, ..., 4096); false as dmn_hist_init_125. */
bool dmn_hist_init_pow2(dmn_hist *h, double lo, double hi);
/* Count v in its bucket and the sum. NaN is ignored. */
void dmn_hist_observe(dmn_hist *h, double v);
/* The q-quantile (0..1, clamped) as Prometheus's histogram_quantile estimates it: linear
 * interpolation in the bucket where the rank falls (the first bucket starting at 0 if its
 * bound is positive); a rank in +Inf gives the last finite bound. NaN when h is empty. */
double dmn_hist_quantile(const dmn_hist *h, double q);
/* Bucket b's cumulative count (b = nbounds: count). */
uint64_t dmn_hist_cumulative(const dmn_hist *h, int b);

/* h as {"count", "sum", "p50", "p99" (null when empty), "buckets": [[le, cumulative], ...]}
 * over the finite bounds (+Inf's cumulative is count). New object owned by the caller
 * (cJSON_Delete); NULL when memory runs out. */
cJSON *dmn_hist_json(const dmn_hist *h);

typedef enum dmn_prom_status {
	DMN_PROM_OK,
	DMN_PROM_EINVAL, /* a metric or label name not in Prometheus's alphabet, or a family split */
	DMN_PROM_ENOMEM,
	DMN_PROM_STATUS_COUNT
} dmn_prom_status;

/* One label of a series. Values are escaped on output (backslash, double quote, newline). */
typedef struct dmn_label {
	const char *name, *value;
} dmn_label;

/* A Prometheus text format (0.0.4) page being written. Each dmn_prom_* call writes one series;
 * the first series of a family writes its # HELP and # TYPE lines, so a family's series must be
 * written one after another (reopening an earlier family is DMN_PROM_EINVAL). Errors are
 * sticky: after the first, calls write nothing and dmn_prom_finish reports it. Owns buf. */
typedef struct dmn_prom {
	char *buf;
	size_t len, cap;
	dmn_prom_status status;
	char msg[160];    /* why, when status is not OK */
	char family[128]; /* the family being written ("" before the first) */
} dmn_prom;

void dmn_prom_init(dmn_prom *p);
/* Frees the text. p can be initialised again. */
void dmn_prom_free(dmn_prom *p);
/* A counter or gauge sample: name{labels} value. help may hold anything (escaped). */
void dmn_prom_counter(dmn_prom *p, const char *name, const char *help, const dmn_label *labels,
		      int nlabels, double value);
void dmn_prom_gauge(dmn_prom *p, const char *name, const char *help, const dmn_label *labels,
		    int nlabels, double value);
/* A histogram: name_bucket{labels,le="..."} cumulative for each bound and +Inf, name_sum, name_count. */
void dmn_prom_hist(dmn_prom *p, const char *name, const char *help, const dmn_label *labels,
		   int nlabels, const dmn_hist *h);
/* The page so far (NUL-terminated, owned by p, valid until the next call), or NULL with the
 * status in *status and its message in p->msg. */
const char *dmn_prom_finish(dmn_prom *p, dmn_prom_status *status);

#endif
