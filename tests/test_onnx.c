/* test_onnx.c: the ONNX importer (onnx.h) on models built here with protobuf-c: a small graph end
 * to end, constants and build-time values, and hostile files (truncated, wrong field types, a
 * cycle, sizes disagreeing with data, external data leaving the directory, huge dims). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tensord/onnx.h>
#include "onnx_mb.h"
#include "testutil.h"

/* y = x + w (w an initializer (2, 3)), x (batch, 3) */
static char *add_in[] = {"x", "w"}, *add_out[] = {"y"};
static int64_t wdims[] = {2, 3};
static float wdata[] = {1, 2, 3, 4, 5, 6};
static void mb_add_model(mb *b)
{
	mb_init(b, 13);
	mb_input(b, "x", 2, (int64_t[]){-1, 3});
	mb_output(b, "y", 2, (int64_t[]){-1, 3});
	mb_init_f32(b, "w", 2, wdims, wdata, 6);
	mb_node(b, "Add", 2, add_in, 1, add_out);
}

static eng_onnx_model *load_mb(eng_ctx *ctx, mb *b, const char *dir, char *err, size_t errlen)
{
	size_t len;
	uint8_t *buf = mb_pack(b, &len);
	eng_onnx_model *m = eng_onnx_load_mem(ctx, buf, len, dir, 0, err, errlen);
	free(buf);
	return m;
}

/* load_mb for a model that must load (the test fails with the message otherwise). */
static eng_onnx_model *load_mb_ok(eng_ctx *ctx, mb *b)
{
	char err[512];
	eng_onnx_model *m = load_mb(ctx, b, NULL, err, sizeof(err));
	ck_assert_msg(m, "%s", err);
	return m;
}

#define EXPECT_LOAD_FAIL(ctx, b, dir, word)                                                     \
	do {                                                                                    \
		char e_[512] = "";                                                              \
		eng_onnx_model *m_ = load_mb(ctx, b, dir, e_, sizeof(e_));                      \
		ck_assert_msg(m_ == NULL, "line %d: loaded a hostile model", __LINE__);          \
		ck_assert_msg(strstr(e_, word), "line %d: message '%s' lacks '%s'", __LINE__, e_, word); \
	} while (0)

/* ---- tests ---- */

