/* test_graph_batch.c: proto_graph_batch_check (protocol/graph_batch.c): row-independent models
 * accepted with their batch axes (and checked on the engine: each output row computed from its
 * input row alone), every way of mixing rows rejected naming the node. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/graph_build.h"
#include "suites.h"
#include "testutil.h"

/* What the check promises, on the engine: built with 3 rows of random inputs, each output row
 * equals the output of that input row built alone. */
static void rows_agree(int line, const proto_graph *g, const int *in_axis, const int *out_axis)
{
	enum { ROWS = 3, MAXN = 256 };
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {11};
	eng_tensor *in[8], *par[16], *full[PROTO_GRAPH_MAX_OUTPUTS], *one[PROTO_GRAPH_MAX_OUTPUTS];
	int nin = 0, npar = 0;
	for (int i = 0; i < g->nnodes; i++) {
		const proto_gnode *n = &g->nodes[i];
		int64_t shape[ENG_MAX_DIMS];
		for (int d = 0; d < n->ndim; d++)
			shape[d] = n->shape[d] == PROTO_BATCH ? ROWS : n->shape[d];
		if (n->op == PROTO_G_INPUT || n->op == PROTO_G_PARAM) {
			eng_tensor *t = tu_rand(ctx, &r, n->dtype, n->ndim, shape, -1, 1);
			if (n->op == PROTO_G_INPUT)
				in[nin++] = t;
			else
				par[npar++] = t;
		}
	}
	proto_err err = {0};
	ck_assert_msg(proto_graph_build(g, ctx, in, par, full, &err) == TSD_OK, "line %d: %s", line, err.msg);
	for (int row = 0; row < ROWS; row++) {
		eng_scope_begin(ctx);
		eng_tensor *sl[8];
		for (int k = 0; k < nin; k++)
			sl[k] = eng_slice(in[k], in_axis[k], row, row + 1, 1);
		ck_assert_msg(proto_graph_build(g, ctx, sl, par, one, &err) == TSD_OK, "line %d: %s", line, err.msg);
		for (int o = 0; o < g->noutputs; o++) {
			eng_tensor *want = eng_cast(eng_slice(full[o], out_axis[o], row, row + 1, 1), ENG_F32);
			eng_tensor *got = eng_cast(one[o], ENG_F32);
			int64_t n = eng_numel(got);
			ck_assert(n == eng_numel(want) && n <= MAXN);
			float a[MAXN], b[MAXN];
			ck_assert_int_eq(eng_tensor_read(got, a, sizeof(float) * (size_t)n), ENG_OK);
			ck_assert_int_eq(eng_tensor_read(want, b, sizeof(float) * (size_t)n), ENG_OK);
			for (int64_t e = 0; e < n; e++)
				ck_assert_msg(fabsf(a[e] - b[e]) <= 1e-4f * (1 + fabsf(b[e])), "line %d: outputs[%d] row "
					      "%d [%lld]: %g alone, %g batched", line, o, row, (long long)e, a[e], b[e]);
		}
		eng_scope_end(ctx);
	}
	tu_ctx_free(ctx);
}

/* Parse text (' for ") and run the check over every input node and the graph's outputs.
 * want_word NULL: must pass with the given axes (in_axes for the inputs in node order, then
 * out_axes); otherwise must fail as bad_request with a message containing want_word. */
