/* server.c: the daemon's life: start (executor, preloads, socket, metrics listener), the libuv
 * loop draining the inbox, signals (SIGTERM/SIGINT drain and exit, SIGHUP reload), readiness
 * and stop notifications to systemd, and the drain. */
#include "server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errno.h>
#include <malloc.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

void dmn_wake(dmn_srv *s)
{
	uv_async_send(&s->wake);
}

void dmn_post_event(dmn_srv *s, dmn_event *e)
{
	e->next = NULL;
	pthread_mutex_lock(&s->mu);
	if (s->in_events_tail)
		s->in_events_tail->next = e;
	else
		s->in_events = e;
	s->in_events_tail = e;
	pthread_mutex_unlock(&s->mu);
	dmn_wake(s);
}

bool dmn_ready(const dmn_srv *s)
{
	return s->preload_pending == 0 && !s->draining;
}

/* Take the whole inbox, then handle it in order: jobs first (their replies free slots and
 * make room), then new requests, then connection events (a closed connection's last requests
 * came before its closing). */
static void on_wake(uv_async_t *h)
{
	dmn_srv *s = h->data;
	pthread_mutex_lock(&s->mu);
	dmn_slot *slots = s->in_slots;
	dmn_job *jobs = s->in_jobs;
	dmn_event *evs = s->in_events;
	s->in_slots = s->in_slots_tail = NULL;
	s->in_jobs = s->in_jobs_tail = NULL;
	s->in_events = s->in_events_tail = NULL;
	pthread_mutex_unlock(&s->mu);
	for (dmn_job *j = jobs, *n; j; j = n) {
		n = j->next;
		dmn_model_job_done(s, j);
	}
	for (dmn_slot *sl = slots, *n; sl; sl = n) {
		n = sl->next;
		dmn_on_request(s, sl);
	}
	for (dmn_event *e = evs, *n; e; e = n) {
		n = e->next;
		if (e->kind == DMN_EV_PIPE_GONE)
			dmn_on_pipe_gone(s, e->pipe);
		else
			dmn_http_answer(s, e->aio, e->what);
		free(e);
	}
	dmn_dispatch(s);
	dmn_check_drained(s);
}

static void close_all(dmn_srv *s)
{
	uv_close((uv_handle_t *)&s->wake, NULL);
	uv_close((uv_handle_t *)&s->timer, NULL);
	uv_close((uv_handle_t *)&s->drain_timer, NULL);
	uv_close((uv_handle_t *)&s->trim_timer, NULL);
	uv_close((uv_handle_t *)&s->sig_term, NULL);
	uv_close((uv_handle_t *)&s->sig_int, NULL);
	uv_close((uv_handle_t *)&s->sig_hup, NULL);
}

/* Draining ends when nothing is queued, nothing runs and every reply went out, or at the
 * deadline (what is left is answered shutting_down). */
void dmn_check_drained(dmn_srv *s)
{
	if (!s->draining || s->exit_code >= 0) /* not draining, or already exiting */
		return;
	bool late = eng_now_ns() >= s->drain_deadline;
	if (late) {
		dmn_flush_queues(s, NULL, TSD_SHUTTING_DOWN, "the daemon stopped before it ran");
		if (s->exec_busy)
			dmn_exec_cancel(s);
	}
	bool queued = s->ctl_len > 0;
	for (int i = 0; i < s->nmodels && !queued; i++)
		queued = s->models[i]->queued > 0;
	if (queued || s->exec_busy || atomic_load(&s->sending) > 0)
		return;
	dmn_log(&s->log, DMN_LOG_INFO, "drained%s; exiting", late ? " (at the deadline)" : "");
	s->exit_code = s->exit_status;
	close_all(s);
}

/* glibc keeps freed memory in its arenas (one per thread that allocated: the loop, the executor,
 * nng's); a long-running server hands it back so that its RSS follows what it holds. */
static void on_trim(uv_timer_t *t)
{
	(void)t;
	malloc_trim(0);
}

static void on_drain_tick(uv_timer_t *t)
{
	dmn_check_drained(t->data);
}

static void on_term(uv_signal_t *h, int signum)
{
	dmn_srv *s = h->data;
	if (s->draining) {
		dmn_log(&s->log, DMN_LOG_WARN, "second %s: stopping now", signum == SIGINT ? "SIGINT" : "SIGTERM");
		s->drain_deadline = 0;
		dmn_check_drained(s);
		return;
	}
	dmn_log(&s->log, DMN_LOG_INFO, "%s: draining (at most %lld s), new requests are refused",
		signum == SIGINT ? "SIGINT" : "SIGTERM", (long long)s->cfg.drain_seconds);
	sd_notify(0, "STOPPING=1");
	s->draining = true;
	s->drain_deadline = eng_now_ns() + (uint64_t)s->cfg.drain_seconds * 1000000000ull;
	uv_timer_start(&s->drain_timer, on_drain_tick, 10, 10);
	dmn_dispatch(s);
	dmn_check_drained(s);
}

/* SIGHUP: the config file and flags again; what can change live does (log level, batching and
 * queue defaults for later loads, preloads whose spec changed); the rest needs a restart. */
