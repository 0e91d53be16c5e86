/* test_protocol.c: the protocol library (protocol/): status names, message round trips, every
 * decoder rejection with its named field, graph validation errors, and graphs built and
 * realized against the same expression written with the Tensor API. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/graph_build.h"
#include "protocol/message.h"
#include "suites.h"
#include "testutil.h"

#define MAXLEN ((size_t)1 << 24)

/* JSON written with ' for " (readable in C), parsed; the test owns the result. */
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

/* A raw message: prefix, json (' for "), padding to 64, then area zero bytes; *len set. */
static uint8_t *raw(const char *json, size_t area, size_t *len)
{
	char *t = strdup(json);
	for (char *p = t; *p; p++)
		if (*p == '\'')
			*p = '"';
	size_t jl = strlen(t), start = (8 + jl + 63) / 64 * 64;
	*len = area ? start + area : 8 + jl;
	uint8_t *b = calloc(1, *len + 64);
	memcpy(b, "TSD1", 4);
	for (int k = 0; k < 4; k++)
		b[4 + k] = (uint8_t)(jl >> (8 * k));
	memcpy(b + 8, t, jl);
	free(t);
	return b;
}

static void expect_decode_fail(int line, const uint8_t *b, size_t len, size_t max, tsd_status want,
			       const char *word)
{
	proto_msg *m = malloc(sizeof(*m));
	proto_err err = {0};
	tsd_status s = proto_decode(b, len, max, PROTO_REQUEST, m, &err);
	ck_assert_msg(s == want, "line %d: status %s, want %s (%s)", line, tsd_status_name(s),
		      tsd_status_name(want), err.msg);
	ck_assert_msg(err.status == want && strstr(err.msg, word), "line %d: message '%s' lacks '%s'",
		      line, err.msg, word);
	ck_assert_ptr_null(m->json);
	free(m);
}

/* json (' for ") with area payload bytes must fail as bad_request naming word. */
#define BAD_JSON(json, area, word)                                                   \
	do {                                                                         \
		size_t l_;                                                           \
		uint8_t *b_ = raw(json, area, &l_);                                  \
		expect_decode_fail(__LINE__, b_, l_, MAXLEN, TSD_BAD_REQUEST, word); \
		free(b_);                                                            \
	} while (0)

START_TEST(status_names)
{
	for (int s = 0; s < TSD_STATUS_COUNT; s++) {
		tsd_status back;
		ck_assert(tsd_status_from_name(tsd_status_name((tsd_status)s), &back));
		ck_assert_int_eq(back, s);
	}
	ck_assert_str_eq(tsd_status_name(TSD_BAD_REQUEST), "bad_request");
	ck_assert_str_eq(tsd_status_name(TSD_VERSION_MISMATCH), "version_mismatch");
	tsd_status x = TSD_OK;
	ck_assert(!tsd_status_from_name("nope", &x) && !tsd_status_from_name(NULL, &x));
	ck_assert_int_eq(tsd_status_from_eng(ENG_ESHAPE), TSD_SHAPE_MISMATCH);
	ck_assert_int_eq(tsd_status_from_eng(ENG_ENOMEM), TSD_OUT_OF_MEMORY);
	ck_assert_int_eq(tsd_status_from_eng(ENG_ECOMPILE), TSD_COMPILE_FAILED);
	ck_assert_int_eq(tsd_status_from_eng(ENG_ECANCELED), TSD_CANCELLED);
	ck_assert_int_eq(tsd_status_from_eng(ENG_OK), TSD_OK);
	ck_assert_int_eq(TSD_PROTOCOL_VERSION, 1);
}
END_TEST

/* An allocator callback as the daemon's (nng_msg) would be: records the size asked for. */
static void *record_alloc(void *arg, size_t size)
{
	*(size_t *)arg = size;
	return aligned_alloc(64, (size + 63) / 64 * 64);
}

/* Every dtype, a scalar and zero-size tensors through encode and decode. */
START_TEST(roundtrip_every_dtype)
{
	enum { N = ENG_DTYPE_COUNT + 2 };
	proto_out out[N];
	int64_t shapes[N][2];
	uint8_t *data[N];
	char names[N][16];
	for (int i = 0; i < N; i++) {
		out[i] = (proto_out){.name = names[i], .dtype = (eng_dtype)(i % ENG_DTYPE_COUNT), .ndim = 2,
				     .shape = shapes[i]};
		snprintf(names[i], sizeof(names[i]), "t%d", i);
		shapes[i][0] = i < ENG_DTYPE_COUNT ? 3 : 0;
		shapes[i][1] = 5 + i;
		size_t nb = (size_t)(shapes[i][0] * shapes[i][1]) * eng_dtype_size(out[i].dtype);
		data[i] = malloc(nb + 1);
		for (size_t k = 0; k < nb; k++)
			data[i][k] = (uint8_t)(k * 7 + (size_t)i);
		out[i].data = data[i];
	}
	out[N - 1].ndim = 0; /* a scalar */
	cJSON *h = js("{'id':'abc','verb':'infer','model':'m'}");
	void *buf;
	size_t len;
	proto_err err;
	size_t seen_size = 0;
	ck_assert_int_eq(proto_encode(h, out, N, 0, record_alloc, &seen_size, &buf, &len, &err), TSD_OK);
	ck_assert_uint_eq(seen_size, len);
	proto_msg *m = malloc(sizeof(*m));
	ck_assert_msg(proto_decode(buf, len, len, PROTO_REQUEST, m, &err) == TSD_OK, "%s", err.msg);
	ck_assert_str_eq(m->id, "abc");
	ck_assert(m->id_is_str);
	ck_assert_str_eq(m->verb, "infer");
	ck_assert_str_eq(cJSON_GetObjectItem(m->json, "model")->valuestring, "m");
	ck_assert_int_eq(m->ntensors, N);
	for (int i = 0; i < N; i++) {
		const proto_tensor *t = proto_msg_tensor(m, names[i]);
		ck_assert_ptr_nonnull(t);
		ck_assert_int_eq(t->dtype, out[i].dtype);
		ck_assert_int_eq(t->ndim, out[i].ndim);
		for (int d = 0; d < t->ndim; d++)
			ck_assert_int_eq(t->shape[d], shapes[i][d]);
		size_t nb = out[i].ndim ? (size_t)(shapes[i][0] * shapes[i][1]) : 1;
		nb *= eng_dtype_size(out[i].dtype);
		ck_assert_uint_eq(t->nbytes, nb);
		ck_assert_uint_eq(((const uint8_t *)t->data - (uint8_t *)buf) % 64, 0);
		ck_assert_uint_eq((uintptr_t)t->data % 64, 0);
		ck_assert(!nb || !memcmp(t->data, data[i], nb));
		free(data[i]);
	}
	ck_assert_ptr_null(proto_msg_tensor(m, "nope"));
	proto_msg_free(m);
	/* the same message under a smaller cap */
	ck_assert_int_eq(proto_decode(buf, len, len - 1, PROTO_REQUEST, m, &err), TSD_TOO_LARGE);
	free(m);
	free(buf);
	cJSON_Delete(h);
}
END_TEST

