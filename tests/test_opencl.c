/* test_opencl.c: the OpenCL backend on the first OpenCL device (PoCL on the build machines):
 * listing, memory, hand-written kernels, build errors, binaries, the failed state, and the
 * engine's own kernels rendered as OpenCL C giving the CPU backend's results. Without OpenCL
 * every test prints "opencl: SKIPPED (reason)" and passes. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/ocl/ocl.h"
#include "backends/registry.h"
#include "renderer/cstyle.h"
#include "schedule/schedule.h"
#include "util/strbuf.h"
#include "testutil.h"

static void skip(const char *why) { fprintf(stderr, "opencl: SKIPPED (%s)\n", why); }

/* CL:0 opened with opts (may be NULL), or false after printing why it is skipped (no library,
 * no device: nothing else). */
static bool ocl_device_opts(int debug, const bk_opts *opts, bk_device *dev)
{
	bk_err err;
	bk_target tg;
	eng_status s = bk_backend_find("CL")->open(0, opts, debug, dev, &err);
	if (s == ENG_ENOTFOUND) {
		skip(err.msg);
		return false;
	}
	ck_assert_msg(s == ENG_OK, "CL open: %s", err.msg);
	ck_assert_msg(bk_device_check(dev, &tg, &err) == ENG_OK, "%s", err.msg);
	return true;
}

static bool ocl_device(int debug, bk_device *dev) { return ocl_device_opts(debug, NULL, dev); }

static const char KSRC_AXPY[] =
	"__kernel void tk_axpy(__global float *restrict b0, __global const float *restrict b1, long start, long end)\n"
	"{\n  const long i = start + (long)get_global_id(0);\n  if (i < end) b0[i] = 2.0f * b1[i] + 1.0f;\n}\n";
static const char KSRC_SQ[] =
	"__kernel void tk_sq(__global float *restrict b0, __global const float *restrict b1, long start, long end)\n"
	"{\n  const long i = start + (long)get_global_id(0);\n  if (i < end) b0[i] = b1[i] * b1[i];\n}\n";

static float axpy_ref(float x) { return 2.0f * x + 1.0f; }
static float sq_ref(float x) { return x * x; }

/* Run a (b0 out, b1 in) kernel over 1000 elements of buffers holding 1003: the 3 past the end
 * must stay untouched (the kernel guards the rounded-up tail). */
static void run_unary(bk_device *dev, bk_program *p, float (*ref)(float))
{
	enum { N = 1000, CAP = 1003 };
	float in[CAP], out[CAP];
	void *h[2];
	bk_err err;
	for (int i = 0; i < CAP; i++) {
		in[i] = (float)(i % 37) * 0.25f - 3.0f;
		out[i] = -7.0f;
	}
	for (int k = 0; k < 2; k++)
		ck_assert_msg(dev->ops->alloc(dev->ctx, sizeof(in), &h[k], &err) == ENG_OK, "%s", err.msg);
	ck_assert_int_eq(dev->ops->copy_in(dev->ctx, h[0], 0, out, sizeof(out), &err), ENG_OK);
	ck_assert_int_eq(dev->ops->copy_in(dev->ctx, h[1], 0, in, sizeof(in), &err), ENG_OK);
	bk_launch l = {.nparallel = N, .cost = N};
	ck_assert_msg(dev->ops->launch(dev->ctx, p, h, 2, &l, &err) == ENG_OK, "%s", err.msg);
	ck_assert_msg(dev->ops->synchronize(dev->ctx, &err) == ENG_OK, "%s", err.msg);
	ck_assert_int_eq(dev->ops->copy_out(dev->ctx, h[0], 0, out, sizeof(out), &err), ENG_OK);
	for (int i = 0; i < CAP; i++)
		ck_assert_msg(out[i] == (i < N ? ref(in[i]) : -7.0f), "element %d: %g", i, out[i]);
	for (int k = 0; k < 2; k++)
		dev->ops->free(dev->ctx, h[k]);
}

START_TEST(test_list_devices)
{
	char out[16384], tiny[8];
	int n = 0;
	bk_err err;
	eng_status s = ocl_list(out, sizeof(out), &n, &err);
	if (s == ENG_ENOTFOUND) {
		skip(err.msg);
		return;
	}
	ck_assert_msg(s == ENG_OK, "%s", err.msg);
	ck_assert_int_gt(n, 0);
	ck_assert_msg(!strncmp(out, "CL:0 ", 5) && strstr(out, "compute units") && strstr(out, "fp16"), "%s", out);
	int lines = 0;
	for (const char *c = out; *c; c++)
		lines += *c == '\n';
	ck_assert_int_eq(lines, n);
	ck_assert_int_eq(ocl_list(tiny, sizeof(tiny), NULL, &err), ENG_OK);
	ck_assert_uint_eq(strlen(tiny), sizeof(tiny) - 1);
	/* the listing names the device CL:0 opens (whose cache identity names it too) */
	bk_device dev;
	ck_assert(ocl_device(0, &dev));
	const char *id = dev.ops->cache_id(dev.ctx), *p = strstr(id, " device="), *q = p ? strstr(p, " driver=") : NULL;
	ck_assert_msg(p && q, "%s", id);
	char name[256];
	snprintf(name, sizeof(name), "%.*s", (int)(q - p - 8), p + 8);
	ck_assert_msg(strlen(name) > 0 && strstr(out, name), "'%s' not in %s", name, out);
	dev.ops->destroy(dev.ctx);
	/* a device past the last is a clean error */
	ck_assert_int_eq(bk_backend_find("CL")->open(n, NULL, 0, &dev, &err), ENG_ENOTFOUND);
	ck_assert_msg(strstr(err.msg, "CL:") != NULL, "%s", err.msg);
	ck_assert_int_eq(bk_backend_find("CL")->open(-1, NULL, 0, &dev, &err), ENG_EINVAL);
}
END_TEST

