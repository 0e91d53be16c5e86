/* test_graph_builder.c: the graph builder (include/tensord/graph.h, suite `graphbuilder`): the
 * JSON it makes equals the hand-written one, every op's node passes the daemon's graph parser,
 * the first failure sticks, renames follow into later nodes, the generic tsd_g_op. */
#include <stdlib.h>
#include <string.h>

#include <tensord/graph.h>
#include "protocol/proto_graph.h"
#include "suites.h"
#include "testutil.h"

#define S(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]){__VA_ARGS__}

/* docs/PROTOCOL.md's example graph */
static const char *const mlp_json =
	"{\"nodes\": ["
	"{\"id\": \"x\",  \"op\": \"input\",  \"dtype\": \"float32\", \"shape\": [-1, 784]},"
	"{\"id\": \"w1\", \"op\": \"param\",  \"dtype\": \"float32\", \"shape\": [784, 128]},"
	"{\"id\": \"b1\", \"op\": \"param\",  \"dtype\": \"float32\", \"shape\": [128]},"
	"{\"id\": \"w2\", \"op\": \"param\",  \"dtype\": \"float32\", \"shape\": [128, 10]},"
	"{\"id\": \"h\",  \"op\": \"matmul\", \"in\": [\"x\", \"w1\"]},"
	"{\"id\": \"hb\", \"op\": \"add\",    \"in\": [\"h\", \"b1\"]},"
	"{\"id\": \"a\",  \"op\": \"relu\",   \"in\": [\"hb\"]},"
	"{\"id\": \"y\",  \"op\": \"matmul\", \"in\": [\"a\", \"w2\"]},"
	"{\"id\": \"p\",  \"op\": \"softmax\", \"in\": [\"y\"], \"axis\": -1}"
	"], \"outputs\": [\"y\", \"p\"]}";

START_TEST(same_as_hand_written)
{
	tsd_graph *g = tsd_graph_create();
	int x = tsd_g_input(g, "x", TSD_F32, S(-1, 784));
	int w1 = tsd_g_param(g, "w1", TSD_F32, S(784, 128));
	int b1 = tsd_g_param(g, "b1", TSD_F32, S(128));
	int w2 = tsd_g_param(g, "w2", TSD_F32, S(128, 10));
	int h = tsd_graph_name(g, tsd_g_matmul(g, x, w1), "h");
	int hb = tsd_graph_name(g, tsd_g_add(g, h, b1), "hb");
	int a = tsd_g_relu(g, hb);
	int y = tsd_g_matmul(g, a, w2);
	int p = tsd_g_softmax(g, y, -1);
	tsd_graph_name(g, a, "a"); /* after its use: y's "in" follows */
	tsd_graph_output(g, y, "y");
	tsd_graph_output(g, p, "p");
	cJSON *got = tsd_graph_json(g), *want = cJSON_Parse(mlp_json);
	ck_assert_msg(got, "%s", tsd_graph_error(g));
	char *text = cJSON_PrintUnformatted(got);
	ck_assert_msg(cJSON_Compare(got, want, true), "built: %s", text);
	free(text);
	text = tsd_graph_text(g);
	cJSON *again = cJSON_Parse(text);
	ck_assert(cJSON_Compare(again, want, true));
	free(text);
	cJSON_Delete(again);
	cJSON_Delete(got);
	cJSON_Delete(want);
	tsd_graph_free(g);
}
END_TEST