/* 64 tensors is the limit both ways; replies carry status and error. */
START_TEST(roundtrip_many_and_replies)
{
	proto_out out[PROTO_MAX_TENSORS + 1];
	char names[PROTO_MAX_TENSORS + 1][16];
	int64_t shape[1] = {3};
	int32_t vals[3] = {1, 2, 3};
	for (int i = 0; i <= PROTO_MAX_TENSORS; i++) {
		snprintf(names[i], sizeof(names[i]), "x%d", i);
		out[i] = (proto_out){names[i], ENG_I32, 1, shape, vals};
	}
	cJSON *h = js("{'id':42,'verb':'realize'}");
	void *buf;
	size_t len;
	proto_err err;
	proto_msg *m = malloc(sizeof(*m));
	ck_assert_int_eq(proto_encode(h, out, PROTO_MAX_TENSORS, 0, NULL, NULL, &buf, &len, &err), TSD_OK);
	ck_assert_int_eq(proto_decode(buf, len, MAXLEN, PROTO_REQUEST, m, &err), TSD_OK);
	ck_assert_int_eq(m->ntensors, PROTO_MAX_TENSORS);
	ck_assert(!m->id_is_str && m->id_int == 42);
	ck_assert_int_eq(((const int32_t *)m->tensors[63].data)[2], 3);
	free(buf);
	ck_assert_int_eq(proto_encode(h, out, PROTO_MAX_TENSORS + 1, 0, NULL, NULL, &buf, &len, &err),
			 TSD_BAD_REQUEST);
	ck_assert_int_eq(proto_encode(h, out, 2, 100, NULL, NULL, &buf, &len, &err), TSD_TOO_LARGE);
	/* a reply to it, echoing the integer id */
	cJSON *r = proto_reply_header(m, TSD_SHAPE_MISMATCH, "input x: [2,3], want [2,4]");
	proto_msg_free(m);
	ck_assert_int_eq(proto_encode(r, NULL, 0, 0, NULL, NULL, &buf, &len, &err), TSD_OK);
	ck_assert_int_eq(proto_decode(buf, len, MAXLEN, PROTO_REPLY, m, &err), TSD_OK);
	ck_assert_int_eq(m->status, TSD_SHAPE_MISMATCH);
	ck_assert_str_eq(m->error, "input x: [2,3], want [2,4]");
	ck_assert_int_eq(m->id_int, 42);
	ck_assert_ptr_null(m->verb);
	proto_msg_free(m);
	/* a reply is not a request (no verb) */
	ck_assert_int_eq(proto_decode(buf, len, MAXLEN, PROTO_REQUEST, m, &err), TSD_BAD_REQUEST);
	ck_assert_ptr_nonnull(strstr(err.msg, "verb"));
	free(buf);
	cJSON_Delete(r);
	/* an undecodable request's reply has a null id */
	r = proto_reply_header(NULL, TSD_BAD_REQUEST, NULL);
	ck_assert_int_eq(proto_encode(r, NULL, 0, 0, NULL, NULL, &buf, &len, &err), TSD_OK);
	ck_assert_int_eq(proto_decode(buf, len, MAXLEN, PROTO_REPLY, m, &err), TSD_OK);
	ck_assert_str_eq(m->error, "bad request");
	proto_msg_free(m);
	free(buf);
	cJSON_Delete(r);
	cJSON_Delete(h);
	free(m);
}
END_TEST

