/* ops_reduce.c: ONNX reductions (ReduceSum ... ReduceLogSumExp, axes as attribute or input by
 * opset), ArgMax/ArgMin, and Softmax/LogSoftmax/Hardmax (opset < 13: the flattened 2-D form). */
#include <math.h>
#include <string.h>

#include "onnx_int.h"
#include "ops.h"

/* The reduce axes of node n for rank r into ax (distinct, normalised): *nax = 0 and *noop set
 * when nothing is to be reduced. */
static eng_status reduce_axes(onx_node *n, int r, int *ax, int *nax, bool *noop)
{
	const char *op = n->pb->op_type;
	bool from_input = !strcmp(op, "ReduceSum") ? n->opset >= 13 : n->opset >= 18;
	int64_t raw[ENG_MAX_DIMS + 1];
	int cnt;
	eng_status s = from_input ? onx_in_ints(n, 1, raw, ENG_MAX_DIMS + 1, &cnt)
				  : onx_attr_ints(n, "axes", raw, ENG_MAX_DIMS + 1, &cnt);
	if (s)
		return s;
	*noop = false;
	*nax = 0;
	if (cnt <= 0) {
		if (onx_attr_i(n, "noop_with_empty_axes", 0)) {
			*noop = true;
			return ENG_OK;
		}
		for (int i = 0; i < r; i++)
			ax[(*nax)++] = i;
		return ENG_OK;
	}
	bool seen[ENG_MAX_DIMS] = {0};
	for (int i = 0; i < cnt; i++) {
		int a;
		if (!onx_axis(raw[i], r, &a))
			return onx_fail(n, ENG_EAXIS, "axis %lld is out of range for rank %d", (long long)raw[i], r);
		if (!seen[a])
			ax[(*nax)++] = a;
		seen[a] = true;
	}
	return ENG_OK;
}

static eng_tensor *drop_axes(const eng_tensor *y, const int *ax, int nax)
{
	int64_t shape[ENG_MAX_DIMS];
	int nd = 0;
	for (int i = 0; i < eng_ndim(y); i++) {
		bool drop = false;
		for (int k = 0; k < nax; k++)
			drop |= ax[k] == i;
		if (!drop)
			shape[nd++] = eng_shape(y)[i];
	}
	return eng_reshape(y, nd, shape);
}

eng_status onx_op_reduce(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	int r = eng_ndim(x), ax[ENG_MAX_DIMS], nax;
	bool noop;
	eng_status s = reduce_axes(n, r, ax, &nax, &noop);
	if (s)
		return s;
	eng_dtype dt = eng_tensor_dtype(x);
	const char *op = n->pb->op_type + 6; /* after "Reduce" */
	if (noop) {
		/* the identity, but the elementwise part still applies */
		eng_tensor *y = !strcmp(op, "L1") ? eng_abs(x) : !strcmp(op, "SumSquare") ? eng_mul(x, x)
			: !strcmp(op, "L2") ? eng_abs(x) : !strcmp(op, "LogSum") ? eng_log(x)
			: eng_reshape(x, r, eng_shape(x));
		n->out[0] = y ? eng_cast(y, dt) : NULL;
		return onx_check(n, n->out[0]);
	}
	if (nax == 0 && r == 0) { /* a scalar reduces to itself */
		ax[0] = 0;
		x = eng_reshape(x, 1, (int64_t[]){1});
		r = 1;
		nax = 1;
	}
	eng_tensor *y;
	if (!strcmp(op, "Sum")) y = eng_sum(x, ax, nax, true);
	else if (!strcmp(op, "Mean")) y = eng_mean(x, ax, nax, true);
	else if (!strcmp(op, "Max")) y = eng_max(x, ax, nax, true);
	else if (!strcmp(op, "Min")) y = eng_min(x, ax, nax, true);
	else if (!strcmp(op, "Prod")) y = eng_prod(x, ax, nax, true);
	else if (!strcmp(op, "L1")) y = eng_sum(eng_abs(x), ax, nax, true);
	else if (!strcmp(op, "L2")) y = eng_sqrt(eng_sum(eng_mul(x, x), ax, nax, true));
	else if (!strcmp(op, "SumSquare")) y = eng_sum(eng_mul(x, x), ax, nax, true);
	else if (!strcmp(op, "LogSum")) y = eng_log(eng_sum(x, ax, nax, true));
	else if (!strcmp(op, "LogSumExp")) {
		eng_tensor *m = eng_max(x, ax, nax, true);
		eng_tensor *inf = eng_scalar(n->ctx, eng_tensor_dtype(x), INFINITY);
		eng_tensor *ms = eng_where(eng_eq(eng_abs(m), inf), eng_zeros(n->ctx, eng_tensor_dtype(x), 0, NULL), m);
		y = eng_add(eng_log(eng_sum(eng_exp(eng_sub(x, ms)), ax, nax, true)), ms);
	} else
		return onx_fail(n, ENG_ENOTSUP, "unknown reduction");
	if (y && eng_tensor_dtype(y) != dt)
		y = eng_cast(y, dt);
	if (y && !onx_attr_i(n, "keepdims", 1))
		y = drop_axes(y, ax, nax);
	n->out[0] = y;
	return onx_check(n, y);
}

