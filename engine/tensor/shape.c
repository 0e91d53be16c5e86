/* shape.c: shape functions built on the movement ops: transpose, flatten, squeeze,
 * unsqueeze, slice, cat, stack and repeat. None of them copies data. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "composite.h"

#define MAX_ELEMS ((int64_t)1 << 40)

eng_tensor *eng_transpose(const eng_tensor *a, int dim0, int dim1)
{
	if (!a)
		return NULL;
	int nd = a->node->ndim, d0, d1, perm[ENG_MAX_DIMS];
	if (!eng_axis_norm(a->ctx, "transpose", nd, dim0, &d0) ||
	    !eng_axis_norm(a->ctx, "transpose", nd, dim1, &d1))
		return NULL;
	for (int i = 0; i < nd; i++)
		perm[i] = i;
	perm[d0] = d1;
	perm[d1] = d0;
	return eng_permute(a, perm);
}

/* Merge axes start_dim..end_dim into one; a scalar flattens to shape (1). */
eng_tensor *eng_flatten(const eng_tensor *a, int start_dim, int end_dim)
{
	if (!a)
		return NULL;
	const eng_node *n = a->node;
	int64_t shape[ENG_MAX_DIMS];
	int s, e, k = 0;
	if (n->ndim == 0) {
		if ((start_dim != 0 && start_dim != -1) || (end_dim != 0 && end_dim != -1)) {
			eng_set_error(a->ctx, ENG_EAXIS,
				      "flatten: dims (%d, %d) out of range for a scalar", start_dim,
				      end_dim);
			return NULL;
		}
		shape[0] = 1;
		return eng_reshape(a, 1, shape);
	}
	if (!eng_axis_norm(a->ctx, "flatten", n->ndim, start_dim, &s) ||
	    !eng_axis_norm(a->ctx, "flatten", n->ndim, end_dim, &e))
		return NULL;
	if (s > e) {
		eng_set_error(a->ctx, ENG_EAXIS, "flatten: start_dim %d comes after end_dim %d",
			      start_dim, end_dim);
		return NULL;
	}
	for (int i = 0; i < s; i++)
		shape[k++] = n->shape[i];
	shape[k] = 1;
	for (int i = s; i <= e; i++)
		shape[k] *= n->shape[i];
	k++;
	for (int i = e + 1; i < n->ndim; i++)
		shape[k++] = n->shape[i];
	return eng_reshape(a, k, shape);
}

/* Remove axis if its size is 1; any other size leaves a unchanged (as PyTorch does). */
eng_tensor *eng_squeeze(const eng_tensor *a, int axis)
{
	if (!a)
		return NULL;
	const eng_node *n = a->node;
	int ax;
	if (!eng_axis_norm(a->ctx, "squeeze", n->ndim, axis, &ax))
		return NULL;
	if (n->shape[ax] != 1)
		return eng_dup(a);
	int64_t shape[ENG_MAX_DIMS];
	int k = 0;
	for (int i = 0; i < n->ndim; i++)
		if (i != ax)
			shape[k++] = n->shape[i];
	return eng_reshape(a, k, shape);
}

/* Insert a size-1 axis before position axis (in [-(ndim+1), ndim]). */
eng_tensor *eng_unsqueeze(const eng_tensor *a, int axis)
{
	if (!a)
		return NULL;
	const eng_node *n = a->node;
	int ax;
	if (n->ndim >= ENG_MAX_DIMS) {
		eng_set_error(a->ctx, ENG_ERANGE, "unsqueeze: tensor already has %d dims", n->ndim);
		return NULL;
	}
	ax = axis < 0 ? axis + n->ndim + 1 : axis;
	if (ax < 0 || ax > n->ndim) {
		eng_set_error(a->ctx, ENG_EAXIS, "unsqueeze: axis %d not in [%d, %d]", axis,
			      -(n->ndim + 1), n->ndim);
		return NULL;
	}
	int64_t shape[ENG_MAX_DIMS];
	for (int i = 0, k = 0; i <= n->ndim; i++)
		shape[i] = i == ax ? 1 : n->shape[k++];
	return eng_reshape(a, n->ndim + 1, shape);
}

