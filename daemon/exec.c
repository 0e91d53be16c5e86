/* exec.c: the executor: one thread owning the engine context of the daemon's device. It runs
 * the jobs the loop hands it, in order, sends the replies they made through their channels,
 * and posts each job back on the inbox's DONE lane. A running job stops early (the engine's
 * abort hook) when every request in it has expired or lost its client, or when the drain's
 * deadline passes. */
#include "executor.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dmn_job_free(dmn_job *j)
{
	if (!j)
		return;
	proto_graph_free(&j->graph);
	free(j->reqs);
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
	if (j->kind == DMN_J_REALIZE)
		e->realize_compiles += st.compiles - e->stats.compiles;
	e->stats = st;
	e->dstats = ds;
	pthread_mutex_unlock(&e->mu);
}

/* Send the replies the job made straight from here: the loop only counts them afterwards, so
 * the answer does not wait for the loop thread to wake. A request whose client left is still
 * answered here (nng drops it); the loop sees `sent` and frees it. */
static void send_replies(dmn_job *j)
{
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
	dmn_exec *e = &s->exec;
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
}

void dmn_exec_stats(dmn_srv *s, eng_stats *st, eng_device_stats *ds)
{
	pthread_mutex_lock(&s->exec.mu);
	*st = s->exec.stats;
	*ds = s->exec.dstats;
	pthread_mutex_unlock(&s->exec.mu);
}

int dmn_exec_start(dmn_srv *s, char *err, size_t errlen)
{
	dmn_exec *e = &s->exec;
	e->srv = s;
	eng_ctx_opts o;
	eng_ctx_opts_default(&o);
	o.debug = 0;
	o.device = s->cfg.device;
	o.backend_opts = s->cfg.backend_opts[0] ? s->cfg.backend_opts : NULL;
	o.cache_dir = s->cfg.cache_dir[0] ? s->cfg.cache_dir : NULL;
	o.mem_limit = s->mem_limit; /* the effective one (memlimit.c) */
	char eerr[512];
	e->ctx = eng_ctx_create(&o, eerr, sizeof(eerr));
	if (!e->ctx) {
		snprintf(err, errlen, "device %s: %s", s->cfg.device, eerr);
		return -1;
	}
	eng_set_log(e->ctx, dmn_log_engine, &s->log);
	eng_set_abort_hook(e->ctx, nobody_waits, e);
	snprintf(e->name, sizeof(e->name), "%s", eng_device_name(e->ctx, eng_default_device(e->ctx)));
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->cv, NULL);
	if (pthread_create(&e->thread, NULL, exec_main, e)) {
		snprintf(err, errlen, "cannot start the executor thread");
		pthread_mutex_destroy(&e->mu);
		pthread_cond_destroy(&e->cv);
		eng_ctx_destroy(e->ctx);
		e->ctx = NULL;
		return -1;
	}
	return 0;
}

void dmn_exec_stop(dmn_srv *s)
{
	dmn_exec *e = &s->exec;
	if (!e->ctx)
		return;
	pthread_mutex_lock(&e->mu);
	e->stop = true;
	pthread_cond_signal(&e->cv);
	pthread_mutex_unlock(&e->mu);
	pthread_join(e->thread, NULL);
	/* what the executor still owns: the engine side of every model version */
	for (int i = 0; i < s->nmodels; i++)
		if (s->models[i]->cur) {
			dmn_job j = {.kind = DMN_J_FREE, .ver = s->models[i]->cur};
			dmn_run_free(e, &j);
		}
	eng_ctx_destroy(e->ctx);
	e->ctx = NULL;
	pthread_mutex_destroy(&e->mu);
	pthread_cond_destroy(&e->cv);
}
