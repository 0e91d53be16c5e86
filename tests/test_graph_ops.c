/* test_graph_ops.c: the graph format's index and join ops (argmax, one_hot, eq, lt, where, cat,
 * stack, slice, contiguous): their values built in-process against hand-computed numbers, every validation
 * error (arity, axes, num_classes, dtypes, shapes, the batch dimension), and int32 inputs and
 * outputs end to end through a live daemon's model.load and infer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon_harness.h"
#include "protocol/graph_build.h"
#include "suites.h"
#include "testutil.h"

static cJSON *js(const char *text)
{
	char *t = strdup(text);
	for (char *p = t; *p; p++)
		if (*p == '\'')
			*p = '"';
	cJSON *j = cJSON_Parse(t);
	ck_assert_msg(j, "bad test JSON: %s", t);
	free(t);
	return j;
}

#define IDS "{'id':'ids','op':'input','dtype':'int32','shape':[-1,3]}"
#define XF "{'id':'x','op':'input','dtype':'float32','shape':[-1,4]}"
#define G(nodes, outs) "{'nodes':[" nodes "],'outputs':[" outs "]}"

/* Read a built output as int32 or float32 values, checking dtype and shape. */
static void expect_i32(eng_tensor *t, int ndim, const int64_t *shape, const int32_t *want, int n)
{
	ck_assert_int_eq(eng_tensor_dtype(t), ENG_I32);
	ck_assert_int_eq(eng_ndim(t), ndim);
	for (int d = 0; d < ndim; d++)
		ck_assert_int_eq(eng_shape(t)[d], shape[d]);
	int32_t got[64];
	ck_assert_int_eq(eng_tensor_read(t, got, sizeof(int32_t) * (size_t)n), ENG_OK);
	for (int i = 0; i < n; i++)
		ck_assert_msg(got[i] == want[i], "[%d]: %d, want %d", i, got[i], want[i]);
}

static void expect_f32(eng_tensor *t, eng_dtype dt, int ndim, const int64_t *shape, const float *want, int n)
{
	ck_assert_int_eq(eng_tensor_dtype(t), dt);
	ck_assert_int_eq(eng_ndim(t), ndim);
	for (int d = 0; d < ndim; d++)
		ck_assert_int_eq(eng_shape(t)[d], shape[d]);
	float got[64];
	ck_assert_int_eq(eng_tensor_read(eng_cast(t, ENG_F32), got, sizeof(float) * (size_t)n), ENG_OK);
	for (int i = 0; i < n; i++)
		ck_assert_msg(got[i] == want[i], "[%d]: %g, want %g", i, got[i], want[i]);
}

