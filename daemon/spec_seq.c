/* spec_seq.c: a model.load's "sequence" object (docs/PROTOCOL.md, "Sequences"): the state pairs
 * (an input fed at each step with the output of the step before, in the same sequence), their
 * initial values, and the model's sequence limits. The pairs are checked against the ports
 * here for graph models, and when the executor has opened an ONNX file for ONNX models. */
#include "registry.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BAD(...) dmn_bad(err, errlen, TSD_BAD_REQUEST, __VA_ARGS__)
#define INIT_MAX (1 << 20) /* numbers in one state's "init" */

static tsd_status parse_pair(const cJSON *e, int k, struct dmn_state_pair *p, char *err, size_t errlen)
{
	static const char *const known[] = {"input", "output", "init"};
	const char *unknown = cJSON_IsObject(e) ? dmn_json_unknown(e, known, 3) : "";
	if (unknown)
		return BAD("sequence.state[%d]: an object of input, output, init%s%.64s", k, unknown[0] ? "; not " : "",
			   unknown);
	const char *in = dmn_json_str(e, "input"), *out = dmn_json_str(e, "output");
	if (!in || !out || !in[0] || !out[0] || strlen(in) > PROTO_MAX_NAME || strlen(out) > PROTO_MAX_NAME)
		return BAD("sequence.state[%d]: input and output: the names of an input and an output of the model", k);
	snprintf(p->input, sizeof(p->input), "%s", in);
	snprintf(p->output, sizeof(p->output), "%s", out);
	const cJSON *init = cJSON_GetObjectItemCaseSensitive(e, "init");
	if (!init)
		return TSD_OK;
	if (cJSON_IsNumber(init)) {
		if (!isfinite(init->valuedouble))
			return BAD("sequence.state[%d].init: a finite number", k);
		p->init = init->valuedouble;
		return TSD_OK;
	}
	int n = cJSON_IsArray(init) ? cJSON_GetArraySize(init) : -1;
	if (n < 1 || n > INIT_MAX)
		return BAD("sequence.state[%d].init: a number (every element), or one row's numbers (1 to %d)", k, INIT_MAX);
	if (!(p->init_data = malloc((size_t)n * sizeof(float))))
		return dmn_bad(err, errlen, TSD_OUT_OF_MEMORY, "out of memory");
	p->init_n = n;
	int i = 0;
	for (const cJSON *x = init->child; x; x = x->next, i++) {
		if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble))
			return BAD("sequence.state[%d].init[%d]: a finite number", k, i);
		p->init_data[i] = (float)x->valuedouble;
	}
	return TSD_OK;
}

tsd_status dmn_seq_spec(dmn_srv *s, const cJSON *spec, dmn_mver *v, char *err, size_t errlen)
{
	const cJSON *q = cJSON_GetObjectItemCaseSensitive(spec, "sequence");
	v->max_sequences = (int)s->cfg.max_sequences;
	v->seq_idle_us = s->cfg.max_sequence_idle_us;
	if (!q)
		return TSD_OK;
	static const char *const known[] = {"state", "max_sequences", "max_sequence_idle_us", "outlive_connection"};
	if (!cJSON_IsObject(q))
		return BAD("sequence: an object (state, max_sequences, max_sequence_idle_us, outlive_connection)");
	const char *unknown = dmn_json_unknown(q, known, sizeof(known) / sizeof(*known));
	if (unknown)
		return BAD("sequence.%.64s: unknown field (state, max_sequences, max_sequence_idle_us, outlive_connection)",
			   unknown);
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(q, "state"), *f;
	int n = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1;
	if (n < 1 || n > DMN_STATE_MAX)
		return BAD("sequence.state: an array of 1 to %d {\"input\", \"output\"} pairs", DMN_STATE_MAX);
	int k = 0;
	tsd_status st;
	for (const cJSON *e = a->child; e; e = e->next, k++, v->nstate++)
		if ((st = parse_pair(e, k, &v->state[k], err, errlen))) {
			v->nstate++; /* its init_data is freed with v */
			return st;
		}
	int64_t x;
	if ((f = cJSON_GetObjectItemCaseSensitive(q, "max_sequences"))) {
		if (!proto_json_int(f, 1, 1000000, &x))
			return BAD("sequence.max_sequences: an integer in [1, 1000000]");
		v->max_sequences = (int)x;
	}
	if ((f = cJSON_GetObjectItemCaseSensitive(q, "max_sequence_idle_us"))) {
		if (!proto_json_int(f, 1000, INT64_C(86400000000), &x))
			return BAD("sequence.max_sequence_idle_us: an integer in [1000, 86400000000]");
		v->seq_idle_us = x;
	}
	if ((f = cJSON_GetObjectItemCaseSensitive(q, "outlive_connection"))) {
		if (!cJSON_IsBool(f))
			return BAD("sequence.outlive_connection: true or false");
		v->seq_outlive = cJSON_IsTrue(f);
	}
	return TSD_OK;
}