START_TEST(test_memory_round_trip)
{
	bk_device dev;
	if (!ocl_device(0, &dev))
		return;
	bk_err err;
	unsigned char a[4096], b[50], got[200];
	for (int i = 0; i < 4096; i++)
		a[i] = (unsigned char)(i * 7);
	for (int i = 0; i < 50; i++)
		b[i] = (unsigned char)(200 + i);
	void *h, *empty;
	ck_assert_msg(dev.ops->alloc(dev.ctx, sizeof(a), &h, &err) == ENG_OK, "%s", err.msg);
	ck_assert_int_eq(dev.ops->copy_in(dev.ctx, h, 0, a, sizeof(a), &err), ENG_OK);
	ck_assert_int_eq(dev.ops->copy_in(dev.ctx, h, 100, b, sizeof(b), &err), ENG_OK);
	ck_assert_int_eq(dev.ops->copy_out(dev.ctx, h, 90, got, sizeof(got), &err), ENG_OK);
	for (int i = 0; i < 200; i++) {
		int at = 90 + i;
		unsigned char want = at >= 100 && at < 150 ? b[at - 100] : a[at];
		ck_assert_msg(got[i] == want, "byte %d: %u, want %u", at, got[i], want);
	}
	/* empty buffers and copies are fine */
	ck_assert_int_eq(dev.ops->alloc(dev.ctx, 0, &empty, &err), ENG_OK);
	ck_assert_int_eq(dev.ops->copy_in(dev.ctx, empty, 0, a, 0, &err), ENG_OK);
	ck_assert_int_eq(dev.ops->copy_out(dev.ctx, empty, 0, got, 0, &err), ENG_OK);
	dev.ops->free(dev.ctx, empty);
	/* too large is ENOMEM with a message, and the device keeps working */
	void *huge = NULL;
	ck_assert_int_eq(dev.ops->alloc(dev.ctx, (size_t)1 << 62, &huge, &err), ENG_ENOMEM);
	ck_assert_msg(strstr(err.msg, "bytes") != NULL, "%s", err.msg);
	ck_assert_int_eq(dev.ops->copy_out(dev.ctx, h, 0, got, 10, &err), ENG_OK);
	ck_assert(memcmp(got, a, 10) == 0);
	dev.ops->free(dev.ctx, h);
	dev.ops->destroy(dev.ctx);
}
END_TEST

/* The prelude's helpers, called from a hand-written kernel, against C on the host. */
static const char KSRC_HELPERS[] =
	"__kernel void tk_helpers(__global int *restrict b0, __global float *restrict b1, __global const int *restrict b2,\n"
	"                         __global const float *restrict b3, long start, long end)\n"
	"{\n  const long i = start + (long)get_global_id(0);\n  if (i >= end) return;\n"
	"  b0[i] = i < 4 ? eng_idiv_int32_t(b2[i], b2[i + 4]) : i < 8 ? eng_mod_int32_t(b2[i - 4], b2[i])\n"
	"         : i < 12 ? eng_f2i_int32_t(b3[i]) : (int)eng_f2i_uint8_t(b3[i]);\n"
	"  b1[i] = eng_f16r(b3[i]);\n}\n";

START_TEST(test_handwritten_kernels)
{
	bk_device dev;
	if (!ocl_device(2, &dev)) /* DEBUG=2: launches are timed on the device */
		return;
	bk_err err;
	const char *srcs[3] = {KSRC_AXPY, KSRC_SQ, KSRC_HELPERS}, *names[3] = {"tk_axpy", "tk_sq", "tk_helpers"};
	bk_program *p[3];
	ck_assert_msg(dev.ops->compile(dev.ctx, srcs, 3, names, p, &err) == ENG_OK, "%s", err.msg);
	run_unary(&dev, p[0], axpy_ref);
	run_unary(&dev, p[1], sq_ref);
	/* the buffers and (start, end) are the arguments: a wrong count is refused */
	bk_launch l = {.nparallel = 4};
	void *h[4] = {0};
	ck_assert_int_eq(dev.ops->launch(dev.ctx, p[0], h, 1, &l, &err), ENG_EINVAL);
	ck_assert_msg(strstr(err.msg, "tk_axpy") != NULL, "%s", err.msg);

	/* tk_helpers: b0[0..4) = ints[i] / ints[i + 4], b0[4..8) = ints[i - 4] % ints[i], then float to
	 * int32 and to uint8 casts of fin[8..16); b1 = fin rounded to float16 precision */
	enum { N = 16 };
	int32_t ints[N] = {7, -7, INT32_MIN, 5, 0, 2, -1, 3}, iout[N];
	const int32_t want[N] = {0, -3, INT32_MIN, 1, 0, -1, 0, 2, 0, INT32_MAX, INT32_MIN, -2, 255, 0, 17, 0};
	float fin[N] = {1.0f + 0x1p-11f, 1.0f + 0x1p-10f, 65520.0f, 65519.0f, 1e-8f, 3e-8f, -0.1f, 1.0f / 3.0f,
			NAN, 3e9f, -3e9f, -2.7f, 300.0f, -5.0f, 17.9f, NAN},
	      fout[N];
	for (int k = 0; k < 4; k++)
		ck_assert_int_eq(dev.ops->alloc(dev.ctx, N * 4, &h[k], &err), ENG_OK);
	ck_assert_int_eq(dev.ops->copy_in(dev.ctx, h[2], 0, ints, sizeof(ints), &err), ENG_OK);
	ck_assert_int_eq(dev.ops->copy_in(dev.ctx, h[3], 0, fin, sizeof(fin), &err), ENG_OK);
	l.nparallel = N;
	ck_assert_msg(dev.ops->launch(dev.ctx, p[2], h, 4, &l, &err) == ENG_OK, "%s", err.msg);
	ck_assert_int_eq(dev.ops->synchronize(dev.ctx, &err), ENG_OK);
	ck_assert_int_eq(dev.ops->copy_out(dev.ctx, h[0], 0, iout, sizeof(iout), &err), ENG_OK);
	ck_assert_int_eq(dev.ops->copy_out(dev.ctx, h[1], 0, fout, sizeof(fout), &err), ENG_OK);
	for (int i = 0; i < N; i++) {
		ck_assert_msg(iout[i] == want[i], "helper %d: %d, want %d", i, iout[i], want[i]);
		float f16 = (float)eng_f16_round(fin[i]); /* the CPU renderer's rounding */
		ck_assert_msg((isnan(f16) && isnan(fout[i])) || f16 == fout[i], "f16 round of %a: %a, want %a", fin[i],
			      fout[i], f16);
	}
	for (int k = 0; k < 4; k++)
		dev.ops->free(dev.ctx, h[k]);
	for (int k = 0; k < 3; k++)
		dev.ops->program_free(dev.ctx, p[k]);
	dev.ops->destroy(dev.ctx);
}
END_TEST