START_TEST(every_op_parses)
{
	tsd_graph *g = tsd_graph_create();
	int x = tsd_g_input(g, "x", TSD_F32, S(2, 4));
	int w = tsd_g_param(g, "w", TSD_F32, S(4, 4));
	int b = tsd_g_param(g, "b", TSD_F32, S(4));
	int c = tsd_g_const(g, 2.5, TSD_F32);
	int img = tsd_g_input(g, "img", TSD_F32, S(1, 2, 5, 5));
	int k = tsd_g_param(g, "k", TSD_F32, S(3, 2, 3, 3));
	int kb = tsd_g_param(g, "kb", TSD_F32, S(3));
	int ex = tsd_g_exp(g, x);
	int r = tsd_g_reshape(g, x, S(2, 2, 2));
	int outs[] = {
		tsd_g_add(g, x, c), tsd_g_sub(g, x, b), tsd_g_mul(g, x, x), tsd_g_div(g, x, ex),
		tsd_g_neg(g, x), tsd_g_log(g, ex), tsd_g_sqrt(g, ex), tsd_g_relu(g, x),
		tsd_g_sigmoid(g, x), tsd_g_tanh(g, x), tsd_g_matmul(g, x, w), tsd_g_linear(g, x, w, b),
		tsd_g_linear(g, x, w, -1), tsd_g_softmax(g, x, -1), tsd_g_log_softmax(g, x, 1),
		tsd_g_sum(g, x, (const int[]){1}, 1, true), tsd_g_mean(g, x, NULL, 0, false),
		tsd_g_max(g, x, (const int[]){0, 1}, 2, false),
		tsd_g_permute(g, r, 3, (const int[]){2, 0, 1}), tsd_g_transpose(g, x, 0, 1),
		tsd_g_cast(g, x, TSD_I32), tsd_g_conv2d(g, img, k, kb, 1, 1, 1, 1),
		tsd_g_conv2d(g, img, k, -1, 2, 1, 0, 2),
		tsd_g_argmax(g, x, -1, false), tsd_g_argmax(g, x, 0, true),
		tsd_g_one_hot(g, tsd_g_cast(g, x, TSD_I32), 7), tsd_g_eq(g, x, c), tsd_g_lt(g, x, b),
		tsd_g_where(g, tsd_g_lt(g, x, c), x, b), tsd_g_cat(g, (const int[]){x, x, x}, 3, 0),
		tsd_g_stack(g, (const int[]){x, x}, 2, 1), tsd_g_slice(g, x, 1, 1, TSD_SLICE_NONE, 2),
		tsd_g_slice(g, x, 0, TSD_SLICE_NONE, TSD_SLICE_NONE, -1), tsd_g_contiguous(g, x),
	};
	for (size_t i = 0; i < sizeof(outs) / sizeof(outs[0]); i++)
		tsd_graph_output(g, outs[i], NULL);
	cJSON *j = tsd_graph_json(g);
	ck_assert_msg(j, "%s", tsd_graph_error(g));
	proto_graph pg;
	proto_err err = {0};
	tsd_status s = proto_graph_parse(j, (uint64_t)1 << 30, &pg, &err);
	char *text = cJSON_PrintUnformatted(j);
	ck_assert_msg(s == TSD_OK, "%s: %s\n%s", tsd_status_name(s), err.msg, text);
	ck_assert_int_eq(pg.noutputs, (int)(sizeof(outs) / sizeof(outs[0])));
	/* the conv's shape: [1,3,5,5] with padding 1, [1,3,2,5] with stride 2,1 and padding 0,2 */
	const proto_gnode *cv = &pg.nodes[pg.outputs[21]], *cv2 = &pg.nodes[pg.outputs[22]];
	ck_assert(cv->ndim == 4 && cv->shape[1] == 3 && cv->shape[2] == 5 && cv->shape[3] == 5);
	ck_assert(cv2->shape[2] == 2 && cv2->shape[3] == 7);
	ck_assert_int_eq(pg.nodes[pg.outputs[20]].dtype, TSD_I32);
	/* argmax [2], [1,4] int32; one_hot [2,4,7]; cat [6,4]; stack [2,2,4]; slices [2,2], [2,4] */
	const proto_gnode *o = pg.nodes;
	const int *po = pg.outputs;
	ck_assert(o[po[23]].ndim == 1 && o[po[23]].shape[0] == 2 && o[po[23]].dtype == TSD_I32);
	ck_assert(o[po[24]].ndim == 2 && o[po[24]].shape[0] == 1 && o[po[24]].shape[1] == 4);
	ck_assert(o[po[25]].ndim == 3 && o[po[25]].shape[2] == 7 && o[po[25]].dtype == TSD_F32);
	ck_assert_int_eq(o[po[26]].dtype, TSD_BOOL);
	ck_assert(o[po[29]].ndim == 2 && o[po[29]].shape[0] == 6);
	ck_assert(o[po[30]].ndim == 3 && o[po[30]].shape[1] == 2);
	ck_assert(o[po[31]].shape[1] == 2 && o[po[32]].shape[0] == 2 && o[po[32]].shape[1] == 4);
	proto_graph_free(&pg);
	free(text);
	cJSON_Delete(j);
	tsd_graph_free(g);
}
END_TEST