/* The encoder refuses what the decoder would; a header's own "tensors" is replaced. */
START_TEST(encode_errors)
{
	cJSON *h = js("{'id':'e','verb':'infer','tensors':'junk'}");
	int64_t neg[1] = {-1}, two[1] = {2}, huge[3] = {(int64_t)1 << 40, (int64_t)1 << 40, (int64_t)1 << 40};
	float v[2] = {1, 2};
	void *buf;
	size_t len;
	proto_err err;
	proto_out t = {"a", ENG_F32, 1, neg, v};
	ck_assert_int_eq(proto_encode(h, &t, 1, 0, NULL, NULL, &buf, &len, &err), TSD_BAD_REQUEST);
	ck_assert_ptr_nonnull(strstr(err.msg, "tensors[0]: a dimension"));
	ck_assert_ptr_null(buf);
	t = (proto_out){"a", ENG_F32, 3, huge, v};
	ck_assert_int_eq(proto_encode(h, &t, 1, 0, NULL, NULL, &buf, &len, &err), TSD_BAD_REQUEST);
	ck_assert_ptr_nonnull(strstr(err.msg, "overflows"));
	t = (proto_out){"a", ENG_F32, 1, two, NULL};
	ck_assert_int_eq(proto_encode(h, &t, 1, 0, NULL, NULL, &buf, &len, &err), TSD_BAD_REQUEST);
	ck_assert_ptr_nonnull(strstr(err.msg, "no data"));
	t = (proto_out){"", ENG_F32, 1, two, v};
	ck_assert_int_eq(proto_encode(h, &t, 1, 0, NULL, NULL, &buf, &len, &err), TSD_BAD_REQUEST);
	t = (proto_out){"a", ENG_DTYPE_COUNT, 1, two, v};
	ck_assert_int_eq(proto_encode(h, &t, 1, 0, NULL, NULL, &buf, &len, &err), TSD_BAD_REQUEST);
	cJSON *arr = cJSON_CreateArray();
	ck_assert_int_eq(proto_encode(arr, NULL, 0, 0, NULL, NULL, &buf, &len, &err), TSD_BAD_REQUEST);
	cJSON_Delete(arr);
	/* no tensors: the header's junk "tensors" goes; with one, it is the real list */
	ck_assert_int_eq(proto_encode(h, NULL, 0, 0, NULL, NULL, &buf, &len, &err), TSD_OK);
	proto_msg *m = malloc(sizeof(*m));
	ck_assert_msg(proto_decode(buf, len, len, PROTO_REQUEST, m, &err) == TSD_OK, "%s", err.msg);
	ck_assert_int_eq(m->ntensors, 0);
	proto_msg_free(m);
	free(buf);
	t = (proto_out){"a", ENG_F32, 1, two, v};
	ck_assert_int_eq(proto_encode(h, &t, 1, 0, NULL, NULL, &buf, &len, &err), TSD_OK);
	ck_assert_int_eq(proto_decode(buf, len, len, PROTO_REQUEST, m, &err), TSD_OK);
	ck_assert_int_eq(m->ntensors, 1);
	ck_assert(((const float *)m->tensors[0].data)[1] == 2.0f);
	proto_msg_free(m);
	free(buf);
	/* a reply with an unknown status name */
	size_t l;
	uint8_t *b = raw("{'id':'e','status':'on_fire'}", 0, &l);
	ck_assert_int_eq(proto_decode(b, l, MAXLEN, PROTO_REPLY, m, &err), TSD_BAD_REQUEST);
	ck_assert_ptr_nonnull(strstr(err.msg, "status: not a known status name"));
	free(b);
	free(m);
	ck_assert_str_eq(tsd_status_name((tsd_status)99), "internal");
	cJSON_Delete(h);
}
END_TEST