START_TEST(test_add_end_to_end)
{
	eng_ctx *ctx = tu_ctx_new();
	mb b;
	mb_add_model(&b);
	char err[512];
	eng_onnx_model *m = load_mb(ctx, &b, NULL, err, sizeof(err));
	ck_assert_msg(m, "%s", err);
	ck_assert_int_eq(eng_onnx_input_count(m), 1);
	ck_assert_int_eq(eng_onnx_output_count(m), 1);
	ck_assert_int_eq(eng_onnx_opset(m, ""), 13);
	eng_onnx_io io;
	ck_assert_int_eq(eng_onnx_input(m, 0, &io), ENG_OK);
	ck_assert_str_eq(io.name, "x");
	ck_assert(io.dtype_ok && io.dtype == ENG_F32);
	ck_assert_int_eq(io.ndim, 2);
	ck_assert_int_eq(io.shape[0], -1);
	ck_assert_str_eq(io.dim_names[0], "batch");
	ck_assert_int_eq(io.shape[1], 3);
	ck_assert_int_eq(eng_onnx_input(m, 1, &io), ENG_EINVAL);
	/* two builds reuse the initializer */
	for (int rep = 0; rep < 2; rep++) {
		float xv[] = {10, 20, 30, 40, 50, 60};
		eng_tensor *x = eng_from_data(ctx, ENG_F32, 2, (int64_t[]){2, 3}, xv), *y = NULL;
		ck_assert_int_eq(eng_onnx_build(m, &x, &y, 0), ENG_OK);
		float out[6];
		ck_assert_int_eq(eng_tensor_read(y, out, sizeof(out)), ENG_OK);
		for (int i = 0; i < 6; i++)
			ck_assert_float_eq(out[i], xv[i] + wdata[i]);
		eng_tensor_free(x);
		eng_tensor_free(y);
	}
	/* a wrong input dtype or static dim is an error naming the input */
	eng_tensor *xi = eng_zeros(ctx, ENG_I32, 2, (int64_t[]){2, 3}), *y = NULL;
	ck_assert_int_eq(eng_onnx_build(m, &xi, &y, 0), ENG_EDTYPE);
	ck_assert_ptr_nonnull(strstr(eng_errmsg(ctx), "'x'"));
	eng_clear_error(ctx);
	eng_tensor *xs = eng_zeros(ctx, ENG_F32, 2, (int64_t[]){2, 4});
	ck_assert_int_eq(eng_onnx_build(m, &xs, &y, 0), ENG_ESHAPE);
	eng_clear_error(ctx);
	eng_onnx_free(m);
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(test_unsupported_is_an_error)
{
	eng_ctx *ctx = tu_ctx_new();
	mb b;
	mb_add_model(&b);
	b.nodes[0].op_type = "NoSuchOp";
	b.nodes[0].name = "n0";
	char err[512];
	eng_onnx_model *m = load_mb(ctx, &b, NULL, err, sizeof(err));
	ck_assert_msg(m, "%s", err);
	eng_tensor *x = eng_zeros(ctx, ENG_F32, 2, (int64_t[]){2, 3}), *y = NULL;
	ck_assert_int_eq(eng_onnx_build(m, &x, &y, 0), ENG_ENOTSUP);
	const char *msg = eng_errmsg(ctx);
	ck_assert_msg(strstr(msg, "'n0'") && strstr(msg, "NoSuchOp") && strstr(msg, "opset 13"), "%s", msg);
	ck_assert_ptr_null(y);
	eng_clear_error(ctx);
	eng_onnx_free(m);
	/* an attribute the op does not know */
	mb_add_model(&b);
	Onnx__AttributeProto at, *atp[1] = {&at};
	onnx__attribute_proto__init(&at);
	at.name = "frobnicate";
	at.has_type = 1;
	at.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
	at.has_i = 1;
	at.i = 3;
	b.nodes[0].n_attribute = 1;
	b.nodes[0].attribute = atp;
	m = load_mb(ctx, &b, NULL, err, sizeof(err));
	ck_assert_msg(m, "%s", err);
	ck_assert_int_eq(eng_onnx_build(m, &x, &y, 0), ENG_ENOTSUP);
	ck_assert_msg(strstr(eng_errmsg(ctx), "frobnicate"), "%s", eng_errmsg(ctx));
	eng_clear_error(ctx);
	eng_onnx_free(m);
	tu_ctx_free(ctx);
}
END_TEST

/* Reshape's shape from a graph input: an error unless ENG_ONNX_SPECIALIZE, which then marks that
 * input (and only it) static. */
START_TEST(test_build_time_values)
{
	eng_ctx *ctx = tu_ctx_new();
	mb b;
	mb_init(&b, 13);
	static char *rin[] = {"x", "s"}, *rout[] = {"y"};
	mb_input(&b, "x", 2, (int64_t[]){2, 3});
	b.inp[1] = mb_value(&b, &b.in[1], "s", 7, 1, (int64_t[]){1});
	b.g.n_input = 2;
	mb_output(&b, "y", 1, (int64_t[]){6});
	mb_node(&b, "Reshape", 2, rin, 1, rout);
	char err[512];
	eng_onnx_model *m = load_mb(ctx, &b, NULL, err, sizeof(err));
	ck_assert_msg(m, "%s", err);
	int64_t sv = -1;
	eng_tensor *in[2] = {eng_ones(ctx, ENG_F32, 2, (int64_t[]){2, 3}), eng_from_data(ctx, ENG_I64, 1, (int64_t[]){1}, &sv)};
	eng_tensor *y = NULL;
	ck_assert_int_eq(eng_onnx_build(m, in, &y, 0), ENG_ENOTSUP);
	ck_assert_msg(strstr(eng_errmsg(ctx), "constant"), "%s", eng_errmsg(ctx));
	eng_clear_error(ctx);
	ck_assert_int_eq(eng_onnx_build(m, in, &y, ENG_ONNX_SPECIALIZE), ENG_OK);
	ck_assert_int_eq(eng_ndim(y), 1);
	ck_assert_int_eq(eng_shape(y)[0], 6);
	ck_assert(eng_onnx_input_static(m, 1));
	ck_assert(!eng_onnx_input_static(m, 0)); /* only the inputs the read value comes from */
	eng_onnx_free(m);
	tu_ctx_free(ctx);
}
END_TEST

/* An input the op's function never read is refused by name, not ignored (graph.c's run_node):
 * Clip before opset 11 takes its bounds from attributes, so a second input there is one the
 * importer would otherwise drop; from 11 on the same node reads it as the lower bound. */
START_TEST(test_unread_input_refused)
{
	eng_ctx *ctx = tu_ctx_new();
	for (int k = 0; k < 2; k++) {
		mb b;
		mb_init(&b, k ? 13 : 6);
		static char *cin[] = {"x", "lo"}, *cout_[] = {"y"};
		mb_input(&b, "x", 1, (int64_t[]){3});
		b.inp[1] = mb_value(&b, &b.in[1], "lo", 1, 0, NULL);
		b.g.n_input = 2;
		mb_output(&b, "y", 1, (int64_t[]){3});
		mb_node(&b, "Clip", 2, cin, 1, cout_);
		char err[512];
		eng_onnx_model *m = load_mb(ctx, &b, NULL, err, sizeof(err));
		ck_assert_msg(m, "%s", err);
		float xv[3] = {-2, 0.5f, 3}, lv = 0, yv[3];
		eng_tensor *in[2] = {eng_from_data(ctx, ENG_F32, 1, (int64_t[]){3}, xv), eng_from_data(ctx, ENG_F32, 0, NULL, &lv)};
		eng_tensor *y = NULL;
		eng_status st = eng_onnx_build(m, in, &y, ENG_ONNX_SPECIALIZE);
		if (!k) {
			ck_assert_int_eq(st, ENG_ENOTSUP);
			ck_assert_msg(strstr(eng_errmsg(ctx), "input 1 ('lo')") && strstr(eng_errmsg(ctx), "refused"), "%s",
				      eng_errmsg(ctx));
			eng_clear_error(ctx);
		} else {
			ck_assert_msg(st == ENG_OK, "%s", eng_errmsg(ctx));
			ck_assert(eng_tensor_read(y, yv, sizeof(yv)) == ENG_OK);
			ck_assert(yv[0] == 0 && yv[1] == 0.5f && yv[2] == 3);
		}
		eng_onnx_free(m);
	}
	tu_ctx_free(ctx);
}
END_TEST

/* int8, int16 and uint16 are held as int32, uint32 as int64, and wrapped back into their range
 * after every op that makes them: 127 + 1 is -128 in int8, 0 - 1 is 65535 in uint16 and
 * 4294967295 in uint32, and uint64's 2^64 - 1 (int64's -1) is more than 1 (graph.c's
 * output_narrow, narrow.c). */
START_TEST(test_narrow_ints_wrap)
{
	eng_ctx *ctx = tu_ctx_new();
	static const struct {
		int elem;
		const char *op;
		int32_t a, b, want;
	} cases[] = {{3, "Add", 127, 1, -128}, {3, "Mul", -128, -1, -128}, {4, "Sub", 0, 1, 65535}, {5, "Add", 32767, 2, -32767},
		     {12, "Sub", 0, 1, -1}, {13, "Less", 1, -1, 1}};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		mb b;
		mb_init(&b, 13);
		static char *in[] = {"a", "b"}, *out[] = {"y"};
		b.inp[0] = mb_value(&b, &b.in[0], "a", cases[k].elem, 1, (int64_t[]){1});
		b.inp[1] = mb_value(&b, &b.in[1], "b", cases[k].elem, 1, (int64_t[]){1});
		b.g.n_input = 2;
		b.outp[0] = mb_value(&b, &b.out[0], "y", strcmp(cases[k].op, "Less") ? cases[k].elem : 9, 1, (int64_t[]){1});
		b.g.n_output = 1;
		mb_node(&b, cases[k].op, 2, in, 1, out);
		char err[512];
		eng_onnx_model *m = load_mb(ctx, &b, NULL, err, sizeof(err));
		ck_assert_msg(m, "%s", err);
		bool u32 = cases[k].elem == 12 || cases[k].elem == 13; /* held in int64 (uint64: its bits) */
		int64_t a64 = cases[k].a, b64 = cases[k].b, got = 0, want = cases[k].elem == 12 ? 4294967295 : cases[k].want;
		bool cmp = !strcmp(cases[k].op, "Less"); /* 1 < 2^64 - 1 as uint64, not 1 < -1 */
		eng_tensor *iv[2] = {u32 ? eng_from_data(ctx, ENG_I64, 1, (int64_t[]){1}, &a64) : eng_from_data(ctx, ENG_I32, 1, (int64_t[]){1}, &cases[k].a),
				     u32 ? eng_from_data(ctx, ENG_I64, 1, (int64_t[]){1}, &b64) : eng_from_data(ctx, ENG_I32, 1, (int64_t[]){1}, &cases[k].b)};
		eng_tensor *y = NULL;
		ck_assert_msg(eng_onnx_build(m, iv, &y, 0) == ENG_OK, "%s", eng_errmsg(ctx));
		int32_t g32 = 0;
		uint8_t g8 = 0;
		if (cmp)
			ck_assert(eng_tensor_read(y, &g8, 1) == ENG_OK);
		else
			ck_assert(eng_tensor_read(y, u32 ? (void *)&got : (void *)&g32, u32 ? sizeof(got) : sizeof(g32)) == ENG_OK);
		got = cmp ? g8 : u32 ? got : g32;
		ck_assert_msg(got == want, "case %zu: %lld, want %lld", k, (long long)got, (long long)want);
		eng_onnx_free(m);
	}
	tu_ctx_free(ctx);
}
END_TEST

