/* server.c: the daemon's life, the top of its layers: start (the inbox and its handlers, the
 * executor, transports, the metrics listener, preloads), the libuv loop, signals (SIGTERM/SIGINT
 * drain and exit, SIGHUP reload), readiness and stop notifications to systemd, the drain, and
 * the teardown of what the loop owned. */
#include "server.h"
#include "auth.h"
#include "leftovers.h"

#include "memlimit.h"
#include "oip_grpc.h"
#include "oip_http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

static void check_drained(dmn_srv *s);

#define DMN_DRAIN_WRITE_GRACE_NS 500000000ull

/* A job came back from the executor: the idle trim waits for idle_trim_ms after the last. Only
 * jobs count: health or stats polls do not keep the daemon from trimming. */
static void active(dmn_srv *s)
{
	s->activity++;
	s->last_activity = eng_now_ns();
}

/* The inbox's handlers: how the layers below reach the loop (registered in setup_loop). */
static void on_done(void *arg, dmn_inbox_node *n)
{
	dmn_srv *s = arg;
	dmn_job *j = (dmn_job *)n;
	if (j->kind == DMN_J_TRIM || j->kind == DMN_J_RTRIM) { /* the loop's own: no model, no request */
		s->trim_inflight--;
		s->trims += j->kind == DMN_J_TRIM;
		dmn_job_free(j);
		return;
	}
	active(s);
	dmn_model_job_done(s, j);
}

static void on_arrived(void *arg, dmn_inbox_node *n)
{
	dmn_on_request(arg, (dmn_chan *)n);
}

static void on_closed(void *arg, dmn_inbox_node *n)
{
	dmn_closed *c = (dmn_closed *)n;
	dmn_on_closed(arg, c->ops, c->conn);
	free(c);
}

/* After each drain: run what can run now, and see whether a drain is done. */
static void after_drain(void *arg)
{
	dmn_run_deferred(arg);
	dmn_dispatch(arg);
	check_drained(arg);
}

static void close_all(dmn_srv *s)
{
	dmn_stream_close(s->stream); /* its listeners, then its connections (closings posted before the inbox closes) */
	dmn_oip_http_close(s->oip);
	dmn_oip_grpc_close(s->oip_grpc);
	dmn_inbox_close(s->inbox);
	uv_close((uv_handle_t *)&s->timer, NULL);
	uv_close((uv_handle_t *)&s->drain_timer, NULL);
	uv_close((uv_handle_t *)&s->grace_timer, NULL);
	uv_close((uv_handle_t *)&s->trim_timer, NULL);
	uv_close((uv_handle_t *)&s->sig_term, NULL);
	uv_close((uv_handle_t *)&s->sig_int, NULL);
	uv_close((uv_handle_t *)&s->sig_hup, NULL);
}

/* Draining ends when nothing is queued, nothing runs and every reply went out, or at the
 * deadline (what is left is answered shutting_down). */
static void check_drained(dmn_srv *s)
{
	if (!s->draining || s->exit_code >= 0) /* not draining, or already exiting */
		return;
	uint64_t now = eng_now_ns();
	bool late = now >= s->drain_deadline;
	if (late) {
		dmn_flush_queues(s, NULL, TSD_SHUTTING_DOWN, "the daemon stopped before it ran");
		if (s->exec_busy || s->rz_job)
			dmn_exec_cancel(s);
	}
	bool queued = s->ctl_len > 0;
	for (int i = 0; i < s->nmodels && !queued; i++)
		queued = s->models[i]->queued > 0;
	/* replies still being written get half a second past the deadline (the answers made at it,
	 * to clients that read); then what a client did not take is dropped by the close */
	if (queued || s->exec_busy || s->rz_job ||
	    (now < s->drain_deadline + DMN_DRAIN_WRITE_GRACE_NS &&
	     dmn_stream_sending(s->stream) + dmn_oip_http_sending(s->oip) + dmn_oip_grpc_sending(s->oip_grpc) > 0))
		return;
	dmn_log(&s->log, DMN_LOG_INFO, "drained%s; exiting", late ? " (at the deadline)" : "");
	s->exit_code = s->exit_status;
	close_all(s);
}

/* Nothing queued, loading or running, no reply being sent: the executor's context is free for a
 * trim. */