START_TEST(decode_errors)
{
	size_t l;
	uint8_t *b = raw("{'id':1,'verb':'x'}", 0, &l);
	expect_decode_fail(__LINE__, b, 5, MAXLEN, TSD_BAD_REQUEST, "shorter than the 8-byte prefix");
	expect_decode_fail(__LINE__, b, l - 1, MAXLEN, TSD_BAD_REQUEST, "JSON length");
	expect_decode_fail(__LINE__, b, l, l - 1, TSD_TOO_LARGE, "at most");
	b[0] = 'X';
	expect_decode_fail(__LINE__, b, l, MAXLEN, TSD_BAD_REQUEST, "magic");
	free(b);
	BAD_JSON("{'id':1,'verb':'x'", 0, "malformed JSON");
	BAD_JSON("{'id':1,'verb':'x'} x", 0, "bytes after the JSON value");
	BAD_JSON("[1]", 0, "not a JSON object");
	BAD_JSON("{'verb':'x'}", 0, "id: missing");
	BAD_JSON("{'id':true,'verb':'x'}", 0, "id: not a string or an integer");
	BAD_JSON("{'id':1.5,'verb':'x'}", 0, "id: not a string or an integer");
	BAD_JSON("{'id':'0123456789012345678901234567890123456789012345678901234567890123X','verb':'x'}", 0,
		 "id: 65 bytes");
	BAD_JSON("{'id':1}", 0, "verb: missing");
	BAD_JSON("{'id':1,'verb':3}", 0, "verb: not a non-empty string");
	BAD_JSON("{'id':1,'verb':'x','tensors':{}}", 0, "tensors: not an array");
	BAD_JSON("{'id':1,'verb':'x','tensors':[3]}", 64, "tensors[0]: not an object");
	BAD_JSON("{'id':1,'verb':'x','tensors':[{'dtype':'float32','shape':[],'offset':0,'nbytes':4}]}", 64,
		 "tensors[0].name: missing");
	BAD_JSON("{'id':1,'verb':'x','tensors':[{'name':'a','dtype':'float99','shape':[],'offset':0,'nbytes':4}]}",
		 64, "tensors[0] (a).dtype: unknown dtype 'float99'");
	BAD_JSON("{'id':1,'verb':'x','tensors':[{'name':'a','shape':[],'offset':0,'nbytes':4}]}", 64,
		 "tensors[0] (a).dtype: missing");
	BAD_JSON("{'id':1,'verb':'x','tensors':[{'name':'a','dtype':'float32','shape':3,'offset':0,'nbytes':4}]}",
		 64, "tensors[0] (a).shape: not an array");
	BAD_JSON("{'id':1,'verb':'x','tensors':[{'name':'a','dtype':'uint8','shape':[1,1,1,1,1,1,1,1,1],"
		 "'offset':0,'nbytes':1}]}", 64, "rank 9");
	BAD_JSON("{'id':1,'verb':'x','tensors':[{'name':'a','dtype':'float32','shape':[2,-3],'offset':0,'nbytes':4}]}",
		 64, "tensors[0] (a).shape[1]: -3 is negative");
	BAD_JSON("{'id':1,'verb':'x','tensors':[{'name':'a','dtype':'float32','shape':[2.5],'offset':0,'nbytes':4}]}",
		 64, "tensors[0] (a).shape[0]: not an integer");
	BAD_JSON("{'id':1,'verb':'x','tensors':[{'name':'a','dtype':'float32','shape':[2,3],'offset':0,'nbytes':20}]}",
		 64, "nbytes: 20, but shape x dtype is 24 bytes");
	BAD_JSON("{'id':1,'verb':'x','tensors':[{'name':'a','dtype':'float32','shape':[2,3],'offset':0}]}",
		 64, "tensors[0] (a).nbytes: missing");
	BAD_JSON("{'id':1,'verb':'x','tensors':[{'name':'a','dtype':'float32','shape':[1099511627776,"
		 "1099511627776,1099511627776],'offset':0,'nbytes':0}]}", 64, "byte size overflows");
	BAD_JSON("{'id':1,'verb':'x','tensors':[{'name':'a','dtype':'float32','shape':[4294967296,"
		 "4294967296],'offset':0,'nbytes':0}]}", 64, "byte size overflows");
	BAD_JSON("{'id':1,'verb':'x','tensors':[{'name':'a','dtype':'float32','shape':[2],'offset':32,'nbytes':8}]}",
		 128, "offset: 32 is not a multiple of 64");
	BAD_JSON("{'id':1,'verb':'x','tensors':[{'name':'a','dtype':'float32','shape':[2],'offset':'0','nbytes':8}]}",
		 128, "(a).offset: missing or not");
	BAD_JSON("{'id':1,'verb':'x','tensors':[{'name':'a','dtype':'float32','shape':[32],'offset':64,'nbytes':128}]}",
		 128, "past the end of the message");
	BAD_JSON("{'id':1,'verb':'x','tensors':[{'name':'a','dtype':'float32','shape':[32],'offset':0,'nbytes':128},"
		 "{'name':'b','dtype':'float32','shape':[16],'offset':64,'nbytes':64}]}", 128,
		 "tensors[0] (a) and tensors[1] (b): payloads overlap");
	BAD_JSON("{'id':1,'verb':'x','tensors':[{'name':'a','dtype':'uint8','shape':[1],'offset':0,'nbytes':1},"
		 "{'name':'a','dtype':'uint8','shape':[1],'offset':64,'nbytes':1}]}", 128,
		 "tensors[1].name: 'a' is also tensors[0]");
	BAD_JSON("{'id':1,'verb':'x','tensors':[{'name':'a','dtype':'uint8','shape':[1],'offset':0,'nbytes':1}]}",
		 256, "bytes after the last payload");
	BAD_JSON("{'id':1,'verb':'x'}", 256, "bytes after the header");
	/* truncated: the payload area cut short */
	b = raw("{'id':1,'verb':'x','tensors':[{'name':'a','dtype':'float32','shape':[32],'offset':0,'nbytes':128}]}",
		128, &l);
	expect_decode_fail(__LINE__, b, l - 1, MAXLEN, TSD_BAD_REQUEST, "past the end of the message");
	expect_decode_fail(__LINE__, b, 70, MAXLEN, TSD_BAD_REQUEST, "JSON length");
	free(b);
	/* 65 tensors */
	char *big = malloc(65 * 80 + 64), *p = big;
	p += sprintf(p, "{'id':1,'verb':'x','tensors':[");
	for (int i = 0; i < 65; i++)
		p += sprintf(p, "%s{'name':'t%d','dtype':'uint8','shape':[0],'offset':0,'nbytes':0}", i ? "," : "", i);
	sprintf(p, "]}");
	BAD_JSON(big, 64, "tensors: 65 entries, at most 64");
	free(big);
}
END_TEST

/* The MLP of docs/PROTOCOL.md: x [-1,4] -> relu(x@w1+b1) @ w2 + b2, softmax. */
static const char *MLP =
	"{'nodes':[{'id':'x','op':'input','dtype':'float32','shape':[-1,4]},"
	"{'id':'w1','op':'param','dtype':'float32','shape':[4,8]},"
	"{'id':'b1','op':'param','dtype':'float32','shape':[8]},"
	"{'id':'w2','op':'param','dtype':'float32','shape':[8,3]},"
	"{'id':'b2','op':'param','dtype':'float32','shape':[3]},"
	"{'id':'h','op':'matmul','in':['x','w1']},{'id':'hb','op':'add','in':['h','b1']},"
	"{'id':'a','op':'relu','in':['hb']},{'id':'o','op':'matmul','in':['a','w2']},"
	"{'id':'y','op':'add','in':['o','b2']},{'id':'p','op':'softmax','in':['y'],'axis':-1}],"
	"'outputs':['y','p']}";

/* Random float32 data, at most 128 elements. */
static eng_tensor *randt(eng_ctx *ctx, tu_rng *r, int nd, const int64_t *shape)
{
	float v[128];
	int64_t n = 1;
	for (int d = 0; d < nd; d++)
		n *= shape[d];
	ck_assert_int_le(n, 128);
	for (int64_t i = 0; i < n; i++)
		v[i] = (float)tu_real(r, -1, 1);
	return eng_from_data(ctx, ENG_F32, nd, shape, v);
}

