/* functional.c: neural-network functions: matmul, linear, one_hot, gather, embedding, layernorm
 * and sparse cross-entropy, each a broadcast product or compare plus one reduction. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "composite.h"

/* ---- matmul and linear ---- */

/* a (.., M, K) times b (.., K, N), batch dims broadcasting: (a[.., M, 1, K] * bT[.., 1, N, K])
 * summed over K. Call inside a scope. */
static eng_tensor *matmul_core(const eng_tensor *a, const eng_tensor *b, eng_dtype dt)
{
	int da = a->node->ndim, last = -1;
	int64_t mk[3] = {a->node->shape[da - 2], 1, a->node->shape[da - 1]};
	eng_tensor *bt = eng_transpose(b, -1, -2);
	int64_t nk[3] = {1, b->node->shape[b->node->ndim - 1], b->node->shape[b->node->ndim - 2]};
	eng_tensor *prod = eng_mul(reshape_at(a, da - 2, 2, mk, 3),
				   bt ? reshape_at(bt, bt->node->ndim - 2, 2, nk, 3) : NULL);
	return sum_as(prod, &last, 1, dt);
}

eng_tensor *eng_matmul(const eng_tensor *a, const eng_tensor *b)
{
	if (!a || !b)
		return NULL;
	eng_ctx *ctx = a->ctx;
	if (!eng_same_ctx(a, b, "matmul"))
		return NULL;
	const eng_node *na = a->node, *nb = b->node;
	if (na->ndim == 0 || nb->ndim == 0) {
		eng_set_error(ctx, ENG_ESHAPE,
			      "matmul: operands need at least 1 dim (got %d and %d)", na->ndim,
			      nb->ndim);
		return NULL;
	}
	bool a1 = na->ndim == 1, b1 = nb->ndim == 1;
	int da = a1 ? 2 : na->ndim, db = b1 ? 2 : nb->ndim;
	int64_t m = a1 ? 1 : na->shape[da - 2], ka = na->shape[na->ndim - 1];
	int64_t kb = b1 ? nb->shape[0] : nb->shape[db - 2], n = b1 ? 1 : nb->shape[db - 1];
	if (ka != kb) {
		eng_set_error(ctx, ENG_ESHAPE, "matmul: inner dimensions differ (%lld vs %lld)",
			      (long long)ka, (long long)kb);
		return NULL;
	}
	/* batch dims broadcast like elementwise ops */
	int ba = da - 2, bb = db - 2, nbat = ba > bb ? ba : bb;
	int64_t bshape[ENG_MAX_DIMS], out[ENG_MAX_DIMS], batch = 1;
	for (int i = 0; i < nbat; i++) {
		int ia = i - (nbat - ba), ib = i - (nbat - bb);
		int64_t x = ia >= 0 ? na->shape[ia] : 1, y = ib >= 0 ? nb->shape[ib] : 1;
		if (x != y && x != 1 && y != 1) {
			eng_set_error(
				ctx, ENG_ESHAPE,
				"matmul: batch dimension %d does not broadcast (%lld vs %lld)", i,
				(long long)x, (long long)y);
			return NULL;
		}
		bshape[i] = x == 1 ? y : x;
		batch *= bshape[i];
	}
	int nout = nbat;
	memcpy(out, bshape, sizeof(int64_t) * nbat);
	if (!a1)
		out[nout++] = m;
	if (!b1)
		out[nout++] = n;
	eng_dtype dt = eng_dtype_promote(na->dtype, nb->dtype);
	eng_scope_begin(ctx);
	int64_t s2[ENG_MAX_DIMS];
	const eng_tensor *x = a, *y = b; /* as (.., M, K) and (.., K, N) */
	if (a1) {
		s2[0] = 1, s2[1] = ka;
		x = eng_reshape(a, 2, s2);
	}
	if (b1) {
		s2[0] = kb, s2[1] = 1;
		y = eng_reshape(b, 2, s2);
	}
	if (x && y && nbat + 3 > ENG_MAX_DIMS) { /* no room for the product's axes: merge batch */
		memcpy(s2, bshape, sizeof(int64_t) * nbat);
		s2[nbat] = m, s2[nbat + 1] = ka;
		int64_t mk[3] = {batch, m, ka}, kn[3] = {batch, kb, n};
		x = eng_reshape(eng_expand(x, nbat + 2, s2), 3, mk);
		s2[nbat] = kb, s2[nbat + 1] = n;
		y = eng_reshape(eng_expand(y, nbat + 2, s2), 3, kn);
	}
	eng_tensor *r = x && y ? eng_reshape(matmul_core(x, y, dt), nout, out) : NULL;
	r = eng_keep(r);
	eng_scope_end(ctx);
	return r;
}