static bool idle(dmn_srv *s)
{
	if (s->exec_busy || s->ctl_len > 0 || s->draining || s->exit_code >= 0 ||
	    dmn_stream_sending(s->stream) > 0 || dmn_oip_http_sending(s->oip) > 0 ||
	    dmn_oip_grpc_sending(s->oip_grpc) > 0)
		return false;
	for (int i = 0; i < s->nmodels; i++)
		if (s->models[i]->queued > 0 || s->models[i]->loading > 0)
			return false;
	return true;
}

/* Every second. glibc keeps freed memory in its arenas (one per thread that allocated: the loop,
 * the executor, nng's); a long-running server hands it back so that its RSS follows what it
 * holds. And once the daemon has been idle for idle_trim_ms after some activity, a trim job
 * gives back what the engine keeps only to be faster (its cached free buffers: up to the whole
 * memory limit after one large request) on the executor, whose context it is. */
static void on_trim(uv_timer_t *t)
{
	dmn_srv *s = t->data;
	malloc_trim(0);
	if (!s->cfg.idle_trim_ms || s->trim_inflight || s->activity == s->activity_trimmed || !idle(s) ||
	    eng_now_ns() - s->last_activity < (uint64_t)s->cfg.idle_trim_ms * 1000000u)
		return;
	eng_stats es;
	eng_device_stats ds;
	dmn_exec_stats(s, &es, &ds); /* as the executor published them after its last job */
	if (!es.mem_cached) {
		s->activity_trimmed = s->activity; /* nothing to give back */
		return;
	}
	/* one trim per executor: the models' and the realize worker's (behind its running job) */
	for (int k = 0; k < (s->rexec.ctx ? 2 : 1); k++) {
		dmn_job *j = calloc(1, sizeof(*j));
		if (!j)
			return; /* the next tick tries again */
		j->kind = k ? DMN_J_RTRIM : DMN_J_TRIM;
		j->srv = s;
		s->trim_inflight++;
		s->activity_trimmed = s->activity;
		dmn_exec_push(s, j);
	}
}

static void on_drain_tick(uv_timer_t *t)
{
	check_drained(t->data);
}

/* The shutdown's last resort: whatever still runs (a job that does not stop, nng's close, its
 * exit handler) at the drain's deadline + 1.5 s, the process exits. It owns its argument (a
 * copy of what it needs: the server may be freed before it fires). */
typedef struct watchdog_arg {
	uint64_t at;   /* eng_now_ns() */
	int status;
	dmn_logger log;
} watchdog_arg;

static void *watchdog_main(void *arg)
{
	watchdog_arg *w = arg;
	struct timespec ts;
	for (uint64_t now; (now = eng_now_ns()) < w->at;) {
		uint64_t left = w->at - now;
		ts.tv_sec = (time_t)(left / 1000000000ull);
		ts.tv_nsec = (long)(left % 1000000000ull);
		nanosleep(&ts, NULL);
	}
	dmn_log(&w->log, DMN_LOG_ERROR, "shutdown still not finished 1.5 s after the drain's deadline: exiting now");
	_exit(w->status);
	return NULL;
}

static void start_watchdog(dmn_srv *s)
{
	watchdog_arg *w = calloc(1, sizeof(*w));
	if (!w)
		return;
	w->at = s->drain_deadline + 1500000000ull;
	w->status = s->exit_status;
	dmn_logger_init(&w->log, atomic_load(&s->log.level), s->log.fd);
	pthread_t th;
	if (pthread_create(&th, NULL, watchdog_main, w))
		free(w);
	else
		pthread_detach(th);
}

/* The drain: new requests refused (shutting_down), queued work finished within drain_seconds,
 * then the exit. */
static void begin_drain(dmn_srv *s)
{
	uv_timer_stop(&s->grace_timer);
	dmn_log(&s->log, DMN_LOG_INFO, "draining (at most %lld s), new requests are refused", (long long)s->cfg.drain_seconds);
	s->draining = true;
	s->drain_deadline = eng_now_ns() + (uint64_t)s->cfg.drain_seconds * 1000000000ull;
	start_watchdog(s);
	uv_timer_start(&s->drain_timer, on_drain_tick, 10, 10);
	dmn_dispatch(s);
	check_drained(s);
}

static void on_grace_over(uv_timer_t *t)
{
	dmn_srv *s = t->data;
	if (!s->draining)
		begin_drain(s);
}