START_TEST(first_error_sticks)
{
	tsd_graph *g = tsd_graph_create();
	int x = tsd_g_input(g, "x", TSD_F32, S(3));
	ck_assert_int_eq(x, 0);
	ck_assert_int_eq(tsd_graph_status(g), TSD_OK);
	ck_assert_str_eq(tsd_graph_error(g), "");
	ck_assert_int_eq(tsd_g_add(g, x, 7), -1);
	ck_assert_int_eq(tsd_g_relu(g, x), -1);               /* later calls fail too */
	ck_assert_int_eq(tsd_g_input(g, "x", TSD_F32, S(3)), -1); /* without replacing the message */
	ck_assert_int_eq(tsd_graph_output(g, x, "y"), -1);
	ck_assert_int_eq(tsd_graph_status(g), TSD_BAD_REQUEST);
	ck_assert_msg(strstr(tsd_graph_error(g), "add: input 1: 7 is not a node"), "%s", tsd_graph_error(g));
	ck_assert_ptr_null(tsd_graph_json(g));
	ck_assert_ptr_null(tsd_graph_text(g));
	tsd_graph_free(g);

	g = tsd_graph_create();
	x = tsd_g_input(g, "x", TSD_F32, S(3));
	ck_assert_int_eq(tsd_g_param(g, "x", TSD_F32, S(3)), -1);
	ck_assert_msg(strstr(tsd_graph_error(g), "id 'x' is taken"), "%s", tsd_graph_error(g));
	tsd_graph_free(g);

	g = tsd_graph_create();
	x = tsd_g_input(g, "x", TSD_F32, S(3));
	ck_assert_ptr_null(tsd_graph_json(g));
	ck_assert_msg(strstr(tsd_graph_error(g), "no output"), "%s", tsd_graph_error(g));
	tsd_graph_free(g);

	/* chained: one check at the end catches a failure in the middle */
	g = tsd_graph_create();
	x = tsd_g_input(g, "x", TSD_F32, S(2, 3));
	tsd_graph_output(g, tsd_g_relu(g, tsd_g_reshape(g, tsd_g_neg(g, x), 9, NULL)), "y");
	ck_assert_ptr_null(tsd_graph_json(g));
	ck_assert_msg(strstr(tsd_graph_error(g), "reshape: bad shape"), "%s", tsd_graph_error(g));
	tsd_graph_free(g);
	tsd_graph_free(NULL);
}
END_TEST

START_TEST(generic_op)
{
	tsd_graph *g = tsd_graph_create();
	int x = tsd_g_input(g, "x", TSD_F32, S(2, 3));
	cJSON *attrs = cJSON_Parse("{\"axis\": 0}");
	int sm = tsd_g_op(g, "softmax", &x, 1, attrs);
	int fut = tsd_g_op(g, "frobnicate", (const int[]){x, sm}, 2, attrs); /* for a newer daemon */
	tsd_graph_output(g, sm, "sm");
	tsd_graph_output(g, fut, NULL);
	cJSON *j = tsd_graph_json(g);
	ck_assert_msg(j, "%s", tsd_graph_error(g));
	const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(j, "nodes");
	const cJSON *n1 = cJSON_GetArrayItem(nodes, 1), *n2 = cJSON_GetArrayItem(nodes, 2);
	ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(n1, "op")->valuestring, "softmax");
	ck_assert_int_eq(cJSON_GetObjectItemCaseSensitive(n1, "axis")->valueint, 0);
	ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(n2, "op")->valuestring, "frobnicate");
	ck_assert_str_eq(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(n2, "in"), 1)->valuestring, "sm");
	cJSON_Delete(j);
	/* a known op's input count is checked */
	ck_assert_int_eq(tsd_g_op(g, "relu", (const int[]){x, x}, 2, NULL), -1);
	ck_assert_msg(strstr(tsd_graph_error(g), "relu: 2 inputs, wants 1 to 1"), "%s", tsd_graph_error(g));
	cJSON_Delete(attrs);
	tsd_graph_free(g);
}
END_TEST

Suite *graphbuilder_suite(void)
{
	const TTest *const tests[] = {same_as_hand_written, every_op_parses, first_error_sticks, generic_op};
	return tu_suite("graphbuilder", tests, (int)(sizeof(tests) / sizeof(tests[0])), 30);
}
