/* shadow.c: a realize's kernels planned and rendered for a second target without running them
 * (the CUDA compile check: every kernel the test suites make, in the CUDA dialect). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "realize.h"

#include "renderer/cstyle.h"
#include "schedule/schedule.h"

void eng_realize_set_shadow(eng_ctx *ctx, const bk_target *t, eng_shadow_fn fn, void *arg)
{
	ctx->shadow_target = t;
	ctx->shadow_fn = t ? fn : NULL;
	ctx->shadow_arg = arg;
}

void eng_realize_shadow(eng_ctx *ctx, eng_node *const *nodes, int n)
{
	const bk_target *t = ctx->shadow_target;
	/* the shadow's errors are its own: the context's error state is put back afterwards */
	eng_status err0 = ctx->err;
	char *msg0 = strdup(ctx->errmsg);
	eng_schedule sch;
	eng_status s = eng_schedule_build_on(ctx, t, nodes, n, &sch);
	if (s) {
		ctx->shadow_fn(ctx->shadow_arg, NULL, NULL, ctx->errmsg);
	} else {
		for (int i = 0; i < sch.n; i++) {
			char name[96], *src;
			s = eng_render_kernel(t, &sch.items[i].ir, name, &src);
			if (s)
				ctx->shadow_fn(ctx->shadow_arg, NULL, NULL,
					       s == ENG_EINVAL ? "render: no work-groups of that size" : "render: out of memory");
			else
				ctx->shadow_fn(ctx->shadow_arg, name, src, NULL);
			free(src);
		}
		eng_schedule_free(&sch);
	}
	ctx->err = err0;
	snprintf(ctx->errmsg, sizeof(ctx->errmsg), "%s", msg0 ? msg0 : "");
	free(msg0);
}
