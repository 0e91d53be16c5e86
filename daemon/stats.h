/* stats.h: the daemon's figures (stats.c, loop thread), read from every layer below: the
 * `stats` verb's JSON and the Prometheus text of /metrics. */
#ifndef DMN_STATS_H
#define DMN_STATS_H

#include "executor.h"
#include "models.h"
#include "types.h"

cJSON *dmn_stats_json(dmn_srv *s); /* caller owns it */
char *dmn_metrics_text(dmn_srv *s); /* Prometheus text; caller frees; NULL on failure (logged) */

#endif
