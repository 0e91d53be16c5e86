/* health.h: the daemon's liveness and readiness as balancers and orchestrators read them
 * (health's reply, /v2/health/ready and /live over HTTP and gRPC, /readyz and /healthz, the
 * tensord_ready gauge). Loop thread. */
#ifndef DMN_HEALTH_H
#define DMN_HEALTH_H

#include "types.h"

typedef struct dmn_health {
	bool live;      /* false only when the process should be restarted (exiting, or stalled past stall_restart_ms) */
	bool ready;     /* whether a balancer should route new work here */
	char why[192];  /* when not ready (or not live): why, for people and logs; "" when both hold */
} dmn_health;

/* s's health at now (eng_now_ns()). */
void dmn_health_get(const dmn_srv *s, uint64_t now, dmn_health *h);
/* dmn_health_get's ready, now. */
bool dmn_ready(const dmn_srv *s);

#endif
