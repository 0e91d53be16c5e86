/* ops_train.c: the optimizer ops of domain ai.onnx.preview.training (Adagrad, Adam, Momentum):
 * one update step of n tensors, inputs R (learning rate), T (step, needed at build time), then
 * the n tensors, their gradients and their optimizer states. */
#include <math.h>
#include <string.h>

#include "onnx_int.h"
#include "ops.h"

eng_status onx_op_optimizer(onx_node *n)
{
	const char *op = n->pb->op_type;
	int states = !strcmp(op, "Adam") ? 2 : 1; /* Adam: V and H; Adagrad: H; Momentum: V */
	int k = (n->n_in - 2) / (2 + states);
	if (k < 1 || n->n_in != 2 + k * (2 + states) || n->n_out != k * (1 + states))
		return onx_fail(n, ENG_EINVAL, "%d inputs and %d outputs do not make whole groups", n->n_in, n->n_out);
	eng_tensor *R = onx_in(n, 0);
	double T;
	bool present;
	eng_status s = onx_in_scalar(n, 1, &T, &present);
	if (s)
		return s;
	if (!R || !present)
		return onx_fail(n, ENG_EINVAL, "R and T are needed");
	double norm = onx_attr_f(n, "norm_coefficient", 0);
	R = eng_reshape(R, 0, NULL);
	for (int i = 0; i < k; i++) {
		eng_tensor *X = onx_in(n, 2 + i), *G = onx_in(n, 2 + k + i);
		eng_tensor *S1 = onx_in(n, 2 + 2 * k + i), *S2 = states > 1 ? onx_in(n, 2 + 3 * k + i) : NULL;
		if (!X || !G || !S1 || (states > 1 && !S2))
			return onx_fail(n, ENG_EINVAL, "group %d is incomplete", i);
		eng_dtype dt = eng_tensor_dtype(X);
		eng_tensor *Rx = eng_cast(R, dt);
		eng_tensor *g = norm != 0 ? eng_add(eng_mul_s(X, norm), G) : G;
		eng_tensor *xn, *s1, *s2 = NULL;
		if (!strcmp(op, "Adagrad")) {
			eng_tensor *r = eng_div_s(Rx, 1 + T * onx_attr_f(n, "decay_factor", 0));
			s1 = eng_add(S1, eng_mul(g, g));
			eng_tensor *h = eng_add_s(eng_sqrt(s1), onx_attr_f(n, "epsilon", 0));
			xn = eng_sub(X, eng_div(eng_mul(r, g), h));
		} else if (!strcmp(op, "Momentum")) {
			double a = onx_attr_f(n, "alpha", 0), b = onx_attr_f(n, "beta", 0);
			char buf[16];
			const char *mode = onx_attr_s(n, "mode", "standard", buf, sizeof(buf));
			s1 = eng_add(eng_mul_s(S1, a), eng_mul_s(g, T > 0 ? b : 1)); /* beta is 1 at step 0 */
			if (!strcmp(mode, "nesterov"))
				xn = eng_sub(X, eng_mul(Rx, eng_add(g, eng_mul_s(s1, a))));
			else if (!strcmp(mode, "standard"))
				xn = eng_sub(X, eng_mul(Rx, s1));
			else
				return onx_fail(n, ENG_EINVAL, "attribute 'mode' '%s'", mode);
		} else { /* Adam */
			double a = onx_attr_f(n, "alpha", 0.9), b = onx_attr_f(n, "beta", 0.999), eps = onx_attr_f(n, "epsilon", 1e-6);
			double post = onx_attr_f(n, "norm_coefficient_post", 0);
			s1 = eng_add(eng_mul_s(S1, a), eng_mul_s(g, 1 - a));
			s2 = eng_add(eng_mul_s(S2, b), eng_mul_s(eng_mul(g, g), 1 - b));
			eng_tensor *hs = eng_add_s(eng_sqrt(s2), eps);
			double adj = T > 0 ? sqrt(1 - pow(b, T)) / (1 - pow(a, T)) : 1;
			xn = eng_sub(X, eng_mul(eng_mul_s(Rx, adj), eng_div(s1, hs)));
			if (post != 0)
				xn = eng_mul_s(xn, 1 - post);
		}
		n->out[i] = xn ? eng_cast(xn, dt) : NULL;
		n->out[k + i] = s1 ? eng_cast(s1, eng_tensor_dtype(S1)) : NULL;
		if (states > 1)
			n->out[2 * k + i] = s2 ? eng_cast(s2, eng_tensor_dtype(S2)) : NULL;
		if ((s = onx_check(n, n->out[i])))
			return s;
	}
	return ENG_OK;
}