static void on_hup(uv_signal_t *h, int signum)
{
	(void)signum;
	dmn_srv *s = h->data;
	dmn_config cfg;
	dmn_cli cli;
	dmn_env env;
	char err[4608];
	dmn_env_current(&env);
	sd_notify(0, "RELOADING=1");
	if (dmn_config_from_args(&cfg, &cli, s->argc, s->argv, &env, err, sizeof(err)) != DMN_CFG_OK) {
		dmn_log(&s->log, DMN_LOG_ERROR, "reload: %s; keeping the running config", err);
		dmn_config_free(&cfg);
		sd_notify(0, "READY=1");
		return;
	}
	/* what needs a restart: a change is logged, and the running value kept */
#define RESTART_KEYS(X) X(listen) X(tcp_listen) X(device) X(backend_opts) X(max_pending) X(http_listen) \
	X(cache_dir) X(mem_limit_bytes)
	char *a = dmn_config_json(&s->cfg, false), *b = dmn_config_json(&cfg, false);
	cJSON *ja = a ? cJSON_Parse(a) : NULL, *jb = b ? cJSON_Parse(b) : NULL;
#define WARN_CHANGED(k)                                                                                     \
	if (ja && jb && !cJSON_Compare(cJSON_GetObjectItem(ja, #k), cJSON_GetObjectItem(jb, #k), 1))          \
		dmn_log(&s->log, DMN_LOG_WARN, "reload: %s changed; it takes effect at the next start", #k);
	RESTART_KEYS(WARN_CHANGED)
#undef WARN_CHANGED
	cJSON_Delete(ja);
	cJSON_Delete(jb);
	free(a);
	free(b);
	dmn_config old = s->cfg;
#define KEEP(k) do { __typeof__(cfg.k) t = cfg.k; cfg.k = old.k; old.k = t; } while (0);
	RESTART_KEYS(KEEP)
#undef KEEP
#undef RESTART_KEYS
	s->cfg = cfg;
	dmn_config_free(&old);
	atomic_store(&s->log.level, s->cfg.log_level);
	int n = dmn_preload(s, true);
	dmn_log(&s->log, DMN_LOG_INFO, "reload: config read, %d model(s) reloading", n);
	dmn_dispatch(s);
	sd_notify(0, "READY=1");
}

static void on_timer(uv_poll_t *t, int status, int events)
{
	(void)status, (void)events;
	dmn_srv *s = t->data;
	uint64_t expirations;
	ssize_t n = read(s->tfd, &expirations, sizeof(expirations));
	(void)n;
	s->timer_at = 0;
	dmn_dispatch(s);
	dmn_check_drained(s);
}

static int setup_loop(dmn_srv *s, char *err, size_t errlen)
{
	int rv;
	if ((s->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)) < 0) {
		snprintf(err, errlen, "timerfd: %s", strerror(errno));
		return -1;
	}
	if ((rv = uv_loop_init(&s->loop)) || (rv = uv_async_init(&s->loop, &s->wake, on_wake)) ||
	    (rv = uv_poll_init(&s->loop, &s->timer, s->tfd)) || (rv = uv_timer_init(&s->loop, &s->drain_timer)) ||
	    (rv = uv_timer_init(&s->loop, &s->trim_timer)) ||
	    (rv = uv_signal_init(&s->loop, &s->sig_term)) || (rv = uv_signal_init(&s->loop, &s->sig_int)) ||
	    (rv = uv_signal_init(&s->loop, &s->sig_hup))) {
		snprintf(err, errlen, "libuv: %s", uv_strerror(rv));
		return -1;
	}
	s->wake.data = s->timer.data = s->drain_timer.data = s->trim_timer.data = s;
	uv_timer_start(&s->trim_timer, on_trim, 1000, 1000);
	s->sig_term.data = s->sig_int.data = s->sig_hup.data = s;
	uv_poll_start(&s->timer, UV_READABLE, on_timer);
	uv_signal_start(&s->sig_term, on_term, SIGTERM);
	uv_signal_start(&s->sig_int, on_term, SIGINT);
	uv_signal_start(&s->sig_hup, on_hup, SIGHUP);
	return 0;
}

int dmn_serve(dmn_config *cfg, int argc, char *const *argv)
{
	dmn_srv *s = calloc(1, sizeof(*s));
	if (!s) {
		fprintf(stderr, "tensord: out of memory\n");
		return 1;
	}
	char err[4608] = "";
	s->cfg = *cfg;
	memset(cfg, 0, sizeof(*cfg));
	s->argc = argc;
	s->argv = argv;
	s->t_start = eng_now_ns();
	s->exit_code = -1;
	dmn_logger_init(&s->log, s->cfg.log_level, 2);
	dmn_stats_init(s);
	pthread_mutex_init(&s->mu, NULL);
	int rc = 1;
	bool loop_ok = false;
	if (setup_loop(s, err, sizeof(err)))
		goto out;
	loop_ok = true;
	if (dmn_exec_start(s, err, sizeof(err)))
		goto out;
	dmn_log(&s->log, DMN_LOG_INFO, "tensord %s: device %s", DMN_VERSION, s->exec.name);
	if (dmn_slots_start(s, err, sizeof(err)) || dmn_http_start(s, err, sizeof(err)))
		goto out;
	if (dmn_preload(s, false) < 0) {
		snprintf(err, sizeof(err), "a preloaded model is unusable (see above)");
		goto out;
	}
	dmn_dispatch(s);
	uv_run(&s->loop, UV_RUN_DEFAULT);
	rc = s->exit_code < 0 ? 1 : s->exit_code;
out:
	if (rc && err[0])
		dmn_log(&s->log, DMN_LOG_ERROR, "%s", err);
	dmn_http_stop(s);
	dmn_slots_stop(s);
	dmn_exec_stop(s);
	if (loop_ok) {
		if (s->exit_code < 0) {
			close_all(s);
			uv_run(&s->loop, UV_RUN_DEFAULT);
		}
		uv_loop_close(&s->loop);
	}
	if (s->tfd > 0)
		close(s->tfd);
	dmn_server_free_state(s);
	pthread_mutex_destroy(&s->mu);
	dmn_config_free(&s->cfg);
	free(s);
	return rc;
}