START_TEST(values)
{
	cJSON *j = js(G(IDS "," XF ",{'id':'tab','op':'param','dtype':'float32','shape':[3,2]},"
			"{'id':'am','op':'argmax','in':['x']},"
			"{'id':'amk','op':'argmax','in':['x'],'axis':1,'keepdim':true},"
			"{'id':'oh','op':'one_hot','in':['ids'],'num_classes':5},"
			"{'id':'two','op':'const','value':2,'dtype':'int32'},"
			"{'id':'e','op':'eq','in':['ids','two']},"
			"{'id':'z','op':'const','value':0},{'id':'n','op':'lt','in':['x','z']},"
			"{'id':'nx','op':'neg','in':['x']},{'id':'abs','op':'where','in':['n','nx','x']},"
			"{'id':'c','op':'cat','in':['x','abs'],'axis':1},"
			"{'id':'s','op':'stack','in':['am','am','am']},"
			"{'id':'sl','op':'slice','in':['x'],'axis':1,'start':1,'stop':3},"
			"{'id':'rev','op':'slice','in':['x'],'axis':-1,'step':-1},"
			"{'id':'row','op':'slice','in':['tab'],'axis':0,'start':-1},"
			"{'id':'cc','op':'contiguous','in':['rev']}",
			"'am','amk','oh','e','abs','c','s','sl','rev','row','cc'"));
	proto_graph g;
	proto_err err = {0};
	ck_assert_msg(proto_graph_parse(j, 1 << 20, &g, &err) == TSD_OK, "%s", err.msg);
	const proto_gnode *s = &g.nodes[proto_graph_find(&g, "s")];
	ck_assert(s->ndim == 2 && s->shape[0] == PROTO_BATCH && s->shape[1] == 3 && s->dtype == ENG_I32);
	const proto_gnode *oh = &g.nodes[proto_graph_find(&g, "oh")];
	ck_assert(oh->ndim == 3 && oh->shape[2] == 5 && oh->dtype == ENG_F32);
	ck_assert_int_eq(g.nodes[proto_graph_find(&g, "e")].dtype, ENG_BOOL);

	eng_ctx *ctx = tu_ctx_new();
	const int32_t ids[6] = {0, 2, 4, 1, 7, -1}; /* 7 and -1: out of range, zero rows */
	const float x[8] = {1, 3, -2, 3, -1, -5, 0.5f, 2}, tab[6] = {1, 2, 3, 4, 5, 6};
	eng_tensor *in[2] = {eng_from_data(ctx, ENG_I32, 2, (int64_t[]){2, 3}, ids),
			     eng_from_data(ctx, ENG_F32, 2, (int64_t[]){2, 4}, x)};
	eng_tensor *par = eng_from_data(ctx, ENG_F32, 2, (int64_t[]){3, 2}, tab), *o[11];
	ck_assert_msg(proto_graph_build(&g, ctx, in, &par, o, &err) == TSD_OK, "%s", err.msg);
	expect_i32(o[0], 1, (int64_t[]){2}, (int32_t[]){1, 3}, 2); /* the first maximum */
	expect_i32(o[1], 2, (int64_t[]){2, 1}, (int32_t[]){1, 3}, 2);
	float want_oh[30] = {0};
	want_oh[0 * 5 + 0] = want_oh[1 * 5 + 2] = want_oh[2 * 5 + 4] = want_oh[3 * 5 + 1] = 1;
	expect_f32(o[2], ENG_F32, 3, (int64_t[]){2, 3, 5}, want_oh, 30);
	expect_f32(o[3], ENG_BOOL, 2, (int64_t[]){2, 3}, (float[]){0, 1, 0, 0, 0, 0}, 6);
	expect_f32(o[4], ENG_F32, 2, (int64_t[]){2, 4}, (float[]){1, 3, 2, 3, 1, 5, 0.5f, 2}, 8);
	expect_f32(o[5], ENG_F32, 2, (int64_t[]){2, 8}, (float[]){1, 3, -2, 3, 1, 3, 2, 3, -1, -5, 0.5f, 2, 1, 5, 0.5f, 2}, 16);
	expect_i32(o[6], 2, (int64_t[]){2, 3}, (int32_t[]){1, 1, 1, 3, 3, 3}, 6);
	expect_f32(o[7], ENG_F32, 2, (int64_t[]){2, 2}, (float[]){3, -2, -5, 0.5f}, 4);
	expect_f32(o[8], ENG_F32, 2, (int64_t[]){2, 4}, (float[]){3, -2, 3, 1, 2, 0.5f, -5, -1}, 8);
	expect_f32(o[9], ENG_F32, 2, (int64_t[]){1, 2}, (float[]){5, 6}, 2);
	expect_f32(o[10], ENG_F32, 2, (int64_t[]){2, 4}, (float[]){3, -2, 3, 1, 2, 0.5f, -5, -1}, 8);
	proto_graph_free(&g);
	cJSON_Delete(j);
	tu_ctx_free(ctx);
}
END_TEST

static void expect_fail(int line, const char *text, tsd_status want, const char *word)
{
	cJSON *j = js(text);
	proto_graph g;
	proto_err err = {0};
	tsd_status s = proto_graph_parse(j, 1 << 20, &g, &err);
	ck_assert_msg(s == want, "line %d: status %s, want %s (%s)", line, tsd_status_name(s), tsd_status_name(want),
		      err.msg);
	ck_assert_msg(strstr(err.msg, word), "line %d: message '%s' lacks '%s'", line, err.msg, word);
	ck_assert_ptr_null(g.nodes);
	cJSON_Delete(j);
}
#define GBAD(text, st, word) expect_fail(__LINE__, text, st, word)