START_TEST(test_build_errors)
{
	bk_device dev;
	if (!ocl_device(0, &dev))
		return;
	bk_err err;
	static const char bad[] = "__kernel void tk_bad(__global float *b0, long start, long end)\n"
				  "{\n  b0[0] = nonsense_token;\n}\n";
	const char *srcs[2] = {KSRC_AXPY, bad}, *names[2] = {"tk_axpy", "tk_bad"};
	bk_program *p[2] = {(bk_program *)1, (bk_program *)1};
	/* the whole batch fails, with the build log */
	ck_assert_int_eq(dev.ops->compile(dev.ctx, srcs, 2, names, p, &err), ENG_ECOMPILE);
	ck_assert_ptr_null(p[0]);
	ck_assert_ptr_null(p[1]);
	ck_assert_msg(strstr(err.msg, "nonsense_token") && strstr(err.msg, "CL_BUILD_PROGRAM_FAILURE"), "%s", err.msg);
	/* a program that builds but lacks a named kernel */
	const char *good[2] = {KSRC_AXPY, KSRC_SQ}, *missing[2] = {"tk_axpy", "tk_missing"};
	ck_assert_int_eq(dev.ops->compile(dev.ctx, good, 2, missing, p, &err), ENG_ECOMPILE);
	ck_assert_ptr_null(p[0]);
	ck_assert_msg(strstr(err.msg, "tk_missing") && strstr(err.msg, "CL_INVALID_KERNEL_NAME"), "%s", err.msg);
	/* neither is a device failure */
	ck_assert_msg(dev.ops->compile(dev.ctx, srcs, 1, names, p, &err) == ENG_OK, "%s", err.msg);
	run_unary(&dev, p[0], axpy_ref);
	dev.ops->program_free(dev.ctx, p[0]);
	dev.ops->destroy(dev.ctx);
}
END_TEST

START_TEST(test_blob_load_round_trip)
{
	bk_device dev, other;
	if (!ocl_device(0, &dev))
		return;
	ck_assert(ocl_device(0, &other));
	bk_err err;
	const char *id = dev.ops->cache_id(dev.ctx);
	ck_assert_ptr_eq(dev.ops->cache_id(dev.ctx), id);
	ck_assert_str_eq(other.ops->cache_id(other.ctx), id);
	ck_assert_msg(strstr(id, "cl-abi") && strstr(id, "platform=") && strstr(id, "prelude="), "%s", id);
	other.ops->destroy(other.ctx);

	const char *srcs[2] = {KSRC_AXPY, KSRC_SQ}, *names[2] = {"tk_axpy", "tk_sq"};
	bk_program *progs[2], *loaded[2];
	ck_assert_msg(dev.ops->compile(dev.ctx, srcs, 2, names, progs, &err) == ENG_OK, "%s", err.msg);
	const void *blob, *blob2;
	size_t n, n2;
	const char *sym;
	ck_assert_msg(dev.ops->program_blob(dev.ctx, progs[0], &blob, &n, &sym, &err) == ENG_OK, "%s", err.msg);
	ck_assert_str_eq(sym, "tk_axpy");
	ck_assert_uint_gt(n, 0);
	/* one module for the batch: the same bytes for both kernels (stored once on disk) */
	ck_assert_int_eq(dev.ops->program_blob(dev.ctx, progs[1], &blob2, &n2, &sym, &err), ENG_OK);
	ck_assert_ptr_eq(blob2, blob);
	ck_assert_str_eq(sym, "tk_sq");
	void *copy = malloc(n);
	ck_assert(copy != NULL);
	memcpy(copy, blob, n);
	/* the originals may go first */
	dev.ops->program_free(dev.ctx, progs[0]);
	dev.ops->program_free(dev.ctx, progs[1]);
	ck_assert_msg(dev.ops->load(dev.ctx, copy, n, names, 2, loaded, &err) == ENG_OK, "%s", err.msg);
	run_unary(&dev, loaded[0], axpy_ref);
	run_unary(&dev, loaded[1], sq_ref);
	/* a loaded program's blob is what it was loaded from */
	ck_assert_int_eq(dev.ops->program_blob(dev.ctx, loaded[1], &blob2, &n2, &sym, &err), ENG_OK);
	ck_assert_uint_eq(n2, n);
	ck_assert(memcmp(blob2, copy, n) == 0);
	/* a module without the named kernel, garbage and nothing are errors, not crashes */
	const char *two[2] = {"tk_axpy", "tk_missing"};
	bk_program *q[2] = {(bk_program *)1, (bk_program *)1};
	ck_assert_int_eq(dev.ops->load(dev.ctx, copy, n, two, 2, q, &err), ENG_ECOMPILE);
	ck_assert_ptr_null(q[0]);
	ck_assert_ptr_null(q[1]);
	ck_assert_msg(strstr(err.msg, "tk_missing") != NULL, "%s", err.msg);
	static const char junk[] = "this is not an OpenCL program binary";
	ck_assert_int_ne(dev.ops->load(dev.ctx, junk, sizeof(junk), names, 1, q, &err), ENG_OK);
	ck_assert_ptr_null(q[0]);
	ck_assert_int_ne(dev.ops->load(dev.ctx, "", 0, names, 1, q, &err), ENG_OK);
	free(copy);
	dev.ops->program_free(dev.ctx, loaded[0]);
	dev.ops->program_free(dev.ctx, loaded[1]);
	dev.ops->destroy(dev.ctx);
}
END_TEST

