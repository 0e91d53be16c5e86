/* exec.c: the executors: threads owning an engine context of the daemon's device each, the
 * models' and the realize worker's (ad-hoc graphs: its own context, CPU priority and thread
 * count, so that compiles never delay inference). One runs the jobs the loop hands it, in order,
 * sends the replies they made through their channels, and posts each job back on the inbox's
 * DONE lane. A running job stops early (the engine's abort hook) when every request in it has
 * expired or lost its client, or when the drain's deadline passes. */
#include "executor.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

void dmn_job_free(dmn_job *j)
{
	if (!j)
		return;
	proto_graph_free(&j->graph);
	free(j->reqs);
	free(j->slots);
	free(j);
}

/* The abort hook: nobody is left waiting for the running job's answer. */
static bool nobody_waits(void *arg)
{
	dmn_exec *e = arg;
	dmn_job *j = e->running;
	if (!j || !j->nreq || j->kind == DMN_J_LOAD)
		return false;
	uint64_t now = 0;
	for (int k = 0; k < j->nreq; k++) {
		dmn_req *r = j->reqs[k];
		if (atomic_load_explicit(&r->gone, memory_order_relaxed))
			continue;
		if (!r->deadline)
			return false;
		if (!now)
			now = eng_now_ns();
		if (now < r->deadline)
			return false;
	}
	return true;
}

/* The idle trim: the allocator's cached free buffers go back to the backend, and malloc's free
 * memory (the CPU backend's buffers come from it) back to the system. */
static void run_trim(dmn_exec *e)
{
	eng_stats st;
	eng_get_stats(e->ctx, &st);
	uint64_t freed = eng_trim(e->ctx, ENG_TRIM_BUFFERS);
	malloc_trim(0);
	dmn_log(&e->srv->log, DMN_LOG_DEBUG, "idle: %llu bytes of cached buffers freed (%llu live)",
		(unsigned long long)freed, (unsigned long long)st.mem_live);
}

static void run(dmn_exec *e, dmn_job *j)
{
	e->running = j;
	j->t_start = eng_now_ns();
	switch (j->kind) {
	case DMN_J_LOAD:
		dmn_run_load(e, j);
		break;
	case DMN_J_FREE:
		dmn_run_free(e, j);
		break;
	case DMN_J_SEQFREE:
		dmn_run_seqfree(e, j);
		break;
	case DMN_J_INFER:
		dmn_run_infer(e, j);
		break;
	case DMN_J_REALIZE:
		dmn_run_realize(e, j);
		break;
	case DMN_J_TRAIN:
		dmn_run_train(e, j);
		break;
	case DMN_J_SAVE:
		dmn_run_save(e, j);
		break;
	case DMN_J_TRIM:
	case DMN_J_RTRIM:
		run_trim(e);
		break;
	}
	j->t_end = eng_now_ns();
	e->running = NULL;
	eng_clear_error(e->ctx);
	/* publish the engine's figures for stats */
	eng_stats st;
	eng_device_stats ds = {0};
	eng_get_stats(e->ctx, &st);
	eng_get_device_stats(e->ctx, eng_default_device(e->ctx), &ds);
	pthread_mutex_lock(&e->mu);
	if (j->kind == DMN_J_REALIZE) {
		j->compiles = st.compiles - e->stats.compiles;
		e->realize_compiles += j->compiles;
	}
	e->stats = st;
	e->dstats = ds;
	pthread_mutex_unlock(&e->mu);
}

/* Send the replies the job made straight from here: the loop only counts them afterwards, so
 * the answer does not wait for the loop thread to wake. A request whose client left is still
 * answered here (nng drops it); the loop sees `sent` and frees it. */
static void send_replies(dmn_job *j)
{
	atomic_store(&j->replied, true);
	for (int k = 0; k < j->nreq; k++) {
		dmn_req *r = j->reqs[k];
		if (!r->reply)
			continue;
		r->chan->ops->send(r->chan, r->reply);
		r->reply = NULL;
		r->sent = true;
	}
}

