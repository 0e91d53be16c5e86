/* xor: the seed's tiny network: 2 -> 8 (tanh) -> 2, Adam lr 0.05, 200 full-batch steps on the
 * four XOR points; prints the loss every 50 steps, the predictions and the wall time. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <tensord/engine.h>
#include <tensord/nn.h>
#include <tensord/optim.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(void)
{
	double t0 = now_s();
	char err[256];
	eng_ctx *ctx = eng_ctx_create(NULL, err, sizeof(err));
	if (!ctx) {
		fprintf(stderr, "xor: %s\n", err);
		return 1;
	}
	eng_manual_seed(ctx, 1337);
	const float xv[8] = {0, 0, 0, 1, 1, 0, 1, 1};
	const int32_t yv[4] = {0, 1, 1, 0};
	int64_t xs[2] = {4, 2}, ys[1] = {4};
	eng_tensor *X = eng_from_data(ctx, ENG_F32, 2, xs, xv), *Y = eng_from_data(ctx, ENG_I32, 1, ys, yv);
	eng_params params;
	eng_params_init(&params);
	eng_nn_linear l1, l2;
	eng_optim *opt = NULL;
	int rc = 1;
	if (eng_nn_linear_init(ctx, &l1, 2, 8, true, &params, "l1") ||
	    eng_nn_linear_init(ctx, &l2, 8, 2, true, &params, "l2"))
		goto fail;
	int np;
	eng_tensor **ps = eng_params_trainable(&params, &np);
	eng_optim_opts oo;
	eng_optim_opts_default(&oo, ENG_OPTIM_ADAM);
	oo.lr = 0.05;
	opt = eng_optim_create(ctx, ps, np, &oo);
	free(ps);
	if (!opt)
		goto fail;
	for (int step = 0; step <= 200; step++) {
		eng_scope_begin(ctx);
		eng_tensor *logits = eng_nn_linear_forward(&l2, eng_tanh(eng_nn_linear_forward(&l1, X)));
		eng_tensor *loss = eng_loss_sparse_cross_entropy(logits, Y, 0.0, -100);
		eng_status s = step < 200 ? eng_backward(loss) : ENG_OK;
		if (!s && step < 200)
			s = eng_optim_step(opt, &loss, 1);
		if (!s && step % 50 == 0)
			printf("step %3d loss %.4f\n", step, eng_item(loss));
		eng_scope_end(ctx);
		if (s || eng_error(ctx))
			goto fail;
	}
	eng_scope_begin(ctx);
	eng_tensor *pred = eng_argmax(eng_nn_linear_forward(&l2, eng_tanh(eng_nn_linear_forward(&l1, X))), 1, false);
	int32_t p[4];
	if (eng_tensor_read(pred, p, sizeof(p)))
		goto fail;
	eng_scope_end(ctx);
	printf("predictions: [%d, %d, %d, %d] time %.2fs\n", p[0], p[1], p[2], p[3], now_s() - t0);
	rc = !(p[0] == 0 && p[1] == 1 && p[2] == 1 && p[3] == 0);
	goto out;
fail:
	fprintf(stderr, "xor: %s\n", eng_errmsg(ctx));
out:
	eng_optim_destroy(opt);
	eng_nn_linear_free(&l1);
	eng_nn_linear_free(&l2);
	eng_params_free(&params);
	eng_ctx_destroy(ctx);
	return rc;
}
