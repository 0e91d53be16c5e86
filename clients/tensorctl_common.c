/* tensorctl_common.c: what every tensorctl command uses: usage errors, a call's outcome as an
 * exit status, the clock, number arguments, a whole file read and the progress bar on stderr. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tensorctl.h"

int tctl_usage(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "tensorctl%s%s: ", cmd ? " " : "", cmd ? cmd : "");
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(tensorctl %s%s--help for usage)\n", cmd ? cmd : "", cmd ? " " : "");
	return TCTL_EXIT_USAGE;
}

int tctl_exit_for(tsd_status s, bool replied)
{
	if (s == TSD_OK)
		return TCTL_EXIT_OK;
	return replied ? TCTL_EXIT_DAEMON : TCTL_EXIT_TRANSPORT;
}

int tctl_outcome(tsd_client *c, tsd_status s, const tsd_reply *r)
{
	if (s == TSD_OK)
		return TCTL_EXIT_OK;
	fprintf(stderr, "tensorctl: %s: %s\n", tsd_status_name(s), tsd_client_message(c, r));
	if (s == TSD_SEQUENCE_ENDED)
		fprintf(stderr, "(tensorctl infer --sequence ID --start starts it)\n");
	return tctl_exit_for(s, r != NULL);
}

double tctl_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

bool tctl_parse_long(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (!*s || *end || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

char *tctl_read_file(const char *path, size_t *len, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n = -1;
	if (f && !fseek(f, 0, SEEK_END) && (n = ftell(f)) >= 0 && (size_t)n <= TCTL_FILE_MAX &&
	    !fseek(f, 0, SEEK_SET) && (buf = malloc((size_t)n + 1)) &&
	    fread(buf, 1, (size_t)n, f) == (size_t)n) {
		fclose(f);
		buf[n] = '\0';
		*len = (size_t)n;
		return buf;
	}
	int e = errno;
	if (f)
		fclose(f);
	free(buf);
	if (n >= 0 && (size_t)n > TCTL_FILE_MAX)
		snprintf(err, errlen, "%s: over %zu bytes", path, TCTL_FILE_MAX);
	else
		snprintf(err, errlen, "%s: %s", path, strerror(e ? e : EIO));
	return NULL;
}

void tctl_progress_start(tctl_progress *p, bool on, size_t total, size_t base)
{
	memset(p, 0, sizeof(*p));
	p->on = on;
	p->t0 = p->last = tctl_now();
	p->total = total;
	p->base = base;
}

/* "1:02:03" or "2:03" of s seconds. */
static void clock_text(double s, char *buf, size_t cap)
{
	if (!isfinite(s) || s < 0 || s > 359999) {
		snprintf(buf, cap, "--:--");
		return;
	}
	long t = lround(s);
	if (t >= 3600)
		snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
	else
		snprintf(buf, cap, "%ld:%02ld", t / 60, t % 60);
}

/* r per second as "950.0", "419.3k" or "1.47M". */
static void rate_text(double r, char *buf, size_t cap)
{
	if (r >= 1e6)
		snprintf(buf, cap, "%.2fM", r / 1e6);
	else if (r >= 1e3)
		snprintf(buf, cap, "%.1fk", r / 1e3);
	else
		snprintf(buf, cap, "%.1f", r);
}

void tctl_progress_update(tctl_progress *p, size_t done, const char *note, bool force)
{
	double now = tctl_now();
	if (!p->on || (!force && now - p->last < 0.1))
		return;
	p->last = now;
	double el = now - p->t0, rate = el > 0 ? (double)(done - p->base) / el : 0;
	char eta[32], bar[32], rt[32];
	const int width = 24;
	rate_text(rate, rt, sizeof(rt));
	if (p->total) {
		double f = done >= p->total ? 1 : (double)done / (double)p->total;
		int full = (int)(f * width);
		for (int i = 0; i < width; i++)
			bar[i] = i < full ? '#' : '.';
		bar[width] = '\0';
		clock_text(rate > 0
				   ? (double)(p->total - (done < p->total ? done : p->total)) / rate
				   : NAN,
			   eta, sizeof(eta));
		fprintf(stderr, "\r[%s] %3.0f%% %zu/%zu %s/s ETA %s %s\033[K", bar, 100 * f, done,
			p->total, rt, eta, note ? note : "");
	} else {
		clock_text(el, eta, sizeof(eta));
		fprintf(stderr, "\r%zu %s/s %s %s\033[K", done, rt, eta, note ? note : "");
	}
	fflush(stderr);
}

void tctl_progress_end(tctl_progress *p)
{
	if (p->on)
		fputc('\n', stderr);
}