START_TEST(graph_mlp_matches_api)
{
	eng_ctx *ctx = tu_ctx_new();
	cJSON *j = js(MLP);
	proto_graph g;
	proto_err err;
	ck_assert_msg(proto_graph_parse(j, 1 << 20, &g, &err) == TSD_OK, "%s", err.msg);
	ck_assert_int_eq(g.ninputs, 1);
	ck_assert_int_eq(g.nparams, 4);
	ck_assert(g.batched);
	ck_assert_uint_eq(g.param_bytes, 4 * (32 + 8 + 24 + 3));
	const proto_gnode *p = &g.nodes[proto_graph_find(&g, "p")];
	ck_assert_int_eq(p->ndim, 2);
	ck_assert_int_eq(p->shape[0], PROTO_BATCH);
	ck_assert_int_eq(p->shape[1], 3);
	tu_rng r = {7};
	int64_t sx[2] = {5, 4}, s1[2] = {4, 8}, sb1[1] = {8}, s2[2] = {8, 3}, sb2[1] = {3};
	eng_tensor *x = randt(ctx, &r, 2, sx);
	eng_tensor *params[4] = {randt(ctx, &r, 2, s1), randt(ctx, &r, 1, sb1), randt(ctx, &r, 2, s2),
				 randt(ctx, &r, 1, sb2)};
	eng_tensor *outs[2];
	ck_assert_msg(proto_graph_build(&g, ctx, &x, params, outs, &err) == TSD_OK, "%s", err.msg);
	eng_tensor *h = eng_relu(eng_add(eng_matmul(x, params[0]), params[1]));
	eng_tensor *y = eng_add(eng_matmul(h, params[2]), params[3]);
	eng_tensor *sm = eng_softmax(y, -1);
	float a[15], b[15];
	ck_assert_int_eq(eng_tensor_read(outs[0], a, sizeof(a)), ENG_OK);
	ck_assert_int_eq(eng_tensor_read(y, b, sizeof(b)), ENG_OK);
	ck_assert(!memcmp(a, b, sizeof(a)));
	ck_assert_int_eq(eng_tensor_read(outs[1], a, sizeof(a)), ENG_OK);
	ck_assert_int_eq(eng_tensor_read(sm, b, sizeof(b)), ENG_OK);
	ck_assert(!memcmp(a, b, sizeof(a)));
	/* a wrong input shape and a missing tensor are named, not built */
	int64_t bad[2] = {5, 3};
	eng_tensor *xb = randt(ctx, &r, 2, bad);
	ck_assert_int_eq(proto_graph_build(&g, ctx, &xb, params, outs, &err), TSD_SHAPE_MISMATCH);
	ck_assert_msg(strstr(err.msg, "nodes[0] (x): input"), "%s", err.msg);
	ck_assert_ptr_null(outs[0]);
	params[3] = NULL;
	ck_assert_int_eq(proto_graph_build(&g, ctx, &x, params, outs, &err), TSD_BAD_REQUEST);
	ck_assert_msg(strstr(err.msg, "nodes[4] (b2): param: no tensor"), "%s", err.msg);
	ck_assert_int_eq(eng_error(ctx), ENG_OK);
	proto_graph_free(&g);
	cJSON_Delete(j);
	tu_ctx_free(ctx);
}
END_TEST

/* The first 15 nodes of graph_other_ops' graphs (an unterminated nodes array). */
#define OTHER_OPS_NODES                                                                             \
	"{'nodes':[{'id':'x','op':'input','dtype':'float32','shape':[-1,1,4,4]},"                   \
	"{'id':'w','op':'param','dtype':'float32','shape':[2,1,3,3]},"                               \
	"{'id':'c','op':'conv2d','in':['x','w'],'stride':1,'padding':[1,1]},"                        \
	"{'id':'f','op':'reshape','in':['c'],'shape':[-1,32]},"                                      \
	"{'id':'k','op':'const','value':0.5},{'id':'m','op':'mul','in':['f','k']},"                   \
	"{'id':'t','op':'transpose','in':['m'],'dims':[0,1]},"                                       \
	"{'id':'s','op':'sum','in':['t'],'axes':[1],'keepdim':true},"                                \
	"{'id':'mx','op':'max','in':['t'],'axes':1},{'id':'mn','op':'mean','in':['t']},"              \
	"{'id':'q','op':'permute','in':['c'],'perm':[0,2,3,1]},"                                     \
	"{'id':'i','op':'cast','in':['q'],'dtype':'int32'},"                                         \
	"{'id':'l','op':'log_softmax','in':['f'],'axis':1},"                                         \
	"{'id':'e','op':'tanh','in':['l']},{'id':'n','op':'neg','in':['e']},"

/* The other ops: shapes inferred as the engine makes them, values as the API gives. */
START_TEST(graph_other_ops)
{
	eng_ctx *ctx = tu_ctx_new();
	cJSON *j = js(OTHER_OPS_NODES
		      "{'id':'lin','op':'linear','in':['f','w2','b2']},"
		      "{'id':'w2','op':'param','dtype':'float32','shape':[3,32]}],"
		      "'outputs':['s','mx','mn','i','n']}");
	proto_graph g;
	proto_err err;
	/* lin names w2 before it is defined */
	ck_assert_int_eq(proto_graph_parse(j, 1 << 20, &g, &err), TSD_BAD_REQUEST);
	ck_assert_msg(strstr(err.msg, "nodes[15] (lin): linear: in[1]: 'w2' is defined later"), "%s", err.msg);
	cJSON_Delete(j);
	j = js(OTHER_OPS_NODES
	       "{'id':'w2','op':'param','dtype':'float32','shape':[3,32]},"
	       "{'id':'lin','op':'linear','in':['f','w2']}],"
	       "'outputs':['s','mx','mn','i','n','lin']}");
	ck_assert_msg(proto_graph_parse(j, 1 << 20, &g, &err) == TSD_OK, "%s", err.msg);
	const proto_gnode *s = &g.nodes[proto_graph_find(&g, "s")];
	ck_assert(s->ndim == 2 && s->shape[0] == 32 && s->shape[1] == 1);
	const proto_gnode *q = &g.nodes[proto_graph_find(&g, "q")];
	ck_assert(q->ndim == 4 && q->shape[0] == PROTO_BATCH && q->shape[3] == 2);
	tu_rng r = {3};
	int64_t sx[4] = {2, 1, 4, 4}, sw[4] = {2, 1, 3, 3}, sw2[2] = {3, 32};
	eng_tensor *x = randt(ctx, &r, 4, sx);
	eng_tensor *p[2] = {randt(ctx, &r, 4, sw), randt(ctx, &r, 2, sw2)};
	eng_tensor *o[6];
	ck_assert_msg(proto_graph_build(&g, ctx, &x, p, o, &err) == TSD_OK, "%s", err.msg);
	ck_assert_int_eq(eng_realize(o, 6), ENG_OK);
	int pad[2] = {1, 1};
	eng_tensor *f = eng_reshape(eng_conv2d(x, p[0], NULL, NULL, pad, NULL, 1), 2, (int64_t[]){2, 32});
	eng_tensor *want = eng_linear(f, p[1], NULL);
	float a[6], b[6];
	ck_assert_int_eq(eng_tensor_read(o[5], a, sizeof(a)), ENG_OK);
	ck_assert_int_eq(eng_tensor_read(want, b, sizeof(b)), ENG_OK);
	ck_assert(!memcmp(a, b, sizeof(a)));
	ck_assert_int_eq(eng_tensor_dtype(o[3]), ENG_I32);
	ck_assert_int_eq(eng_ndim(o[2]), 0);
	proto_graph_free(&g);
	cJSON_Delete(j);
	tu_ctx_free(ctx);
}
END_TEST

