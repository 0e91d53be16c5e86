/* fuzz_graph.c: libFuzzer target for the graph validator alone (protocol/graph*.c): any JSON text
 * must parse into a graph or fail with a named bad_request/too_large/shape_mismatch, and a valid
 * graph's batch check (every input node, the outputs) must pass with batch axes that point at the
 * batch dimension, or fail as bad_request naming a node (make fuzz). Nothing is built. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/proto_graph.h"

static void finding(const char *what, const proto_err *err)
{
	fprintf(stderr, "fuzz: %s (%s: '%s')\n", what, tsd_status_name(err->status), err->msg);
	abort();
}

/* A failure must carry its status in err and a message naming where. */
static void check_err(tsd_status s, const proto_err *err, bool batch)
{
	bool known = batch ? s == TSD_BAD_REQUEST :
		s == TSD_BAD_REQUEST || s == TSD_TOO_LARGE || s == TSD_SHAPE_MISMATCH;
	if (!known || err->status != s || !err->msg[0])
		finding(batch ? "the batch check failed oddly" : "the parse failed oddly", err);
	if (batch && strncmp(err->msg, "nodes[", 6) && strncmp(err->msg, "inputs[", 7) &&
	    strncmp(err->msg, "outputs[", 8))
		finding("a batch check message names no node", err);
}

static void batch_check(const proto_graph *g)
{
	int *inputs = malloc(sizeof(int) * (size_t)(g->ninputs + 1));
	int *in_axis = malloc(sizeof(int) * (size_t)(g->ninputs + 1));
	int out_axis[PROTO_GRAPH_MAX_OUTPUTS];
	if (!inputs || !in_axis)
		abort();
	int nin = 0;
	for (int i = 0; i < g->nnodes; i++)
		if (g->nodes[i].op == PROTO_G_INPUT)
			inputs[nin++] = i;
	proto_err err = {0};
	tsd_status s = proto_graph_batch_check(g, inputs, nin, g->outputs, g->noutputs, in_axis, out_axis, &err);
	if (s) {
		check_err(s, &err, true);
	} else {
		/* only inputs bring a batch dimension: an unbatched graph cannot pass */
		if (!g->batched)
			finding("an unbatched graph passed the batch check", &err);
		for (int k = 0; k < nin + g->noutputs; k++) {
			const proto_gnode *n = &g->nodes[k < nin ? inputs[k] : g->outputs[k - nin]];
			int ax = k < nin ? in_axis[k] : out_axis[k - nin];
			if (ax < 0 || ax >= n->ndim || n->shape[ax] != PROTO_BATCH)
				finding("a batch axis does not point at the batch dimension", &err);
		}
	}
	free(inputs);
	free(in_axis);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cJSON *j = cJSON_ParseWithLength((const char *)data, size);
	if (!j)
		return 0;
	proto_graph g;
	proto_err err = {0};
	tsd_status s = proto_graph_parse(j, (uint64_t)1 << 30, &g, &err);
	if (s) {
		check_err(s, &err, false);
	} else {
		batch_check(&g);
		proto_graph_free(&g);
	}
	cJSON_Delete(j);
	return 0;
}
