/* ops_nn.c: ONNX dense and normalisation ops: MatMul, Gemm, BatchNormalization (inference and
 * training), LayerNormalization, InstanceNormalization, GroupNormalization, RMSNormalization. */
#include <string.h>

#include "onnx_int.h"
#include "ops.h"

eng_status onx_op_matmul(onx_node *n)
{
	eng_tensor *a = onx_in(n, 0), *b = onx_in(n, 1);
	if (!a || !b)
		return onx_fail(n, ENG_EINVAL, "two inputs are needed");
	if (eng_tensor_dtype(a) != eng_tensor_dtype(b))
		return onx_fail(n, ENG_EDTYPE, "inputs differ in type");
	n->out[0] = eng_matmul(a, b);
	return onx_check(n, n->out[0]);
}

eng_status onx_op_gemm(onx_node *n)
{
	eng_tensor *a = onx_in(n, 0), *b = onx_in(n, 1), *c = onx_in(n, 2);
	if (!a || !b)
		return onx_fail(n, ENG_EINVAL, "two inputs are needed");
	if (eng_ndim(a) != 2 || eng_ndim(b) != 2)
		return onx_fail(n, ENG_ESHAPE, "A and B must be 2-D");
	if (n->opset < 7 && onx_attr_i(n, "broadcast", 0) == 0 && c && eng_ndim(c) != 2)
		return onx_fail(n, ENG_ENOTSUP, "C without broadcast must be 2-D");
	double alpha = onx_attr_f(n, "alpha", 1.0), beta = onx_attr_f(n, "beta", 1.0);
	if (onx_attr_i(n, "transA", 0))
		a = eng_transpose(a, 0, 1);
	if (onx_attr_i(n, "transB", 0))
		b = eng_transpose(b, 0, 1);
	eng_dtype dt = eng_tensor_dtype(a);
	eng_tensor *y = eng_matmul(a, b);
	if (alpha != 1.0)
		y = eng_mul_s(y, alpha);
	if (c)
		y = eng_add(y, beta != 1.0 ? eng_mul_s(c, beta) : c);
	n->out[0] = y ? eng_cast(y, dt) : y;
	return onx_check(n, n->out[0]);
}

/* p (C) reshaped to (1, C, 1, ...) for rank r */
static eng_tensor *chan(const eng_tensor *p, int r)
{
	int64_t sh[ENG_MAX_DIMS];
	for (int i = 0; i < r; i++)
		sh[i] = i == 1 ? eng_numel(p) : 1;
	return eng_reshape(p, r, sh);
}

eng_status onx_op_batchnorm(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *sc = onx_in(n, 1), *b = onx_in(n, 2), *mean = onx_in(n, 3), *var = onx_in(n, 4);
	if (!x || !sc || !b || !mean || !var)
		return onx_fail(n, ENG_EINVAL, "five inputs are needed");
	bool train = onx_attr_i(n, "training_mode", 0) != 0;
	if (n->opset < 9 && onx_attr_i(n, "spatial", 1) != 1)
		return onx_fail(n, ENG_ENOTSUP, "attribute 'spatial' = 0 is not supported");
	if (n->opset < 7 && onx_attr_i(n, "is_test", 0) == 0)
		return onx_fail(n, ENG_ENOTSUP, "training mode (is_test = 0) is not supported");
	for (int i = 1; i < n->n_out && !train; i++)
		if (*n->pb->output[i])
			return onx_fail(n, ENG_ENOTSUP, "training outputs without training_mode are not supported");
	int r = eng_ndim(x);
	if (r < 2)
		return onx_fail(n, ENG_ESHAPE, "the input needs at least 2 dims");
	double eps = onx_attr_f(n, "epsilon", 1e-5);
	eng_tensor *m = chan(mean, r), *v = chan(var, r);
	if (train) { /* batch statistics; running ones updated with momentum */
		int ax[ENG_MAX_DIMS], nax = 0;
		for (int i = 0; i < r; i++)
			if (i != 1)
				ax[nax++] = i;
		double mom = onx_attr_f(n, "momentum", 0.9);
		eng_tensor *bm = eng_mean(x, ax, nax, true);
		eng_tensor *d = eng_sub(x, bm);
		eng_tensor *bv = eng_mean(eng_mul(d, d), ax, nax, true);
		if (n->n_out > 1)
			n->out[1] = eng_add(eng_mul_s(mean, mom), eng_mul_s(eng_reshape(bm, 1, eng_shape(mean)), 1 - mom));
		if (n->n_out > 2)
			n->out[2] = eng_add(eng_mul_s(var, mom), eng_mul_s(eng_reshape(bv, 1, eng_shape(var)), 1 - mom));
		m = bm;
		v = bv;
	}
	eng_tensor *inv = eng_rsqrt(eng_add_s(v, eps));
	eng_tensor *y = eng_add(eng_mul(eng_mul(eng_sub(x, m), inv), chan(sc, r)), chan(b, r));
	n->out[0] = y ? eng_cast(y, eng_tensor_dtype(x)) : y;
	return onx_check(n, n->out[0]);
}