/* ---- slice ---- */

/* A Python slice bound: negative counts from the end, then clipped to [lo, hi]. */
static int64_t clip_bound(int64_t v, int64_t n, int64_t lo, int64_t hi)
{
	if (v < 0)
		v += n;
	return v < lo ? lo : v > hi ? hi : v;
}

/* Elements start, start+step, ... (cnt of them, all in range) along axis ax of x. Strided picks
 * reshape the axis into (cnt, step) and keep column 0; a short tail is padded (never read). */
static eng_tensor *take_strided(const eng_tensor *x, int ax, int64_t start, int64_t cnt,
				int64_t step)
{
	if (!x)
		return NULL;
	const eng_node *n = x->node;
	int nd = n->ndim;
	int64_t len = n->shape[ax], r[ENG_MAX_DIMS][2], pads[ENG_MAX_DIMS][2];
	for (int i = 0; i < nd; i++) {
		r[i][0] = 0, r[i][1] = n->shape[i];
		pads[i][0] = pads[i][1] = 0;
	}
	if (cnt <= 1 || step == 1) {
		r[ax][0] = cnt ? start : 0;
		r[ax][1] = r[ax][0] + cnt;
		return eng_shrink(x, (const int64_t(*)[2])r);
	}
	if (nd == ENG_MAX_DIMS) { /* no room to split the axis: work on a 3-d view */
		int64_t v[3] = {1, len, 1}, back[ENG_MAX_DIMS];
		for (int i = 0; i < nd; i++)
			v[0] *= i < ax ? n->shape[i] : 1, v[2] *= i > ax ? n->shape[i] : 1;
		memcpy(back, n->shape, sizeof(back));
		back[ax] = cnt;
		return eng_reshape(take_strided(eng_reshape(x, 3, v), 1, start, cnt, step), nd,
				   back);
	}
	int64_t need = cnt * step;
	r[ax][0] = start;
	r[ax][1] = start + need < len ? start + need : len;
	pads[ax][1] = need - (r[ax][1] - r[ax][0]);
	eng_tensor *t = eng_pad(eng_shrink(x, (const int64_t(*)[2])r), (const int64_t(*)[2])pads);
	int64_t split[ENG_MAX_DIMS], r2[ENG_MAX_DIMS][2], out[ENG_MAX_DIMS];
	for (int i = 0, k = 0; i < nd; i++, k++) {
		split[k] = out[i] = n->shape[i];
		r2[k][0] = 0, r2[k][1] = n->shape[i];
		if (i == ax) {
			split[k] = out[i] = cnt;
			r2[k][1] = cnt;
			k++;
			split[k] = step;
			r2[k][0] = 0, r2[k][1] = 1;
		}
	}
	t = eng_shrink(eng_reshape(t, nd + 1, split), (const int64_t(*)[2])r2);
	return eng_reshape(t, nd, out);
}

/* Python's a[start:stop:step] along one axis; a negative step walks a flipped view. */
eng_tensor *eng_slice(const eng_tensor *a, int axis, int64_t start, int64_t stop, int64_t step)
{
	if (!a)
		return NULL;
	int ax;
	if (!eng_axis_norm(a->ctx, "slice", a->node->ndim, axis, &ax))
		return NULL;
	if (step == 0) {
		eng_set_error(a->ctx, ENG_EINVAL, "slice: step must not be zero");
		return NULL;
	}
	int64_t n = a->node->shape[ax], cnt;
	/* |step| past n picks at most one element; capping it avoids overflow below */
	uint64_t mag = step > 0 ? (uint64_t)step : (uint64_t)0 - (uint64_t)step;
	int64_t st = mag > (uint64_t)n ? (n > 0 ? n : 1) : (int64_t)mag;
	eng_scope_begin(a->ctx);
	const eng_tensor *x = a;
	if (step > 0) {
		start = clip_bound(start, n, 0, n);
		stop = clip_bound(stop, n, 0, n);
		cnt = stop > start ? 1 + (stop - start - 1) / st : 0;
	} else {
		start = clip_bound(start, n, -1, n - 1);
		stop = clip_bound(stop, n, -1, n - 1);
		cnt = start > stop ? 1 + (start - stop - 1) / st : 0;
		start = n - 1 - start; /* position in the flipped axis */
		x = eng_flip(a, &ax, 1);
	}
	eng_tensor *r = x ? eng_keep(take_strided(x, ax, start, cnt, st)) : NULL;
	eng_scope_end(a->ctx);
	return r;
}

