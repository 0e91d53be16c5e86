/* stats.c: the daemon's figures (loop thread): requests by verb and outcome, rejections by
 * reason, latency and batch-size histograms, the engine's counters and memory, per-model
 * counters; as the `stats` JSON and as Prometheus text for /metrics. */
#include "stats.h"
#include "health.h"

#include "sequence.h"
#include "oip_grpc.h"
#include "oip_http.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

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

/* Every kind of address's transport figures, and the totals over them (open, refused_cap,
 * reply_timeouts) in *sum. */
static void stream_stats(dmn_srv *s, dmn_stream_stats ks[DMN_ST_KINDS], dmn_stream_stats *sum)
{
	memset(sum, 0, sizeof(*sum));
	for (int k = 0; k < DMN_ST_KINDS; k++) {
		dmn_stream_get_stats(s->stream, (dmn_stream_kind)k, &ks[k]);
		sum->open += ks[k].open;
		sum->refused_cap += ks[k].refused_cap;
		sum->reply_timeouts += ks[k].reply_timeouts;
	}
	dmn_oip_http_stats hs;
	dmn_oip_http_get_stats(s->oip, &hs);
	sum->open += hs.open;
	sum->refused_cap += hs.refused_cap;
	dmn_oip_grpc_stats gs;
	dmn_oip_grpc_get_stats(s->oip_grpc, &gs);
	sum->open += gs.open;
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
	for (int k = 0; k < DMN_NHISTS; k++)
		cJSON_AddItemToObject(hs, dmn_hists_name(k), dmn_hist_json(dmn_hists_at(&s->hist, k)));
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
	cJSON_AddNumberToObject(eng, "mem_limit", (double)s->mem_limit);
	cJSON_AddNumberToObject(eng, "idle_trims", (double)s->trims);
	for (int i = 0; i < s->nmodels; i++) {
		cJSON *mo = dmn_counters_json(&s->models[i]->c);
		if (s->models[i]->cur)
			cJSON_AddNumberToObject(mo, "version", s->models[i]->cur->version);
		cJSON_AddItemToObject(mo, "histograms", dmn_hists_json(&s->models[i]->hist));
		cJSON *seq = dmn_seqs_json(s->models[i]);
		if (seq)
			cJSON_AddItemToObject(mo, "sequence", seq);
		cJSON_AddItemToObject(models, s->models[i]->name, mo);
	}
	cJSON_AddNumberToObject(rz, "graphs", (double)s->realize_graphs);
	eng_stats rs;
	eng_device_stats rd;
	uint64_t rc;
	dmn_exec_realize_stats(s, &rs, &rd, &rc);
	cJSON_AddNumberToObject(rz, "compiles", (double)rc);
	cJSON_AddNumberToObject(rz, "over_budget", (double)s->realize_over_budget);
	cJSON_AddNumberToObject(rz, "programs", (double)rd.programs);
	cJSON_AddNumberToObject(rz, "program_evictions", (double)rd.program_evictions);
	cJSON_AddNumberToObject(rz, "mem_live", (double)rs.mem_live);
	cJSON_AddItemToObject(x, "requests", req);
	cJSON_AddItemToObject(x, "rejected", rej);
	cJSON_AddItemToObject(x, "histograms", hs);
	cJSON_AddItemToObject(x, "engine", eng);
	cJSON_AddItemToObject(x, "models", models);
	cJSON_AddItemToObject(x, "realize", rz);
	dmn_stream_stats ks[DMN_ST_KINDS], sum;
	stream_stats(s, ks, &sum);
	cJSON *co = cJSON_AddObjectToObject(x, "connections");
	cJSON_AddNumberToObject(co, "open", (double)sum.open);
	cJSON_AddNumberToObject(co, "refused_peer_cap", (double)sum.refused_cap);
	cJSON_AddNumberToObject(co, "closed_reply_timeout", (double)sum.reply_timeouts);
	cJSON_AddNumberToObject(co, "closed_flood", (double)s->hangup_flood);
	cJSON_AddNumberToObject(co, "closed_refused", (double)s->hangup_refused);
	cJSON_AddNumberToObject(co, "auth_refused", (double)s->auth_refused);
	cJSON_AddNumberToObject(co, "closed_token", (double)s->hangup_token);
	for (int k = 0; k < DMN_ST_KINDS; k++) { /* each kind of address's own */
		cJSON *cu = cJSON_AddObjectToObject(co, dmn_stream_kind_name((dmn_stream_kind)k));
		cJSON_AddNumberToObject(cu, "open", (double)ks[k].open);
		cJSON_AddNumberToObject(cu, "refused_peer_cap", (double)ks[k].refused_cap);
		cJSON_AddNumberToObject(cu, "closed_reply_timeout", (double)ks[k].reply_timeouts);
		cJSON_AddNumberToObject(cu, "closed_frame_timeout", (double)ks[k].frame_timeouts);
		cJSON_AddNumberToObject(cu, "frames_refused", (double)ks[k].frames_refused);
		cJSON_AddNumberToObject(cu, "budget_waits", (double)ks[k].budget_waits);
		cJSON_AddNumberToObject(cu, "pending_waits", (double)ks[k].pending_waits);
		cJSON_AddNumberToObject(cu, "partial_bytes", (double)ks[k].partial_bytes);
	}
	dmn_oip_http_stats hst;
	dmn_oip_http_get_stats(s->oip, &hst);
	cJSON *ch = cJSON_AddObjectToObject(co, "http"); /* the Open Inference Protocol's */
	cJSON_AddNumberToObject(ch, "open", (double)hst.open);
	cJSON_AddNumberToObject(ch, "accepted", (double)hst.accepted);
	cJSON_AddNumberToObject(ch, "refused_peer_cap", (double)hst.refused_cap);
	cJSON_AddNumberToObject(ch, "requests", (double)hst.requests);
	cJSON_AddNumberToObject(ch, "frontend_errors", (double)hst.errors);
	dmn_oip_grpc_stats gst;
	dmn_oip_grpc_get_stats(s->oip_grpc, &gst);
	cJSON *cg = cJSON_AddObjectToObject(co, "grpc"); /* the Open Inference Protocol's */
	cJSON_AddNumberToObject(cg, "open", (double)gst.open);
	cJSON_AddNumberToObject(cg, "calls", (double)gst.calls);
	cJSON_AddNumberToObject(cg, "requests", (double)gst.requests);
	cJSON_AddNumberToObject(cg, "frontend_errors", (double)gst.errors);
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
	for (int k = 0; k < DMN_NHISTS; k++) {
		char name[64];
		snprintf(name, sizeof(name), "tensord_%s", dmn_hists_name(k));
		dmn_prom_hist(&p, name, help[k], NULL, 0, dmn_hists_at(&s->hist, k));
	}
	eng_stats es, rs;
	eng_device_stats ds, rd;
	uint64_t rc;
	dmn_exec_stats(s, &es, &ds);
	dmn_exec_realize_stats(s, &rs, &rd, &rc);
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
		{"tensord_engine_mem_limit_bytes", "The engine's memory limit (0: none)", (double)s->mem_limit, false},
		{"tensord_engine_idle_trims_total", "Idle trims of the engine's cached buffers", (double)s->trims, true},
		{"tensord_realize_compiles_total", "Compiler runs caused by realize requests", (double)rc, true},
		{"tensord_realize_over_budget_total", "Realize requests refused: their client's compile budget was spent",
		 (double)s->realize_over_budget, true},
		{"tensord_realize_programs", "Compiled programs the realize worker holds", (double)rd.programs, false},
	};
	/* per kind of address, one family after another (a family's series must be contiguous) */
	dmn_stream_stats ks[DMN_ST_KINDS], sum;
	stream_stats(s, ks, &sum);
	static const struct { const char *name, *help; size_t off; bool counter; } tk[] = {
		{"tensord_transport_connections", "Connections open, by kind of address", offsetof(dmn_stream_stats, open), false},
		{"tensord_transport_closed_frame_timeout_total", "Connections closed: a frame (or SP handshake) not complete within frame_timeout_ms", offsetof(dmn_stream_stats, frame_timeouts), true},
		{"tensord_transport_frames_refused_total", "Frames refused by the transport (length, prefix, handshake, descriptors)", offsetof(dmn_stream_stats, frames_refused), true},
		{"tensord_transport_partial_bytes", "Bytes of frames being received", offsetof(dmn_stream_stats, partial_bytes), false},
	};
	for (size_t i = 0; i < sizeof(tk) / sizeof(*tk); i++)
		for (int k = 0; k < DMN_ST_KINDS; k++) {
			dmn_label l = {"transport", dmn_stream_kind_name((dmn_stream_kind)k)};
			int64_t v;
			memcpy(&v, (const char *)&ks[k] + tk[i].off, sizeof(v));
			(tk[i].counter ? dmn_prom_counter : dmn_prom_gauge)(&p, tk[i].name, tk[i].help, &l, 1, (double)v);
		}
	dmn_oip_http_stats hst;
	dmn_oip_http_get_stats(s->oip, &hst);
	dmn_oip_grpc_stats gst;
	dmn_oip_grpc_get_stats(s->oip_grpc, &gst);
	struct { const char *name, *help; double v; bool counter; } cn[] = {
		{"tensord_oip_http_connections", "Open Inference Protocol HTTP connections open", (double)hst.open, false},
		{"tensord_oip_http_requests_total", "Open Inference Protocol HTTP requests received", (double)hst.requests, true},
		{"tensord_oip_http_frontend_errors_total", "Open Inference Protocol HTTP requests the frontend refused before the daemon saw them",
		 (double)hst.errors, true},
		{"tensord_oip_grpc_connections", "Open Inference Protocol gRPC client addresses with calls open", (double)gst.open, false},
		{"tensord_oip_grpc_calls_total", "Open Inference Protocol gRPC calls (a stream is one)", (double)gst.calls, true},
		{"tensord_oip_grpc_requests_total", "Open Inference Protocol gRPC request messages received", (double)gst.requests, true},
		{"tensord_oip_grpc_frontend_errors_total", "Open Inference Protocol gRPC requests the frontend refused before the daemon saw them",
		 (double)gst.errors, true},
		{"tensord_connections", "Connections open", (double)sum.open, false},
		{"tensord_connections_refused_peer_cap_total", "Connections closed at once: their peer had peer_connections_max", (double)sum.refused_cap, true},
		{"tensord_connections_closed_reply_timeout_total", "Connections closed: a reply not taken within reply_timeout_ms", (double)sum.reply_timeouts, true},
		{"tensord_connections_closed_flood_total", "Connections closed: far past client_inflight_max", (double)s->hangup_flood, true},
		{"tensord_connections_closed_refused_total", "Connections of refused peers closed after their answer", (double)s->hangup_refused, true},
		{"tensord_auth_refused_total", "tcp requests refused: token missing or wrong (tcp_token_file)", (double)s->auth_refused, true},
		{"tensord_connections_closed_token_total", "Connections closed: too many requests without the right token", (double)s->hangup_token, true},
	};
	for (size_t k = 0; k < sizeof(cn) / sizeof(*cn); k++)
		(cn[k].counter ? dmn_prom_counter : dmn_prom_gauge)(&p, cn[k].name, cn[k].help, NULL, 0, cn[k].v);
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
	dmn_prom_gauge(&p, "tensord_ready", "1 when ready for new work (not starting, reloading, stopping, draining or stalled)", NULL, 0,
		       dmn_ready(s));
	dmn_prom_status st;
	const char *text = dmn_prom_finish(&p, &st);
	char *out = text ? strdup(text) : NULL;
	if (!text)
		dmn_log(&s->log, DMN_LOG_ERROR, "metrics: %s", p.msg);
	dmn_prom_free(&p);
	return out;
}