eng_status onx_op_layernorm(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *sc = onx_in(n, 1), *b = onx_in(n, 2);
	if (!x || !sc)
		return onx_fail(n, ENG_EINVAL, "X and Scale are needed");
	int r = eng_ndim(x), a;
	if (!onx_axis(onx_attr_i(n, "axis", -1), r, &a))
		return onx_fail(n, ENG_EAXIS, "attribute 'axis' is out of range for rank %d", r);
	if (onx_attr_i(n, "stash_type", 1) != 1)
		return onx_fail(n, ENG_ENOTSUP, "attribute 'stash_type' other than float is not supported");
	double eps = onx_attr_f(n, "epsilon", 1e-5);
	int ax[ENG_MAX_DIMS], nax = 0;
	for (int i = a; i < r; i++)
		ax[nax++] = i;
	eng_dtype dt = eng_tensor_dtype(x);
	eng_tensor *xf = eng_cast(x, ENG_F32);
	eng_tensor *mean = eng_mean(xf, ax, nax, true);
	eng_tensor *d = eng_sub(xf, mean);
	eng_tensor *inv = eng_rsqrt(eng_add_s(eng_mean(eng_mul(d, d), ax, nax, true), eps));
	eng_tensor *y = eng_mul(eng_mul(d, inv), sc);
	if (b)
		y = eng_add(y, b);
	n->out[0] = eng_cast(y, dt);
	if (n->n_out > 1)
		n->out[1] = mean;
	if (n->n_out > 2)
		n->out[2] = inv;
	return onx_check(n, n->out[0]);
}

eng_status onx_op_instancenorm(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *sc = onx_in(n, 1), *b = onx_in(n, 2);
	if (!x || !sc || !b)
		return onx_fail(n, ENG_EINVAL, "three inputs are needed");
	int r = eng_ndim(x);
	if (r < 3)
		return onx_fail(n, ENG_ESHAPE, "the input needs at least 3 dims");
	double eps = onx_attr_f(n, "epsilon", 1e-5);
	int ax[ENG_MAX_DIMS], nax = 0;
	for (int i = 2; i < r; i++)
		ax[nax++] = i;
	eng_tensor *mean = eng_mean(x, ax, nax, true);
	eng_tensor *d = eng_sub(x, mean);
	eng_tensor *inv = eng_rsqrt(eng_add_s(eng_mean(eng_mul(d, d), ax, nax, true), eps));
	eng_tensor *y = eng_add(eng_mul(eng_mul(d, inv), chan(sc, r)), chan(b, r));
	n->out[0] = y ? eng_cast(y, eng_tensor_dtype(x)) : y;
	return onx_check(n, n->out[0]);
}

/* GroupNormalization: statistics per (sample, group of C / num_groups channels); scale and bias
 * per group (opset 18) or per channel (opset >= 21). */