static void expect_graph_fail(int line, const char *text, tsd_status want, const char *word)
{
	cJSON *j = js(text);
	proto_graph g;
	proto_err err = {0};
	tsd_status s = proto_graph_parse(j, 1 << 20, &g, &err);
	ck_assert_msg(s == want, "line %d: status %s, want %s (%s)", line, tsd_status_name(s),
		      tsd_status_name(want), err.msg);
	ck_assert_msg(strstr(err.msg, word), "line %d: message '%s' lacks '%s'", line, err.msg, word);
	ck_assert_ptr_null(g.nodes);
	cJSON_Delete(j);
}
#define GBAD(text, st, word) expect_graph_fail(__LINE__, text, st, word)
#define X "{'id':'x','op':'input','dtype':'float32','shape':[-1,4]}"
#define W "{'id':'w','op':'param','dtype':'float32','shape':[4,5]}"

START_TEST(graph_errors)
{
	const tsd_status BR = TSD_BAD_REQUEST, SM = TSD_SHAPE_MISMATCH, TL = TSD_TOO_LARGE;
	GBAD("[]", BR, "graph: not an object");
	GBAD("{'nodes':[" X "]}", BR, "outputs: missing");
	GBAD("{'nodes':[" X "],'outputs':['x'],'extra':1}", BR, "graph: unknown field 'extra'");
	GBAD("{'nodes':[],'outputs':['x']}", BR, "nodes: empty");
	GBAD("{'nodes':[" X ",{'id':'y','op':'frobnicate','in':['x']}],'outputs':['y']}", BR,
	     "nodes[1] (y): unknown op 'frobnicate'");
	GBAD("{'nodes':[" X ",{'id':'y','op':'relu','in':['x','x']}],'outputs':['y']}", BR,
	     "nodes[1] (y): relu: takes 1 inputs, got 2");
	GBAD("{'nodes':[" X ",{'id':'y','op':'linear','in':['x']}],'outputs':['y']}", BR,
	     "linear: takes 2 to 3 inputs, got 1");
	GBAD("{'nodes':[" X ",{'id':'y','op':'relu','in':['z']}],'outputs':['y']}", BR,
	     "nodes[1] (y): relu: in[0]: unknown id 'z'");
	GBAD("{'nodes':[" X "," X "],'outputs':['x']}", BR, "nodes[1] (x): duplicate id (also nodes[0])");
	GBAD("{'nodes':[" X ",{'id':'a','op':'relu','in':['b']},{'id':'b','op':'relu','in':['a']}],"
	     "'outputs':['b']}", BR, "nodes[1] (a): relu: in[0]: 'b' is defined later, at nodes[2] (a forward "
	     "reference or a cycle)");
	GBAD("{'nodes':[" X ",{'id':'a','op':'add','in':['x','a']}],'outputs':['a']}", BR,
	     "nodes[1] (a): add: in[1]: refers to the node itself");
	GBAD("{'nodes':[{'id':'x','op':'input','dtype':'float32','shape':[2,3]},"
	     "{'id':'w','op':'param','dtype':'float32','shape':[4,5]},{'id':'h','op':'matmul','in':['x','w']}],"
	     "'outputs':['h']}", SM, "nodes[2] (h): matmul: shapes [2,3] and [4,5] do not match");
	GBAD("{'nodes':[" X "," W ",{'id':'h','op':'add','in':['x','w']}],'outputs':['h']}", SM,
	     "nodes[2] (h): add: shapes [-1,4] and [4,5] do not broadcast");
	GBAD("{'nodes':[" X ",{'id':'s','op':'softmax','in':['x'],'axis':5}],'outputs':['s']}", BR,
	     "nodes[1] (s): softmax: axis 5 out of range for rank 2");
	GBAD("{'nodes':[" X ",{'id':'s','op':'softmax','in':['x'],'axis':'last'}],'outputs':['s']}", BR,
	     "softmax: axis: not an integer");
	GBAD("{'nodes':[" X ",{'id':'s','op':'sum','in':['x'],'axes':[0,0]}],'outputs':['s']}", BR,
	     "sum: axes[1]: 0 repeated");
	GBAD("{'nodes':[" X ",{'id':'s','op':'sum','in':['x'],'keepdim':1}],'outputs':['s']}", BR,
	     "keepdim: not a boolean");
	GBAD("{'nodes':[" X ",{'id':'s','op':'relu','in':['x'],'axis':1}],'outputs':['s']}", BR,
	     "nodes[1] (s): relu: unknown field 'axis'");
	GBAD("{'nodes':[" X ",{'id':'s','op':'permute','in':['x'],'perm':[1,1]}],'outputs':['s']}", BR,
	     "perm[1]: 1 repeated");
	GBAD("{'nodes':[" X ",{'id':'s','op':'cast','in':['x'],'dtype':'complex'}],'outputs':['s']}", BR,
	     "cast: dtype: missing or unknown");
	GBAD("{'nodes':[" X ",{'id':'s','op':'reshape','in':['x'],'shape':[2,2]}],'outputs':['s']}", SM,
	     "the target needs one -1");
	GBAD("{'nodes':[{'id':'x','op':'input','dtype':'float32','shape':[6]},"
	     "{'id':'s','op':'reshape','in':['x'],'shape':[4,-1]}],'outputs':['s']}", SM, "cannot reshape [6] to [4,-1]");
	GBAD("{'nodes':[{'id':'x','op':'input','dtype':'float32','shape':[-1,-1]}],'outputs':['x']}", BR,
	     "more than one batch dimension");
	GBAD("{'nodes':[{'id':'w','op':'param','dtype':'float32','shape':[-1,4]}],'outputs':['w']}", BR,
	     "nodes[0] (w): param: shape:");
	GBAD("{'nodes':[{'id':'w','op':'param','dtype':'float32','shape':[2199023255552]}],'outputs':['w']}",
	     BR, "2^40");
	GBAD("{'nodes':[{'id':'w','op':'param','dtype':'float32','shape':[1048576,1048577]}],'outputs':['w']}",
	     TL, "nodes[0] (w): param: more than 2^40 elements");
	GBAD("{'nodes':[{'id':'w','op':'param','dtype':'float32','shape':[1024,1024]}],'outputs':['w']}",
	     TL, "params reach 4194304 bytes, at most 1048576");
	GBAD("{'nodes':[{'id':'k','op':'const','value':'1'}],'outputs':['k']}", BR, "const: value");
	GBAD("{'nodes':[" X "],'outputs':['x','x']}", BR, "outputs[1]: 'x' is also outputs[0]");
	GBAD("{'nodes':[" X "],'outputs':['q']}", BR, "outputs[0]: unknown id");
	GBAD("{'nodes':[{'id':'x','op':'input','dtype':'float32','shape':[1,2,5,5]},"
	     "{'id':'w','op':'param','dtype':'float32','shape':[3,2,7,7]},"
	     "{'id':'c','op':'conv2d','in':['x','w'],'stride':0}],'outputs':['c']}", BR, "conv2d: stride");
	GBAD("{'nodes':[{'id':'x','op':'input','dtype':'float32','shape':[1,2,5,5]},"
	     "{'id':'w','op':'param','dtype':'float32','shape':[3,2,7,7]},"
	     "{'id':'c','op':'conv2d','in':['x','w']}],'outputs':['c']}", SM, "kernel [3,2,7,7] larger");
	GBAD("{'nodes':[{'op':'relu'}],'outputs':['x']}", BR, "nodes[0].id: missing");
	/* 4097 nodes */
	char *big = malloc(4097 * 64 + 64), *p = big;
	p += sprintf(p, "{'nodes':[");
	for (int i = 0; i < 4097; i++)
		p += sprintf(p, "%s{'id':'n%d','op':'const','value':1}", i ? "," : "", i);
	sprintf(p, "],'outputs':['n0']}");
	GBAD(big, TL, "nodes: 4097, at most 4096");
	/* 4096 is fine (and fast: ids are hashed) */
	p = big + sprintf(big, "{'nodes':[{'id':'n0','op':'const','value':1}");
	for (int i = 1; i < 4096; i++)
		p += sprintf(p, ",{'id':'n%d','op':'add','in':['n%d','n0']}", i, i - 1);
	sprintf(p, "],'outputs':['n4095']}");
	cJSON *j = js(big);
	proto_graph g;
	proto_err err;
	ck_assert_msg(proto_graph_parse(j, 0, &g, &err) == TSD_OK, "%s", err.msg);
	proto_graph_free(&g);
	cJSON_Delete(j);
	free(big);
}
END_TEST

