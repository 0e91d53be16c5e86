/* loss.c: the losses of nn.h (sparse and dense cross-entropy, MSE, binary cross-entropy on
 * probabilities and on logits), each a mean over the batch computed in float32. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "tensor/composite.h"
#include <tensord/nn.h>

/* a and b from one context with equal shapes; fn names the caller. */
static bool same_shape(const eng_tensor *a, const eng_tensor *b, const char *fn)
{
	if (!eng_same_ctx(a, b, fn))
		return false;
	const eng_node *na = a->node, *nb = b->node;
	if (na->ndim == nb->ndim && !memcmp(na->shape, nb->shape, sizeof(int64_t) * na->ndim))
		return true;
	eng_set_error(a->ctx, ENG_ESHAPE,
		      "%s: shapes differ (%d-d with %lld elements vs %d-d with %lld)", fn, na->ndim,
		      (long long)eng_node_numel(na), nb->ndim, (long long)eng_node_numel(nb));
	return false;
}

/* The engine's sparse cross-entropy (tensor/functional.c) with its two options exposed. */
eng_tensor *eng_loss_sparse_cross_entropy(const eng_tensor *logits, const eng_tensor *labels,
					  double label_smoothing, int64_t ignore_index)
{
	return eng_sparse_ce(logits, labels, label_smoothing, &ignore_index,
			     "loss_sparse_cross_entropy");
}

eng_tensor *eng_loss_cross_entropy(const eng_tensor *logits, const eng_tensor *target)
{
	static const char fn[] = "loss_cross_entropy";
	if (!logits || !target)
		return NULL;
	eng_ctx *ctx = logits->ctx;
	if (!same_shape(logits, target, fn))
		return NULL;
	const eng_node *nl = logits->node;
	if (nl->ndim != 2 || nl->shape[1] < 1) {
		eng_set_error(ctx, ENG_ESHAPE,
			      "%s: need logits and target (N, C >= 1), got %d dims", fn, nl->ndim);
		return NULL;
	}
	int ax1 = 1;
	eng_scope_begin(ctx);
	eng_tensor *lp = eng_cast(eng_log_softmax(logits, 1), ENG_F32);
	eng_tensor *row = eng_sum(eng_mul(lp, eng_cast(target, ENG_F32)), &ax1, 1, false);
	eng_tensor *r = eng_neg(eng_mean(row, NULL, 0, false));
	r = eng_keep(eng_cast(r, eng_dtype_float_of(nl->dtype)));
	eng_scope_end(ctx);
	return r;
}

/* The mean of an elementwise loss expression over all elements, as the float dtype of the
 * operands; build(x, t) gets both operands as float32. */
static eng_tensor *mean_loss(const eng_tensor *a, const eng_tensor *b, const char *fn,
			     eng_tensor *(*build)(const eng_tensor *x, const eng_tensor *t))
{
	if (!a || !b)
		return NULL;
	if (!same_shape(a, b, fn))
		return NULL;
	eng_ctx *ctx = a->ctx;
	eng_dtype dt = eng_dtype_float_of(eng_dtype_promote(a->node->dtype, b->node->dtype));
	eng_scope_begin(ctx);
	eng_tensor *e = build(eng_cast(a, ENG_F32), eng_cast(b, ENG_F32));
	eng_tensor *r = eng_keep(eng_cast(eng_mean(e, NULL, 0, false), dt));
	eng_scope_end(ctx);
	return r;
}

static eng_tensor *mse_terms(const eng_tensor *x, const eng_tensor *t)
{
	return eng_square(eng_sub(x, t));
}

/* log clamped at -100 (PyTorch's BCELoss), so log(0) stays finite. */
static eng_tensor *clamped_log(const eng_tensor *p)
{
	return p ? eng_maximum(eng_log(p), eng_scalar(p->ctx, ENG_F32, -100.0)) : NULL;
}

static eng_tensor *bce_terms(const eng_tensor *p, const eng_tensor *t)
{
	eng_tensor *a = eng_mul(t, clamped_log(p));
	eng_tensor *b = eng_mul(eng_rsub_s(1.0, t), clamped_log(eng_rsub_s(1.0, p)));
	return eng_neg(eng_add(a, b));
}

/* max(x, 0) - x*t + log(1 + exp(-|x|)): never exponentiates a positive number. */
static eng_tensor *bce_logits_terms(const eng_tensor *x, const eng_tensor *t)
{
	eng_tensor *soft = eng_log(eng_add_s(eng_exp(eng_neg(eng_abs(x))), 1.0));
	return eng_add(eng_sub(eng_relu(x), eng_mul(x, t)), soft);
}

eng_tensor *eng_loss_mse(const eng_tensor *pred, const eng_tensor *target)
{
	return mean_loss(pred, target, "loss_mse", mse_terms);
}

eng_tensor *eng_loss_bce(const eng_tensor *prob, const eng_tensor *target)
{
	return mean_loss(prob, target, "loss_bce", bce_terms);
}

eng_tensor *eng_loss_bce_with_logits(const eng_tensor *logits, const eng_tensor *target)
{
	return mean_loss(logits, target, "loss_bce_with_logits", bce_logits_terms);
}