START_TEST(test_error_mapping_and_failed_device)
{
	bk_device dev;
	if (!ocl_device(0, &dev))
		return;
	bk_err err;
	ocl_dev *d = dev.ctx;
	char nb[32];
	ck_assert_str_eq(ocl_errname(CL_INVALID_KERNEL_ARGS, nb, sizeof(nb)), "CL_INVALID_KERNEL_ARGS");
	ck_assert_str_eq(ocl_errname(-9999, nb, sizeof(nb)), "CL error -9999");
	/* recoverable errors leave the device usable */
	ck_assert_int_eq(ocl_fail(d, CL_MEM_OBJECT_ALLOCATION_FAILURE, "clCreateBuffer", &err), ENG_ENOMEM);
	ck_assert_str_eq(err.msg, "clCreateBuffer: CL_MEM_OBJECT_ALLOCATION_FAILURE");
	ck_assert_int_eq(ocl_fail(d, CL_BUILD_PROGRAM_FAILURE, "x", &err), ENG_ECOMPILE);
	ck_assert_int_eq(ocl_fail(d, CL_INVALID_VALUE, "x", &err), ENG_EDEVICE);
	void *h;
	ck_assert_int_eq(dev.ops->alloc(dev.ctx, 64, &h, &err), ENG_OK);
	/* out of resources (a faulting kernel on many drivers): every later call is EDEVICE */
	ck_assert_int_eq(ocl_fail(d, CL_OUT_OF_RESOURCES, "clFinish", &err), ENG_ENOMEM);
	void *h2 = NULL;
	ck_assert_int_eq(dev.ops->alloc(dev.ctx, 64, &h2, &err), ENG_EDEVICE);
	ck_assert_msg(strstr(err.msg, "failed earlier") && strstr(err.msg, "clFinish: CL_OUT_OF_RESOURCES"), "%s", err.msg);
	char byte = 0;
	ck_assert_int_eq(dev.ops->copy_in(dev.ctx, h, 0, &byte, 1, &err), ENG_EDEVICE);
	ck_assert_int_eq(dev.ops->synchronize(dev.ctx, &err), ENG_EDEVICE);
	const char *src = KSRC_AXPY, *name = "tk_axpy";
	bk_program *p;
	ck_assert_int_eq(dev.ops->compile(dev.ctx, &src, 1, &name, &p, &err), ENG_EDEVICE);
	/* freeing still works */
	dev.ops->free(dev.ctx, h);
	dev.ops->destroy(dev.ctx);
}
END_TEST

/* ---- the engine's kernels on OpenCL against the CPU backend ----------------------------- */

/* The OpenCL buffer of each graph node a schedule touches. */
typedef struct clbufs {
	const eng_node *node[256];
	void *mem[256];
	bool owned[256];
	int n;
} clbufs;

static void *ocl_buffer(bk_device *dev, clbufs *m, const eng_node *node, bool output)
{
	for (int i = 0; i < m->n; i++)
		if (m->node[i] == node)
			return m->mem[i];
	ck_assert_int_lt(m->n, 256);
	bk_err err;
	void *h;
	bool owned = true;
	if (output && node->op == ENG_OP_ASSIGN) { /* writes into its target's buffer, in place */
		h = ocl_buffer(dev, m, node->src[0], false);
		owned = false;
	} else {
		size_t nbytes = (size_t)eng_node_numel(node) * eng_dtype_size(node->dtype);
		ck_assert_msg(dev->ops->alloc(dev->ctx, nbytes, &h, &err) == ENG_OK, "%s", err.msg);
		if (!output) { /* an input: the CPU context's realized buffer, copied over */
			ck_assert_msg(node->buf != NULL, "input %%%u has no buffer", node->id);
			void *host = malloc(nbytes ? nbytes : 1);
			ck_assert(host != NULL);
			ck_assert_int_eq(eng_buffer_read(node->buf, host, nbytes), ENG_OK);
			ck_assert_int_eq(dev->ops->copy_in(dev->ctx, h, 0, host, nbytes, &err), ENG_OK);
			free(host);
		}
	}
	m->node[m->n] = node;
	m->mem[m->n] = h;
	m->owned[m->n++] = owned;
	return h;
}

/* Schedule t's graph with the engine, render every kernel with the OpenCL dialect, build them
 * as one batch, run them in order on dev and return t's bytes (caller frees). The kernels'
 * sources are appended to sources (may be NULL). */
static void *run_on_cl(bk_device *dev, eng_tensor *t, eng_strbuf *sources)
{
	ck_assert_msg(t != NULL, "graph build failed");
	eng_ctx *ctx = eng_tensor_ctx(t);
	eng_node *root = eng_tensor_node(t);
	eng_schedule sch;
	bk_err err;
	bk_target bt;
	ck_assert_msg(bk_device_check(dev, &bt, &err) == ENG_OK, "%s", err.msg);
	ck_assert_msg(eng_schedule_build_on(ctx, &bt, &root, 1, &sch) == ENG_OK, "%s", eng_errmsg(ctx));
	ck_assert_int_gt(sch.n, 0);
	char **srcs = calloc(sch.n, sizeof(char *)), (*names)[32] = calloc(sch.n, sizeof(*names));
	const char **cs = calloc(sch.n, sizeof(char *)), **cn = calloc(sch.n, sizeof(char *));
	bk_program **progs = calloc(sch.n, sizeof(bk_program *));
	ck_assert(srcs && names && cs && cn && progs);
	for (int i = 0; i < sch.n; i++) {
		eng_strbuf sb;
		eng_strbuf_init(&sb);
		snprintf(names[i], sizeof(names[i]), "tk_graph%d", i);
		ck_assert_int_eq(eng_render_cstyle(&bt, &sch.items[i].ir, names[i], &sb), ENG_OK);
		cs[i] = srcs[i] = eng_strbuf_take(&sb);
		cn[i] = names[i];
		if (sources)
			eng_strbuf_puts(sources, srcs[i]);
	}
	eng_status st = dev->ops->compile(dev->ctx, cs, sch.n, cn, progs, &err);
	ck_assert_msg(st == ENG_OK, "%s\n%s", err.msg, srcs[0]);
	clbufs m = {.n = 0};
	for (int i = 0; i < sch.n; i++) {
		const eng_kernel_ir *ir = &sch.items[i].ir;
		void *h[ENG_MAX_KERNEL_BUFS];
		for (int k = 0; k < ir->nbufs; k++)
			h[k] = ocl_buffer(dev, &m, ir->bufs[k].node, ir->bufs[k].output);
		bk_launch l = {.nparallel = ir->nparallel, .cost = ir->flops + ir->bytes};
		ck_assert_msg(dev->ops->launch(dev->ctx, progs[i], h, ir->nbufs, &l, &err) == ENG_OK, "%s", err.msg);
	}
	ck_assert_msg(dev->ops->synchronize(dev->ctx, &err) == ENG_OK, "%s", err.msg);
	size_t nbytes = (size_t)eng_numel(t) * eng_dtype_size(eng_tensor_dtype(t));
	void *out = malloc(nbytes ? nbytes : 1);
	ck_assert(out != NULL);
	ck_assert_int_eq(dev->ops->copy_out(dev->ctx, ocl_buffer(dev, &m, root, true), 0, out, nbytes, &err), ENG_OK);
	for (int i = 0; i < m.n; i++)
		if (m.owned[i])
			dev->ops->free(dev->ctx, m.mem[i]);
	for (int i = 0; i < sch.n; i++) {
		dev->ops->program_free(dev->ctx, progs[i]);
		free(srcs[i]);
	}
	free(srcs);
	free(names);
	free(cs);
	free(cn);
	free(progs);
	eng_schedule_free(&sch);
	return out;
}