/* The committed fuzz seeds (tests/fuzz/make_corpus.py): the valid ones decode and their graphs
 * validate, so the fuzzer starts from inputs that reach the graph code. Run from the repo root. */
START_TEST(fuzz_seeds)
{
	static const struct {
		const char *file;
		tsd_status decode, graph;
	} seeds[] = {
		{"infer_two_tensors", TSD_OK, TSD_OK}, {"every_dtype", TSD_OK, TSD_OK},
		{"hello", TSD_OK, TSD_OK}, {"realize_mlp", TSD_OK, TSD_OK},
		{"realize_conv", TSD_OK, TSD_OK}, {"realize_linear", TSD_OK, TSD_OK},
		{"cycle", TSD_OK, TSD_BAD_REQUEST}, {"overlap", TSD_BAD_REQUEST, TSD_OK},
		{"huge_shape", TSD_BAD_REQUEST, TSD_OK},
	};
	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		const char *path = seeds[i].file;
		static uint8_t buf[65536];
		size_t len = tu_read_seed("request", path, buf, sizeof(buf));
		proto_msg *m = malloc(sizeof(*m));
		proto_err err = {0};
		tsd_status st = proto_decode(buf, len, sizeof(buf), PROTO_REQUEST, m, &err);
		ck_assert_msg(st == seeds[i].decode, "%s: %s (%s)", path, tsd_status_name(st), err.msg);
		const cJSON *gj = st ? NULL : cJSON_GetObjectItem(m->json, "graph");
		if (gj) {
			proto_graph g;
			st = proto_graph_parse(gj, 1 << 20, &g, &err);
			ck_assert_msg(st == seeds[i].graph, "%s: graph: %s (%s)", path, tsd_status_name(st), err.msg);
			if (!st)
				proto_graph_free(&g);
		}
		proto_msg_free(m);
		free(m);
	}
}
END_TEST