eng_status onx_op_argminmax(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	int r = eng_ndim(x), a;
	if (!onx_axis(onx_attr_i(n, "axis", 0), r, &a))
		return onx_fail(n, ENG_EAXIS, "attribute 'axis' %lld is out of range for rank %d", (long long)onx_attr_i(n, "axis", 0), r);
	bool keep = onx_attr_i(n, "keepdims", 1), last = onx_attr_i(n, "select_last_index", 0);
	bool is_max = !strcmp(n->pb->op_type, "ArgMax");
	eng_tensor *src = last ? eng_flip(x, &a, 1) : (eng_tensor *)x;
	eng_tensor *y = is_max ? eng_argmax(src, a, keep) : eng_argmin(src, a, keep);
	y = eng_cast(y, ENG_I64);
	if (last)
		y = eng_rsub_s((double)(eng_shape(x)[a] - 1), y);
	n->out[0] = y;
	return onx_check(n, y);
}

eng_status onx_op_softmax(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	const char *op = n->pb->op_type;
	int r = eng_ndim(x), a;
	int64_t axis = onx_attr_i(n, "axis", n->opset >= 13 ? -1 : 1);
	if (r == 0)
		return onx_fail(n, ENG_ENOTSUP, "a scalar input is not supported");
	if (!onx_axis(axis, r, &a))
		return onx_fail(n, ENG_EAXIS, "attribute 'axis' %lld is out of range for rank %d", (long long)axis, r);
	eng_tensor *v = (eng_tensor *)x;
	int along = a;
	if (n->opset < 13) { /* coerce to 2-D (prod(shape[:a]), prod(shape[a:])) */
		int64_t d0 = 1, d1 = 1;
		for (int i = 0; i < r; i++)
			*(i < a ? &d0 : &d1) *= eng_shape(x)[i];
		v = eng_reshape(x, 2, (int64_t[]){d0, d1});
		along = 1;
	}
	eng_tensor *y;
	if (!strcmp(op, "Softmax"))
		y = eng_softmax(v, along);
	else if (!strcmp(op, "LogSoftmax"))
		y = eng_log_softmax(v, along);
	else {
		eng_tensor *am = eng_argmax(v, along, true);
		eng_tensor *idx = eng_index(n->ctx, ENG_I32, eng_ndim(v), eng_shape(v), along);
		y = eng_cast(eng_eq(idx, am), eng_tensor_dtype(x));
	}
	if (y && eng_tensor_dtype(y) != eng_tensor_dtype(x))
		y = eng_cast(y, eng_tensor_dtype(x));
	if (y && n->opset < 13)
		y = eng_reshape(y, r, eng_shape(x));
	n->out[0] = y;
	return onx_check(n, y);
}

/* TopK by K rounds of argmax (argmin) with the chosen entries masked out: values and int64
 * indices, sorted, ties to the lower index (as ONNX). K is needed at build time. */