static void *exec_main(void *arg)
{
	dmn_exec *e = arg;
	dmn_srv *s = e->srv;
	/* per thread on Linux, and inherited by the compilers it starts */
	if (e->nice && setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), e->nice))
		dmn_log(&s->log, DMN_LOG_WARN, "realize worker: cannot lower its priority to nice %d", e->nice);
	for (;;) {
		pthread_mutex_lock(&e->mu);
		while ((!e->head || e->busy) && !e->stop)
			pthread_cond_wait(&e->cv, &e->mu);
		dmn_job *j = e->head;
		if (!j) {
			pthread_mutex_unlock(&e->mu);
			break;
		}
		e->head = j->next;
		if (!e->head)
			e->tail = NULL;
		e->busy = true;
		pthread_mutex_unlock(&e->mu);
		j->next = NULL;
		run(e, j);
		/* the realize worker leaves its replies to the loop: a thread at a low priority must
		 * not hold the transport's locks, which inference's replies take too, when preempted */
		if (e == &s->exec)
			send_replies(j);
		pthread_mutex_lock(&e->mu);
		e->busy = false;
		pthread_mutex_unlock(&e->mu);
		dmn_inbox_post(s->inbox, DMN_LANE_DONE, &j->in);
	}
	return NULL;
}

void dmn_exec_push(dmn_srv *s, dmn_job *j)
{
	dmn_exec *e = j->kind == DMN_J_REALIZE || j->kind == DMN_J_RTRIM ? &s->rexec : &s->exec;
	j->next = NULL;
	pthread_mutex_lock(&e->mu);
	if (e->tail)
		e->tail->next = j;
	else
		e->head = j;
	e->tail = j;
	pthread_cond_signal(&e->cv);
	pthread_mutex_unlock(&e->mu);
}

bool dmn_exec_run_here(dmn_srv *s, dmn_job *j)
{
	dmn_exec *e = &s->exec;
	pthread_mutex_lock(&e->mu);
	bool idle = !e->head && !e->busy && !e->stop;
	if (idle)
		e->busy = true; /* the context is ours until we clear it: the executor waits */
	pthread_mutex_unlock(&e->mu);
	if (!idle)
		return false;
	j->next = NULL;
	run(e, j);
	send_replies(j);
	pthread_mutex_lock(&e->mu);
	e->busy = false;
	if (e->head)
		pthread_cond_signal(&e->cv);
	pthread_mutex_unlock(&e->mu);
	return true;
}

void dmn_exec_cancel(dmn_srv *s)
{
	eng_cancel(s->exec.ctx);
	if (s->rexec.ctx)
		eng_cancel(s->rexec.ctx);
}

/* Both executors' figures: counters and device figures added up. */
void dmn_exec_stats(dmn_srv *s, eng_stats *st, eng_device_stats *ds)
{
	pthread_mutex_lock(&s->exec.mu);
	*st = s->exec.stats;
	*ds = s->exec.dstats;
	pthread_mutex_unlock(&s->exec.mu);
	if (!s->rexec.ctx)
		return;
	pthread_mutex_lock(&s->rexec.mu);
	const eng_stats *a = &s->rexec.stats;
	const eng_device_stats *b = &s->rexec.dstats;
#define ADD(x) st->x += a->x;
	ADD(kernels) ADD(flops) ADD(bytes) ADD(kernel_ns) ADD(compiles) ADD(disk_loads) ADD(schedules)
	ADD(schedule_hits) ADD(searches) ADD(search_hits) ADD(mem_live) ADD(mem_peak) ADD(mem_cached)
	ADD(allocs) ADD(alloc_hits)
#undef ADD
#define ADD(x) ds->x += b->x;
	ADD(live_bytes) ADD(peak_bytes) ADD(cached_bytes) ADD(allocs) ADD(alloc_hits) ADD(backend_allocs)
	ADD(backend_frees) ADD(programs) ADD(program_evictions)
#undef ADD
	pthread_mutex_unlock(&s->rexec.mu);
}

void dmn_exec_realize_stats(dmn_srv *s, eng_stats *st, eng_device_stats *ds, uint64_t *compiles)
{
	memset(st, 0, sizeof(*st));
	memset(ds, 0, sizeof(*ds));
	*compiles = 0;
	if (!s->rexec.ctx)
		return;
	pthread_mutex_lock(&s->rexec.mu);
	*st = s->rexec.stats;
	*ds = s->rexec.dstats;
	*compiles = s->rexec.realize_compiles;
	pthread_mutex_unlock(&s->rexec.mu);
}

