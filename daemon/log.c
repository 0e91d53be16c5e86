/* log.c: the daemon's line logger (log.h). */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void dmn_logger_init(dmn_logger *lg, int level, int fd)
{
	atomic_init(&lg->level, level);
	lg->fd = fd;
}

static void vlog(dmn_logger *lg, int level, const char *fmt, va_list ap)
{
	char line[2048];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	size_t n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
	n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03ldZ %-5s ", ts.tv_nsec / 1000000,
			      level_names[level]);
	int m = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	n = m < 0 ? n : n + (size_t)m >= sizeof(line) - 1 ? sizeof(line) - 2 : n + (size_t)m;
	for (size_t i = 0; i < n; i++) /* one event, one line */
		if (line[i] == '\n')
			line[i] = ' ';
	line[n++] = '\n';
	ssize_t w = write(lg->fd, line, n);
	(void)w;
}

void dmn_log(dmn_logger *lg, int level, const char *fmt, ...)
{
	if (level > atomic_load_explicit(&lg->level, memory_order_relaxed))
		return;
	va_list ap;
	va_start(ap, fmt);
	vlog(lg, level, fmt, ap);
	va_end(ap);
}

void dmn_log_engine(void *arg, int level, const char *msg)
{
	dmn_log(arg, level == 0 ? DMN_LOG_WARN : DMN_LOG_DEBUG, "engine: %s", msg);
}