eng_status onx_op_topk(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	int r = eng_ndim(x), a;
	if (!onx_axis(onx_attr_i(n, "axis", -1), r, &a))
		return onx_fail(n, ENG_EAXIS, "attribute 'axis' is out of range for rank %d", r);
	int64_t k;
	if (n->opset < 10)
		k = onx_attr_i(n, "k", -1);
	else {
		int64_t kv[2];
		int cnt;
		eng_status s = onx_in_ints(n, 1, kv, 2, &cnt);
		if (s)
			return s;
		if (cnt != 1)
			return onx_fail(n, ENG_EINVAL, "K must hold one value");
		k = kv[0];
	}
	if (k < 0 || k > eng_shape(x)[a])
		return onx_fail(n, ENG_EINVAL, "K = %lld for an axis of %lld", (long long)k, (long long)eng_shape(x)[a]);
	if (k > 64)
		return onx_fail(n, ENG_ENOTSUP, "K = %lld (at most 64)", (long long)k);
	if (!onx_attr_i(n, "sorted", 1))
		return onx_fail(n, ENG_ENOTSUP, "attribute 'sorted' = 0 is not supported");
	bool largest = onx_attr_i(n, "largest", 1) != 0;
	eng_dtype dt = eng_tensor_dtype(x);
	if (!eng_dtype_is_float(dt) && !eng_dtype_is_int(dt))
		return onx_fail(n, ENG_ENOTSUP, "type %s is not supported", eng_dtype_name(dt));
	/* the key ranked by argmax (argmin for floats' smallest): integers' smallest as the largest
	 * of ~x (order-reversing, never overflows); chosen entries get the key's lowest value */
	bool is_int = eng_dtype_is_int(dt), use_max = largest || is_int;
	double lowest = !is_int ? (use_max ? -INFINITY : INFINITY)
		      : eng_dtype_is_unsigned(dt) ? 0.0
		      : -ldexp(1.0, (int)eng_dtype_size(dt) * 8 - 1);
	eng_tensor *key = is_int && !largest ? eng_xor(x, eng_scalar(n->ctx, dt, eng_dtype_is_unsigned(dt) ? 255 : -1)) : x;
	eng_tensor *idx = eng_index(n->ctx, ENG_I32, r, eng_shape(x), a);
	eng_tensor *cur = key, *taken = NULL, *vals[64], *ids[64];
	eng_tensor *fill = eng_scalar(n->ctx, dt, lowest);
	int ax = a;
	for (int64_t t = 0; t < k; t++) {
		eng_tensor *am = use_max ? eng_argmax(cur, a, true) : eng_argmin(cur, a, true);
		if (taken) {
			/* every entry left ties with the chosen ones' fill (all -inf, or the type's
			 * minimum): argmax may return a chosen one; the first entry left instead */
			eng_tensor *again = eng_gt(eng_sum(eng_where(eng_eq(idx, am), eng_cast(taken, ENG_I32),
								     eng_scalar(n->ctx, ENG_I32, 0)),
							   &ax, 1, true),
						   eng_scalar(n->ctx, ENG_I32, 0));
			am = eng_where(again, eng_argmax(eng_cast(eng_logical_not(taken), ENG_I32), a, true), am);
		}
		eng_tensor *hit = eng_eq(idx, am);
		vals[t] = eng_sum(eng_where(hit, x, eng_scalar(n->ctx, dt, 0)), &ax, 1, true);
		ids[t] = eng_cast(am, ENG_I64);
		cur = eng_where(hit, fill, cur);
		taken = taken ? eng_or(taken, hit) : hit;
		if (!cur || !taken)
			return onx_check(n, NULL);
	}
	if (k == 0) {
		int64_t sh[ENG_MAX_DIMS];
		memcpy(sh, eng_shape(x), sizeof(int64_t) * (size_t)r);
		sh[a] = 0;
		n->out[0] = eng_zeros(n->ctx, dt, r, sh);
		if (n->n_out > 1)
			n->out[1] = eng_zeros(n->ctx, ENG_I64, r, sh);
		return onx_check(n, n->out[0]);
	}
	n->out[0] = k == 1 ? vals[0] : eng_cat(vals, (int)k, a);
	if (n->n_out > 1)
		n->out[1] = k == 1 ? ids[0] : eng_cat(ids, (int)k, a);
	return onx_check(n, n->out[0]);
}