/* t on OpenCL, then realized on the CPU: equal within rtol (floats; integers exactly); with
 * ref_rtol >= 0 also compared with the reference evaluator (tests/ref_eval.c). The OpenCL
 * sources are appended to sources (may be NULL). */
static void check_graph_src(bk_device *dev, eng_tensor *t, double rtol, double ref_rtol, const char *what,
			    eng_strbuf *sources)
{
	void *clbytes = run_on_cl(dev, t, sources);
	eng_dtype dt = eng_tensor_dtype(t);
	size_t nbytes = (size_t)eng_numel(t) * eng_dtype_size(dt);
	void *cpubytes = malloc(nbytes ? nbytes : 1);
	ck_assert(cpubytes != NULL);
	ck_assert_msg(eng_tensor_read(t, cpubytes, nbytes) == ENG_OK, "%s", eng_errmsg(eng_tensor_ctx(t)));
	ref_array got, want, ref = {0};
	ck_assert(ref_decode(dt, eng_ndim(t), eng_shape(t), clbytes, &got));
	ck_assert(ref_decode(dt, eng_ndim(t), eng_shape(t), cpubytes, &want));
	char msg[512], rmsg[512] = "";
	bool ok = ref_match(&got, &want, rtol, rtol, msg, sizeof(msg));
	bool rok = ref_rtol < 0 || (ref_tensor(t, &ref) && ref_match(&got, &ref, ref_rtol, ref_rtol, rmsg, sizeof(rmsg)));
	ref_free(&got);
	ref_free(&want);
	ref_free(&ref);
	free(clbytes);
	free(cpubytes);
	ck_assert_msg(ok, "%s: OpenCL differs from the CPU: %s", what, msg);
	ck_assert_msg(rok, "%s: OpenCL differs from the reference: %s", what, rmsg);
}

static void check_graph_ref(bk_device *dev, eng_tensor *t, double rtol, double ref_rtol, const char *what)
{
	check_graph_src(dev, t, rtol, ref_rtol, what, NULL);
}

static void check_graph(bk_device *dev, eng_tensor *t, double rtol, const char *what)
{
	check_graph_ref(dev, t, rtol, -1, what);
}

#define F32_TOL 1e-5
#define F16_TOL 2e-3 /* one float16 step: an intermediate may round the other way */

static void engine_elementwise(bk_device *dev, eng_ctx *ctx, tu_rng *r)
{
	int64_t sa[3] = {5, 1, 7}, sb[3] = {1, 6, 7};
	eng_tensor *a = tu_rand(ctx, r, ENG_F32, 3, sa, -2, 2), *b = tu_rand(ctx, r, ENG_F32, 3, sb, 0.5, 3);
	/* broadcasting, exp2/log2/sin/sqrt/recip */
	eng_tensor *e = eng_sub(eng_add(eng_mul(eng_exp(a), b), eng_sqrt(b)), eng_div(eng_sin(a), b));
	check_graph(dev, eng_add(e, eng_log(b)), F32_TOL, "broadcast math");
	/* where / compare (bool output), trunc, max */
	check_graph(dev, eng_where(eng_lt(a, b), a, eng_mul_s(b, 2)), F32_TOL, "where");
	check_graph(dev, eng_or(eng_eq(eng_trunc(a), eng_trunc(b)), eng_gt(a, eng_neg(b))), 0, "bool compare");
	check_graph(dev, eng_maximum(eng_tanh(a), eng_sigmoid(b)), F32_TOL, "activations");
	/* random numbers: int64 hashing with wrapping arithmetic, fused */
	eng_manual_seed(ctx, 3);
	int64_t sr[2] = {17, 29};
	check_graph(dev, eng_randn(ctx, ENG_F32, 2, sr), F32_TOL, "randn");
}

static void engine_reductions(bk_device *dev, eng_ctx *ctx, tu_rng *r)
{
	int64_t s[2] = {33, 65};
	eng_tensor *x = tu_rand(ctx, r, ENG_F32, 2, s, -3, 3);
	int ax1 = 1, ax0 = 0;
	/* two phases of different axes in one graph */
	check_graph(dev, eng_add(eng_sum(x, &ax1, 1, true), eng_max(x, &ax0, 1, false)), F32_TOL, "sum + max");
	/* one work-group: partial sums in another order than the CPU's, so a looser tolerance */
	check_graph(dev, eng_sum(x, NULL, 0, false), 1e-4, "full sum (one work-group, local-memory tree)");
	check_graph(dev, eng_softmax(x, -1), F32_TOL, "softmax");
	check_graph(dev, eng_layernorm(x, 1e-5), 1e-4, "layernorm");
	check_graph(dev, eng_argmax(x, 0, false), 0, "argmax");
	check_graph(dev, eng_prod(eng_mul_s(x, 0.3), &ax0, 1, false), F32_TOL, "prod");
}

