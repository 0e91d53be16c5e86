/* ops_rnn.c: ONNX RNN, GRU and LSTM, unrolled over the (static) sequence: the input projection
 * of all steps is one matmul, each step adds its recurrent matmul and applies the gates. */
#include <stdio.h>
#include <string.h>

#include "onnx_int.h"
#include "ops.h"

typedef enum { R_RNN, R_GRU, R_LSTM } rnn_kind;

typedef struct rnn_ctx {
	onx_node *n;
	rnn_kind kind;
	int64_t H;
	double clip;
	char act[3][16];
} rnn_ctx;

static eng_tensor *act(const char *name, eng_tensor *x)
{
	if (!strcmp(name, "Sigmoid"))
		return eng_sigmoid(x);
	if (!strcmp(name, "Tanh"))
		return eng_tanh(x);
	return eng_relu(x); /* checked to be Relu */
}

static eng_tensor *clipv(const rnn_ctx *c, eng_tensor *x)
{
	return c->clip > 0 ? eng_clamp(x, -c->clip, c->clip) : x;
}

/* gate k (of width H) of the last axis of g */
static eng_tensor *gate(const rnn_ctx *c, eng_tensor *g, int k)
{
	return eng_slice(g, eng_ndim(g) - 1, k * c->H, (k + 1) * c->H, 1);
}

/* Row d of a (num_dir, ...) tensor. */
static eng_tensor *dir_row(eng_tensor *t, int d)
{
	int r = eng_ndim(t);
	return eng_reshape(eng_slice(t, 0, d, d + 1, 1), r - 1, eng_shape(t) + 1);
}