eng_status onx_op_groupnorm(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *sc = onx_in(n, 1), *b = onx_in(n, 2);
	if (!x || !sc || !b)
		return onx_fail(n, ENG_EINVAL, "X, scale and bias are needed");
	int r = eng_ndim(x);
	int64_t G = onx_attr_i(n, "num_groups", 0);
	if (r < 2 || G < 1 || eng_shape(x)[1] % G)
		return onx_fail(n, ENG_ESHAPE, "num_groups %lld does not divide the channels", (long long)G);
	if (onx_attr_i(n, "stash_type", 1) != 1)
		return onx_fail(n, ENG_ENOTSUP, "attribute 'stash_type' other than float is not supported");
	int64_t N = eng_shape(x)[0], C = eng_shape(x)[1], rest = eng_numel(x) / (N ? N : 1) / (C ? C : 1);
	bool per_group = n->opset < 21;
	if (eng_numel(sc) != (per_group ? G : C) || eng_numel(b) != (per_group ? G : C))
		return onx_fail(n, ENG_ESHAPE, "scale and bias must hold %lld values", (long long)(per_group ? G : C));
	double eps = onx_attr_f(n, "epsilon", 1e-5);
	eng_dtype dt = eng_tensor_dtype(x);
	eng_tensor *xg = eng_reshape(eng_cast(x, ENG_F32), 3, (int64_t[]){N, G, C / G * rest});
	int last = 2;
	eng_tensor *mean = eng_mean(xg, &last, 1, true), *d = eng_sub(xg, mean);
	eng_tensor *y = eng_mul(d, eng_rsqrt(eng_add_s(eng_mean(eng_mul(d, d), &last, 1, true), eps)));
	y = eng_reshape(y, 3, (int64_t[]){N, C, rest});
	eng_tensor *s3, *b3;
	if (per_group) { /* group g's value for its C / G channels */
		s3 = eng_reshape(eng_expand(eng_reshape(sc, 2, (int64_t[]){G, 1}), 2, (int64_t[]){G, C / G}), 3, (int64_t[]){1, C, 1});
		b3 = eng_reshape(eng_expand(eng_reshape(b, 2, (int64_t[]){G, 1}), 2, (int64_t[]){G, C / G}), 3, (int64_t[]){1, C, 1});
	} else {
		s3 = eng_reshape(sc, 3, (int64_t[]){1, C, 1});
		b3 = eng_reshape(b, 3, (int64_t[]){1, C, 1});
	}
	y = eng_add(eng_mul(y, eng_cast(s3, ENG_F32)), eng_cast(b3, ENG_F32));
	n->out[0] = y ? eng_cast(eng_reshape(y, r, eng_shape(x)), dt) : y;
	return onx_check(n, n->out[0]);
}

/* RMSNormalization: x / sqrt(mean(x^2 over axes [axis, rank)) + epsilon) * scale. */
eng_status onx_op_rmsnorm(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *sc = onx_in(n, 1);
	if (!x || !sc)
		return onx_fail(n, ENG_EINVAL, "X and scale are needed");
	int r = eng_ndim(x), a;
	if (!onx_axis(onx_attr_i(n, "axis", -1), r, &a))
		return onx_fail(n, ENG_EAXIS, "attribute 'axis' is out of range for rank %d", r);
	if (onx_attr_i(n, "stash_type", 1) != 1)
		return onx_fail(n, ENG_ENOTSUP, "attribute 'stash_type' other than float is not supported");
	int ax[ENG_MAX_DIMS], nax = 0;
	for (int i = a; i < r; i++)
		ax[nax++] = i;
	eng_tensor *xf = eng_cast(x, ENG_F32);
	eng_tensor *y = eng_mul(xf, eng_rsqrt(eng_add_s(eng_mean(eng_mul(xf, xf), ax, nax, true), onx_attr_f(n, "epsilon", 1e-5))));
	y = eng_mul(y, eng_cast(sc, ENG_F32));
	n->out[0] = y ? eng_cast(y, eng_tensor_dtype(x)) : y;
	return onx_check(n, n->out[0]);
}