eng_tensor *eng_linear(const eng_tensor *x, const eng_tensor *w, const eng_tensor *bias)
{
	if (!x || !w)
		return NULL;
	eng_ctx *ctx = x->ctx;
	if (!eng_same_ctx(x, w, "linear") || (bias && !eng_same_ctx(x, bias, "linear")))
		return NULL;
	const eng_node *nx = x->node, *nw = w->node;
	if (nw->ndim != 2 || nx->ndim < 1 || nx->shape[nx->ndim - 1] != nw->shape[1]) {
		eng_set_error(
			ctx, ENG_ESHAPE,
			"linear: need x (..., in) and weight (out, in); got %d-d x and %d-d weight"
			" or mismatched in",
			nx->ndim, nw->ndim);
		return NULL;
	}
	if (bias && (bias->node->ndim != 1 || bias->node->shape[0] != nw->shape[0])) {
		eng_set_error(ctx, ENG_ESHAPE, "linear: bias must have shape (%lld)",
			      (long long)nw->shape[0]);
		return NULL;
	}
	eng_scope_begin(ctx);
	eng_tensor *r = eng_matmul(x, eng_transpose(w, 0, 1));
	if (bias)
		r = eng_add(r, bias);
	r = eng_keep(r);
	eng_scope_end(ctx);
	return r;
}

/* ---- indexing by comparison with the INDEX leaf ---- */

static bool int_arg(const eng_tensor *t, const char *fn, const char *what)
{
	if (eng_dtype_is_int(t->node->dtype))
		return true;
	eng_set_error(t->ctx, ENG_EDTYPE, "%s: %s must be an integer tensor, got %s", fn, what,
		      eng_dtype_name(t->node->dtype));
	return false;
}

/* labels[..., None] == index along a new last axis; labels outside [0, C) give a zero row. */
eng_tensor *eng_one_hot(const eng_tensor *labels, int64_t num_classes)
{
	if (!labels)
		return NULL;
	eng_ctx *ctx = labels->ctx;
	const eng_node *n = labels->node;
	if (!int_arg(labels, "one_hot", "labels"))
		return NULL;
	if (num_classes < 1 || num_classes > INT32_MAX) {
		eng_set_error(ctx, ENG_EINVAL, "one_hot: num_classes %lld out of range",
			      (long long)num_classes);
		return NULL;
	}
	if (n->ndim >= ENG_MAX_DIMS) {
		eng_set_error(ctx, ENG_ERANGE, "one_hot: labels already have %d dims", n->ndim);
		return NULL;
	}
	int64_t shape[ENG_MAX_DIMS];
	memcpy(shape, n->shape, sizeof(int64_t) * n->ndim);
	shape[n->ndim] = num_classes;
	eng_scope_begin(ctx);
	eng_tensor *idx = eng_index(ctx, ENG_I32, n->ndim + 1, shape, n->ndim);
	eng_tensor *r = eng_eq(eng_unsqueeze(labels, n->ndim), idx);
	r = eng_keep(eng_cast(r, ENG_F32));
	eng_scope_end(ctx);
	return r;
}

/* out = sum over j of where(idx[.., i, ..] == j, a[.., j, ..], 0) along a new axis after axis:
 * a compare against the INDEX leaf and one reduction. Indices outside [0, n) give 0. */
eng_tensor *eng_gather(const eng_tensor *a, int axis, const eng_tensor *idx)
{
	if (!a || !idx)
		return NULL;
	eng_ctx *ctx = a->ctx;
	const eng_node *na = a->node, *ni = idx->node;
	int ax;
	if (!eng_same_ctx(a, idx, "gather") || !int_arg(idx, "gather", "idx") ||
	    !eng_axis_norm(ctx, "gather", na->ndim, axis, &ax))
		return NULL;
	if (ni->ndim != na->ndim) {
		eng_set_error(ctx, ENG_ESHAPE, "gather: idx has %d dims, input has %d", ni->ndim,
			      na->ndim);
		return NULL;
	}
	if (na->ndim >= ENG_MAX_DIMS) {
		eng_set_error(ctx, ENG_ERANGE, "gather: input already has %d dims", na->ndim);
		return NULL;
	}
	int64_t r[ENG_MAX_DIMS][2], wide[ENG_MAX_DIMS + 1];
	int nd = na->ndim, red = ax + 1;
	for (int i = 0; i < nd; i++) {
		if (i != ax && ni->shape[i] > na->shape[i]) {
			eng_set_error(ctx, ENG_ESHAPE,
				      "gather: idx size %lld exceeds input size %lld on"
				      " axis %d",
				      (long long)ni->shape[i], (long long)na->shape[i], i);
			return NULL;
		}
		r[i][0] = 0, r[i][1] = i == ax ? na->shape[i] : ni->shape[i];
	}
	for (int i = 0, k = 0; i <= nd; i++)
		wide[i] = i == red ? na->shape[ax] : ni->shape[k++];
	eng_dtype it = na->shape[ax] > INT32_MAX ? ENG_I64 : ENG_I32;
	eng_scope_begin(ctx);
	eng_tensor *src = eng_unsqueeze(eng_shrink(a, (const int64_t(*)[2])r), ax);
	eng_tensor *hit = eng_eq(eng_unsqueeze(idx, red), eng_index(ctx, it, nd + 1, wide, red));
	eng_tensor *out = eng_where(hit, src, eng_scalar_as(a, 0));
	out = eng_keep(sum_as(out, &red, 1, na->dtype));
	eng_scope_end(ctx);
	return out;
}