/* BitCast between types held wider (onx_narrow_bits gives each its own width): uint16 -> int16
 * reinterprets (65535 is -1), bfloat16 -> int16 (a float held) and int4 -> int8 (other widths)
 * are refused by name. */
START_TEST(test_bitcast_narrow)
{
	eng_ctx *ctx = tu_ctx_new();
	static const struct {
		int from, to;
		bool ok;
	} cases[] = {{4, 5, true}, {16, 5, false}, {22, 3, false}};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		mb b;
		mb_init(&b, 26);
		static char *in[] = {"x"}, *out[] = {"y"};
		b.inp[0] = mb_value(&b, &b.in[0], "x", cases[k].from, 1, (int64_t[]){1});
		b.g.n_input = 1;
		b.outp[0] = mb_value(&b, &b.out[0], "y", cases[k].to, 1, (int64_t[]){1});
		b.g.n_output = 1;
		Onnx__NodeProto *nd = mb_node(&b, "BitCast", 1, in, 1, out);
		Onnx__AttributeProto at, *ap[1] = {mb_attr_ints(&at, "to", (int64_t[]){cases[k].to}, 0)};
		nd->n_attribute = 1, nd->attribute = ap;
		char err[512];
		eng_onnx_model *m = load_mb(ctx, &b, NULL, err, sizeof(err));
		ck_assert_msg(m, "%s", err);
		int32_t xi = 65535;
		float xf = 1.5f;
		eng_tensor *x = cases[k].from == 16 ? eng_from_data(ctx, ENG_F32, 1, (int64_t[]){1}, &xf)
						      : eng_from_data(ctx, ENG_I32, 1, (int64_t[]){1}, &xi);
		eng_tensor *y = NULL;
		eng_status st = eng_onnx_build(m, &x, &y, 0);
		if (cases[k].ok) {
			int32_t got = 0;
			ck_assert_msg(st == ENG_OK, "%s", eng_errmsg(ctx));
			ck_assert(eng_tensor_read(y, &got, sizeof(got)) == ENG_OK);
			ck_assert_int_eq(got, -1);
		} else {
			ck_assert_int_eq(st, ENG_ENOTSUP);
			ck_assert_msg(strstr(eng_errmsg(ctx), "is not supported"), "%s", eng_errmsg(ctx));
			eng_clear_error(ctx);
		}
		eng_onnx_free(m);
	}
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(test_truncated_and_garbage)
{
	eng_ctx *ctx = tu_ctx_new();
	mb b;
	mb_add_model(&b);
	size_t len;
	uint8_t *buf = mb_pack(&b, &len);
	char err[512];
	int loaded = 0;
	for (size_t k = 0; k < len; k++) {
		eng_onnx_model *m = eng_onnx_load_mem(ctx, buf, k, NULL, 0, err, sizeof(err));
		if (m) { /* a prefix can be a valid, smaller model: it must still be consistent */
			loaded++;
			eng_onnx_free(m);
		} else
			ck_assert_msg(strncmp(err, "onnx: ", 6) == 0, "message '%s'", err);
	}
	eng_onnx_model *m = eng_onnx_load_mem(ctx, buf, len, NULL, 0, err, sizeof(err));
	ck_assert_msg(m, "%s", err);
	eng_onnx_free(m);
	free(buf);
	/* wrong wire types: the graph field (7) as a varint, the ir_version (1) as bytes */
	const uint8_t bad1[] = {0x38, 0x01}, bad2[] = {0x0a, 0x02, 0x01, 0x02};
	ck_assert_ptr_null(eng_onnx_load_mem(ctx, bad1, sizeof(bad1), NULL, 0, err, sizeof(err)));
	ck_assert_msg(strstr(err, "protobuf"), "%s", err);
	ck_assert_ptr_null(eng_onnx_load_mem(ctx, bad2, sizeof(bad2), NULL, 0, err, sizeof(err)));
	/* a length running past the end */
	const uint8_t bad3[] = {0x3a, 0x7f, 0x0a};
	ck_assert_ptr_null(eng_onnx_load_mem(ctx, bad3, sizeof(bad3), NULL, 0, err, sizeof(err)));
	/* no graph */
	const uint8_t nog[] = {0x08, 0x08};
	ck_assert_ptr_null(eng_onnx_load_mem(ctx, nog, sizeof(nog), NULL, 0, err, sizeof(err)));
	ck_assert_msg(strstr(err, "no graph"), "%s", err);
	tu_ctx_free(ctx);
}
END_TEST