static void check(int line, const char *text, const char *want_word, const int *in_axes,
		  const int *out_axes)
{
	char *t = strdup(text);
	for (char *p = t; *p; p++)
		if (*p == '\'')
			*p = '"';
	cJSON *j = cJSON_Parse(t);
	ck_assert_msg(j, "line %d: bad test JSON: %s", line, t);
	proto_graph g;
	proto_err err = {0};
	ck_assert_msg(proto_graph_parse(j, 1 << 20, &g, &err) == TSD_OK, "line %d: %s", line, err.msg);
	ck_assert_msg(g.batched, "line %d: not batched", line);
	int inputs[8], nin = 0, in_axis[8], out_axis[PROTO_GRAPH_MAX_OUTPUTS];
	for (int i = 0; i < g.nnodes; i++)
		if (g.nodes[i].op == PROTO_G_INPUT)
			inputs[nin++] = i;
	tsd_status s = proto_graph_batch_check(&g, inputs, nin, g.outputs, g.noutputs, in_axis, out_axis, &err);
	if (!want_word) {
		ck_assert_msg(s == TSD_OK, "line %d: %s", line, err.msg);
		for (int k = 0; k < nin; k++)
			ck_assert_msg(in_axis[k] == in_axes[k], "line %d: inputs[%d] axis %d, want %d", line, k,
				      in_axis[k], in_axes[k]);
		for (int k = 0; k < g.noutputs; k++)
			ck_assert_msg(out_axis[k] == out_axes[k], "line %d: outputs[%d] axis %d, want %d", line, k,
				      out_axis[k], out_axes[k]);
		rows_agree(line, &g, in_axis, out_axis);
	} else {
		ck_assert_msg(s == TSD_BAD_REQUEST && err.status == s, "line %d: status %s (%s)", line,
			      tsd_status_name(s), err.msg);
		ck_assert_msg(strstr(err.msg, want_word), "line %d: '%s' lacks '%s'", line, err.msg, want_word);
	}
	proto_graph_free(&g);
	cJSON_Delete(j);
	free(t);
}

#define AXES(...) ((const int[]){__VA_ARGS__})
#define OK(text, in, out) check(__LINE__, text, NULL, in, out)
#define BAD(text, word) check(__LINE__, text, word, NULL, NULL)

/* x [B,4] and x3 [B,3,4] inputs; graphs append nodes after them. */
#define X "{'id':'x','op':'input','dtype':'float32','shape':[-1,4]}"
#define X3 "{'id':'x','op':'input','dtype':'float32','shape':[-1,3,4]}"
#define G(nodes, outs) "{'nodes':[" nodes "],'outputs':[" outs "]}"