/* ---- cat, stack, repeat ---- */

/* A usable tensor list: false for a NULL entry (an earlier error, kept) and for n < 1, which is
 * EINVAL reported in ts[0]'s context if ts[0] is given (there is no other context to use). */
static bool list_ok(eng_tensor *const *ts, int n, const char *fn)
{
	if (!ts)
		return false;
	if (n < 1) {
		if (ts[0])
			eng_set_error(ts[0]->ctx, ENG_EINVAL,
				      "%s: need at least one tensor, got %d", fn, n);
		return false;
	}
	for (int i = 0; i < n; i++)
		if (!ts[i])
			return false;
	return true;
}

/* Pad every piece to the full length along axis and add them (or them, for bool). Inputs
 * are promoted to a common dtype. */
eng_tensor *eng_cat(eng_tensor *const *ts, int n, int axis)
{
	if (!list_ok(ts, n, "cat"))
		return NULL;
	const eng_node *f = ts[0]->node;
	eng_ctx *ctx = ts[0]->ctx;
	int nd = f->ndim, ax;
	if (!eng_axis_norm(ctx, "cat", nd, axis, &ax))
		return NULL;
	eng_dtype dt = f->dtype;
	int64_t total = 0;
	for (int i = 0; i < n; i++) {
		const eng_node *t = ts[i]->node;
		if (!eng_same_ctx(ts[0], ts[i], "cat"))
			return NULL;
		if (t->ndim != nd) {
			eng_set_error(ctx, ENG_ESHAPE,
				      "cat: tensor %d has %d dims, tensor 0 has %d", i, t->ndim,
				      nd);
			return NULL;
		}
		for (int d = 0; d < nd; d++) {
			if (d != ax && t->shape[d] != f->shape[d]) {
				eng_set_error(ctx, ENG_ESHAPE,
					      "cat: tensor %d has size %lld on axis %d, tensor 0 "
					      "has %lld",
					      i, (long long)t->shape[d], d, (long long)f->shape[d]);
				return NULL;
			}
		}
		total += t->shape[ax];
		if (total > MAX_ELEMS) {
			eng_set_error(ctx, ENG_ERANGE, "cat: axis %d would have too many elements",
				      ax);
			return NULL;
		}
		dt = eng_dtype_promote(dt, t->dtype);
	}
	int64_t pads[ENG_MAX_DIMS][2], off = 0;
	memset(pads, 0, sizeof(pads));
	eng_scope_begin(ctx);
	eng_tensor *r = NULL;
	for (int i = 0; i < n; i++) {
		int64_t len = ts[i]->node->shape[ax];
		if (len == 0)
			continue;
		pads[ax][0] = off;
		pads[ax][1] = total - off - len;
		off += len;
		eng_tensor *p = eng_pad(eng_cast(ts[i], dt), (const int64_t(*)[2])pads);
		r = !r ? p : dt == ENG_BOOL ? eng_or(r, p) : eng_add(r, p);
		if (!r)
			break;
	}
	if (!r && off == 0) /* every piece is empty */
		r = eng_cast(ts[0], dt);
	r = eng_keep(r);
	eng_scope_end(ctx);
	return r;
}

