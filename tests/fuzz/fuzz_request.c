/* fuzz_request.c: libFuzzer target for the request decoder and the graph validator (protocol/):
 * any bytes must decode or fail with a named bad_request/too_large; a decoded message must
 * re-encode to the same tensors; a "graph" in it must validate or fail naming a field, and a
 * valid one must build on the engine with the shapes the validator inferred (make fuzz).
 * An input starting with 'J' is the JSON text up to the first NUL and then the payload area:
 * the harness frames it (prefix, padding), so mutations of the JSON keep its length right. */
#include "protocol/graph_build.h"
#include "protocol/message.h"
#include "fuzz_util.h"

#define MAX_LEN 65536

static void check_err(tsd_status s, const proto_err *err, const char *what)
{
	if ((s != TSD_BAD_REQUEST && s != TSD_TOO_LARGE && s != TSD_SHAPE_MISMATCH) || !err->msg[0] ||
	    err->status != s) {
		fprintf(stderr, "fuzz: %s failed with %s and message '%s'\n", what, tsd_status_name(s), err->msg);
		abort();
	}
}

/* Encoding the decoded tensors again and decoding that gives the same tensors. */
static void reencode(const proto_msg *m)
{
	proto_out out[PROTO_MAX_TENSORS];
	uint64_t sum = 0;
	for (int i = 0; i < m->ntensors; i++) {
		const proto_tensor *t = &m->tensors[i];
		for (size_t k = 0; k < t->nbytes; k++) /* every byte is inside the input (ASan) */
			sum += ((const uint8_t *)t->data)[k];
		out[i] = (proto_out){t->name, t->dtype, t->ndim, t->shape, t->data};
	}
	void *buf;
	size_t len;
	proto_err err = {0};
	proto_msg *back = malloc(sizeof(*back));
	if (proto_encode(m->json, out, m->ntensors, 0, NULL, NULL, &buf, &len, &err) ||
	    proto_decode(buf, len, len, PROTO_REQUEST, back, &err)) {
		fprintf(stderr, "fuzz: a decoded message does not re-encode: %s\n", err.msg);
		abort();
	}
	for (int i = 0; i < m->ntensors; i++) {
		const proto_tensor *a = &m->tensors[i], *b = &back->tensors[i];
		if (back->ntensors != m->ntensors || strcmp(a->name, b->name) || a->dtype != b->dtype ||
		    a->ndim != b->ndim || a->nbytes != b->nbytes || memcmp(a->shape, b->shape, sizeof(a->shape)) ||
		    (a->nbytes && memcmp(a->data, b->data, a->nbytes))) {
			fprintf(stderr, "fuzz: tensors[%d] differs after re-encoding (sum %llu)\n", i,
				(unsigned long long)sum);
			abort();
		}
	}
	proto_msg_free(back);
	free(back);
	free(buf);
}

/* Build a validated graph on zero tensors (no memory: constants) with batch size 2. */
static void build(const proto_graph *g)
{
	eng_ctx *ctx = fuzz_ctx();
	size_t nodes = eng_graph_live_nodes(ctx->graph);
	eng_scope_begin(ctx);
	eng_tensor **in = calloc((size_t)g->ninputs + 1, sizeof(*in));
	eng_tensor **par = calloc((size_t)g->nparams + 1, sizeof(*par));
	eng_tensor *outs[PROTO_GRAPH_MAX_OUTPUTS];
	int ki = 0, kp = 0;
	for (int i = 0; i < g->nnodes; i++) {
		const proto_gnode *n = &g->nodes[i];
		if (n->op != PROTO_G_INPUT && n->op != PROTO_G_PARAM)
			continue;
		int64_t shape[ENG_MAX_DIMS];
		for (int d = 0; d < n->ndim; d++)
			shape[d] = n->shape[d] == PROTO_BATCH ? 2 : n->shape[d];
		eng_tensor *t = eng_zeros(ctx, n->dtype, n->ndim, shape);
		if (n->op == PROTO_G_INPUT)
			in[ki++] = t;
		else
			par[kp++] = t;
	}
	proto_err err = {0};
	tsd_status s = proto_graph_build(g, ctx, in, par, outs, &err);
	if (s == TSD_INTERNAL && strstr(err.msg, "disagrees")) {
		fprintf(stderr, "fuzz: %s\n", err.msg);
		abort();
	}
	free(in);
	free(par);
	eng_scope_end(ctx);
	fuzz_check_nodes(ctx, nodes);
}

static int one_input(const uint8_t *data, size_t size);

/* 'J' + json + NUL + area as a framed message (malloc'd, *n bytes). */
static uint8_t *frame(const uint8_t *data, size_t size, size_t *n)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t jl = nul ? (size_t)(nul - data) : size, rest = nul ? size - jl - 1 : 0;
	size_t area = (8 + jl + 63) / 64 * 64;
	*n = rest ? area + rest : 8 + jl;
	uint8_t *b = calloc(1, *n);
	if (!b)
		abort();
	memcpy(b, "TSD1", 4);
	for (int k = 0; k < 4; k++)
		b[4 + k] = (uint8_t)(jl >> (8 * k));
	memcpy(b + 8, data, jl);
	if (rest)
		memcpy(b + area, nul + 1, rest);
	return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *framed = NULL;
	if (size && data[0] == 'J') {
		framed = frame(data + 1, size - 1, &size);
		data = framed;
	}
	int r = one_input(data, size);
	free(framed);
	return r;
}

static int one_input(const uint8_t *data, size_t size)
{
	proto_msg *m = malloc(sizeof(*m));
	proto_err err = {0};
	tsd_status s = proto_decode(data, size, MAX_LEN, PROTO_REQUEST, m, &err);
	if (s) {
		check_err(s, &err, "decode");
		free(m);
		return 0;
	}
	reencode(m);
	const cJSON *gj = cJSON_GetObjectItemCaseSensitive(m->json, "graph");
	if (gj) {
		proto_graph g;
		s = proto_graph_parse(gj, (uint64_t)1 << 30, &g, &err);
		if (s)
			check_err(s, &err, "graph");
		else
			build(&g);
		if (!s)
			proto_graph_free(&g);
	}
	proto_msg_free(m);
	free(m);
	return 0;
}