/* Fields a newer ONNX adds (unknown to this onnx.proto) are skipped. */
START_TEST(test_unknown_fields_skipped)
{
	eng_ctx *ctx = tu_ctx_new();
	mb b;
	mb_add_model(&b);
	size_t len;
	uint8_t *buf = mb_pack(&b, &len);
	/* field 99 (varint) and field 98 (bytes) at the end of the ModelProto */
	const uint8_t extra[] = {0x98, 0x06, 0x2a, 0x92, 0x06, 0x03, 'a', 'b', 'c'};
	uint8_t *big = malloc(len + sizeof(extra));
	memcpy(big, buf, len);
	memcpy(big + len, extra, sizeof(extra));
	char err[512];
	eng_onnx_model *m = eng_onnx_load_mem(ctx, big, len + sizeof(extra), NULL, 0, err, sizeof(err));
	ck_assert_msg(m, "%s", err);
	eng_onnx_free(m);
	free(buf);
	free(big);
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(test_cycle_and_undefined)
{
	eng_ctx *ctx = tu_ctx_new();
	mb b;
	mb_init(&b, 13);
	static char *a_in[] = {"x", "b"}, *a_out[] = {"a"}, *b_in[] = {"a"}, *b_out[] = {"b"};
	mb_input(&b, "x", 1, (int64_t[]){3});
	mb_output(&b, "b", 1, (int64_t[]){3});
	mb_node(&b, "Add", 2, a_in, 1, a_out);
	mb_node(&b, "Relu", 1, b_in, 1, b_out);
	EXPECT_LOAD_FAIL(ctx, &b, NULL, "cycle");
	/* a value nothing defines */
	static char *u_in[] = {"nowhere"};
	b.nodes[1].input = u_in;
	b.g.n_node = 2;
	b.nodes[0].input = (char *[]){"x", "x"};
	EXPECT_LOAD_FAIL(ctx, &b, NULL, "nothing defines");
	/* defined twice */
	mb_add_model(&b);
	static char *dup_out[] = {"w"};
	b.nodes[0].output = dup_out;
	EXPECT_LOAD_FAIL(ctx, &b, NULL, "defined twice");
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(test_sizes_disagree)
{
	eng_ctx *ctx = tu_ctx_new();
	mb b;
	/* 5 floats for dims (2, 3) */
	mb_add_model(&b);
	b.inits[0].n_float_data = 5;
	EXPECT_LOAD_FAIL(ctx, &b, NULL, "5 values");
	/* raw_data of 20 bytes for 24 */
	mb_add_model(&b);
	uint8_t raw[32] = {0};
	b.inits[0].n_float_data = 0;
	b.inits[0].has_raw_data = 1;
	b.inits[0].raw_data.len = 20;
	b.inits[0].raw_data.data = raw;
	EXPECT_LOAD_FAIL(ctx, &b, NULL, "raw_data");
	/* huge dims: refused before any allocation */
	mb_add_model(&b);
	static int64_t huge[] = {1ll << 40, 1ll << 40};
	b.inits[0].dims = huge;
	EXPECT_LOAD_FAIL(ctx, &b, NULL, "bytes");
	static int64_t neg[] = {2, -3};
	b.inits[0].dims = neg;
	EXPECT_LOAD_FAIL(ctx, &b, NULL, "dim 1");
	/* too many dims, an unknown element type */
	mb_add_model(&b);
	static int64_t many[12] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 3};
	b.inits[0].n_dims = 12;
	b.inits[0].dims = many;
	EXPECT_LOAD_FAIL(ctx, &b, NULL, "dims");
	mb_add_model(&b);
	b.inits[0].data_type = 77;
	EXPECT_LOAD_FAIL(ctx, &b, NULL, "element type");
	tu_ctx_free(ctx);
}
END_TEST

static void write_file(const char *path, const void *data, size_t n)
{
	FILE *f = fopen(path, "wb");
	ck_assert_msg(f, "%s: %s", path, strerror(errno));
	ck_assert_int_eq(fwrite(data, 1, n, f), n);
	fclose(f);
}

START_TEST(test_external_data_confined)
{
	eng_ctx *ctx = tu_ctx_new();
	char root[64] = "/tmp/tensord-onnx-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(root));
	char dir[128], p[256];
	snprintf(dir, sizeof(dir), "%s/model", root);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	float w[6] = {1, 2, 3, 4, 5, 6};
	snprintf(p, sizeof(p), "%s/w.bin", dir);
	write_file(p, w, sizeof(w));
	snprintf(p, sizeof(p), "%s/secret.bin", root);
	write_file(p, w, sizeof(w));
	char link[256];
	snprintf(link, sizeof(link), "%s/link.bin", dir);
	ck_assert_int_eq(symlink(p, link), 0);

	mb b;
	Onnx__StringStringEntryProto loc, len, *ext[2] = {&loc, &len};
	onnx__string_string_entry_proto__init(&loc);
	onnx__string_string_entry_proto__init(&len);
	loc.key = "location";
	len.key = "length";
	len.value = "24";
	struct {
		const char *loc;
		const char *word; /* NULL: loads */
	} cases[] = {
		{"w.bin", NULL},
		{"../secret.bin", "leaves"},
		{"/etc/passwd", "absolute"},
		{"link.bin", "outside"},
		{"sub/../../secret.bin", "leaves"},
		{"missing.bin", "No such file"},
		{"", "location"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		mb_add_model(&b);
		b.inits[0].n_float_data = 0;
		b.inits[0].has_data_location = 1;
		b.inits[0].data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
		b.inits[0].n_external_data = 2;
		b.inits[0].external_data = ext;
		loc.value = (char *)cases[i].loc;
		char err[512] = "";
		eng_onnx_model *m = load_mb(ctx, &b, dir, err, sizeof(err));
		if (!cases[i].word) {
			ck_assert_msg(m, "%s: %s", cases[i].loc, err);
			float x[6] = {0}, out[6];
			eng_tensor *xt = eng_from_data(ctx, ENG_F32, 2, (int64_t[]){2, 3}, x), *y = NULL;
			ck_assert_int_eq(eng_onnx_build(m, &xt, &y, 0), ENG_OK);
			ck_assert_int_eq(eng_tensor_read(y, out, sizeof(out)), ENG_OK);
			ck_assert_float_eq(out[5], 6);
			eng_onnx_free(m);
		} else {
			ck_assert_msg(!m, "%s: loaded", cases[i].loc);
			ck_assert_msg(strstr(err, cases[i].word), "%s: '%s' lacks '%s'", cases[i].loc, err, cases[i].word);
		}
	}
	/* no directory: external data refused; a length disagreeing with the dims */
	mb_add_model(&b);
	b.inits[0].n_float_data = 0;
	b.inits[0].has_data_location = 1;
	b.inits[0].data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
	b.inits[0].n_external_data = 2;
	b.inits[0].external_data = ext;
	loc.value = "w.bin";
	EXPECT_LOAD_FAIL(ctx, &b, NULL, "not allowed");
	len.value = "16";
	EXPECT_LOAD_FAIL(ctx, &b, dir, "length");
	len.value = "-1";
	EXPECT_LOAD_FAIL(ctx, &b, dir, "not a number");
	unlink(link);
	unlink(p);
	snprintf(p, sizeof(p), "%s/w.bin", dir);
	unlink(p);
	rmdir(dir);
	rmdir(root);
	tu_ctx_free(ctx);
}
END_TEST

/* Loading a file: the directory of the path is where external data may come from. */
START_TEST(test_load_file)
{
	eng_ctx *ctx = tu_ctx_new();
	char dir[64] = "/tmp/tensord-onnx-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	mb b;
	mb_add_model(&b);
	size_t len;
	uint8_t *buf = mb_pack(&b, &len);
	char p[128], err[512];
	snprintf(p, sizeof(p), "%s/m.onnx", dir);
	write_file(p, buf, len);
	free(buf);
	eng_onnx_model *m = eng_onnx_load(ctx, p, 0, err, sizeof(err));
	ck_assert_msg(m, "%s", err);
	eng_onnx_free(m);
	ck_assert_ptr_null(eng_onnx_load(ctx, dir, 0, err, sizeof(err)));
	ck_assert_msg(strstr(err, "regular file"), "%s", err);
	unlink(p);
	ck_assert_ptr_null(eng_onnx_load(ctx, p, 0, err, sizeof(err)));
	/* one TensorProto file (an initializer of the model, packed alone) */
	size_t tl = onnx__tensor_proto__get_packed_size(b.ip[0]);
	uint8_t *tb = malloc(tl + 1);
	ck_assert_ptr_nonnull(tb);
	onnx__tensor_proto__pack(b.ip[0], tb);
	snprintf(p, sizeof(p), "%s/w.pb", dir);
	write_file(p, tb, tl);
	free(tb);
	char name[16];
	eng_tensor *t = eng_onnx_tensor_load(ctx, p, 0, name, sizeof(name), err, sizeof(err));
	ck_assert_msg(t, "%s", err);
	ck_assert_str_eq(name, "w");
	float got[6];
	ck_assert_int_eq(eng_tensor_read(t, got, sizeof(got)), ENG_OK);
	ck_assert(!memcmp(got, wdata, sizeof(got)));
	eng_tensor_free(t);
	ck_assert_ptr_null(eng_onnx_tensor_load(ctx, dir, 0, NULL, 0, err, sizeof(err)));
	ck_assert_msg(strstr(err, "regular file"), "%s", err);
	unlink(p);
	ck_assert_ptr_null(eng_onnx_tensor_load(ctx, p, 0, NULL, 0, err, sizeof(err)));
	ck_assert_msg(strstr(err, "No such file"), "%s", err);
	rmdir(dir);
	tu_ctx_free(ctx);
}
END_TEST

/* A graph nested thousands deep through If branches (graph -> node -> attribute -> graph ...):
 * refused before protobuf-c would recurse that deep. */
START_TEST(test_deep_nesting)
{
	eng_ctx *ctx = tu_ctx_new();
	size_t cap = 1 << 20, len = 0;
	uint8_t *a = malloc(cap), *b = malloc(cap);
	ck_assert(a && b);
	for (int level = 0; level < 3000; level++) {
		/* wrap as: NodeProto.attribute (5) { AttributeProto.g (6) { GraphProto.node (1) { ... } } } */
		const int fields[3] = {1, 6, 5};
		for (int f = 0; f < 3; f++) {
			size_t k = 0;
			b[k++] = (uint8_t)(fields[f] << 3 | 2);
			size_t l = len;
			do {
				b[k++] = (uint8_t)((l & 0x7f) | (l > 0x7f ? 0x80 : 0));
				l >>= 7;
			} while (l);
			ck_assert(k + len <= cap);
			memcpy(b + k, a, len);
			len += k;
			uint8_t *t = a;
			a = b;
			b = t;
		}
	}
	/* ModelProto.graph (7) { GraphProto.node (1) { that } } */
	uint8_t *m = malloc(len + 32);
	size_t k = 0;
	m[k++] = 7 << 3 | 2;
	size_t inner = len + 1 + (len > 127 ? (len > 16383 ? 3 : 2) : 1), l = inner;
	do {
		m[k++] = (uint8_t)((l & 0x7f) | (l > 0x7f ? 0x80 : 0));
		l >>= 7;
	} while (l);
	m[k++] = 1 << 3 | 2;
	l = len;
	do {
		m[k++] = (uint8_t)((l & 0x7f) | (l > 0x7f ? 0x80 : 0));
		l >>= 7;
	} while (l);
	memcpy(m + k, a, len);
	char err[512];
	ck_assert_ptr_null(eng_onnx_load_mem(ctx, m, k + len, NULL, 0, err, sizeof(err)));
	ck_assert_msg(strstr(err, "nested"), "%s", err);
	free(a);
	free(b);
	free(m);
	tu_ctx_free(ctx);
}
END_TEST

/* If whose branches use a value computed by a node listed after it: the load orders the nodes
 * by the branches' implicit inputs too; the condition is an initializer (a constant). */
START_TEST(test_if_captures)
{
	eng_ctx *ctx = tu_ctx_new();
	mb b;
	mb_init(&b, 13);
	mb_input(&b, "x", 1, (int64_t[]){3});
	mb_output(&b, "z", 1, (int64_t[]){3});
	/* branches: then z_t = Relu(y), else z_e = Neg(y) */
	static char *br_in[] = {"y"}, *then_out[] = {"z_t"}, *else_out[] = {"z_e"};
	Onnx__NodeProto tn, en, *tnp[1] = {&tn}, *enp[1] = {&en};
	onnx__node_proto__init(&tn);
	onnx__node_proto__init(&en);
	tn.op_type = "Relu", tn.n_input = 1, tn.input = br_in, tn.n_output = 1, tn.output = then_out;
	en.op_type = "Neg", en.n_input = 1, en.input = br_in, en.n_output = 1, en.output = else_out;
	Onnx__GraphProto tg, eg;
	onnx__graph_proto__init(&tg);
	onnx__graph_proto__init(&eg);
	Onnx__ValueInfoProto tv, ev, *tvp[1] = {&tv}, *evp[1] = {&ev};
	onnx__value_info_proto__init(&tv);
	onnx__value_info_proto__init(&ev);
	tv.name = "z_t", ev.name = "z_e";
	tg.n_node = 1, tg.node = tnp, tg.n_output = 1, tg.output = tvp;
	eg.n_node = 1, eg.node = enp, eg.n_output = 1, eg.output = evp;
	Onnx__AttributeProto at, ae, *ap[2] = {&at, &ae};
	onnx__attribute_proto__init(&at);
	onnx__attribute_proto__init(&ae);
	at.name = "then_branch", at.has_type = 1, at.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH, at.g = &tg;
	ae.name = "else_branch", ae.has_type = 1, ae.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH, ae.g = &eg;
	static char *if_in[] = {"c"}, *if_out[] = {"z"}, *add_in2[] = {"x", "x"}, *add_out2[] = {"y"};
	Onnx__NodeProto *ifn = mb_node(&b, "If", 1, if_in, 1, if_out);
	ifn->n_attribute = 2;
	ifn->attribute = ap;
	mb_node(&b, "Add", 2, add_in2, 1, add_out2); /* after the If that uses y */
	Onnx__TensorProto *c = &b.inits[0];
	onnx__tensor_proto__init(c);
	static int32_t cv[1] = {1};
	c->name = "c", c->has_data_type = 1, c->data_type = 9, c->n_int32_data = 1, c->int32_data = cv;
	b.ip[0] = c;
	b.g.n_initializer = 1;
	char err[512];
	for (int cond = 1; cond >= 0; cond--) {
		cv[0] = cond;
		eng_onnx_model *m = load_mb(ctx, &b, NULL, err, sizeof(err));
		ck_assert_msg(m, "%s", err);
		float xv[3] = {-1, 0, 2}, out[3];
		eng_tensor *x = eng_from_data(ctx, ENG_F32, 1, (int64_t[]){3}, xv), *z = NULL;
		ck_assert_msg(eng_onnx_build(m, &x, &z, 0) == ENG_OK, "%s", eng_errmsg(ctx));
		ck_assert_int_eq(eng_tensor_read(z, out, sizeof(out)), ENG_OK);
		for (int i = 0; i < 3; i++)
			ck_assert_float_eq(out[i], cond ? (2 * xv[i] > 0 ? 2 * xv[i] : 0) : -2 * xv[i]);
		eng_onnx_free(m);
	}
	/* a branch using the If's own output: a cycle */
	static char *self_in[] = {"z"};
	tn.input = self_in;
	EXPECT_LOAD_FAIL(ctx, &b, NULL, "cycle");
	tu_ctx_free(ctx);
}
END_TEST

/* Einsum with an ellipsis (broadcast batch dims) against matmul. */
START_TEST(test_einsum_ellipsis)
{
	eng_ctx *ctx = tu_ctx_new();
	mb b;
	mb_init(&b, 13);
	mb_input(&b, "x", 3, (int64_t[]){2, 3, 4});
	mb_input(&b, "y", 2, (int64_t[]){4, 5});
	mb_output(&b, "z", 3, (int64_t[]){2, 3, 5});
	static char *ein[] = {"x", "y"}, *eout[] = {"z"};
	Onnx__NodeProto *nd = mb_node(&b, "Einsum", 2, ein, 1, eout);
	Onnx__AttributeProto at, *ap[1] = {&at};
	onnx__attribute_proto__init(&at);
	at.name = "equation", at.has_type = 1, at.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
	at.has_s = 1, at.s.data = (uint8_t *)"...ij, jk -> ...ik", at.s.len = strlen("...ij, jk -> ...ik");
	nd->n_attribute = 1, nd->attribute = ap;
	char err[512];
	eng_onnx_model *m = load_mb(ctx, &b, NULL, err, sizeof(err));
	ck_assert_msg(m, "%s", err);
	float xv[24], yv[20];
	for (int i = 0; i < 24; i++)
		xv[i] = (float)(i % 7) - 3;
	for (int i = 0; i < 20; i++)
		yv[i] = (float)(i % 5) * 0.5f;
	eng_tensor *in[2] = {eng_from_data(ctx, ENG_F32, 3, (int64_t[]){2, 3, 4}, xv), eng_from_data(ctx, ENG_F32, 2, (int64_t[]){4, 5}, yv)}, *z = NULL;
	ck_assert_msg(eng_onnx_build(m, in, &z, 0) == ENG_OK, "%s", eng_errmsg(ctx));
	float got[30], want[30];
	ck_assert_int_eq(eng_tensor_read(z, got, sizeof(got)), ENG_OK);
	ck_assert_int_eq(eng_tensor_read(eng_matmul(in[0], in[1]), want, sizeof(want)), ENG_OK);
	for (int i = 0; i < 30; i++)
		ck_assert_float_eq_tol(got[i], want[i], 1e-5);
	eng_onnx_free(m);
	tu_ctx_free(ctx);
}
END_TEST

/* LpPool (p = 2, 2x2 windows, stride 2) and GlobalLpPool against the definition (the node tests
 * of onnx 1.12 have none). */
START_TEST(test_lp_pool)
{
	eng_ctx *ctx = tu_ctx_new();
	for (int global = 0; global < 2; global++) {
		mb b;
		mb_init(&b, 13);
		mb_input(&b, "x", 4, (int64_t[]){1, 1, 2, 4});
		mb_output(&b, "y", 4, global ? (int64_t[]){1, 1, 1, 1} : (int64_t[]){1, 1, 1, 2});
		static char *pin[] = {"x"}, *pout[] = {"y"};
		Onnx__NodeProto *nd = mb_node(&b, global ? "GlobalLpPool" : "LpPool", 1, pin, 1, pout);
		Onnx__AttributeProto ks, st, *ap[2] = {&ks, &st};
		static int64_t two[2] = {2, 2};
		mb_attr_ints(&ks, "kernel_shape", two, 2);
		mb_attr_ints(&st, "strides", two, 2);
		if (!global)
			nd->n_attribute = 2, nd->attribute = ap;
		char err[512];
		eng_onnx_model *m = load_mb(ctx, &b, NULL, err, sizeof(err));
		ck_assert_msg(m, "%s", err);
		float xv[8] = {1, -2, 3, 4, -5, 6, 7, 8}, out[2];
		eng_tensor *x = eng_from_data(ctx, ENG_F32, 4, (int64_t[]){1, 1, 2, 4}, xv), *y = NULL;
		ck_assert_msg(eng_onnx_build(m, &x, &y, 0) == ENG_OK, "%s", eng_errmsg(ctx));
		ck_assert_int_eq(eng_tensor_read(y, out, sizeof(float) * (global ? 1 : 2)), ENG_OK);
		if (global)
			ck_assert_float_eq_tol(out[0], sqrtf(1 + 4 + 9 + 16 + 25 + 36 + 49 + 64), 1e-4);
		else {
			ck_assert_float_eq_tol(out[0], sqrtf(1 + 4 + 25 + 36), 1e-4);
			ck_assert_float_eq_tol(out[1], sqrtf(9 + 16 + 49 + 64), 1e-4);
		}
		eng_onnx_free(m);
	}
	tu_ctx_free(ctx);
}
END_TEST

/* GroupNormalization (opsets 18 and 21) and RMSNormalization against the definitions (onnx
 * 1.12's node tests have none). x (1, 4, 2): groups of 2 channels. */
START_TEST(test_group_rms_norm)
{
	eng_ctx *ctx = tu_ctx_new();
	float xv[8] = {1, 2, 3, 5, -1, 0, 4, 9}, sv[4] = {1, 2, 0.5f, -1}, bv[4] = {0, 1, -1, 2};
	for (int k = 0; k < 3; k++) {
		int opset = k == 0 ? 18 : k == 1 ? 21 : 23;
		bool rms = k == 2;
		int64_t np = rms ? 2 : opset == 18 ? 2 : 4;
		mb b;
		mb_init(&b, opset);
		mb_input(&b, "x", 3, (int64_t[]){1, 4, 2});
		mb_output(&b, "y", 3, (int64_t[]){1, 4, 2});
		static int64_t pd[1];
		pd[0] = np;
		mb_init_f32(&b, "s", 1, pd, sv, (size_t)np);
		mb_init_f32(&b, "b", 1, pd, bv, (size_t)np);
		static char *gin[] = {"x", "s", "b"}, *gout[] = {"y"};
		Onnx__NodeProto *nd = mb_node(&b, rms ? "RMSNormalization" : "GroupNormalization", rms ? 2 : 3, gin, 1, gout);
		Onnx__AttributeProto ng, *ap[1] = {&ng};
		onnx__attribute_proto__init(&ng);
		ng.name = "num_groups", ng.has_type = 1, ng.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, ng.has_i = 1, ng.i = 2;
		if (!rms)
			nd->n_attribute = 1, nd->attribute = ap;
		char err[512];
		eng_onnx_model *m = load_mb(ctx, &b, NULL, err, sizeof(err));
		ck_assert_msg(m, "%s", err);
		eng_tensor *x = eng_from_data(ctx, ENG_F32, 3, (int64_t[]){1, 4, 2}, xv), *y = NULL;
		ck_assert_msg(eng_onnx_build(m, &x, &y, 0) == ENG_OK, "%s", eng_errmsg(ctx));
		float out[8];
		ck_assert_int_eq(eng_tensor_read(y, out, sizeof(out)), ENG_OK);
		for (int c = 0; c < 4; c++)
			for (int j = 0; j < 2; j++) {
				double want;
				if (rms) { /* over the last axis (2 values), scale by position */
					double ms = (xv[c * 2] * xv[c * 2] + xv[c * 2 + 1] * xv[c * 2 + 1]) / 2;
					want = xv[c * 2 + j] / sqrt(ms + 1e-5) * sv[j];
				} else {
					int g = c / 2;
					double mean = 0, var = 0;
					for (int i = 0; i < 4; i++)
						mean += xv[g * 4 + i] / 4.0;
					for (int i = 0; i < 4; i++)
						var += (xv[g * 4 + i] - mean) * (xv[g * 4 + i] - mean) / 4.0;
					int p = opset == 18 ? g : c;
					want = (xv[c * 2 + j] - mean) / sqrt(var + 1e-5) * sv[p] + bv[p];
				}
				ck_assert_msg(fabs(out[c * 2 + j] - want) < 1e-4, "opset %d at %d: %g, want %g", opset, c * 2 + j, out[c * 2 + j], want);
			}
		eng_onnx_free(m);
	}
	tu_ctx_free(ctx);
}
END_TEST

/* Constant folding: y = x + Transpose(w), w an initializer: the first build computes the
 * transpose (its own kernel), later builds reuse it: one kernel each, the same values. */
START_TEST(test_constant_folding)
{
	eng_ctx *ctx = tu_ctx_new();
	mb b;
	mb_init(&b, 13);
	static char *tin[] = {"w"}, *tout[] = {"wt"}, *ain[] = {"x", "wt"}, *aout[] = {"y"};
	mb_input(&b, "x", 2, (int64_t[]){3, 2});
	mb_output(&b, "y", 2, (int64_t[]){3, 2});
	mb_init_f32(&b, "w", 2, wdims, wdata, 6);
	mb_node(&b, "Transpose", 1, tin, 1, tout);
	mb_node(&b, "Add", 2, ain, 1, aout);
	eng_onnx_model *m = load_mb_ok(ctx, &b);
	float xv[6] = {10, 20, 30, 40, 50, 60}, want[6] = {11, 24, 32, 45, 53, 66}, out[6];
	eng_tensor *x = eng_from_data(ctx, ENG_F32, 2, (int64_t[]){3, 2}, xv);
	for (int build = 0; build < 3; build++) {
		eng_stats a, c;
		eng_tensor *y = NULL;
		eng_get_stats(ctx, &a);
		ck_assert_int_eq(eng_onnx_build(m, &x, &y, 0), ENG_OK);
		ck_assert_int_eq(eng_tensor_read(y, out, sizeof(out)), ENG_OK);
		eng_get_stats(ctx, &c);
		for (int i = 0; i < 6; i++)
			ck_assert_float_eq(out[i], want[i]);
		ck_assert_int_eq((int)(c.kernels - a.kernels), build ? 1 : 2);
		eng_tensor_free(y);
	}
	eng_onnx_free(m);
	tu_ctx_free(ctx);
}
END_TEST

/* A 1-D Conv with a constant weight on a short input runs as one matmul by a dense weight
 * (ops_conv.c): x (2, 3, 4), W (5, 3, 3) and B initializers, pads 1, stride 2, against the
 * definition, on two builds (the second takes the kept dense weight). */
START_TEST(test_conv1d_dense)
{
	eng_ctx *ctx = tu_ctx_new();
	mb b;
	mb_init(&b, 13);
	static char *cin[] = {"x", "W", "B"}, *cout[] = {"y"};
	static int64_t wd[] = {5, 3, 3}, bd[] = {5};
	static float wv[45], bv[5];
	for (int i = 0; i < 45; i++)
		wv[i] = (float)((i * 7 % 11) - 5) / 4;
	for (int i = 0; i < 5; i++)
		bv[i] = (float)i - 2;
	mb_input(&b, "x", 3, (int64_t[]){2, 3, 4});
	mb_output(&b, "y", 3, (int64_t[]){2, 5, 2});
	mb_init_f32(&b, "W", 3, wd, wv, 45);
	mb_init_f32(&b, "B", 1, bd, bv, 5);
	Onnx__NodeProto *nd = mb_node(&b, "Conv", 3, cin, 1, cout);
	Onnx__AttributeProto pa, st, *ap[2] = {&pa, &st};
	static int64_t pads[2] = {1, 1}, two[1] = {2};
	mb_attr_ints(&pa, "pads", pads, 2);
	mb_attr_ints(&st, "strides", two, 1);
	nd->n_attribute = 2, nd->attribute = ap;
	eng_onnx_model *m = load_mb_ok(ctx, &b);
	float xv[24], out[20];
	for (int i = 0; i < 24; i++)
		xv[i] = (float)((i * 5 % 13) - 6) / 3;
	eng_tensor *x = eng_from_data(ctx, ENG_F32, 3, (int64_t[]){2, 3, 4}, xv);
	for (int build = 0; build < 2; build++) {
		eng_tensor *y = NULL;
		ck_assert_msg(eng_onnx_build(m, &x, &y, 0) == ENG_OK, "%s", eng_errmsg(ctx));
		ck_assert_int_eq(eng_tensor_read(y, out, sizeof(out)), ENG_OK);
		for (int n = 0; n < 2; n++)
			for (int o = 0; o < 5; o++)
				for (int l = 0; l < 2; l++) {
					float want = bv[o];
					for (int c = 0; c < 3; c++)
						for (int k = 0; k < 3; k++) {
							int at = l * 2 - 1 + k;
							if (at >= 0 && at < 4)
								want += wv[(o * 3 + c) * 3 + k] * xv[(n * 3 + c) * 4 + at];
						}
					ck_assert_float_eq_tol(out[(n * 5 + o) * 2 + l], want, 1e-4);
				}
		eng_tensor_free(y);
	}
	eng_onnx_free(m);
	tu_ctx_free(ctx);
}
END_TEST

/* A 2-D Conv striding along the width runs over the input split into column phases
 * (ops_conv.c): x (2, 3, 5, 32), pads 1, a full convolution with strides (2, 2) and a depthwise
 * one with strides (1, 3) and a 3x5 kernel, against the definition. */
START_TEST(test_conv_width_phases)
{
	eng_ctx *ctx = tu_ctx_new();
	enum { N = 2, C = 3, H = 5, W = 32 };
	static float xv[N * C * H * W], wv[4 * 3 * 3 * 5], bv[4] = {0.5f, -1, 2, 0};
	for (int i = 0; i < N * C * H * W; i++)
		xv[i] = (float)((i * 7 % 17) - 8) / 5;
	for (int i = 0; i < 4 * 3 * 3 * 5; i++)
		wv[i] = (float)((i * 5 % 11) - 5) / 4;
	for (int cfg = 0; cfg < 2; cfg++) {
		int64_t M = cfg ? 3 : 4, cg = cfg ? 1 : 3, KH = 3, KW = cfg ? 5 : 3, sy = cfg ? 1 : 2, sx = cfg ? 3 : 2;
		int64_t OH = (H + 2 - KH) / sy + 1, OW = (W + 2 - KW) / sx + 1;
		static int64_t wd[4], bd[1], pads[4] = {1, 1, 1, 1}, strides[2], group[1];
		wd[0] = M, wd[1] = cg, wd[2] = KH, wd[3] = KW, bd[0] = M, strides[0] = sy, strides[1] = sx, group[0] = C / cg;
		mb b;
		mb_init(&b, 13);
		static char *cin[] = {"x", "W", "B"}, *cout[] = {"y"};
		mb_input(&b, "x", 4, (int64_t[]){N, C, H, W});
		mb_output(&b, "y", 4, (int64_t[]){N, M, OH, OW});
		mb_init_f32(&b, "W", 4, wd, wv, (size_t)(M * cg * KH * KW));
		mb_init_f32(&b, "B", 1, bd, bv, (size_t)M);
		Onnx__NodeProto *nd = mb_node(&b, "Conv", 3, cin, 1, cout);
		Onnx__AttributeProto pa, st, gr, *ap[3] = {&pa, &st, &gr};
		mb_attr_ints(&pa, "pads", pads, 4);
		mb_attr_ints(&st, "strides", strides, 2);
		mb_attr_ints(&gr, "group", group, 0);
		nd->n_attribute = 3, nd->attribute = ap;
		eng_onnx_model *m = load_mb_ok(ctx, &b);
		eng_tensor *x = eng_from_data(ctx, ENG_F32, 4, (int64_t[]){N, C, H, W}, xv), *y = NULL;
		ck_assert_msg(eng_onnx_build(m, &x, &y, 0) == ENG_OK, "%s", eng_errmsg(ctx));
		float *out = malloc(sizeof(float) * (size_t)(N * M * OH * OW));
		ck_assert_int_eq(eng_tensor_read(y, out, sizeof(float) * (size_t)(N * M * OH * OW)), ENG_OK);
		for (int64_t i = 0; i < N * M * OH * OW; i++) {
			int64_t ox = i % OW, oy = i / OW % OH, o = i / (OW * OH) % M, nn = i / (OW * OH * M);
			float want = bv[o];
			for (int64_t c = 0; c < cg; c++)
				for (int64_t ky = 0; ky < KH; ky++)
					for (int64_t kx = 0; kx < KW; kx++) {
						int64_t iy = oy * sy - 1 + ky, ix = ox * sx - 1 + kx, ic = o / (M / (C / cg)) * cg + c;
						if (iy >= 0 && iy < H && ix >= 0 && ix < W)
							want += wv[((o * cg + c) * KH + ky) * KW + kx] * xv[((nn * C + ic) * H + iy) * W + ix];
					}
			ck_assert_msg(fabsf(out[i] - want) < 1e-4f, "cfg %d at %lld: %g, want %g", cfg, (long long)i, out[i], want);
		}
		free(out);
		eng_tensor_free(y);
		eng_onnx_free(m);
	}
	tu_ctx_free(ctx);
}
END_TEST

/* Gather with constant indices (slices of x): negative indices count from the end; one out of
 * range is an error, not a wrong answer. */
START_TEST(test_gather_const_indices)
{
	eng_ctx *ctx = tu_ctx_new();
	for (int bad = 0; bad < 2; bad++) {
		mb b;
		mb_init(&b, 13);
		static char *gin[] = {"x", "i"}, *gout[] = {"y"};
		static int64_t idims[] = {2}, ok_idx[2] = {-1, 0}, bad_idx[2] = {0, 3};
		mb_input(&b, "x", 2, (int64_t[]){3, 2});
		mb_output(&b, "y", 2, (int64_t[]){2, 2});
		mb_init_i64(&b, "i", 1, idims, bad ? bad_idx : ok_idx, 2);
		mb_node(&b, "Gather", 2, gin, 1, gout);
		eng_onnx_model *m = load_mb_ok(ctx, &b);
		float xv[6] = {1, 2, 3, 4, 5, 6}, out[4];
		eng_tensor *x = eng_from_data(ctx, ENG_F32, 2, (int64_t[]){3, 2}, xv), *y = NULL;
		if (bad) {
			ck_assert_int_eq(eng_onnx_build(m, &x, &y, 0), ENG_EINVAL);
			ck_assert_msg(strstr(eng_errmsg(ctx), "out of range"), "%s", eng_errmsg(ctx));
			eng_clear_error(ctx);
		} else {
			ck_assert_msg(eng_onnx_build(m, &x, &y, 0) == ENG_OK, "%s", eng_errmsg(ctx));
			ck_assert_int_eq(eng_tensor_read(y, out, sizeof(out)), ENG_OK);
			float want[4] = {5, 6, 1, 2};
			for (int i = 0; i < 4; i++)
				ck_assert_float_eq(out[i], want[i]);
		}
		eng_onnx_free(m);
	}
	tu_ctx_free(ctx);
}
END_TEST

Suite *onnx_suite(void)
{
	const TTest *const tests[] = {
		test_add_end_to_end, test_unsupported_is_an_error, test_build_time_values, test_unread_input_refused, test_narrow_ints_wrap, test_bitcast_narrow, test_truncated_and_garbage,
		test_unknown_fields_skipped, test_cycle_and_undefined, test_sizes_disagree, test_external_data_confined,
		test_load_file, test_deep_nesting, test_if_captures, test_einsum_ellipsis, test_lp_pool,
		test_group_rms_norm, test_constant_folding, test_conv1d_dense, test_gather_const_indices,
		test_conv_width_phases,
	};
	return tu_suite("onnx", tests, (int)(sizeof(tests) / sizeof(tests[0])), TU_TIMEOUT);
}