START_TEST(errors)
{
	const tsd_status BR = TSD_BAD_REQUEST, SM = TSD_SHAPE_MISMATCH;
	/* argmax */
	GBAD(G(XF ",{'id':'a','op':'argmax','in':['x','x']}", "'a'"), BR, "nodes[1] (a): argmax: takes 1 inputs, got 2");
	GBAD(G(XF ",{'id':'a','op':'argmax','in':['x'],'axis':2}", "'a'"), BR, "argmax: axis 2 out of range for rank 2");
	GBAD(G(XF ",{'id':'a','op':'argmax','in':['x'],'axis':9}", "'a'"), BR, "argmax: axis: not an integer in [-8, 7]");
	GBAD(G(XF ",{'id':'a','op':'argmax','in':['x'],'keepdim':1}", "'a'"), BR, "argmax: keepdim: not a boolean");
	GBAD(G(XF ",{'id':'a','op':'argmax','in':['x'],'axes':[1]}", "'a'"), BR, "argmax: unknown field 'axes'");
	GBAD(G("{'id':'x','op':'input','dtype':'float32','shape':[-1,0]},{'id':'a','op':'argmax','in':['x']}", "'a'"),
	     SM, "argmax: axis 1 is empty");
	/* one_hot */
	GBAD(G(IDS ",{'id':'o','op':'one_hot','in':['ids']}", "'o'"), BR, "one_hot: num_classes: missing");
	GBAD(G(IDS ",{'id':'o','op':'one_hot','in':['ids'],'num_classes':0}", "'o'"), BR, "num_classes: missing or not an "
	     "integer in [1, 1048576]");
	GBAD(G(IDS ",{'id':'o','op':'one_hot','in':['ids'],'num_classes':1048577}", "'o'"), BR, "one_hot: num_classes");
	GBAD(G(IDS ",{'id':'o','op':'one_hot','in':['ids'],'num_classes':2.5}", "'o'"), BR, "one_hot: num_classes");
	GBAD(G(XF ",{'id':'o','op':'one_hot','in':['x'],'num_classes':3}", "'o'"), BR,
	     "nodes[1] (o): one_hot: labels must be an integer dtype, got float32");
	GBAD(G(IDS ",{'id':'o','op':'one_hot','in':[],'num_classes':3}", "'o'"), BR, "one_hot: takes 1 inputs, got 0");
	GBAD(G("{'id':'x','op':'input','dtype':'int32','shape':[1,1,1,1,1,1,1,-1]},"
	       "{'id':'o','op':'one_hot','in':['x'],'num_classes':3}", "'o'"), SM, "labels already have 8 dims");
	/* eq, lt, where */
	GBAD(G(XF ",{'id':'w','op':'param','dtype':'float32','shape':[3]},{'id':'e','op':'eq','in':['x','w']}", "'e'"), SM,
	     "eq: shapes [-1,4] and [3] do not broadcast");
	GBAD(G(XF ",{'id':'e','op':'lt','in':['x']}", "'e'"), BR, "lt: takes 2 inputs, got 1");
	GBAD(G(XF ",{'id':'e','op':'where','in':['x','x']}", "'e'"), BR, "where: takes 3 inputs, got 2");
	GBAD(G(XF ",{'id':'w','op':'param','dtype':'float32','shape':[3]},{'id':'e','op':'where','in':['x','x','w']}",
	       "'e'"), SM, "where: condition [-1,4] and values [-1,4], [3] do not broadcast");
	/* cat and stack */
	GBAD(G(XF ",{'id':'c','op':'cat','in':[]}", "'c'"), BR, "cat: takes 1 to 16 inputs, got 0");
	GBAD(G(XF ",{'id':'c','op':'cat','in':['x','x','x','x','x','x','x','x','x','x','x','x','x','x','x','x','x']}",
	       "'c'"), BR, "cat: takes 1 to 16 inputs, got 17");
	GBAD(G(XF ",{'id':'c','op':'cat','in':['x','x'],'axis':0}", "'c'"), SM, "cat: cannot join along the batch dimension");
	GBAD(G(XF ",{'id':'c','op':'cat','in':['x','x'],'axis':2}", "'c'"), BR, "cat: axis 2 out of range for rank 2");
	GBAD(G(XF ",{'id':'w','op':'param','dtype':'float32','shape':[2,4]},{'id':'c','op':'cat','in':['x','w']}", "'c'"),
	     SM, "cat: in[1] [2,4] does not match in[0] [-1,4]");
	GBAD(G(XF ",{'id':'w','op':'param','dtype':'float32','shape':[4]},{'id':'c','op':'cat','in':['x','w']}", "'c'"),
	     SM, "cat: in[1] [4] does not match");
	GBAD(G(XF ",{'id':'y','op':'input','dtype':'float32','shape':[-1,5]},{'id':'s','op':'stack','in':['x','y']}", "'s'"),
	     SM, "stack: in[1] [-1,5] does not match in[0] [-1,4]");
	GBAD(G(XF ",{'id':'s','op':'stack','in':['x','x'],'axis':3}", "'s'"), BR, "stack: axis 3 out of range for rank 3");
	GBAD(G(XF ",{'id':'s','op':'stack','in':['x'],'dims':[0]}", "'s'"), BR, "stack: unknown field 'dims'");
	GBAD(G(XF ",{'id':'c','op':'contiguous','in':['x','x']}", "'c'"), BR, "contiguous: takes 1 inputs, got 2");
	GBAD(G(XF ",{'id':'c','op':'contiguous','in':['x'],'axis':0}", "'c'"), BR, "contiguous: unknown field 'axis'");
	/* slice */
	GBAD(G(XF ",{'id':'s','op':'slice','in':['x'],'start':1}", "'s'"), BR, "slice: axis: missing");
	GBAD(G(XF ",{'id':'s','op':'slice','in':['x'],'axis':1,'step':0}", "'s'"), BR, "slice: step: must not be 0");
	GBAD(G(XF ",{'id':'s','op':'slice','in':['x'],'axis':1,'stop':'2'}", "'s'"), BR, "slice: stop: not an integer");
	GBAD(G(XF ",{'id':'s','op':'slice','in':['x'],'axis':0,'stop':1}", "'s'"), SM,
	     "slice: cannot slice the batch dimension (axis 0)");
	GBAD(G(XF ",{'id':'s','op':'slice','in':['x'],'axis':-3}", "'s'"), BR, "slice: axis -3 out of range for rank 2");
}
END_TEST