START_TEST(accepts_row_independent)
{
	/* MLP: matmul with the batch in a's rows, bias broadcast, relu, linear, softmax on features */
	OK(G(X ",{'id':'w1','op':'param','dtype':'float32','shape':[4,8]},"
	     "{'id':'b1','op':'param','dtype':'float32','shape':[8]},"
	     "{'id':'h','op':'matmul','in':['x','w1']},{'id':'hb','op':'add','in':['h','b1']},"
	     "{'id':'a','op':'relu','in':['hb']},"
	     "{'id':'w2','op':'param','dtype':'float32','shape':[3,8]},"
	     "{'id':'b2','op':'param','dtype':'float32','shape':[3]},"
	     "{'id':'y','op':'linear','in':['a','w2','b2']},"
	     "{'id':'p','op':'softmax','in':['y'],'axis':-1},"
	     "{'id':'s','op':'sum','in':['a'],'axes':[1],'keepdim':true}",
	     "'p','s','x'"), AXES(0), AXES(0, 0, 0));
	/* conv net: conv2d, permute to NHWC, reductions over the spatial axes, log_softmax */
	OK(G("{'id':'x','op':'input','dtype':'float32','shape':[-1,1,6,6]},"
	     "{'id':'w','op':'param','dtype':'float32','shape':[2,1,3,3]},"
	     "{'id':'b','op':'param','dtype':'float32','shape':[2]},"
	     "{'id':'c','op':'conv2d','in':['x','w','b'],'stride':2,'padding':1},"
	     "{'id':'q','op':'permute','in':['c'],'perm':[0,2,3,1]},"
	     "{'id':'l','op':'log_softmax','in':['q'],'axis':3},"
	     "{'id':'m','op':'max','in':['l'],'axes':[1,2]},{'id':'e','op':'exp','in':['m']}",
	     "'e','q'"), AXES(0), AXES(0, 0));
	/* the batch axis moved by permute and transpose, then a matmul with it in a's rows */
	OK(G(X3 ",{'id':'p','op':'permute','in':['x'],'perm':[2,0,1]},"
	     "{'id':'t','op':'transpose','in':['p'],'dims':[0,1]},"
	     "{'id':'w','op':'param','dtype':'float32','shape':[3,5]},"
	     "{'id':'m','op':'matmul','in':['t','w']},{'id':'s','op':'mean','in':['m'],'axes':[-1]}",
	     "'p','t','m','s'"), AXES(0), AXES(1, 0, 0, 0));
	/* the batch in b's columns (w @ x^T): column j uses b's column j only */
	OK(G(X ",{'id':'t','op':'transpose','in':['x'],'dims':[0,1]},"
	     "{'id':'w','op':'param','dtype':'float32','shape':[2,4]},"
	     "{'id':'m','op':'matmul','in':['w','t']}", "'m'"), AXES(0), AXES(1));
	/* the batch in matmul batch dims of both operands, and broadcast against a param */
	OK(G(X3 ",{'id':'y','op':'input','dtype':'float32','shape':[-1,4,2]},"
	     "{'id':'m','op':'matmul','in':['x','y']},"
	     "{'id':'w','op':'param','dtype':'float32','shape':[1,3,2]},"
	     "{'id':'a','op':'mul','in':['m','w']}", "'a'"), AXES(0, 0), AXES(0));
	/* reshapes keeping rows whole: [B,3,4] -> [B,12] -> [B,2,6]; [2,B,3] -> [2,B,3,1] */
	OK(G(X3 ",{'id':'r','op':'reshape','in':['x'],'shape':[-1,12]},"
	     "{'id':'r2','op':'reshape','in':['r'],'shape':[-1,2,6]}", "'r','r2'"), AXES(0), AXES(0, 0));
	OK(G("{'id':'x','op':'input','dtype':'float32','shape':[2,-1,3]},"
	     "{'id':'r','op':'reshape','in':['x'],'shape':[2,-1,3,1]},{'id':'c','op':'cast','in':['r'],'dtype':'float16'}",
	     "'c'"), AXES(1), AXES(1));
	/* a greedy decode: int32 ids, one_hot, a bag of words, argmax steps fed back through
	 * one_hot, a param row by slice, the steps stacked and joined; eq, lt and where per row */
	OK(G("{'id':'ids','op':'input','dtype':'int32','shape':[-1,3]},"
	     "{'id':'e','op':'param','dtype':'float32','shape':[4,5]},"
	     "{'id':'p','op':'param','dtype':'float32','shape':[5,5]},"
	     "{'id':'oh','op':'one_hot','in':['ids'],'num_classes':4},"
	     "{'id':'bag','op':'sum','in':['oh'],'axes':1},{'id':'c','op':'matmul','in':['bag','e']},"
	     "{'id':'y0','op':'argmax','in':['c'],'axis':-1},"
	     "{'id':'o1','op':'one_hot','in':['y0'],'num_classes':5},{'id':'m1','op':'matmul','in':['o1','p']},"
	     "{'id':'r','op':'slice','in':['p'],'axis':0,'start':1,'stop':2},"
	     "{'id':'h','op':'add','in':['m1','r']},{'id':'y1','op':'argmax','in':['h'],'axis':1,'keepdim':true},"
	     "{'id':'y0k','op':'argmax','in':['c'],'keepdim':true},"
	     "{'id':'plan','op':'stack','in':['y0','y0'],'axis':0},"
	     "{'id':'j','op':'cat','in':['y0k','y1','y1'],'axis':1},"
	     "{'id':'z','op':'const','value':0},{'id':'neg','op':'lt','in':['c','z']},"
	     "{'id':'two','op':'const','value':2,'dtype':'int32'},{'id':'is2','op':'eq','in':['ids','two']},"
	     "{'id':'ab','op':'neg','in':['c']},{'id':'w','op':'where','in':['neg','ab','c']},"
	     "{'id':'cs','op':'slice','in':['c'],'axis':1,'start':-1,'stop':0,'step':-2}",
	     "'plan','j','w','is2','cs'"), AXES(0), AXES(1, 0, 0, 0, 0));
	/* mixing that reaches no output does not matter */
	OK(G(X ",{'id':'m','op':'mean','in':['x'],'axes':[0]},{'id':'e','op':'exp','in':['x']}",
	     "'e'"), AXES(0), AXES(0));
}
END_TEST

