/* functional.c: neural-network functions: matmul, linear, one_hot, gather, embedding, layernorm
 * and sparse cross-entropy, each a broadcast product or compare plus one reduction. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
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

/* Whether v is a value of integer dtype dt (else no element can equal it). */
static bool int_fits(eng_dtype dt, int64_t v)
{
	switch (dt) {
	case ENG_U8:
		return v >= 0 && v <= UINT8_MAX;
	case ENG_I32:
		return v >= INT32_MIN && v <= INT32_MAX;
	default:
		return dt == ENG_I64;
	}
}

/* Labels that are realized are read back (N integers) and checked now, so a bad label is an
 * error at the call that names its row rather than a wrong number later. Lazy labels are not
 * computed here (that would realize part of the graph early): the loss guards them instead. */
static eng_status check_known_labels(const eng_tensor *labels, int64_t C, const int64_t *ignore,
				     const char *fn)
{
	eng_ctx *ctx = labels->ctx;
	const eng_node *ny = labels->node;
	int64_t n = eng_node_numel(ny);
	if (!ny->buf || n == 0)
		return ENG_OK;
	size_t isz = eng_dtype_size(ny->dtype);
	unsigned char *raw = malloc((size_t)n * isz);
	if (!raw)
		return eng_set_error(ctx, ENG_ENOMEM, "%s: out of memory reading the labels", fn);
	eng_status s = eng_buffer_read(ny->buf, raw, (size_t)n * isz);
	for (int64_t i = 0; i < n && !s; i++) {
		int64_t v;
		if (ny->dtype == ENG_U8)
			v = raw[i];
		else if (ny->dtype == ENG_I32)
			v = ((const int32_t *)raw)[i];
		else
			v = ((const int64_t *)raw)[i];
		if ((v < 0 || v >= C) && !(ignore && v == *ignore))
			s = eng_set_error(ctx, ENG_EINVAL,
					  "%s: label %lld in row %lld is outside [0, %lld)%s", fn,
					  (long long)v, (long long)i, (long long)C,
					  ignore ? " and not the ignore index" : "");
	}
	free(raw);
	return s;
}

/* Rows whose label is outside [0, C) and not the ignore index, as bool (N); NULL when the
 * labels' dtype cannot hold such a label. Call inside a scope. */
static eng_tensor *bad_labels(const eng_tensor *labels, int64_t C, const int64_t *ignore)
{
	eng_ctx *ctx = labels->ctx;
	eng_dtype dt = labels->node->dtype;
	eng_tensor *bad = NULL;
	if (!eng_dtype_is_unsigned(dt))
		bad = eng_lt(labels, eng_scalar(ctx, dt, 0));
	if (int_fits(dt, C)) { /* > C - 1: one compare, where >= C lowers to two */
		eng_tensor *high = eng_gt(labels, eng_scalar(ctx, dt, (double)(C - 1)));
		bad = bad ? eng_or(bad, high) : high;
	}
	if (bad && ignore && int_fits(dt, *ignore) && (*ignore < 0 || *ignore >= C))
		bad = eng_and(bad, eng_ne(labels, eng_scalar(ctx, dt, (double)*ignore)));
	return bad;
}

/* The one sparse cross-entropy (see eng_loss_sparse_cross_entropy in nn.h for the contract);
 * ignore_index NULL: no row is ignored. Per row, -sum over classes of log_softmax times the
 * smoothed target is one reduction; the batch mean is the second kernel. */
eng_tensor *eng_sparse_ce(const eng_tensor *logits, const eng_tensor *labels,
			  double label_smoothing, const int64_t *ignore_index, const char *fn)
{
	if (!logits || !labels)
		return NULL;
	eng_ctx *ctx = logits->ctx;
	if (!eng_same_ctx(logits, labels, fn))
		return NULL;
	const eng_node *nl = logits->node, *ny = labels->node;
	if (!eng_dtype_is_int(ny->dtype)) {
		eng_set_error(ctx, ENG_EDTYPE, "%s: labels must be integers, got %s", fn,
			      eng_dtype_name(ny->dtype));
		return NULL;
	}
	/* C > INT32_MAX: the class index below is int32 */
	if (nl->ndim != 2 || ny->ndim != 1 || ny->shape[0] != nl->shape[0] || nl->shape[1] < 1 ||
	    nl->shape[1] > INT32_MAX) {
		eng_set_error(ctx, ENG_ESHAPE,
			      "%s: need logits (N, C >= 1) and labels (N); got %d-d logits and %d-d"
			      " labels or mismatched N",
			      fn, nl->ndim, ny->ndim);
		return NULL;
	}
	if (!(label_smoothing >= 0 && label_smoothing < 1)) {
		eng_set_error(ctx, ENG_EINVAL, "%s: label_smoothing must be in [0, 1), got %g", fn,
			      label_smoothing);
		return NULL;
	}
	int64_t N = nl->shape[0], C = nl->shape[1];
	if (check_known_labels(labels, C, ignore_index, fn))
		return NULL;
	eng_dtype dt = eng_dtype_float_of(nl->dtype);
	double ls = label_smoothing, on = 1.0 - ls + ls / (double)C, off = ls / (double)C;
	bool has_ignore = ignore_index && int_fits(ny->dtype, *ignore_index);
	int ax1 = 1;
	eng_scope_begin(ctx);
	eng_tensor *lp = eng_cast(eng_log_softmax(logits, 1), ENG_F32);
	eng_tensor *hit =
		eng_eq(eng_unsqueeze(labels, 1), eng_index(ctx, ENG_I32, 2, nl->shape, 1));
	eng_tensor *picked = ls == 0 ? eng_where(hit, lp, eng_scalar(ctx, ENG_F32, 0))
				     : eng_mul(lp, eng_where(hit, eng_scalar(ctx, ENG_F32, on),
							     eng_scalar(ctx, ENG_F32, off)));
	eng_tensor *row = eng_sum(picked, &ax1, 1, false);
	/* A bad label the check above could not see (lazy labels, or a jit replay's new data)
	 * makes its row, and so the loss, NaN: the lazy form of an error. Always in the graph,
	 * since a replay reuses it with labels never checked. */
	eng_tensor *bad = bad_labels(labels, C, ignore_index);
	if (bad)
		row = eng_where(bad, eng_scalar(ctx, ENG_F32, NAN), row);
	/* then the batch: the mean over the rows not ignored */
	eng_tensor *r;
	if (has_ignore) {
		eng_tensor *keep = eng_cast(
			eng_ne(labels, eng_scalar(ctx, ny->dtype, (double)*ignore_index)), ENG_F32);
		eng_tensor *cnt =
			eng_maximum(eng_sum(keep, NULL, 0, false), eng_scalar(ctx, ENG_F32, 1));
		r = eng_div(eng_neg(eng_sum(eng_mul(row, keep), NULL, 0, false)), cnt);
	} else {
		r = eng_mul_s(eng_sum(row, NULL, 0, false), N ? -1.0 / (double)N : 0);
	}
	r = eng_keep(eng_cast(r, dt));
	eng_scope_end(ctx);
	return r;
}

eng_tensor *eng_sparse_cross_entropy(const eng_tensor *logits, const eng_tensor *labels)
{
	return eng_sparse_ce(logits, labels, 0, NULL, "sparse_cross_entropy");
}
