/* ops_loss.c: ONNX loss ops, NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (weights,
 * ignore_index, reduction none/sum/mean), built from a one-hot mask over the class axis. */
#include <string.h>

#include "onnx_int.h"
#include "ops.h"

/* NLL of log-probabilities lp (N, C, d...) against integer target (N, d...). */
static eng_status nll(onx_node *n, eng_tensor *lp, eng_tensor *target, eng_tensor *w, eng_tensor **out)
{
	eng_ctx *ctx = n->ctx;
	int r = eng_ndim(lp);
	if (r < 2 || eng_ndim(target) != r - 1)
		return onx_fail(n, ENG_ESHAPE, "input must be (N, C, ...) and target (N, ...)");
	if (!eng_dtype_is_int(eng_tensor_dtype(target)))
		return onx_fail(n, ENG_EDTYPE, "target must be integer");
	char buf[16];
	const char *red = onx_attr_s(n, "reduction", "mean", buf, sizeof(buf));
	if (strcmp(red, "mean") && strcmp(red, "sum") && strcmp(red, "none"))
		return onx_fail(n, ENG_EINVAL, "attribute 'reduction' '%s'", red);
	eng_dtype dt = eng_tensor_dtype(lp);
	bool has_ign = onx_attr(n, "ignore_index") != NULL;
	int64_t ign = onx_attr_i(n, "ignore_index", 0);
	eng_tensor *t = eng_cast(target, ENG_I64);
	eng_tensor *tu = eng_unsqueeze(t, 1); /* (N, 1, d...) */
	eng_tensor *cls = eng_index(ctx, ENG_I64, r, eng_shape(lp), 1);
	eng_tensor *mask = eng_eq(cls, tu); /* (N, C, d...) */
	eng_tensor *zero = eng_scalar(ctx, dt, 0);
	int one = 1;
	eng_tensor *picked = eng_sum(eng_where(mask, lp, zero), &one, 1, false);
	eng_tensor *wt;
	if (w) {
		int64_t sh[ENG_MAX_DIMS];
		for (int i = 0; i < r; i++)
			sh[i] = i == 1 ? eng_numel(w) : 1;
		wt = eng_sum(eng_where(mask, eng_reshape(w, r, sh), zero), &one, 1, false);
	} else
		wt = eng_ones(ctx, dt, r - 1, eng_shape(t));
	if (has_ign)
		wt = eng_where(eng_eq(t, eng_scalar(ctx, ENG_I64, (double)ign)), zero, wt);
	eng_tensor *loss = eng_neg(eng_mul(picked, wt));
	if (!strcmp(red, "sum"))
		loss = eng_sum(loss, NULL, 0, false);
	else if (!strcmp(red, "mean"))
		loss = eng_div(eng_sum(loss, NULL, 0, false), eng_sum(wt, NULL, 0, false));
	*out = loss ? eng_cast(loss, dt) : NULL;
	return onx_check(n, *out);
}

eng_status onx_op_nll_loss(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *t = onx_in(n, 1);
	if (!x || !t)
		return onx_fail(n, ENG_EINVAL, "input and target are needed");
	return nll(n, x, t, onx_in(n, 2), &n->out[0]);
}

eng_status onx_op_sce_loss(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *t = onx_in(n, 1);
	if (!x || !t)
		return onx_fail(n, ENG_EINVAL, "scores and labels are needed");
	if (eng_ndim(x) < 2)
		return onx_fail(n, ENG_ESHAPE, "scores must be (N, C, ...)");
	eng_tensor *lp = eng_log_softmax(x, 1);
	if (lp && eng_tensor_dtype(lp) != eng_tensor_dtype(x))
		lp = eng_cast(lp, eng_tensor_dtype(x));
	eng_status s = onx_check(n, lp);
	if (s)
		return s;
	if (n->n_out > 1)
		n->out[1] = lp;
	return nll(n, lp, t, onx_in(n, 2), &n->out[0]);
}
