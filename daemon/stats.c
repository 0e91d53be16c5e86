/* stats.c: the daemon's figures (loop thread): requests by verb and outcome, rejections by
 * reason, latency and batch-size histograms, the engine's counters and memory, per-model
 * counters; as the `stats` JSON and as Prometheus text for /metrics. Also the teardown of the
 * loop's state. */
#include "server.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void dmn_hists_init(dmn_hists *h)
{
	dmn_hist_init_125(&h->queue_us, 1, 1e7);
	dmn_hist_init_125(&h->compute_us, 1, 1e7);
	dmn_hist_init_125(&h->total_us, 1, 1e7);
	dmn_hist_init_pow2(&h->batch_size, 1, 4096);
}

void dmn_stats_init(dmn_srv *s)
{
	dmn_hists_init(&s->hist);
}

void dmn_stats_count(dmn_srv *s, dmn_req *r, tsd_status st)
{
	int v = r->decoded ? (int)r->verb : DMN_V_COUNT;
	if (st < 0 || st >= TSD_STATUS_COUNT)
		st = TSD_INTERNAL;
	s->requests[v][st]++;
	/* refused before any work: the reasons an operator watches */
	if (st == TSD_BUSY || st == TSD_UNAUTHORISED || st == TSD_TOO_LARGE || st == TSD_SHUTTING_DOWN ||
	    st == TSD_TIMEOUT || st == TSD_SUPERSEDED || st == TSD_BAD_REQUEST || st == TSD_UNKNOWN_VERB ||
	    st == TSD_VERSION_MISMATCH)
		s->rejected[st]++;
}

/* The process's memory: resident set (from /proc/self/statm) and malloc's heap (mallinfo2:
 * bytes in use, and bytes free but still held, which is fragmentation or a pool). */
static cJSON *process_json(void)
{
	cJSON *p = cJSON_CreateObject();
	long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	struct mallinfo2 mi = mallinfo2();
	cJSON_AddNumberToObject(p, "rss_bytes", (double)resident * (double)sysconf(_SC_PAGESIZE));
	cJSON_AddNumberToObject(p, "heap_in_use_bytes", (double)(mi.uordblks + mi.hblkhd));
	cJSON_AddNumberToObject(p, "heap_free_bytes", (double)mi.fordblks);
	return p;
}

static const char *hist_names[] = {"queue_us", "compute_us", "total_us", "batch_size"};

static const dmn_hist *hist_at(const dmn_hists *hs, int k)
{
	const dmn_hist *h[] = {&hs->queue_us, &hs->compute_us, &hs->total_us, &hs->batch_size};
	return h[k];
}

cJSON *dmn_hists_json(const dmn_hists *h)
{
	cJSON *o = cJSON_CreateObject();
	for (int k = 0; k < 4; k++)
		cJSON_AddItemToObject(o, hist_names[k], dmn_hist_json(hist_at(h, k)));
	return o;
}

cJSON *dmn_stats_json(dmn_srv *s)
{
	cJSON *x = cJSON_CreateObject(), *req = cJSON_CreateObject(), *rej = cJSON_CreateObject(),
	      *hs = cJSON_CreateObject(), *eng = cJSON_CreateObject(), *models = cJSON_CreateObject(),
	      *rz = cJSON_CreateObject();
	cJSON_AddNumberToObject(x, "uptime_s", (double)(eng_now_ns() - s->t_start) / 1e9);
	for (int v = 0; v <= DMN_V_COUNT; v++) {
		cJSON *o = NULL;
		for (int st = 0; st < TSD_STATUS_COUNT; st++)
			if (s->requests[v][st]) {
				if (!o)
					o = cJSON_AddObjectToObject(req, dmn_verb_name((dmn_verb)v));
				cJSON_AddNumberToObject(o, tsd_status_name((tsd_status)st), (double)s->requests[v][st]);
			}
	}
	for (int st = 0; st < TSD_STATUS_COUNT; st++)
		if (s->rejected[st])
			cJSON_AddNumberToObject(rej, tsd_status_name((tsd_status)st), (double)s->rejected[st]);
	for (int k = 0; k < 4; k++)
		cJSON_AddItemToObject(hs, hist_names[k], dmn_hist_json(hist_at(&s->hist, k)));
	eng_stats es;
	eng_device_stats ds;
	dmn_exec_stats(s, &es, &ds);
	cJSON_AddNumberToObject(eng, "kernels", (double)es.kernels);
	cJSON_AddNumberToObject(eng, "compiles", (double)es.compiles);
	cJSON_AddNumberToObject(eng, "disk_loads", (double)es.disk_loads);
	cJSON_AddNumberToObject(eng, "schedules", (double)es.schedules);
	cJSON_AddNumberToObject(eng, "schedule_hits", (double)es.schedule_hits);
	cJSON_AddNumberToObject(eng, "mem_live", (double)es.mem_live);
	cJSON_AddNumberToObject(eng, "mem_peak", (double)es.mem_peak);
	cJSON_AddNumberToObject(eng, "mem_cached", (double)es.mem_cached);
	cJSON_AddNumberToObject(eng, "programs", (double)ds.programs);
	for (int i = 0; i < s->nmodels; i++) {
		cJSON *mo = dmn_counters_json(&s->models[i]->c);
		cJSON_AddItemToObject(mo, "histograms", dmn_hists_json(&s->models[i]->hist));
		cJSON_AddItemToObject(models, s->models[i]->name, mo);
	}
	cJSON_AddNumberToObject(rz, "graphs", (double)s->realize_graphs);
	pthread_mutex_lock(&s->exec.mu);
	cJSON_AddNumberToObject(rz, "compiles", (double)s->exec.realize_compiles);
	pthread_mutex_unlock(&s->exec.mu);
	cJSON_AddItemToObject(x, "requests", req);
	cJSON_AddItemToObject(x, "rejected", rej);
	cJSON_AddItemToObject(x, "histograms", hs);
	cJSON_AddItemToObject(x, "engine", eng);
	cJSON_AddItemToObject(x, "models", models);
	cJSON_AddItemToObject(x, "realize", rz);
	cJSON_AddItemToObject(x, "process", process_json());
	return x;
}