/* Join equal-shaped tensors along a new axis (in [-(ndim+1), ndim]). */
eng_tensor *eng_stack(eng_tensor *const *ts, int n, int axis)
{
	if (!list_ok(ts, n, "stack"))
		return NULL;
	eng_ctx *ctx = ts[0]->ctx;
	const eng_node *f = ts[0]->node;
	for (int i = 1; i < n; i++) {
		const eng_node *t = ts[i]->node;
		if (t->ndim != f->ndim || memcmp(t->shape, f->shape, sizeof(int64_t) * f->ndim)) {
			eng_set_error(ctx, ENG_ESHAPE,
				      "stack: tensor %d's shape differs from tensor 0's", i);
			return NULL;
		}
	}
	if (f->ndim >= ENG_MAX_DIMS) {
		eng_set_error(ctx, ENG_ERANGE, "stack: tensors already have %d dims", f->ndim);
		return NULL;
	}
	int ax = axis < 0 ? axis + f->ndim + 1 : axis;
	if (ax < 0 || ax > f->ndim) {
		eng_set_error(ctx, ENG_EAXIS, "stack: axis %d not in [%d, %d]", axis,
			      -(f->ndim + 1), f->ndim);
		return NULL;
	}
	eng_tensor *local[16] = {0}, **us = n <= 16 ? local : malloc(sizeof(*us) * n);
	if (!us) {
		eng_set_error(ctx, ENG_ENOMEM, "stack: out of memory");
		return NULL;
	}
	eng_scope_begin(ctx);
	for (int i = 0; i < n; i++)
		us[i] = eng_unsqueeze(ts[i], ax);
	eng_tensor *r = eng_keep(eng_cat(us, n, ax));
	eng_scope_end(ctx);
	if (us != local)
		free(us);
	return r;
}

/* Tile a: axis i repeated repeats[i] times (each >= 0). Each repeated axis s becomes (r, s)
 * by reshape + expand, then merges back to r*s; without room for the extra axes (more than
 * ENG_MAX_DIMS in all) one axis at a time goes through a 4-d view. */
eng_tensor *eng_repeat(const eng_tensor *a, const int64_t *repeats)
{
	if (!a)
		return NULL;
	eng_ctx *ctx = a->ctx;
	const eng_node *n = a->node;
	int nd = n->ndim, extra = 0;
	int64_t out[ENG_MAX_DIMS], numel;
	if (nd && !repeats) {
		eng_set_error(ctx, ENG_EINVAL, "repeat: repeats is NULL");
		return NULL;
	}
	for (int i = 0; i < nd; i++) {
		if (repeats[i] < 0 || repeats[i] > MAX_ELEMS) {
			eng_set_error(ctx, ENG_EINVAL,
				      "repeat: repeat count %lld for axis %d out of range",
				      (long long)repeats[i], i);
			return NULL;
		}
		if (n->shape[i] && repeats[i] > MAX_ELEMS / n->shape[i]) {
			eng_set_error(ctx, ENG_ERANGE,
				      "repeat: axis %d would have too many elements", i);
			return NULL;
		}
		out[i] = n->shape[i] * repeats[i];
		extra += repeats[i] != 1;
	}
	if (!eng_shape_numel(nd, out, &numel)) {
		eng_set_error(ctx, ENG_ERANGE, "repeat: result has too many elements");
		return NULL;
	}
	eng_scope_begin(ctx);
	eng_tensor *r;
	if (nd + extra <= ENG_MAX_DIMS) {
		int64_t ones[ENG_MAX_DIMS], wide[ENG_MAX_DIMS];
		int k = 0;
		for (int i = 0; i < nd; i++) {
			if (repeats[i] != 1) {
				ones[k] = 1;
				wide[k++] = repeats[i];
			}
			ones[k] = wide[k] = n->shape[i];
			k++;
		}
		r = eng_reshape(eng_expand(eng_reshape(a, k, ones), k, wide), nd, out);
	} else {
		int64_t cur[ENG_MAX_DIMS];
		memcpy(cur, n->shape, sizeof(cur));
		r = eng_dup(a);
		for (int i = 0; i < nd && r; i++) {
			if (repeats[i] == 1)
				continue;
			int64_t v[4] = {1, 1, cur[i], 1}, w[4];
			for (int j = 0; j < nd; j++)
				v[0] *= j < i ? cur[j] : 1, v[3] *= j > i ? cur[j] : 1;
			memcpy(w, v, sizeof(w));
			w[1] = repeats[i];
			cur[i] = out[i];
			r = eng_reshape(eng_expand(eng_reshape(r, 4, v), 4, w), nd, cur);
		}
	}
	r = eng_keep(r);
	eng_scope_end(ctx);
	return r;
}