START_TEST(rejects_mixing)
{
	BAD(G(X ",{'id':'m','op':'mean','in':['x'],'axes':[0]},{'id':'e','op':'exp','in':['m']}", "'e'"),
	    "nodes[1] (m): mean: reduces over the batch dimension");
	BAD(G(X ",{'id':'m','op':'sum','in':['x']}", "'m'"), "nodes[1] (m): sum: reduces over the batch "
	    "dimension (all axes)");
	BAD(G(X3 ",{'id':'m','op':'max','in':['x'],'axes':[2,-3]}", "'m'"), "nodes[1] (m): max: reduces");
	/* x - mean(x, 0, keepdim): the mixing propagates to the output */
	BAD(G(X ",{'id':'m','op':'mean','in':['x'],'axes':[0],'keepdim':true},"
	      "{'id':'d','op':'sub','in':['x','m']}", "'d'"), "nodes[1] (m): mean: reduces over the batch");
	/* x^T @ x contracts it */
	BAD(G(X ",{'id':'t','op':'transpose','in':['x'],'dims':[0,1]},"
	      "{'id':'g','op':'matmul','in':['t','x']}", "'g'"), "nodes[2] (g): matmul: contracts the batch");
	/* x @ x^T crosses it with itself ([B,B]) */
	BAD(G(X ",{'id':'t','op':'transpose','in':['x'],'dims':[0,1]},"
	      "{'id':'g','op':'matmul','in':['x','t']}", "'g'"), "nodes[2] (g): matmul: combines the batch");
	/* a 1-d batch operand is contracted */
	BAD(G("{'id':'v','op':'input','dtype':'float32','shape':[-1]},"
	      "{'id':'r','op':'reshape','in':['v'],'shape':[-1,1]},"
	      "{'id':'g','op':'matmul','in':['v','r']}", "'g'"), "nodes[2] (g): matmul: contracts");
	/* linear over a transposed input: the batch is the contracted 'in' */
	BAD(G(X ",{'id':'t','op':'transpose','in':['x'],'dims':[0,1]},"
	      "{'id':'y','op':'linear','in':['t','t']}", "'y'"), "nodes[2] (y): linear: contracts");
	/* an outer sum: [B,1] + [1,B] */
	BAD(G(X ",{'id':'a','op':'reshape','in':['x'],'shape':[-1,1,4]},"
	      "{'id':'b','op':'reshape','in':['x'],'shape':[1,-1,4]},{'id':'s','op':'add','in':['a','b']}",
	      "'s'"), "nodes[3] (s): add: combines the batch dimension with itself");
	BAD(G(X ",{'id':'p','op':'softmax','in':['x'],'axis':0}", "'p'"),
	    "nodes[1] (p): softmax: normalizes along the batch dimension");
	BAD(G(X3 ",{'id':'q','op':'permute','in':['x'],'perm':[1,2,0]},"
	      "{'id':'p','op':'log_softmax','in':['q']}", "'p'"), "(p): log_softmax: normalizes");
	/* [B,3,4] -> [3,-1,4]: 3 elements before the batch axis (was 1). ([3,-1] does not even
	 * parse: with a batch dimension the -1 is it, so the other dimensions must keep 12.) */
	BAD(G(X3 ",{'id':'r','op':'reshape','in':['x'],'shape':[3,-1,4]}", "'r'"),
	    "nodes[1] (r): reshape: moves the batch dimension");
	BAD(G("{'id':'x','op':'input','dtype':'float32','shape':[2,-1,3]},"
	      "{'id':'r','op':'reshape','in':['x'],'shape':[-1,6]}", "'r'"), "(r): reshape: moves");
	BAD(G(X ",{'id':'a','op':'argmax','in':['x'],'axis':0}", "'a'"),
	    "nodes[1] (a): argmax: reduces over the batch dimension");
	BAD(G(X3 ",{'id':'a','op':'argmax','in':['x'],'axis':-3,'keepdim':true},"
	      "{'id':'o','op':'one_hot','in':['a'],'num_classes':3}", "'o'"), "nodes[1] (a): argmax: reduces");
	/* an output without the batch dimension */
	BAD(G(X ",{'id':'w','op':'param','dtype':'float32','shape':[4]},{'id':'e','op':'exp','in':['w']}",
	      "'x','e'"), "outputs[1] (e): no batch dimension");
	/* an input without it (the model is batched through another input) */
	BAD(G(X ",{'id':'z','op':'input','dtype':'float32','shape':[4]},{'id':'a','op':'add','in':['x','z']}",
	      "'a'"), "inputs[1] (z): no batch dimension");
}
END_TEST