eng_status onx_op_rnn(onx_node *n)
{
	const char *op = n->pb->op_type;
	rnn_ctx c = {.n = n, .kind = !strcmp(op, "RNN") ? R_RNN : !strcmp(op, "GRU") ? R_GRU : R_LSTM};
	int G = c.kind == R_RNN ? 1 : c.kind == R_GRU ? 3 : 4;
	eng_tensor *X = onx_in(n, 0), *W = onx_in(n, 1), *R = onx_in(n, 2), *B = onx_in(n, 3);
	eng_tensor *h0 = onx_in(n, 5), *c0 = c.kind == R_LSTM ? onx_in(n, 6) : NULL, *P = c.kind == R_LSTM ? onx_in(n, 7) : NULL;
	if (!X || !W || !R)
		return onx_fail(n, ENG_EINVAL, "X, W and R are needed");
	if (eng_ndim(X) != 3 || eng_ndim(W) != 3 || eng_ndim(R) != 3)
		return onx_fail(n, ENG_ESHAPE, "X, W and R must be 3-D");
	c.H = onx_attr_i(n, "hidden_size", eng_shape(R)[2]);
	c.clip = onx_attr_f(n, "clip", 0);
	if (c.H != eng_shape(R)[2] || eng_shape(W)[1] != G * c.H)
		return onx_fail(n, ENG_ESHAPE, "hidden_size disagrees with W and R");
	if (onx_attr(n, "activation_alpha") || onx_attr(n, "activation_beta"))
		return onx_fail(n, ENG_ENOTSUP, "attributes 'activation_alpha' and 'activation_beta' are not supported");
	if (c.kind == R_LSTM && onx_attr_i(n, "input_forget", 0))
		return onx_fail(n, ENG_ENOTSUP, "attribute 'input_forget' = 1 is not supported");
	char buf[24];
	const char *dir = onx_attr_s(n, "direction", "forward", buf, sizeof(buf));
	int ndir = !strcmp(dir, "bidirectional") ? 2 : 1;
	bool reverse = !strcmp(dir, "reverse");
	if (strcmp(dir, "forward") && strcmp(dir, "reverse") && ndir == 1)
		return onx_fail(n, ENG_EINVAL, "attribute 'direction' '%s'", dir);
	/* activations: defaults, or the attribute's (per direction, the same for both required) */
	const char *def[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
	int nact = c.kind == R_RNN ? 1 : c.kind == R_GRU ? 2 : 3;
	for (int i = 0; i < nact; i++)
		snprintf(c.act[i], sizeof(c.act[i]), "%s", def[c.kind][i]);
	const Onnx__AttributeProto *aa = onx_attr(n, "activations");
	if (aa) {
		if (aa->n_strings != (size_t)(nact * ndir))
			return onx_fail(n, ENG_EINVAL, "attribute 'activations' has %zu entries", aa->n_strings);
		for (size_t i = 0; i < aa->n_strings; i++) {
			char a[16];
			size_t l = aa->strings[i].len < 15 ? aa->strings[i].len : 15;
			memcpy(a, aa->strings[i].data, l);
			a[l] = 0;
			if (strcmp(a, "Sigmoid") && strcmp(a, "Tanh") && strcmp(a, "Relu"))
				return onx_fail(n, ENG_ENOTSUP, "activation '%s' is not supported", a);
			if (i >= (size_t)nact && strcmp(a, c.act[i % nact]))
				return onx_fail(n, ENG_ENOTSUP, "different activations per direction are not supported");
			if (i < (size_t)nact)
				snprintf(c.act[i], sizeof(c.act[i]), "%s", a);
		}
	}
	int64_t layout = onx_attr_i(n, "layout", 0);
	if (layout)
		X = eng_permute(X, (int[]){1, 0, 2});
	int64_t S = eng_shape(X)[0], N = eng_shape(X)[1];
	if (onx_in(n, 4)) { /* sequence_lens: only full lengths */
		int64_t lens[4096];
		int cnt;
		eng_status s = onx_in_ints(n, 4, lens, 4096, &cnt);
		if (s)
			return s;
		for (int i = 0; i < cnt; i++)
			if (lens[i] != S)
				return onx_fail(n, ENG_ENOTSUP, "sequence_lens other than the full length are not supported");
	}
	eng_dtype dt = eng_tensor_dtype(X);
	eng_tensor *ys[2], *yh[2], *yc[2];
	for (int d = 0; d < ndir; d++) {
		eng_tensor *Wd = dir_row(W, d), *Rd = dir_row(R, d);
		eng_tensor *xp = eng_matmul(X, eng_transpose(Wd, 0, 1)); /* (S, N, G*H) */
		eng_tensor *rb = NULL;
		if (B) {
			eng_tensor *Bd = dir_row(B, d);
			eng_tensor *wb = eng_slice(Bd, 0, 0, G * c.H, 1);
			rb = eng_slice(Bd, 0, G * c.H, 2 * G * c.H, 1);
			xp = eng_add(xp, wb);
			if (c.kind != R_GRU) {
				xp = eng_add(xp, rb);
				rb = NULL;
			}
		}
		eng_tensor *h = h0 ? dir_row(h0, d) : eng_zeros(n->ctx, dt, 2, (int64_t[]){N, c.H});
		eng_tensor *cs = c0 ? dir_row(c0, d) : eng_zeros(n->ctx, dt, 2, (int64_t[]){N, c.H});
		eng_tensor *Pd = P ? dir_row(P, d) : NULL;
		eng_tensor *steps[4096];
		if (S > 4096)
			return onx_fail(n, ENG_ENOTSUP, "a sequence of %lld steps", (long long)S);
		bool rev = reverse || d == 1;
		for (int64_t k = 0; k < S; k++) {
			int64_t t = rev ? S - 1 - k : k;
			eng_tensor *xt = eng_reshape(eng_slice(xp, 0, t, t + 1, 1), 2, (int64_t[]){N, G * c.H});
			eng_tensor *Rt = eng_transpose(Rd, 0, 1);
			if (c.kind == R_RNN) {
				h = act(c.act[0], clipv(&c, eng_add(xt, eng_matmul(h, Rt))));
			} else if (c.kind == R_GRU) {
				eng_tensor *hr = eng_matmul(h, Rt); /* (N, 3H): z, r, h parts */
				if (rb)
					hr = eng_add(hr, rb);
				eng_tensor *z = act(c.act[0], clipv(&c, eng_add(gate(&c, xt, 0), gate(&c, hr, 0))));
				eng_tensor *r = act(c.act[0], clipv(&c, eng_add(gate(&c, xt, 1), gate(&c, hr, 1))));
				eng_tensor *hh;
				if (onx_attr_i(n, "linear_before_reset", 0))
					hh = eng_add(gate(&c, xt, 2), eng_mul(r, gate(&c, hr, 2)));
				else {
					eng_tensor *Rh = eng_slice(Rd, 0, 2 * c.H, 3 * c.H, 1);
					eng_tensor *v = eng_matmul(eng_mul(r, h), eng_transpose(Rh, 0, 1));
					if (rb)
						v = eng_add(v, eng_slice(rb, 0, 2 * c.H, 3 * c.H, 1));
					hh = eng_add(gate(&c, xt, 2), v);
				}
				hh = act(c.act[1], clipv(&c, hh));
				h = eng_add(eng_mul(eng_rsub_s(1.0, z), hh), eng_mul(z, h));
			} else {
				eng_tensor *g = eng_add(xt, eng_matmul(h, Rt)); /* i, o, f, c */
				eng_tensor *gi = gate(&c, g, 0), *go = gate(&c, g, 1), *gf = gate(&c, g, 2), *gc = gate(&c, g, 3);
				if (Pd) {
					gi = eng_add(gi, eng_mul(eng_slice(Pd, 0, 0, c.H, 1), cs));
					gf = eng_add(gf, eng_mul(eng_slice(Pd, 0, 2 * c.H, 3 * c.H, 1), cs));
				}
				eng_tensor *it = act(c.act[0], clipv(&c, gi)), *ft = act(c.act[0], clipv(&c, gf));
				eng_tensor *ct = act(c.act[1], clipv(&c, gc));
				cs = eng_add(eng_mul(ft, cs), eng_mul(it, ct));
				if (Pd)
					go = eng_add(go, eng_mul(eng_slice(Pd, 0, c.H, 2 * c.H, 1), cs));
				eng_tensor *ot = act(c.act[0], clipv(&c, go));
				h = eng_mul(ot, act(c.act[2], cs));
			}
			if (!h)
				return onx_check(n, h);
			steps[t] = eng_reshape(h, 3, (int64_t[]){1, N, c.H});
		}
		ys[d] = S ? eng_cat(steps, (int)S, 0) : eng_zeros(n->ctx, dt, 3, (int64_t[]){0, N, c.H}); /* (S, N, H) */
		yh[d] = eng_reshape(h, 3, (int64_t[]){1, N, c.H});
		yc[d] = eng_reshape(cs, 3, (int64_t[]){1, N, c.H});
	}
	eng_tensor *Y = ndir == 2 ? eng_stack(ys, 2, 1) : eng_unsqueeze(ys[0], 1); /* (S, D, N, H) */
	eng_tensor *Yh = ndir == 2 ? eng_cat(yh, 2, 0) : yh[0];
	eng_tensor *Yc = ndir == 2 ? eng_cat(yc, 2, 0) : yc[0];
	if (layout) {
		Y = eng_permute(Y, (int[]){2, 0, 1, 3});
		Yh = eng_permute(Yh, (int[]){1, 0, 2});
		Yc = eng_permute(Yc, (int[]){1, 0, 2});
	}
	n->out[0] = Y;
	if (n->n_out > 1)
		n->out[1] = Yh;
	if (n->n_out > 2 && c.kind == R_LSTM)
		n->out[2] = Yc;
	return onx_check(n, Y);
}