static void engine_matmul_conv(bk_device *dev, eng_ctx *ctx, tu_rng *r)
{
	int64_t sa[2] = {70, 33}, sb[2] = {33, 130}, sbias[1] = {130};
	eng_tensor *a = tu_rand(ctx, r, ENG_F32, 2, sa, -1, 1), *b = tu_rand(ctx, r, ENG_F32, 2, sb, -1, 1);
	eng_tensor *bias = tu_rand(ctx, r, ENG_F32, 1, sbias, -1, 1);
	check_graph(dev, eng_matmul(a, b), F32_TOL, "matmul (register tiles)");
	/* two kernels: the second matmul reads the first's stored result */
	eng_tensor *h = eng_relu(eng_add(eng_matmul(a, b), bias));
	check_graph(dev, eng_matmul(h, eng_transpose(eng_mul_s(b, 0.5), 0, 1)), F32_TOL, "MLP");
	int64_t sx[4] = {2, 3, 9, 8}, sw[4] = {4, 3, 3, 3};
	eng_tensor *x = tu_rand(ctx, r, ENG_F32, 4, sx, -1, 1), *w = tu_rand(ctx, r, ENG_F32, 4, sw, -1, 1);
	int pad[2] = {1, 1}, stride[2] = {2, 1};
	check_graph(dev, eng_conv2d(x, w, NULL, stride, pad, NULL, 1), F32_TOL, "conv2d");
}

static void engine_dtypes(bk_device *dev, eng_ctx *ctx, tu_rng *r)
{
	int64_t s[2] = {9, 31}, sm[2] = {31, 20};
	/* float16: storage via vload_half / vstore_half, every op rounded */
	eng_tensor *h = tu_rand(ctx, r, ENG_F16, 2, s, -4, 4), *g = tu_rand(ctx, r, ENG_F16, 2, s, -4, 4);
	/* exactly the reference's rounding after every op, on both backends (the CPU prelude's
	 * eng_f16r keeps gcc from fusing a float16 multiply-add past the rounding) */
	eng_tensor *arith = eng_sub(eng_add(eng_mul(h, g), h), eng_mul_s(g, 0.37));
	check_graph_ref(dev, arith, F16_TOL, 0, "float16 arithmetic");
	eng_tensor *arith2 = eng_sub(eng_add(eng_mul(g, h), g), eng_mul_s(h, 0.61)); /* a new graph: */
	check_graph(dev, arith2, 0, "float16 arithmetic, CPU and OpenCL alike"); /* arith is realized */
	check_graph(dev, eng_add(eng_mul(h, g), eng_exp(h)), F16_TOL, "float16 math");
	check_graph(dev, eng_matmul(h, tu_rand(ctx, r, ENG_F16, 2, sm, -1, 1)), F16_TOL, "float16 matmul");
	int ax = 1;
	check_graph(dev, eng_cast(eng_sum(h, &ax, 1, false), ENG_F32), F16_TOL, "float16 sum");
	/* int32 with zero divisors, negatives, shifts and overflow */
	eng_tensor *i = tu_rand(ctx, r, ENG_I32, 2, s, -50, 50), *j = tu_rand(ctx, r, ENG_I32, 2, s, -5, 5);
	eng_tensor *q = eng_add(eng_idiv(i, j), eng_mul(eng_mod(i, j), eng_full(ctx, ENG_I32, 2, s, 3)));
	eng_tensor *big = eng_mul(eng_mul_s(i, 65537), eng_full(ctx, ENG_I32, 2, s, 40009)); /* wraps */
	check_graph(dev, eng_xor(eng_add(q, big), eng_shl(i, j)), 0, "int32");
	check_graph(dev, eng_shr(eng_cast(i, ENG_I64), eng_cast(j, ENG_I64)), 0, "int64 shift");
	/* uint8 wrapping, bool storage, float <-> int casts that saturate */
	eng_tensor *u = tu_rand(ctx, r, ENG_U8, 2, s, 0, 255), *v = tu_rand(ctx, r, ENG_U8, 2, s, 0, 255);
	check_graph(dev, eng_sub(eng_add(u, v), eng_mul(u, v)), 0, "uint8");
	check_graph(dev, eng_cast(eng_mul_s(eng_cast(i, ENG_F32), 1e8), ENG_I32), 0, "saturating cast");
	check_graph(dev, eng_cast(eng_cast(h, ENG_F32), ENG_U8), 0, "float16 to uint8");
	check_graph(dev, eng_bitcast(eng_add(eng_cast(i, ENG_F32), eng_cast(h, ENG_F32)), ENG_I32), 1, "bitcast");
}

static void engine_views_and_assign(bk_device *dev, eng_ctx *ctx, tu_rng *r)
{
	int64_t s[2] = {6, 11};
	eng_tensor *a = tu_rand(ctx, r, ENG_F32, 2, s, -2, 2);
	int64_t pads[2][2] = {{1, 2}, {3, 0}}, ranges[2][2] = {{2, 9}, {1, 5}};
	int flip[2] = {0, 1};
	/* padded (guarded loads), flipped, shrunk, permuted views */
	eng_tensor *p = eng_flip(eng_pad(a, pads), flip, 2);
	check_graph(dev, eng_add(p, eng_full(ctx, ENG_F32, 2, eng_shape(p), 0.5)), F32_TOL, "pad + flip");
	check_graph(dev, eng_mul(eng_shrink(p, ranges), eng_shrink(eng_transpose(p, 0, 1), ranges)), F32_TOL,
		    "shrink + transpose");
	int64_t rep[2] = {2, 3};
	check_graph(dev, eng_repeat(a, rep), 0, "repeat");
	/* an in-place assign: the kernel reads and writes one buffer (no restrict) */
	eng_tensor *t = tu_rand(ctx, r, ENG_F32, 2, s, -2, 2);
	check_graph(dev, eng_assign(t, eng_add_s(eng_mul(t, eng_flip(t, flip, 1)), 1)), F32_TOL, "assign");
}

/* t on OpenCL (equal to the CPU's and the reference's result) whose kernels must contain
 * every string of want (NULL-terminated), or none of them with want_absent. */