/* Empty slices and Python's clipping: inferred shapes as the engine makes them (the build checks). */
START_TEST(slice_shapes)
{
	static const struct { const char *attrs; int64_t len; } cases[] = {
		{"'start':2,'stop':100", 4}, {"'start':-100,'stop':3", 3}, {"'start':5,'stop':1", 0},
		{"'step':3", 2}, {"'start':-1,'step':-2", 3}, {"'start':2,'stop':-100,'step':-1", 3},
		{"'stop':-2", 4}, {"'start':6,'stop':6", 0},
	};
	eng_ctx *ctx = tu_ctx_new();
	float v[6] = {0, 1, 2, 3, 4, 5};
	eng_tensor *p = eng_from_data(ctx, ENG_F32, 1, (int64_t[]){6}, v);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char text[400];
		snprintf(text, sizeof(text), G("{'id':'p','op':'param','dtype':'float32','shape':[6]},"
					       "{'id':'s','op':'slice','in':['p'],'axis':0,%s}", "'s'"), cases[i].attrs);
		cJSON *j = js(text);
		proto_graph g;
		proto_err err = {0};
		ck_assert_msg(proto_graph_parse(j, 1 << 20, &g, &err) == TSD_OK, "%s: %s", cases[i].attrs, err.msg);
		ck_assert_msg(g.nodes[1].shape[0] == cases[i].len, "%s: length %lld, want %lld", cases[i].attrs,
			      (long long)g.nodes[1].shape[0], (long long)cases[i].len);
		eng_tensor *o;
		ck_assert_msg(proto_graph_build(&g, ctx, NULL, &p, &o, &err) == TSD_OK, "%s: %s", cases[i].attrs, err.msg);
		eng_tensor_free(o);
		proto_graph_free(&g);
		cJSON_Delete(j);
	}
	tu_ctx_free(ctx);
}
END_TEST

/* The example of docs/PROTOCOL.md parses, passes the batch check and builds. */
START_TEST(doc_example)
{
	cJSON *j = js(
		"{'nodes': ["
		"  {'id': 'ids',  'op': 'input',   'dtype': 'int32', 'shape': [-1, 3]},"
		"  {'id': 'emb',  'op': 'param',   'dtype': 'float32', 'shape': [10, 6]},"
		"  {'id': 'back', 'op': 'param',   'dtype': 'float32', 'shape': [6, 6]},"
		"  {'id': 'oh',   'op': 'one_hot', 'in': ['ids'], 'num_classes': 10},"
		"  {'id': 'bag',  'op': 'sum',     'in': ['oh'], 'axes': 1},"
		"  {'id': 's0',   'op': 'matmul',  'in': ['bag', 'emb']},"
		"  {'id': 'y0',   'op': 'argmax',  'in': ['s0'], 'axis': -1},"
		"  {'id': 'f0',   'op': 'one_hot', 'in': ['y0'], 'num_classes': 6},"
		"  {'id': 'b0',   'op': 'matmul',  'in': ['f0', 'back']},"
		"  {'id': 'r',    'op': 'slice',   'in': ['back'], 'axis': 0, 'start': 0, 'stop': 1},"
		"  {'id': 's1',   'op': 'add',     'in': ['s0', 'b0']},"
		"  {'id': 's1r',  'op': 'add',     'in': ['s1', 'r']},"
		"  {'id': 'y1',   'op': 'argmax',  'in': ['s1r'], 'axis': -1},"
		"  {'id': 'plan', 'op': 'stack',   'in': ['y0', 'y1'], 'axis': 1}"
		" ],"
		" 'outputs': ['plan']}");
	proto_graph g;
	proto_err err = {0};
	ck_assert_msg(proto_graph_parse(j, 1 << 20, &g, &err) == TSD_OK, "%s", err.msg);
	int in = 0, ax, oax;
	ck_assert_msg(proto_graph_batch_check(&g, &in, 1, g.outputs, 1, &ax, &oax, &err) == TSD_OK, "%s", err.msg);
	const proto_gnode *p = &g.nodes[g.outputs[0]];
	ck_assert(p->dtype == ENG_I32 && p->ndim == 2 && p->shape[0] == PROTO_BATCH && p->shape[1] == 2);
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {5};
	eng_tensor *ids = eng_from_data(ctx, ENG_I32, 2, (int64_t[]){2, 3}, (int32_t[]){1, 2, 3, 9, 0, 4});
	eng_tensor *par[2] = {tu_rand(ctx, &r, ENG_F32, 2, (int64_t[]){10, 6}, -1, 1),
			      tu_rand(ctx, &r, ENG_F32, 2, (int64_t[]){6, 6}, -1, 1)}, *o;
	ck_assert_msg(proto_graph_build(&g, ctx, &ids, par, &o, &err) == TSD_OK, "%s", err.msg);
	int32_t plan[4];
	ck_assert_int_eq(eng_tensor_read(o, plan, sizeof(plan)), ENG_OK);
	for (int k = 0; k < 4; k++)
		ck_assert(plan[k] >= 0 && plan[k] < 6);
	proto_graph_free(&g);
	cJSON_Delete(j);
	tu_ctx_free(ctx);
}
END_TEST