/* sum over v of where(idx[..., None, None] == v, table[v, :], 0): result idx.shape + (D). */
eng_tensor *eng_embedding(const eng_tensor *table, const eng_tensor *idx)
{
	if (!table || !idx)
		return NULL;
	eng_ctx *ctx = table->ctx;
	const eng_node *nt = table->node, *ni = idx->node;
	if (!eng_same_ctx(table, idx, "embedding") || !int_arg(idx, "embedding", "idx"))
		return NULL;
	if (nt->ndim != 2) {
		eng_set_error(ctx, ENG_ESHAPE, "embedding: table must be 2-d (V, D), got %d dims",
			      nt->ndim);
		return NULL;
	}
	if (ni->ndim + 2 > ENG_MAX_DIMS) {
		eng_set_error(ctx, ENG_ERANGE, "embedding: idx has too many dims (%d)", ni->ndim);
		return NULL;
	}
	int nd = ni->ndim, red = nd;
	int64_t shape[ENG_MAX_DIMS], ones[2] = {1, 1};
	memcpy(shape, ni->shape, sizeof(int64_t) * nd);
	shape[nd] = nt->shape[0], shape[nd + 1] = 1;
	eng_dtype it = nt->shape[0] > INT32_MAX ? ENG_I64 : ENG_I32;
	eng_scope_begin(ctx);
	eng_tensor *iu = reshape_at(idx, nd, 0, ones, 2);
	eng_tensor *hit = eng_eq(iu, eng_index(ctx, it, nd + 2, shape, nd));
	eng_tensor *out = eng_where(hit, table, eng_scalar_as(table, 0));
	out = eng_keep(sum_as(out, &red, 1, nt->dtype));
	eng_scope_end(ctx);
	return out;
}

/* ---- normalisation and loss ---- */

/* (x - mean) * rsqrt(mean((x - mean)^2) + eps) over the last axis, computed in float32. */
eng_tensor *eng_layernorm(const eng_tensor *x, double eps)
{
	if (!x)
		return NULL;
	eng_ctx *ctx = x->ctx;
	if (x->node->ndim < 1) {
		eng_set_error(ctx, ENG_ESHAPE, "layernorm: input needs at least 1 dim");
		return NULL;
	}
	if (!(eps >= 0) || !isfinite(eps)) {
		eng_set_error(ctx, ENG_EINVAL, "layernorm: eps must be finite and >= 0");
		return NULL;
	}
	int last = -1;
	eng_scope_begin(ctx);
	eng_tensor *xf = eng_cast(x, ENG_F32);
	eng_tensor *xc = eng_sub(xf, eng_mean(xf, &last, 1, true));
	eng_tensor *var = eng_mean(eng_mul(xc, xc), &last, 1, true);
	eng_tensor *r = eng_mul(xc, eng_rsqrt(eng_add_s(var, eps)));
	r = eng_keep(eng_cast(r, eng_dtype_float_of(x->node->dtype)));
	eng_scope_end(ctx);
	return r;
}

/* -(sum of log_softmax(logits)[i, labels[i]]) / N, as one reduction over both axes. Labels
 * outside [0, C) contribute 0. */
eng_tensor *eng_sparse_cross_entropy(const eng_tensor *logits, const eng_tensor *labels)
{
	if (!logits || !labels)
		return NULL;
	eng_ctx *ctx = logits->ctx;
	const eng_node *nl = logits->node, *ny = labels->node;
	if (!eng_same_ctx(logits, labels, "sparse_cross_entropy") ||
	    !int_arg(labels, "sparse_cross_entropy", "labels"))
		return NULL;
	if (nl->ndim != 2 || ny->ndim != 1 || ny->shape[0] != nl->shape[0] || nl->shape[1] < 1) {
		eng_set_error(
			ctx, ENG_ESHAPE,
			"sparse_cross_entropy: need logits (N, C >= 1) and labels (N); got %d-d"
			" logits and %d-d labels or mismatched N",
			nl->ndim, ny->ndim);
		return NULL;
	}
	eng_dtype dt = eng_dtype_float_of(nl->dtype);
	eng_scope_begin(ctx);
	eng_tensor *lp = eng_log_softmax(logits, 1);
	eng_tensor *hit =
		eng_eq(eng_unsqueeze(labels, 1), eng_index(ctx, ENG_I32, 2, nl->shape, 1));
	eng_tensor *picked = eng_cast(eng_where(hit, lp, eng_scalar(ctx, dt, 0)), ENG_F32);
	/* per-row loss first, then the batch mean: the row reductions fuse into one kernel */
	int ax1 = 1;
	eng_tensor *row = eng_sum(picked, &ax1, 1, false);
	eng_tensor *r = eng_mul_s(eng_sum(row, NULL, 0, false), -1.0 / (double)nl->shape[0]);
	r = eng_keep(eng_cast(r, dt));
	eng_scope_end(ctx);
	return r;
}