static void check_vector(bk_device *dev, eng_tensor *t, const char *const *want, bool want_absent, const char *what)
{
	eng_strbuf sb;
	eng_strbuf_init(&sb);
	check_graph_src(dev, t, F32_TOL, 1e-4, what, &sb);
	for (int i = 0; want[i]; i++)
		ck_assert_msg(!strstr(sb.s ? sb.s : "", want[i]) == want_absent, "%s: \"%s\" %s the kernels:\n%s", what,
			      want[i], want_absent ? "in" : "not in", sb.s ? sb.s : "");
	eng_strbuf_free(&sb);
}

/* The wide tile as vectors (the device opened with vector_width=16, whatever it prefers: PoCL
 * says 16 floats on AVX-512 hosts, 8 on AVX2 ones): consecutive loads and stores, gathers and
 * scatters a stride apart, comparisons as lane masks, selects, maxima, every width. */
static void engine_vectors(bk_device *dev, eng_ctx *ctx, tu_rng *r)
{
	int64_t sa[2] = {24, 40}, sb[2] = {40, 48}, s8[2] = {40, 8}, s4[2] = {40, 4}, s2[2] = {40, 2};
	eng_tensor *a = tu_rand(ctx, r, ENG_F32, 2, sa, -1, 1), *b = tu_rand(ctx, r, ENG_F32, 2, sb, -1, 1);
	const char *v16[] = {"float16 acc0", "vload16(0, b", "vstore16(", NULL};
	check_vector(dev, eng_matmul(a, b), v16, false, "matmul, 16 lanes");
	const char *v8[] = {"float8 acc0", "vload8(", "vstore8(", NULL};
	const char *v4[] = {"float4 acc0", NULL};
	const char *v2[] = {"float2 acc0", NULL};
	check_vector(dev, eng_matmul(a, tu_rand(ctx, r, ENG_F32, 2, s8, -1, 1)), v8, false, "matmul, 8 lanes");
	check_vector(dev, eng_matmul(a, tu_rand(ctx, r, ENG_F32, 2, s4, -1, 1)), v4, false, "matmul, 4 lanes");
	check_vector(dev, eng_matmul(a, tu_rand(ctx, r, ENG_F32, 2, s2, -1, 1)), v2, false, "matmul, 2 lanes");
	/* comparisons, where, maximum, exp2 and a mask turned into numbers, summed along dim 0 */
	int64_t sx[2] = {37, 48};
	eng_tensor *x = tu_rand(ctx, r, ENG_F32, 2, sx, -2, 2), *y = tu_rand(ctx, r, ENG_F32, 2, sx, -2, 2);
	int ax0 = 0, ax1 = 1;
	eng_tensor *mask = eng_cast(eng_eq(eng_trunc(x), eng_trunc(y)), ENG_F32);
	eng_tensor *val = eng_add(eng_where(eng_lt(x, y), eng_mul(x, y), eng_maximum(x, eng_exp(y))), mask);
	const char *sel[] = {"select(", "int16 x", "convert_float16(", NULL};
	check_vector(dev, eng_sum(val, &ax0, 1, false), sel, false, "masks and selects");
	const char *vmax[] = {"float16 acc0", "select(acc0", NULL};
	check_vector(dev, eng_max(x, &ax0, 1, false), vmax, false, "max along dim 0");
	/* gathered: v[i] * x[i, j] summed over j; x read 37 elements apart along the lanes */
	int64_t sg[2] = {48, 37}, sv[2] = {48, 1};
	eng_tensor *g = tu_rand(ctx, r, ENG_F32, 2, sg, -1, 1), *v = tu_rand(ctx, r, ENG_F32, 2, sv, -1, 1);
	const char *gather[] = {"(float16)(b", "+37]", NULL};
	check_vector(dev, eng_sum(eng_mul(g, v), &ax1, 1, false), gather, false, "gather");
	/* scattered: (x^T w) of shape 48 x 3, lanes along the 48, stored 3 elements apart */
	int64_t sw[2] = {37, 3};
	eng_tensor *w = tu_rand(ctx, r, ENG_F32, 2, sw, -1, 1);
	const char *scatter[] = {"t_.s1;", "+3] = t_.s1", NULL};
	check_vector(dev, eng_matmul(eng_transpose(x, 0, 1), w), scatter, false, "scatter");
	/* the contiguous dim is 5 wide, no vector width: the lanes go along the 32 rows instead, a
	 * gathered 40 elements apart */
	int64_t s32[2] = {32, 40}, s5[2] = {40, 5};
	const char *rows16[] = {"float16 acc0", "(float16)(b", "+40]", NULL};
	check_vector(dev, eng_matmul(tu_rand(ctx, r, ENG_F32, 2, s32, -1, 1), tu_rand(ctx, r, ENG_F32, 2, s5, -1, 1)),
		     rows16, false, "lanes along a non-contiguous dim");
	/* no vector form: an int32 reduction stays scalar */
	eng_tensor *xi = eng_cast(eng_mul_s(x, 10), ENG_I32);
	const char *none[] = {"vload", "float16", NULL};
	check_vector(dev, eng_cast(eng_sum(xi, &ax0, 1, false), ENG_F32), none, true, "int32: scalars");
}

/* Reductions with few long rows: one work-group per row, the row's reduction split over its
 * threads and combined in local memory; the row's stores shared out over the threads, or
 * made by thread 0 when there is one per row. */