/* Open e's context with o and start its thread. */
static int exec_open(dmn_srv *s, dmn_exec *e, const eng_ctx_opts *o, const char *what, char *err, size_t errlen)
{
	e->srv = s;
	char eerr[512];
	e->ctx = eng_ctx_create(o, eerr, sizeof(eerr));
	if (!e->ctx) {
		snprintf(err, errlen, "%sdevice %s: %s", what, s->cfg.device, eerr);
		return -1;
	}
	eng_set_log(e->ctx, dmn_log_engine, &s->log);
	eng_set_abort_hook(e->ctx, nobody_waits, e);
	snprintf(e->name, sizeof(e->name), "%s", eng_device_name(e->ctx, eng_default_device(e->ctx)));
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->cv, NULL);
	if (pthread_create(&e->thread, NULL, exec_main, e)) {
		snprintf(err, errlen, "cannot start the %sexecutor thread", what);
		pthread_mutex_destroy(&e->mu);
		pthread_cond_destroy(&e->cv);
		eng_ctx_destroy(e->ctx);
		e->ctx = NULL;
		return -1;
	}
	return 0;
}

/* Stop e's thread (it runs what is queued first); its context stays for exec_close. */
static void exec_join(dmn_exec *e)
{
	pthread_mutex_lock(&e->mu);
	e->stop = true;
	pthread_cond_signal(&e->cv);
	pthread_mutex_unlock(&e->mu);
	pthread_join(e->thread, NULL);
}

static void exec_close(dmn_exec *e)
{
	eng_ctx_destroy(e->ctx);
	e->ctx = NULL;
	pthread_mutex_destroy(&e->mu);
	pthread_cond_destroy(&e->cv);
}

/* The realize worker's share of the engine's limit (s->mem_limit: memlimit.c): its own key, else
 * a quarter, at most half; the models' context gets the rest, so both together stay within it.
 * Without a limit, its own key (0: none). */
static uint64_t realize_mem_limit(const dmn_srv *s)
{
	uint64_t r = s->cfg.realize_mem_limit_bytes;
	if (!s->mem_limit)
		return r;
	r = r ? r : s->mem_limit / 4;
	return r < s->mem_limit / 2 ? r : s->mem_limit / 2;
}

int dmn_exec_start(dmn_srv *s, char *err, size_t errlen)
{
	eng_ctx_opts o;
	eng_ctx_opts_default(&o);
	o.debug = 0;
	o.device = s->cfg.device;
	o.backend_opts = s->cfg.backend_opts[0] ? s->cfg.backend_opts : NULL;
	o.cache_dir = s->cfg.cache_dir[0] ? s->cfg.cache_dir : NULL;
	/* the effective limit (memlimit.c), less the realize worker's share */
	o.mem_limit = s->mem_limit ? s->mem_limit - realize_mem_limit(s) : 0;
	if (exec_open(s, &s->exec, &o, "", err, errlen))
		return -1;
	/* the realize worker: the same device, its own context; its kernels on its own thread
	 * (CPU.threads first: the first setting of a key is the one taken) */
	char opts[1024];
	if (s->cfg.realize_threads) {
		int n = snprintf(opts, sizeof(opts), "CPU.threads=%d%s%s", (int)s->cfg.realize_threads,
				 o.backend_opts ? "," : "", o.backend_opts ? o.backend_opts : "");
		if (n < 0 || (size_t)n >= sizeof(opts)) {
			snprintf(err, errlen, "backend_opts: too long to add the realize worker's CPU.threads");
			goto fail;
		}
		o.backend_opts = opts;
	}
	o.mem_limit = realize_mem_limit(s);
	o.prog_cache_max = (uint32_t)s->cfg.realize_prog_cache_max;
	s->rexec.nice = (int)s->cfg.realize_nice;
	if (exec_open(s, &s->rexec, &o, "realize worker: ", err, errlen))
		goto fail;
	return 0;
fail:
	exec_join(&s->exec);
	exec_close(&s->exec);
	return -1;
}

void dmn_exec_stop(dmn_srv *s)
{
	dmn_exec *e = &s->exec;
	if (s->rexec.ctx) { /* it owns nothing beyond its context: a running job finishes first */
		exec_join(&s->rexec);
		exec_close(&s->rexec);
	}
	if (!e->ctx)
		return;
	exec_join(e);
	/* what the executor still owns: the engine side of every model version */
	for (int i = 0; i < s->nmodels; i++)
		if (s->models[i]->cur) {
			dmn_job j = {.kind = DMN_J_FREE, .ver = s->models[i]->cur};
			dmn_run_free(e, &j);
		}
	exec_close(e);
}