/* int32 ids in and int32 argmaxes out through model.load and a batched infer on a live daemon. */
START_TEST(daemon_int32)
{
	dh_daemon d = {0};
	dh_start(&d, NULL);
	tsd_client *c = dh_client(&d);
	const char *spec_text = "{'name':'ix','graph':" G(IDS ",{'id':'oh','op':'one_hot','in':['ids'],'num_classes':4},"
		"{'id':'bag','op':'sum','in':['oh'],'axes':1},{'id':'y','op':'argmax','in':['bag'],'axis':-1},"
		"{'id':'y1','op':'argmax','in':['oh'],'axis':-1},{'id':'plan','op':'stack','in':['y','y'],'axis':1}",
		"'plan','y1'") ",'batching':{'max':4,'buckets':[1,4]}}";
	cJSON *spec = js(spec_text);
	char *text = cJSON_PrintUnformatted(spec);
	dh_load(c, text, NULL, 0);
	free(text);
	cJSON_Delete(spec);
	const int32_t ids[6] = {1, 1, 3, 2, 0, 2};
	tsd_tensor in = {.name = "ids", .dtype = ENG_I32, .ndim = 2, .shape = {2, 3}, .data = ids, .nbytes = sizeof(ids)};
	cJSON *h = js("{'verb':'infer','model':'ix'}");
	tsd_reply *r = NULL;
	ck_assert_int_eq(tsd_client_call(c, h, &in, 1, &r), TSD_OK);
	const tsd_tensor *plan = tsd_reply_find(r, "plan"), *y1 = tsd_reply_find(r, "y1");
	ck_assert(plan && plan->dtype == ENG_I32 && plan->ndim == 2 && plan->shape[0] == 2 && plan->shape[1] == 2);
	const int32_t *p = plan->data, *q = y1->data;
	ck_assert(p[0] == 1 && p[1] == 1 && p[2] == 2 && p[3] == 2);
	ck_assert(y1->dtype == ENG_I32 && !memcmp(q, ids, sizeof(ids)));
	tsd_reply_free(r);
	/* float ids are refused naming the input */
	const float fx[3] = {0};
	tsd_tensor bad = {.name = "ids", .dtype = ENG_F32, .ndim = 2, .shape = {1, 3}, .data = fx, .nbytes = sizeof(fx)};
	ck_assert_int_ne(tsd_client_call(c, h, &bad, 1, &r), TSD_OK);
	tsd_reply_free(r);
	cJSON_Delete(h);
	tsd_client_close(c);
	dh_stop(&d);
}
END_TEST

Suite *graphops_suite(void)
{
	Suite *s = suite_create("graphops");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, TU_TIMEOUT);
	tcase_add_test(tc, values);
	tcase_add_test(tc, errors);
	tcase_add_test(tc, slice_shapes);
	tcase_add_test(tc, doc_example);
	suite_add_tcase(s, tc);
	dh_add_test(s, "daemon_int32", daemon_int32, 60);
	return s;
}
