/* health.c: liveness and readiness from the loop's state. Not ready while starting (preloads
 * loading), while a reload warms a new version, during the drain's grace (SIGTERM received:
 * balancers are told before anything is refused), while draining, and while the executor is
 * stalled: one job running for stall_ms with other work waiting behind it. Not live only when
 * a restart is the cure: the daemon is exiting, or a stall outlasted stall_restart_ms. */
#include "health.h"

#include <stdio.h>

/* Requests and control jobs waiting for the executor. */
static int64_t waiting(const dmn_srv *s)
{
	int64_t n = s->ctl_len;
	for (int i = 0; i < s->nmodels; i++)
		n += s->models[i]->queued;
	return n;
}

void dmn_health_get(const dmn_srv *s, uint64_t now, dmn_health *h)
{
	h->live = s->exit_code < 0;
	h->ready = false;
	h->why[0] = 0;
	uint64_t ran = s->exec_busy && s->cur_job && now > s->job_t0 ? now - s->job_t0 : 0;
	int64_t behind = ran ? waiting(s) : 0;
	bool stalled = behind > 0 && ran >= (uint64_t)s->cfg.stall_ms * 1000000u;
	if (stalled && s->cfg.stall_restart_ms > 0 && ran >= (uint64_t)s->cfg.stall_restart_ms * 1000000u)
		h->live = false;
	if (s->exit_code >= 0)
		snprintf(h->why, sizeof(h->why), "exiting");
	else if (s->draining)
		snprintf(h->why, sizeof(h->why), "draining: new requests are refused");
	else if (s->stopping)
		snprintf(h->why, sizeof(h->why), "stopping: draining in %.1f s (drain_grace_s)",
			 now < s->drain_at ? (double)(s->drain_at - now) / 1e9 : 0.0);
	else if (s->preload_pending > 0)
		snprintf(h->why, sizeof(h->why), "starting: %d preloaded model(s) loading", s->preload_pending);
	else if (s->reload_pending > 0)
		snprintf(h->why, sizeof(h->why), "reloading: %d model(s) warming a new version", s->reload_pending);
	else if (stalled)
		snprintf(h->why, sizeof(h->why), "stalled: one executor job has run %.0f ms with %lld waiting (stall_ms %lld)%s",
			 (double)ran / 1e6, (long long)behind, (long long)s->cfg.stall_ms,
			 h->live ? "" : "; past stall_restart_ms: restart");
	else
		h->ready = true;
}

bool dmn_ready(const dmn_srv *s)
{
	dmn_health h;
	dmn_health_get(s, eng_now_ns(), &h);
	return h.ready;
}
