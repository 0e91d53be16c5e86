/* test_devices.c: several devices in one context (a second CPU device stands in for any other
 * backend): opening by name, the default device, copies between devices (lazy, realized as
 * transfers), operands on two devices rejected, gradients flowing back across a copy. */
#include <check.h>
#include <string.h>

#include <tensord/jit.h>

#include "device/device.h"
#include "realize/realize.h"
#include "tensor/tensor.h"
#include "testutil.h"

START_TEST(test_open_and_names)
{
	eng_ctx *ctx = tu_ctx_new();
	ck_assert_int_eq(eng_device_count(ctx), 1); /* $DEV's device, CPU by default */
	const char *first = eng_device_name(ctx, 0);
	int d1 = eng_device_open(ctx, "CPU:1");
	ck_assert_int_eq(d1, 1);
	ck_assert_str_eq(eng_device_name(ctx, 1), "CPU:1");
	ck_assert_int_eq(eng_device_open(ctx, "CPU:1"), 1); /* already open */
	ck_assert_int_eq(eng_device_open(ctx, first), 0);
	if (!strcmp(first, "CPU"))
		ck_assert_int_eq(eng_device_open(ctx, "CPU:0"), 0); /* the same device by another name */
	ck_assert_int_eq(eng_device_open(ctx, "GPU"), -1);
	ck_assert_int_eq(eng_error(ctx), ENG_EDEVICE);
	ck_assert_msg(strstr(eng_errmsg(ctx), "GPU"), "%s", eng_errmsg(ctx));
	eng_clear_error(ctx);
	ck_assert_int_eq(eng_device_open(ctx, "CPU:x"), -1);
	eng_clear_error(ctx);
	ck_assert_ptr_null(eng_device_name(ctx, 5));
	ck_assert_int_eq(eng_set_default_device(ctx, 7), ENG_EINVAL);
	eng_clear_error(ctx);
	char list[4096];
	ck_assert_int_eq(eng_devices_list(list, sizeof(list)), ENG_OK);
	ck_assert_msg(strstr(list, "CPU"), "%s", list);
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(test_copies_between_devices)
{
	eng_ctx *ctx = tu_ctx_new();
	int d1 = eng_device_open(ctx, "CPU:1");
	tu_rng r = {3};
	int64_t s[2] = {5, 7};
	eng_tensor *x = tu_rand(ctx, &r, ENG_F32, 2, s, -1, 1);
	ck_assert_int_eq(eng_tensor_device(x), 0);
	eng_tensor *y = eng_to_device(eng_transpose(x, 0, 1), d1); /* a view, copied */
	ck_assert_int_eq(eng_tensor_device(y), d1);
	eng_tensor *z = eng_add_s(eng_mul_s(y, 2), 1); /* runs on CPU:1 */
	ck_assert_int_eq(eng_tensor_device(z), d1);
	eng_tensor *w = eng_add(eng_transpose(eng_to_device(z, 0), 0, 1), x); /* back, and on CPU */
	ck_assert_int_eq(eng_tensor_device(w), 0);
	tu_batch *b = tu_batch_new(ctx);
	tu_batch_ref(b, z, 1e-6, 1e-6, "on CPU:1");
	tu_batch_ref(b, w, 1e-6, 1e-6, "back on CPU");
	tu_batch_check(b);
	/* mixing devices is an error naming both */
	ck_assert_ptr_null(eng_add(x, eng_to_device(x, d1)));
	ck_assert_int_eq(eng_error(ctx), ENG_EDEVICE);
	ck_assert_msg(strstr(eng_errmsg(ctx), "CPU:1"), "%s", eng_errmsg(ctx));
	eng_clear_error(ctx);
	/* the default device decides where new tensors live */
	ck_assert_int_eq(eng_set_default_device(ctx, d1), ENG_OK);
	eng_tensor *n = tu_rand(ctx, &r, ENG_F32, 2, s, -1, 1);
	ck_assert_int_eq(eng_tensor_device(n), d1);
	eng_tensor *m = eng_sum(eng_mul(n, eng_to_device(x, d1)), NULL, 0, false);
	tu_batch *b2 = tu_batch_new(ctx);
	tu_batch_ref(b2, m, 1e-5, 1e-5, "reduction on CPU:1");
	tu_batch_check(b2);
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(test_gradient_across_a_copy)
{
	eng_ctx *ctx = tu_ctx_new();
	int d1 = eng_device_open(ctx, "CPU:1");
	float xv[4] = {1, -2, 3, 0.5f};
	eng_tensor *x = eng_from_data(ctx, ENG_F32, 1, (int64_t[]){4}, xv);
	ck_assert_int_eq(eng_set_requires_grad(x, true), ENG_OK);
	eng_tensor *loss = eng_sum(eng_square(eng_to_device(x, d1)), NULL, 0, false);
	ck_assert_int_eq(eng_backward(loss), ENG_OK);
	eng_tensor *g = eng_grad(x);
	ck_assert_int_eq(eng_tensor_device(g), 0);
	float gv[4];
	ck_assert_int_eq(eng_tensor_read(g, gv, sizeof(gv)), ENG_OK);
	for (int i = 0; i < 4; i++)
		ck_assert_float_eq_tol(gv[i], 2 * xv[i], 1e-6);
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(test_failed_device_is_isolated)
{
	/* a device-level failure (as a lost GPU reports it) is simulated through the engine's own
	 * entry point: work on that device then fails at once, the other device goes on */
	eng_ctx *ctx = tu_ctx_new();
	int d1 = eng_device_open(ctx, "CPU:1");
	tu_rng r = {9};
	int64_t s[1] = {64};
	eng_tensor *x = tu_rand(ctx, &r, ENG_F32, 1, s, -1, 1);
	eng_tensor *y = eng_add_s(eng_to_device(x, d1), 1);
	ck_assert_int_eq(eng_realize(&y, 1), ENG_OK);
	ck_assert_int_eq(eng_device_fail(ctx->devs[d1], ENG_EDEVICE, "simulated device loss"), ENG_EDEVICE);
	eng_clear_error(ctx);
	eng_tensor *z = eng_mul_s(y, 2); /* on the failed device */
	ck_assert_int_eq(eng_realize(&z, 1), ENG_EDEVICE);
	ck_assert_msg(strstr(eng_errmsg(ctx), "simulated device loss"), "%s", eng_errmsg(ctx));
	eng_clear_error(ctx);
	eng_tensor *c = eng_add_s(eng_to_device(x, d1), 3); /* a copy to it fails too */
	ck_assert_int_eq(eng_realize(&c, 1), ENG_EDEVICE);
	eng_clear_error(ctx);
	eng_tensor *w = eng_mul_s(x, 3); /* the CPU keeps working */
	tu_batch *b = tu_batch_new(ctx);
	tu_batch_ref(b, w, 1e-6, 1e-6, "on the healthy device");
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

static eng_status twice_plus_one(eng_ctx *ctx, eng_tensor *const *in, int nin, eng_tensor **out, int nout, void *user)
{
	out[0] = eng_add_s(eng_mul_s(in[0], 2.0), 1.0);
	return out[0] ? ENG_OK : eng_error(ctx);
}

/* A failed device is replaced by a fresh one under the same index: new work runs, computed
 * values are computed again, data and captures of the failed one are reported lost. */
START_TEST(test_failed_device_reopened)
{
	eng_ctx *ctx = tu_ctx_new();
	int d1 = eng_device_open(ctx, "CPU:1");
	ck_assert_int_eq(eng_device_reopen(ctx, d1), ENG_ESTATE); /* healthy: nothing to reopen */
	ck_assert_int_eq(eng_device_reopen(ctx, 9), ENG_EINVAL);
	eng_clear_error(ctx);
	int64_t s[1] = {64};
	float vals[64];
	for (int i = 0; i < 64; i++)
		vals[i] = (float)i;
	eng_tensor *x = eng_keep_root(eng_from_data(ctx, ENG_F32, 1, s, vals)); /* a buffer on the CPU */
	eng_tensor *y = eng_keep_root(eng_add_s(eng_to_device(x, d1), 1));
	ck_assert_int_eq(eng_realize(&y, 1), ENG_OK);
	/* a JIT captured on d1 */
	ck_assert_int_eq(eng_set_default_device(ctx, d1), ENG_OK);
	eng_tensor *data = eng_keep_root(eng_from_data(ctx, ENG_F32, 1, s, vals)); /* only on d1 */
	eng_jit *j = eng_jit_create(ctx, twice_plus_one, NULL, 1, 1, NULL);
	eng_tensor *in = eng_keep_root(eng_full(ctx, ENG_F32, 1, s, 3.0)), *out;
	ck_assert_int_eq(eng_jit_warmup(j, &in), ENG_OK);
	eng_device_fail(ctx->devs[d1], ENG_EDEVICE, "simulated device loss");
	eng_clear_error(ctx);
	ck_assert_int_eq(eng_device_reopen(ctx, d1), ENG_OK);
	ck_assert_str_eq(eng_device_name(ctx, d1), "CPU:1");
	ck_assert_int_eq(eng_device_count(ctx), 2);
	/* computed values are computed again; data that lived only there is lost */
	float got[64];
	ck_assert_msg(eng_tensor_read(y, got, sizeof(got)) == ENG_OK, "%s", eng_errmsg(ctx));
	for (int i = 0; i < 64; i++)
		ck_assert_float_eq(got[i], (float)i + 1);
	ck_assert_int_eq(eng_tensor_read(data, got, sizeof(got)), ENG_EDEVICE);
	ck_assert_msg(strstr(eng_errmsg(ctx), "lost"), "%s", eng_errmsg(ctx));
	eng_clear_error(ctx);
	eng_tensor *z = eng_mul_s(data, 2);
	ck_assert_int_eq(eng_realize(&z, 1), ENG_EDEVICE);
	ck_assert_msg(strstr(eng_errmsg(ctx), "lost"), "%s", eng_errmsg(ctx));
	eng_clear_error(ctx);
	/* and so are its captures: an error until dropped, then captured anew */
	eng_tensor *in2 = eng_full(ctx, ENG_F32, 1, s, 3.0);
	ck_assert_int_eq(eng_jit_call(j, &in2, &out), ENG_EDEVICE);
	ck_assert_msg(strstr(eng_errmsg(ctx), "reopened"), "%s", eng_errmsg(ctx));
	eng_clear_error(ctx);
	ck_assert_int_eq(eng_jit_drop(j, 0), ENG_OK);
	ck_assert_int_eq(eng_jit_warmup(j, &in2), ENG_OK);
	ck_assert_int_eq(eng_jit_call(j, &in2, &out), ENG_OK);
	ck_assert_double_eq(eng_item(eng_shrink(out, (const int64_t[][2]){{5, 6}})), 7.0);
	/* new work on the reopened device runs */
	eng_tensor *w = eng_add_s(eng_to_device(x, d1), 1);
	ck_assert_int_eq(eng_tensor_read(w, got, sizeof(got)), ENG_OK);
	for (int i = 0; i < 64; i++)
		ck_assert_float_eq(got[i], (float)i + 1);
	eng_jit_destroy(j);
	tu_ctx_free(ctx);
}
END_TEST

/* Backend options: given in the context options, checked against what the backend takes,
 * with an error that names the option; another backend's options are left to it. */
START_TEST(test_backend_options)
{
	eng_ctx_opts o;
	char err[512];
	eng_ctx_opts_default(&o);
	o.debug = tu_debug();
	o.device = "CPU";
	o.backend_opts = "CPU.threads=2, CL.vector_width=4";
	eng_ctx *ctx = eng_ctx_create(&o, err, sizeof(err));
	ck_assert_msg(ctx != NULL, "%s", err);
	int64_t s[1] = {100000};
	eng_tensor *x = eng_sum(eng_add_s(eng_full(ctx, ENG_F32, 1, s, 1.5), 1), NULL, 0, false);
	ck_assert_double_eq_tol(eng_item(x), 250000.0, 1e-3);
	eng_ctx_destroy(ctx);
	/* a march the compiler rejects, one of another architecture, one that is no name; the same
	 * for mtune */
#if defined(__x86_64__)
	const char *other = "CPU.march=armv8.2-a";
#else
	const char *other = "CPU.march=x86-64-v3";
#endif
	const char *bad[] = {"CPU.colour=red", "CPU.threads=lots", "CPU.threads=1000", "threads=2", "CPU.cc",
			     "CPU.march=x86-64-v9", other, "CPU.march=-O0;rm", "CPU.mtune=no-such-cpu", "CPU.mtune=-O0;rm"};
	const char *want[] = {"colour", "threads=lots", "threads=1000", "threads=2", "CPU.cc",
			      "march=x86-64-v9", other + 4, "march=-O0;rm", "mtune=no-such-cpu", "mtune=-O0;rm"};
	for (int i = 0; i < 10; i++) {
		o.backend_opts = bad[i];
		err[0] = 0;
		ck_assert_ptr_null(eng_ctx_create(&o, err, sizeof(err)));
		ck_assert_msg(strstr(err, want[i]), "%s: %s", bad[i], err);
	}
	o.backend_opts = "CPU.colour=red";
	eng_ctx_create(&o, err, sizeof(err));
	ck_assert_msg(strstr(err, "cc, march, mtune, threads"), "the keys CPU takes are named: %s", err);
	char help[2048];
	ck_assert_int_eq(eng_devices_options(help, sizeof(help)), ENG_OK);
	ck_assert_msg(strstr(help, "CPU.cc ($CC)") && strstr(help, "CL.vector_width"), "%s", help);
}
END_TEST

Suite *devices_suite(void)
{
	const TTest *const tests[] = {
		test_open_and_names,
		test_copies_between_devices,
		test_gradient_across_a_copy,
		test_failed_device_is_isolated,
		test_backend_options,
		test_failed_device_reopened,
	};
	return tu_suite("devices", tests, (int)(sizeof(tests) / sizeof(tests[0])), TU_TIMEOUT);
}
