/* cancel.c: stopping a computing call: eng_cancel requests (from any thread), the context's
 * deadline and abort hook, checked by realize and JIT replay before compiles and launches. */
#include <time.h>

#include "context.h"

uint64_t eng_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void eng_set_deadline(eng_ctx *ctx, uint64_t deadline_ns) { ctx->deadline_ns = deadline_ns; }

void eng_set_abort_hook(eng_ctx *ctx, bool (*hook)(void *arg), void *arg)
{
	ctx->abort_hook = hook;
	ctx->abort_arg = arg;
}

void eng_cancel(eng_ctx *ctx) { atomic_store(&ctx->cancel, 1); }

void eng_call_begin(eng_ctx *ctx)
{
	if (ctx->err == ENG_ECANCELED) {
		ctx->err = ENG_OK;
		ctx->errmsg[0] = 0;
	}
	ctx->in_place_done = false;
}

eng_status eng_cancel_point(eng_ctx *ctx, const char *what, const char *name)
{
	if (ctx->in_place_done)
		return ENG_OK; /* an in-place update ran: finish, so a step is applied whole */
	const char *why = NULL;
	if (atomic_exchange(&ctx->cancel, 0))
		why = "eng_cancel was called";
	else if (ctx->deadline_ns && eng_now_ns() >= ctx->deadline_ns)
		why = "the deadline passed";
	else if (ctx->abort_hook && ctx->abort_hook(ctx->abort_arg))
		why = "the abort hook said stop";
	if (!why)
		return ENG_OK;
	return eng_set_error(ctx, ENG_ECANCELED, "cancelled before %s%s: %s", what, name ? name : "", why);
}
