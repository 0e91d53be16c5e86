/* test_zerocopy.c: tensors over caller memory (eng_from_host: no copy on the CPU, one upload
 * elsewhere; the release callback once nothing refers to the memory) and results computed
 * straight into caller memory (eng_realize_into). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "tensor/tensor.h"
#include "testutil.h"

typedef struct released {
	int calls;
	void *last;
} released;

/* The release callback: frees the memory, as a server freeing a request's payload would. */
static void release_free(void *arg, void *data)
{
	released *r = arg;
	r->calls++;
	r->last = data;
	free(data);
}

static bool on_cpu(eng_ctx *ctx) { return !strncmp(eng_device_name(ctx, eng_default_device(ctx)), "CPU", 3); }

START_TEST(from_host_reads_in_place_and_releases_once)
{
	eng_ctx *ctx = tu_ctx_new();
	enum { N = 1000 };
	float *data = malloc(N * sizeof(float));
	ck_assert_ptr_nonnull(data);
	for (int i = 0; i < N; i++)
		data[i] = (float)i;
	released rel = {0};
	int64_t s[1] = {N};
	eng_tensor *x = eng_from_host(ctx, ENG_F32, 1, s, data, N * sizeof(float), release_free, &rel);
	ck_assert_msg(x != NULL, "%s", eng_errmsg(ctx));
	bool cpu = on_cpu(ctx);
	if (cpu) { /* no copy: a change before the realize is seen by the kernel */
		data[3] = 1000.0f;
		ck_assert_int_eq(rel.calls, 0);
	} else { /* uploaded: the memory was given back at once */
		ck_assert_int_eq(rel.calls, 1);
	}
	eng_scope_begin(ctx); /* the temporaries go at its end */
	eng_tensor *y = eng_keep(eng_add_s(eng_mul_s(x, 2.0), 1.0));
	eng_scope_end(ctx);
	eng_tensor_free(x); /* y's graph still refers to the memory */
	ck_assert_int_eq(rel.calls, cpu ? 0 : 1);
	float out[N];
	ck_assert_msg(eng_tensor_read(y, out, sizeof(out)) == ENG_OK, "%s", eng_errmsg(ctx));
	for (int i = 0; i < N; i++)
		ck_assert_float_eq(out[i], (cpu && i == 3 ? 1000.0f : (float)i) * 2 + 1);
	/* y is realized and holds its own buffer; its graph went with the realize */
	eng_tensor_free(y);
	ck_assert_int_eq(rel.calls, 1);
	tu_ctx_free(ctx);
}
END_TEST

/* Bad sizes are errors that leave the memory the caller's; a context going away releases what
 * it still refers to. */
START_TEST(from_host_errors_and_context_end)
{
	eng_ctx *ctx = tu_ctx_new();
	released rel = {0};
	int64_t s[2] = {4, 5};
	float *data = malloc(20 * sizeof(float));
	ck_assert_ptr_nonnull(data);
	ck_assert_ptr_null(eng_from_host(ctx, ENG_F32, 2, s, data, 19 * sizeof(float), release_free, &rel));
	ck_assert_int_eq(eng_error(ctx), ENG_EINVAL);
	ck_assert_msg(strstr(eng_errmsg(ctx), "from_host"), "%s", eng_errmsg(ctx));
	eng_clear_error(ctx);
	ck_assert_ptr_null(eng_from_host(ctx, ENG_F32, 2, s, NULL, 20 * sizeof(float), release_free, &rel));
	eng_clear_error(ctx);
	ck_assert_int_eq(rel.calls, 0);
	memset(data, 0, 20 * sizeof(float));
	eng_tensor *x = eng_from_host(ctx, ENG_F32, 2, s, data, 20 * sizeof(float), release_free, &rel);
	ck_assert_ptr_nonnull(eng_keep(eng_sum(x, NULL, 0, false)));
	tu_ctx_free(ctx); /* everything goes, the memory with it */
	ck_assert_int_eq(rel.calls, 1);
	ck_assert_ptr_eq(rel.last, data);
}
END_TEST

START_TEST(realize_into_writes_caller_memory)
{
	eng_ctx *ctx = tu_ctx_new();
	int64_t s[2] = {37, 29};
	tu_rng r = {17};
	eng_tensor *a = tu_rand(ctx, &r, ENG_F32, 2, s, -1, 1);
	ck_assert_int_eq(eng_realize(&a, 1), ENG_OK);
	eng_tensor *y = eng_softmax(eng_mul_s(a, 3.0), 1);
	float *dst = malloc(37 * 29 * sizeof(float)), want[37 * 29];
	ck_assert_ptr_nonnull(dst);
	ck_assert_msg(eng_realize_into(y, dst, 37 * 29 * sizeof(float)) == ENG_OK, "%s", eng_errmsg(ctx));
	if (on_cpu(ctx)) /* the kernel wrote dst; y keeps nothing of it */
		ck_assert_ptr_null(eng_tensor_node(y)->buf);
	ck_assert_msg(eng_tensor_read(y, want, sizeof(want)) == ENG_OK, "%s", eng_errmsg(ctx));
	for (int i = 0; i < 37 * 29; i++)
		ck_assert_float_eq(dst[i], want[i]);
	free(dst);
	/* computed already, a plain buffer, a wrong size */
	float again[37 * 29];
	ck_assert_int_eq(eng_realize_into(y, again, sizeof(again)), ENG_OK);
	ck_assert_int_eq(memcmp(again, want, sizeof(want)), 0);
	float araw[37 * 29];
	ck_assert_int_eq(eng_realize_into(a, araw, sizeof(araw)), ENG_OK);
	ck_assert_int_eq(eng_realize_into(y, again, 4), ENG_EINVAL);
	eng_clear_error(ctx);
	/* a view of a computed tensor: the copy path */
	eng_tensor *t = eng_transpose(y, 0, 1);
	float tr[29 * 37];
	ck_assert_int_eq(eng_realize_into(t, tr, sizeof(tr)), ENG_OK);
	ck_assert_float_eq(tr[1 * 37 + 2], want[2 * 29 + 1]);
	tu_ctx_free(ctx);
}
END_TEST

Suite *zerocopy_suite(void)
{
	const TTest *const tests[] = {
		from_host_reads_in_place_and_releases_once,
		from_host_errors_and_context_end,
		realize_into_writes_caller_memory,
	};
	return tu_suite("zerocopy", tests, (int)(sizeof(tests) / sizeof(tests[0])), TU_TIMEOUT);
}