START_TEST(bad_indices)
{
	cJSON *j = cJSON_Parse("{\"nodes\":[{\"id\":\"x\",\"op\":\"input\",\"dtype\":\"float32\",\"shape\":[-1]}],"
			       "\"outputs\":[\"x\"]}");
	proto_graph g;
	proto_err err = {0};
	ck_assert_int_eq(proto_graph_parse(j, 0, &g, &err), TSD_OK);
	int in = 0, bad = 5, ax[1] = {-7}, oax[1] = {-7};
	ck_assert_int_eq(proto_graph_batch_check(&g, &in, 1, g.outputs, 1, ax, oax, &err), TSD_OK);
	ck_assert(ax[0] == 0 && oax[0] == 0);
	ck_assert_int_eq(proto_graph_batch_check(&g, &bad, 1, g.outputs, 1, ax, oax, &err), TSD_BAD_REQUEST);
	ck_assert_str_eq(err.msg, "inputs[0]: node index 5 out of range");
	proto_graph_free(&g);
	cJSON_Delete(j);
}
END_TEST

/* The committed seeds of fuzz_graph (tests/fuzz/make_corpus.py) give what they were written for:
 * parse status, then the batch check's status and message. Run from the repository root. */
START_TEST(fuzz_seeds)
{
	static const struct {
		const char *file;
		tsd_status parse, batch;
		const char *word;
	} seeds[] = {
		{"mlp", TSD_OK, TSD_OK, NULL},
		{"conv", TSD_OK, TSD_BAD_REQUEST, "nodes[7] (mn): mean: reduces over the batch dimension (all axes)"},
		{"linear", TSD_OK, TSD_BAD_REQUEST, "inputs[0] (x): no batch dimension"},
		{"permuted", TSD_OK, TSD_OK, NULL},
		{"two_inputs", TSD_OK, TSD_OK, NULL},
		{"mean_batch", TSD_OK, TSD_BAD_REQUEST, "nodes[1] (m): mean: reduces"},
		{"gram", TSD_OK, TSD_BAD_REQUEST, "nodes[2] (g): matmul: contracts"},
		{"reshape_moves", TSD_OK, TSD_BAD_REQUEST, "nodes[1] (r): reshape: moves"},
		{"outer", TSD_OK, TSD_BAD_REQUEST, "nodes[3] (s): add: combines"},
		{"decode", TSD_OK, TSD_OK, NULL},
		{"argmax_batch", TSD_OK, TSD_BAD_REQUEST, "nodes[1] (a): argmax: reduces over the batch dimension"},
		{"unknown_op", TSD_BAD_REQUEST, TSD_OK, "unknown op 'gelu'"},
		{"bad_shape", TSD_SHAPE_MISMATCH, TSD_OK, "shapes [-1,4] and [5,2] do not match"},
	};
	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		const char *path = seeds[i].file;
		static char buf[65536];
		size_t len = tu_read_seed("graph", path, buf, sizeof(buf));
		cJSON *j = cJSON_ParseWithLength(buf, len);
		ck_assert_msg(j, "%s: not JSON", path);
		proto_graph g;
		proto_err err = {0};
		tsd_status s = proto_graph_parse(j, 1 << 20, &g, &err);
		ck_assert_msg(s == seeds[i].parse, "%s: parse %s (%s)", path, tsd_status_name(s), err.msg);
		if (!s) {
			int inputs[8], nin = 0, ax[8], oax[PROTO_GRAPH_MAX_OUTPUTS];
			for (int k = 0; k < g.nnodes; k++)
				if (g.nodes[k].op == PROTO_G_INPUT)
					inputs[nin++] = k;
			s = proto_graph_batch_check(&g, inputs, nin, g.outputs, g.noutputs, ax, oax, &err);
			ck_assert_msg(s == seeds[i].batch, "%s: batch %s (%s)", path, tsd_status_name(s), err.msg);
			proto_graph_free(&g);
		}
		if (s)
			ck_assert_msg(strstr(err.msg, seeds[i].word), "%s: '%s' lacks '%s'", path, err.msg, seeds[i].word);
		cJSON_Delete(j);
	}
}
END_TEST

Suite *graphbatch_suite(void)
{
	const TTest *const tests[] = {accepts_row_independent, rejects_mixing, bad_indices, fuzz_seeds};
	return tu_suite("graphbatch", tests, (int)(sizeof(tests) / sizeof(tests[0])), TU_TIMEOUT);
}