/* SIGTERM or SIGINT: readiness goes false at once; after drain_grace_s (balancers' health checks
 * see it and route elsewhere; everything is still served meanwhile) the drain. A second signal
 * during the grace drains now; one during the drain stops now. */
static void on_term(uv_signal_t *h, int signum)
{
	dmn_srv *s = h->data;
	const char *sig = signum == SIGINT ? "SIGINT" : "SIGTERM";
	if (s->draining) {
		dmn_log(&s->log, DMN_LOG_WARN, "second %s: stopping now", sig);
		s->drain_deadline = 0;
		check_drained(s);
		return;
	}
	if (s->stopping) {
		dmn_log(&s->log, DMN_LOG_WARN, "second %s: draining now", sig);
		begin_drain(s);
		return;
	}
	sd_notify(0, "STOPPING=1");
	s->stopping = true;
	uint64_t grace = (uint64_t)(s->cfg.drain_grace_s * 1e9);
	s->drain_at = eng_now_ns() + grace;
	if (!grace) {
		dmn_log(&s->log, DMN_LOG_INFO, "%s", sig);
		begin_drain(s);
		return;
	}
	dmn_log(&s->log, DMN_LOG_INFO, "%s: not ready; serving %.3g s more (drain_grace_s), then draining", sig,
		s->cfg.drain_grace_s);
	uv_timer_start(&s->grace_timer, on_grace_over, (grace + 999999) / 1000000, 0);
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
	X(cache_dir) X(mem_limit_bytes) X(mem_limit_fraction) X(reply_timeout_ms) X(peer_connections_max) \
	X(realize_threads) X(realize_nice) X(realize_mem_limit_bytes) X(realize_prog_cache_max) \
	X(tcp_token_file) X(metrics_remote) X(frame_timeout_ms) X(partial_bytes_max) X(unsent_bytes_max) \
	X(oip_http_listen) X(oip_json_max_bytes) X(oip_shm) X(oip_grpc_listen)
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
	/* the token file's path needs a restart; its contents are read again (a rotated token) */
	if (dmn_auth_load(s, err, sizeof(err)))
		dmn_log(&s->log, DMN_LOG_ERROR, "reload: %s; keeping the running token", err);
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
	check_drained(s);
}

static int setup_loop(dmn_srv *s, char *err, size_t errlen)
{
	int rv;
	if ((s->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)) < 0) {
		snprintf(err, errlen, "timerfd: %s", strerror(errno));
		return -1;
	}
	if ((rv = uv_loop_init(&s->loop))) {
		snprintf(err, errlen, "libuv: %s", uv_strerror(rv));
		return -1;
	}
	if (!(s->inbox = dmn_inbox_create(&s->loop, err, errlen)))
		return -1;
	dmn_inbox_on(s->inbox, DMN_LANE_DONE, on_done, s);
	dmn_inbox_on(s->inbox, DMN_LANE_ARRIVED, on_arrived, s);
	dmn_inbox_on(s->inbox, DMN_LANE_CLOSED, on_closed, s);
	dmn_inbox_after(s->inbox, after_drain, s);
	if ((rv = uv_poll_init(&s->loop, &s->timer, s->tfd)) || (rv = uv_timer_init(&s->loop, &s->drain_timer)) ||
	    (rv = uv_timer_init(&s->loop, &s->grace_timer)) ||
	    (rv = uv_timer_init(&s->loop, &s->trim_timer)) ||
	    (rv = uv_signal_init(&s->loop, &s->sig_term)) || (rv = uv_signal_init(&s->loop, &s->sig_int)) ||
	    (rv = uv_signal_init(&s->loop, &s->sig_hup))) {
		snprintf(err, errlen, "libuv: %s", uv_strerror(rv));
		return -1;
	}
	s->timer.data = s->drain_timer.data = s->grace_timer.data = s->trim_timer.data = s;
	uv_timer_start(&s->trim_timer, on_trim, 1000, 1000);
	s->sig_term.data = s->sig_int.data = s->sig_hup.data = s;
	uv_poll_start(&s->timer, UV_READABLE, on_timer);
	uv_signal_start(&s->sig_term, on_term, SIGTERM);
	uv_signal_start(&s->sig_int, on_term, SIGINT);
	uv_signal_start(&s->sig_hup, on_hup, SIGHUP);
	return 0;
}