/* Whether a and b hold the same values, numbers compared exactly (cJSON_Compare allows an epsilon). */
static bool same_json(const cJSON *a, const cJSON *b)
{
	if ((a->type & 0xff) != (b->type & 0xff))
		return false;
	if (cJSON_IsNumber(a))
		return a->valuedouble == b->valuedouble;
	if (cJSON_IsString(a))
		return !strcmp(a->valuestring, b->valuestring);
	const cJSON *x = a->child, *y = b->child;
	for (; x && y; x = x->next, y = y->next)
		if ((x->string || y->string) && (!x->string || !y->string || strcmp(x->string, y->string)))
			return false;
		else if (!same_json(x, y))
			return false;
	return !x && !y;
}

/* The message writer's JSON (json_write.c): cJSON_PrintUnformatted's text for every kind of value
 * (escapes, nesting, the number forms), except where cJSON loses a number: integers up to 2^53
 * are written exactly (cJSON writes 15 digits when they read back within its epsilon) and -0 as
 * 0; every number reads back exactly. Then the encoded header as a whole. */
START_TEST(json_writer_is_cjson)
{
	static const char *const docs[] = {
		"{\"id\":7,\"verb\":\"infer\",\"n\":-42,\"big\":4294967296,\"huge\":9007199254740991,"
		"\"over\":9007199254740993,\"past\":17938878571701105094,\"neg\":-1e19,\"min\":-9223372036854775808,\"f\":0.1,\"g\":-1.5e-300,\"h\":1e300,\"third\":0.3333333333333333,"
		"\"zero\":-0.0,\"t\":true,\"u\":false,\"z\":null}",
		"{\"s\":\"quote \\\" back \\\\ slash / tab \\t nl \\n cr \\r bs \\b ff \\f ctl \\u0001 \\u001f del \x7f\"}",
		"{\"utf8\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\",\"u\":\"\\u00e9\"}",
		"{\"a\":[],\"o\":{},\"nest\":[1,[2,[3,{\"k\":[true,null]}]],{\"x\":{\"y\":-0.25}}]}",
		"[1,2.5,\"x\",[],{}]",
	};
	for (size_t k = 0; k < sizeof(docs) / sizeof(*docs); k++) {
		cJSON *j = cJSON_Parse(docs[k]);
		ck_assert_msg(j, "doc %zu does not parse", k);
		char *want = cJSON_PrintUnformatted(j);
		char stack[16]; /* small: the buffer must grow */
		proto_jw w = {.p = stack, .cap = sizeof(stack)};
		proto_jw_value(&w, j);
		ck_assert(!w.failed);
		cJSON *back = cJSON_ParseWithLength(w.p, w.len);
		ck_assert_msg(back && same_json(back, j), "doc %zu does not read back the same: %.*s", k, (int)w.len, w.p);
		cJSON_Delete(back);
		if (k) /* doc 0 holds the numbers cJSON writes lossily */
			ck_assert_msg(w.len == strlen(want) && !memcmp(w.p, want, w.len), "doc %zu: %.*s, cJSON: %s", k,
				      (int)w.len, w.p, want);
		proto_jw_free(&w);
		free(want);
		cJSON_Delete(j);
	}
	/* NaN and infinities, which JSON has not: null, as cJSON */
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "nan", NAN);
	cJSON_AddNumberToObject(o, "inf", -INFINITY);
	char *want = cJSON_PrintUnformatted(o);
	proto_jw w = {0};
	proto_jw_value(&w, o);
	ck_assert(w.len == strlen(want) && !memcmp(w.p, want, w.len));
	proto_jw_free(&w);
	free(want);
	cJSON_Delete(o);
	/* a whole encoded header: its fields, then the tensors array (a "tensors" of its own replaced) */
	cJSON *h = cJSON_Parse("{\"id\":\"r1\",\"tensors\":[\"old\"],\"verb\":\"infer\",\"priority\":\"realtime\"}");
	float x[6] = {0};
	proto_out t[2] = {{.name = "x", .dtype = TSD_F32, .ndim = 2, .shape = (int64_t[]){2, 3}, .data = x},
			  {.name = "k\"q", .dtype = TSD_I64, .ndim = 0, .shape = NULL, .data = x}};
	void *buf;
	size_t len;
	proto_err e;
	ck_assert_int_eq(proto_encode(h, t, 2, 0, NULL, NULL, &buf, &len, &e), TSD_OK);
	uint32_t jl = (uint32_t)((uint8_t *)buf)[4] | (uint32_t)((uint8_t *)buf)[5] << 8;
	const char *expect = "{\"id\":\"r1\",\"verb\":\"infer\",\"priority\":\"realtime\",\"tensors\":[{\"name\":\"x\","
			     "\"dtype\":\"float32\",\"shape\":[2,3],\"offset\":0,\"nbytes\":24},{\"name\":\"k\\\"q\",\"dtype\":"
			     "\"int64\",\"shape\":[],\"offset\":64,\"nbytes\":8}]}";
	ck_assert_msg(jl == strlen(expect) && !memcmp((char *)buf + PROTO_PREFIX, expect, jl), "%.*s", (int)jl,
		      (char *)buf + PROTO_PREFIX);
	free(buf);
	cJSON_Delete(h);
}
END_TEST

Suite *protocol_suite(void)
{
	const TTest *const tests[] = {
		status_names, roundtrip_every_dtype, roundtrip_many_and_replies, encode_errors, decode_errors,
		graph_mlp_matches_api, graph_other_ops, graph_errors, fuzz_seeds, json_writer_is_cjson,
	};
	return tu_suite("protocol", tests, (int)(sizeof(tests) / sizeof(tests[0])), TU_TIMEOUT);
}