char *dmn_metrics_text(dmn_srv *s)
{
	dmn_prom p;
	dmn_prom_init(&p);
	for (int v = 0; v <= DMN_V_COUNT; v++)
		for (int st = 0; st < TSD_STATUS_COUNT; st++)
			if (s->requests[v][st]) {
				dmn_label l[2] = {{"verb", dmn_verb_name((dmn_verb)v)}, {"status", tsd_status_name((tsd_status)st)}};
				dmn_prom_counter(&p, "tensord_requests_total", "Requests answered, by verb and status", l, 2,
						 (double)s->requests[v][st]);
			}
	for (int st = 0; st < TSD_STATUS_COUNT; st++)
		if (s->rejected[st]) {
			dmn_label l = {"reason", tsd_status_name((tsd_status)st)};
			dmn_prom_counter(&p, "tensord_rejected_total", "Requests refused before any work, by reason", &l, 1,
					 (double)s->rejected[st]);
		}
	static const char *const help[] = {"Time from arrival to the executor (microseconds)",
					   "Executor time per job (microseconds)",
					   "Time from arrival to the reply (microseconds)", "Rows per inference launch"};
	for (int k = 0; k < 4; k++) {
		char name[64];
		snprintf(name, sizeof(name), "tensord_%s", hist_names[k]);
		dmn_prom_hist(&p, name, help[k], NULL, 0, hist_at(&s->hist, k));
	}
	eng_stats es;
	eng_device_stats ds;
	dmn_exec_stats(s, &es, &ds);
	struct { const char *name, *help; double v; bool counter; } e[] = {
		{"tensord_engine_kernels_total", "Kernel launches", (double)es.kernels, true},
		{"tensord_engine_compiles_total", "Kernel compilations (cache misses)", (double)es.compiles, true},
		{"tensord_engine_disk_loads_total", "Kernels loaded from the disk cache", (double)es.disk_loads, true},
		{"tensord_engine_schedule_hits_total", "Realizes answered by the schedule cache", (double)es.schedule_hits, true},
		{"tensord_engine_schedules_total", "Realizes that scheduled kernels", (double)es.schedules, true},
		{"tensord_engine_mem_live_bytes", "Device memory in live buffers", (double)es.mem_live, false},
		{"tensord_engine_mem_peak_bytes", "Highest live device memory", (double)es.mem_peak, false},
		{"tensord_engine_mem_cached_bytes", "Freed device memory kept for reuse", (double)es.mem_cached, false},
		{"tensord_engine_programs", "Compiled programs loaded", (double)ds.programs, false},
	};
	for (size_t k = 0; k < sizeof(e) / sizeof(*e); k++)
		(e[k].counter ? dmn_prom_counter : dmn_prom_gauge)(&p, e[k].name, e[k].help, NULL, 0, e[k].v);
	/* per-model counters: one family per counter, a series per model */
#define DMN_MC(f)                                                                                          \
	for (int i = 0; i < s->nmodels; i++) {                                                             \
		dmn_label l = {"model", s->models[i]->name};                                               \
		dmn_prom_counter(&p, "tensord_model_" #f "_total", "Per-model counter: " #f, &l, 1,         \
				 (double)s->models[i]->c.f);                                               \
	}
#include "model_counters.def"
#undef DMN_MC
	dmn_prom_gauge(&p, "tensord_ready", "1 when every preloaded model is warm and not draining", NULL, 0,
		       dmn_ready(s));
	dmn_prom_status st;
	const char *text = dmn_prom_finish(&p, &st);
	char *out = text ? strdup(text) : NULL;
	if (!text)
		dmn_log(&s->log, DMN_LOG_ERROR, "metrics: %s", p.msg);
	dmn_prom_free(&p);
	return out;
}

void dmn_server_free_state(dmn_srv *s)
{
	/* jobs that came back after the loop stopped */
	for (dmn_job *j = s->in_jobs, *n; j; j = n) {
		n = j->next;
		if (j->kind == DMN_J_FREE)
			dmn_mver_free(j->ver);
		else if (j->kind == DMN_J_LOAD)
			dmn_mver_free(j->ver); /* its engine side went with the context */
		for (int k = 0; k < j->nreq; k++) {
			proto_msg_free(&j->reqs[k]->pm);
			nng_msg_free(j->reqs[k]->msg);
			if (j->reqs[k]->reply)
				nng_msg_free(j->reqs[k]->reply);
			free(j->reqs[k]);
		}
		dmn_job_free(j);
	}
	for (dmn_event *e = s->in_events, *n; e; e = n) {
		n = e->next;
		free(e);
	}
	for (dmn_job *j = s->ctl_head, *n; j; j = n) { /* never ran (a failed start) */
		n = j->next;
		if (j->kind == DMN_J_LOAD)
			dmn_mver_free(j->ver);
		dmn_job_free(j);
	}
	for (int i = 0; i < s->nmodels; i++) {
		dmn_mver_free(s->models[i]->cur);
		free(s->models[i]);
	}
	free(s->models);
	for (dmn_req *r = s->spare, *n; r; r = n) {
		n = r->next;
		free(r);
	}
	for (int b = 0; b < DMN_CLIENT_BUCKETS; b++)
		for (dmn_client *c = s->clients[b], *n; c; c = n) {
			n = c->next;
			free(c);
		}
}