/* After the loop ended: what it owned and what was left on the inbox. */
static void free_state(dmn_srv *s)
{
	if (s->inbox) {
		/* jobs that came back after the loop stopped */
		for (dmn_inbox_node *n = dmn_inbox_take(s->inbox, DMN_LANE_DONE), *next; n; n = next) {
			next = n->next;
			dmn_job *j = (dmn_job *)n;
			if (j->kind == DMN_J_FREE || j->kind == DMN_J_LOAD)
				dmn_mver_free(j->ver); /* a load's engine side went with the context */
			for (int k = 0; k < j->nreq; k++)
				dmn_req_free_lost(j->reqs[k]);
			dmn_job_free(j);
		}
		for (int lane = DMN_LANE_CLOSED; lane <= DMN_LANE_CALL; lane++)
			for (dmn_inbox_node *n = dmn_inbox_take(s->inbox, (dmn_lane)lane), *next; n; n = next) {
				next = n->next;
				free(n); /* malloc'd with the node first */
			}
		dmn_inbox_destroy(s->inbox);
		s->inbox = NULL;
	}
	dmn_batcher_free(s);
	dmn_registry_free(s);
	dmn_shm_set_free(s->sysshm); /* requests freed above held their own references */
	s->sysshm = NULL;
	for (dmn_req *r = s->deferred, *n; r; r = n) { /* a stats request waiting when the loop stopped */
		n = r->next;
		dmn_req_free_lost(r);
	}
	s->deferred = NULL;
	dmn_requests_free(s);
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
	dmn_hists_init(&s->hist);
	int rc = 1;
	bool loop_ok = false;
	if (setup_loop(s, err, sizeof(err)))
		goto out;
	loop_ok = true;
	dmn_mem_paths mp;
	dmn_mem_machine mm;
	char why[800];
	dmn_mem_paths_default(&mp);
	dmn_mem_machine_read(&mp, &mm);
	s->mem_limit = dmn_mem_limit(s->cfg.mem_limit_bytes, s->cfg.mem_limit_fraction, &mm, why, sizeof(why));
	if (dmn_exec_start(s, err, sizeof(err)))
		goto out;
	if (s->mem_limit)
		dmn_log(&s->log, DMN_LOG_INFO, "engine memory limit %llu bytes (%.2f GiB): %s",
			(unsigned long long)s->mem_limit, (double)s->mem_limit / (double)(1u << 30), why);
	else
		dmn_log(&s->log, DMN_LOG_WARN, "engine memory limit: %s; one request can take all the machine's memory", why);
	dmn_log(&s->log, DMN_LOG_INFO, "tensord %s: device %s", DMN_VERSION, s->exec.name);
	if (dmn_auth_load(s, err, sizeof(err)))
		goto out;
	if (s->token.len)
		dmn_log(&s->log, DMN_LOG_INFO, "tcp requests need the token in %s", s->cfg.tcp_token_file);
	/* partial_bytes_max 0: a quarter of the engine's limit, 1 GiB without one */
	uint64_t partial = s->cfg.partial_bytes_max ? s->cfg.partial_bytes_max : s->mem_limit ? s->mem_limit / 4 : 1ull << 30;
	err[0] = 0;
	if (!(s->stream = dmn_stream_start(&s->cfg, &s->log, s->inbox, &s->loop, partial, err, sizeof(err))) && err[0])
		goto out;
	if (s->cfg.oip_shm && !(s->sysshm = dmn_shm_set_new())) {
		snprintf(err, sizeof(err), "out of memory");
		goto out;
	}
	if (!(s->oip = dmn_oip_http_start(&s->cfg, &s->log, s->inbox, &s->loop, err, sizeof(err))) && err[0])
		goto out;
	if (!(s->oip_grpc = dmn_oip_grpc_start(&s->cfg, &s->log, s->inbox, &s->loop, err, sizeof(err))) && err[0])
		goto out;
	if (dmn_http_start(s, err, sizeof(err)))
		goto out;
	dmn_clean_leftovers(&s->cfg, &s->log); /* a killed daemon's temporary files (before any request runs) */
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
	free_state(s);
	dmn_auth_clear(s);
	dmn_stream_stop(s->stream); /* after the executor stopped and the lost requests were freed */
	s->stream = NULL;
	dmn_oip_http_stop(s->oip);
	s->oip = NULL;
	dmn_oip_grpc_stop(s->oip_grpc);
	s->oip_grpc = NULL;
	dmn_config_free(&s->cfg);
	free(s);
	return rc;
}