static void engine_group_rows(bk_device *dev, eng_ctx *ctx, tu_rng *r)
{
	int64_t s[2] = {8, 3000};
	eng_tensor *x = tu_rand(ctx, r, ENG_F32, 2, s, -3, 3);
	int ax1 = 1;
	const char *rows[] = {"reqd_work_group_size(64, 1, 1)", "get_group_id(0)", "+= 64) {", "sh0[lid_]", NULL};
	check_vector(dev, eng_softmax(eng_mul_s(x, 2), -1), rows, false, "softmax of 8 rows of 3000");
	const char *one[] = {"get_group_id(0)", "if (lid_ == 0) b", NULL};
	check_vector(dev, eng_sum(x, &ax1, 1, false), one, false, "sums of 8 rows of 3000");
	check_vector(dev, eng_max(x, &ax1, 1, true), one, false, "maxima of 8 rows of 3000");
	/* statistics per channel of NCHW: rows 400 elements apart, several reduced axes, two phases */
	int64_t sc[4] = {16, 6, 10, 10};
	eng_tensor *c = tu_rand(ctx, r, ENG_F32, 4, sc, -1, 2);
	int axes[3] = {0, 2, 3};
	eng_tensor *mean = eng_mean(c, axes, 3, true);
	eng_tensor *var = eng_mean(eng_square(eng_sub(c, mean)), axes, 3, false);
	check_vector(dev, var, one, false, "variance per channel");
	/* rows over two merged dims, and an in-place update reading its own row */
	int64_t s3[3] = {3, 4, 2500};
	eng_tensor *y = tu_rand(ctx, r, ENG_F32, 3, s3, -1, 1);
	int ax2 = 2;
	eng_tensor *upd = eng_assign(y, eng_sub(y, eng_max(y, &ax2, 1, true)));
	check_vector(dev, upd, rows, false, "in-place row update");
	/* many short rows: one thread each, as before */
	int64_t sm[2] = {3000, 8};
	const char *none[] = {"get_group_id", NULL};
	check_vector(dev, eng_sum(tu_rand(ctx, r, ENG_F32, 2, sm, -1, 1), &ax1, 1, false), none, true, "short rows");
}

/* The same kernels with vectors turned off (option vector_width=1): scalars only. */
static void engine_no_vectors(bk_device *dev, eng_ctx *ctx, tu_rng *r)
{
	int64_t sa[2] = {24, 40}, sb[2] = {40, 48};
	eng_tensor *a = tu_rand(ctx, r, ENG_F32, 2, sa, -1, 1), *b = tu_rand(ctx, r, ENG_F32, 2, sb, -1, 1);
	const char *none[] = {"vload", "float16", NULL};
	check_vector(dev, eng_matmul(a, b), none, true, "matmul without vectors");
}

/* A device preferring 8 floats: tiles are planned 8 wide (a 48-wide dim: 8, not 16). */
static void engine_vectors_of_8(bk_device *dev, eng_ctx *ctx, tu_rng *r)
{
	int64_t sa[2] = {24, 40}, sb[2] = {40, 48};
	eng_tensor *a = tu_rand(ctx, r, ENG_F32, 2, sa, -1, 1), *b = tu_rand(ctx, r, ENG_F32, 2, sb, -1, 1);
	const char *v8[] = {"float8 acc0", "vload8(", NULL};
	check_vector(dev, eng_matmul(a, b), v8, false, "matmul at 8 lanes");
	const char *no16[] = {"float16", NULL};
	check_vector(dev, eng_matmul(a, eng_mul_s(b, 2)), no16, true, "no 16 lanes");
}

/* Run body with CL:0 (opened with opts, may be NULL) and a CPU context whose random inputs
 * come from seed (skipped without OpenCL). */
static void with_engine_opts(const bk_opts *opts, uint64_t seed, void (*body)(bk_device *dev, eng_ctx *ctx, tu_rng *r))
{
	bk_device dev;
	if (!ocl_device_opts(0, opts, &dev))
		return;
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {seed};
	body(&dev, ctx, &r);
	tu_ctx_free(ctx);
	dev.ops->destroy(dev.ctx);
}

static void with_engine(uint64_t seed, void (*body)(bk_device *dev, eng_ctx *ctx, tu_rng *r))
{
	with_engine_opts(NULL, seed, body);
}

START_TEST(test_engine_elementwise) { with_engine(11, engine_elementwise); }
END_TEST

START_TEST(test_engine_reductions) { with_engine(12, engine_reductions); }
END_TEST

START_TEST(test_engine_matmul_conv) { with_engine(13, engine_matmul_conv); }
END_TEST

START_TEST(test_engine_dtypes) { with_engine(14, engine_dtypes); }
END_TEST

START_TEST(test_engine_views_and_assign) { with_engine(15, engine_views_and_assign); }
END_TEST


START_TEST(test_engine_group_rows) { with_engine(18, engine_group_rows); }
END_TEST

/* with_engine on a device opened with the option vector_width=width. */
static void with_vector_width(const char *width, uint64_t seed, void (*body)(bk_device *, eng_ctx *, tu_rng *))
{
	bk_opts opts = {.n = 1, .key = {"vector_width"}, .value = {width}};
	with_engine_opts(&opts, seed, body);
}

/* Options are validated: a width OpenCL has no vectors of is an error naming the option. */
START_TEST(test_bad_vector_width_option)
{
	bk_device dev;
	bk_err err;
	bk_opts opts = {.n = 1, .key = {"vector_width"}, .value = {"32"}};
	if (!ocl_device(0, &dev))
		return;
	dev.ops->destroy(dev.ctx);
	ck_assert_int_eq(bk_backend_find("CL")->open(0, &opts, 0, &dev, &err), ENG_EINVAL);
	ck_assert_msg(strstr(err.msg, "vector_width=32"), "%s", err.msg);
	opts.value[0] = "4x";
	ck_assert_int_eq(bk_backend_find("CL")->open(0, &opts, 0, &dev, &err), ENG_EINVAL);
}
END_TEST

START_TEST(test_engine_vectors) { with_vector_width("16", 16, engine_vectors); }
END_TEST

START_TEST(test_engine_no_vectors) { with_vector_width("1", 17, engine_no_vectors); }
END_TEST

START_TEST(test_engine_vectors_of_8) { with_vector_width("8", 19, engine_vectors_of_8); }
END_TEST

Suite *opencl_suite(void)
{
	const TTest *const tests[] = {
		test_list_devices,	    test_memory_round_trip,	    test_handwritten_kernels,
		test_build_errors,	    test_blob_load_round_trip,	    test_error_mapping_and_failed_device,
		test_engine_elementwise,    test_engine_reductions,	    test_engine_matmul_conv,
		test_engine_dtypes,	    test_engine_views_and_assign,   test_engine_vectors,
		test_engine_no_vectors,	    test_engine_group_rows,	    test_engine_vectors_of_8,
		test_bad_vector_width_option,
	};
	return tu_suite("opencl", tests, (int)(sizeof(tests) / sizeof(tests[0])), TU_TIMEOUT);
}
