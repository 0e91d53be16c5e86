/* log.h: the daemon's logger: one line per event, "TIME LEVEL message", to stderr (journald
 * takes it under systemd). Thread-safe: each line is written with one write(2). */
#ifndef DMN_LOG_H
#define DMN_LOG_H

#include <stdatomic.h>

#include "config.h" /* DMN_LOG_ERROR .. DMN_LOG_DEBUG */

typedef struct dmn_logger {
	atomic_int level; /* least severe level written (DMN_LOG_*); changed on reload */
	int fd;           /* where lines go (2) */
} dmn_logger;

void dmn_logger_init(dmn_logger *lg, int level, int fd);
void dmn_log(dmn_logger *lg, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The engine's log callback (eng_set_log): warnings at warn, DEBUG lines at debug. arg: the
 * dmn_logger. */
void dmn_log_engine(void *arg, int level, const char *msg);

#endif
