/* types.c: the functions of the shared types themselves: the verb names (verbs.def), the
 * histogram sets and model counters as JSON, and a model version's description freed. */
#include "types.h"

#include <stdlib.h>
#include <string.h>

static const char *const verb_names[] = {
#define DMN_VERB(e, name, fn) name,
#include "verbs.def"
#undef DMN_VERB
};

dmn_verb dmn_verb_find(const char *name)
{
	for (int v = 0; v < DMN_V_COUNT; v++)
		if (!strcmp(verb_names[v], name))
			return (dmn_verb)v;
	return DMN_V_COUNT;
}

const char *dmn_verb_name(dmn_verb v)
{
	return v >= 0 && v < DMN_V_COUNT ? verb_names[v] : "(undecodable)";
}

void dmn_hists_init(dmn_hists *h)
{
	dmn_hist_init_125(&h->queue_us, 1, 1e7);
	dmn_hist_init_125(&h->compute_us, 1, 1e7);
	dmn_hist_init_125(&h->total_us, 1, 1e7);
	dmn_hist_init_pow2(&h->batch_size, 1, 4096);
}

static const char *const hist_names[DMN_NHISTS] = {"queue_us", "compute_us", "total_us", "batch_size"};

const char *dmn_hists_name(int k)
{
	return hist_names[k];
}

const dmn_hist *dmn_hists_at(const dmn_hists *hs, int k)
{
	const dmn_hist *h[DMN_NHISTS] = {&hs->queue_us, &hs->compute_us, &hs->total_us, &hs->batch_size};
	return h[k];
}

cJSON *dmn_hists_json(const dmn_hists *h)
{
	cJSON *o = cJSON_CreateObject();
	for (int k = 0; k < DMN_NHISTS; k++)
		cJSON_AddItemToObject(o, hist_names[k], dmn_hist_json(dmn_hists_at(h, k)));
	return o;
}

cJSON *dmn_counters_json(const dmn_mcounters *c)
{
	cJSON *o = cJSON_CreateObject();
#define DMN_MC(f) cJSON_AddNumberToObject(o, #f, (double)c->f);
#include "model_counters.def"
#undef DMN_MC
	return o;
}

void dmn_mver_free(dmn_mver *v)
{
	if (!v)
		return;
	proto_graph_free(&v->g);
	cJSON_Delete(v->onnx_opts);
	for (int k = 0; k < v->nstate; k++)
		free(v->state[k].init_data);
	free(v);
}

void dmn_mver_unbatched(dmn_mver *v)
{
	v->batched = false;
	v->batch_max = 1;
	v->nbuckets = 1;
	v->buckets[0] = 1;
}
