/* autograd.c: reverse-mode differentiation on the op graph. backward walks from the loss to
 * the tensors that require grad and builds their gradients as lazy graphs from the same ops,
 * so forward and backward fuse when realized together. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "realize/realize.h"
#include "tensor/tensor.h"

/* ---- the registry of tensors that require grad ---- */

eng_status eng_set_requires_grad(eng_tensor *t, bool on)
{
	if (!t)
		return ENG_EINVAL;
	eng_ctx *ctx = t->ctx;
	if (on == t->requires_grad)
		return ENG_OK;
	if (on) {
		if (!eng_dtype_is_float(t->node->dtype))
			return eng_set_error(ctx, ENG_EDTYPE, "requires_grad: only float tensors have gradients, not %s",
					     eng_dtype_name(t->node->dtype));
		if (ctx->ngradt == ctx->capgradt) {
			int nc = ctx->capgradt ? ctx->capgradt * 2 : 64;
			eng_tensor **g = realloc(ctx->gradt, nc * sizeof(*g));
			if (!g)
				return eng_set_error(ctx, ENG_ENOMEM, "requires_grad: out of memory");
			ctx->gradt = g;
			ctx->capgradt = nc;
		}
		ctx->gradt[ctx->ngradt++] = t;
	} else {
		for (int i = 0; i < ctx->ngradt; i++)
			if (ctx->gradt[i] == t) {
				ctx->gradt[i] = ctx->gradt[--ctx->ngradt];
				break;
			}
	}
	t->requires_grad = on;
	return ENG_OK;
}

bool eng_requires_grad(const eng_tensor *t) { return t && t->requires_grad; }
eng_tensor *eng_grad(const eng_tensor *t) { return t ? t->grad : NULL; }

void eng_zero_grad(eng_tensor *t)
{
	if (t) {
		eng_tensor_free(t->grad);
		t->grad = NULL;
	}
}

eng_tensor *eng_detach(const eng_tensor *t)
{
	if (!t)
		return NULL;
	eng_node *n = t->node;
	/* a BUFFER gets a DETACH node too: requires_grad is matched by node, so sharing the
	 * buffer's node would let the gradient through to a leaf that requires grad */
	if (n->op == ENG_OP_DETACH || n->op == ENG_OP_CONST)
		return eng_tensor_wrap(t->ctx, eng_node_ref(n));
	eng_node_desc d = {.op = ENG_OP_DETACH, .dtype = n->dtype, .ndim = n->ndim, .shape = n->shape, .src = {n}};
	return eng_tensor_wrap(t->ctx, eng_node_get(t->ctx->graph, &d));
}

/* ---- a pointer -> int map for the walk ---- */

typedef struct pmap {
	const eng_node **k;
	int *v;
	size_t cap;
} pmap;

static size_t phash(const void *p) { return (size_t)(((uintptr_t)p >> 4) * 0x9e3779b97f4a7c15ull); }

static int pmap_get(const pmap *m, const eng_node *k)
{
	for (size_t i = phash(k) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		if (!m->k[i])
			return -1;
		if (m->k[i] == k)
			return m->v[i];
	}
}

static void pmap_put(pmap *m, const eng_node *k, int v)
{
	for (size_t i = phash(k) & (m->cap - 1);; i = (i + 1) & (m->cap - 1))
		if (!m->k[i] || m->k[i] == k) {
			m->k[i] = k;
			m->v[i] = v;
			return;
		}
}

/* Gradients do not flow into these: leaves, stored assignments, detached values, integers. */
static bool stops(const eng_node *n)
{
	return n->nsrc == 0 || n->op == ENG_OP_ASSIGN || n->op == ENG_OP_DETACH || !eng_dtype_is_float(n->dtype);
}

/* The nodes a gradient flows into from n: a composite's inputs where it has its own rule
 * (the primitive ops computing it are then never walked), else the op's sources. */
static int grad_nsrc(const eng_node *n) { return n->vjp ? n->vjp->nin : n->nsrc; }
static const eng_node *grad_src(const eng_node *n, int i) { return n->vjp ? n->vjp->in[i] : n->src[i]; }

typedef struct walk {
	const eng_node **order; /* post-order: sources before users */
	bool *reach;            /* reaches a tensor that requires grad */
	int n, cap;
	pmap idx;
} walk;

static bool walk_push(walk *w, const eng_node *x)
{
	if (w->n == w->cap)
		return false;
	w->order[w->n] = x;
	pmap_put(&w->idx, x, w->n);
	w->n++;
	return true;
}

/* Iterative post-order DFS from root. */
static bool walk_graph(walk *w, const eng_node *root, const pmap *targets)
{
	typedef struct frame {
		const eng_node *n;
		int next;
	} frame;
	int cap = 1024, sp = 0;
	frame *st = malloc(cap * sizeof(*st));
	if (!st)
		return false;
	st[sp++] = (frame){root, 0};
	pmap_put(&w->idx, root, -2); /* on the stack */
	bool ok = true;
	while (sp && ok) {
		frame *f = &st[sp - 1];
		const eng_node *n = f->n;
		if (!stops(n) && f->next < grad_nsrc(n)) {
			const eng_node *s = grad_src(n, f->next++);
			if (pmap_get(&w->idx, s) != -1)
				continue;
			if (sp == cap) {
				frame *ns = realloc(st, 2 * cap * sizeof(*st));
				if (!ns) {
					ok = false;
					break;
				}
				st = ns;
				cap *= 2;
			}
			pmap_put(&w->idx, s, -2);
			st[sp++] = (frame){s, 0};
			continue;
		}
		sp--;
		bool r = pmap_get(targets, n) >= 0;
		if (!stops(n))
			for (int i = 0; i < grad_nsrc(n); i++) {
				int j = pmap_get(&w->idx, grad_src(n, i));
				r |= j >= 0 && w->reach[j];
			}
		int at = w->n;
		ok = walk_push(w, n);
		if (ok)
			w->reach[at] = r;
	}
	free(st);
	return ok;
}

/* ---- gradient rules: given the output gradient g of node n, the gradient of each source
 * (NULL where none flows). All tensors are made in the caller's scope. ---- */

static eng_tensor *T(eng_ctx *ctx, eng_node *n) { return eng_tensor_wrap(ctx, eng_node_ref(n)); }

static eng_tensor *reduce_axes_to(eng_tensor *g, const eng_node *src)
{
	/* sum g over the axes where src has size 1 but g does not (undo a broadcast) */
	int axes[ENG_MAX_DIMS], na = 0;
	for (int d = 0; d < src->ndim; d++)
		if (src->shape[d] == 1 && eng_shape(g)[d] != 1)
			axes[na++] = d;
	return na ? eng_sum(g, axes, na, true) : g;
}

static void rule(eng_ctx *ctx, eng_node *n, eng_tensor *g, eng_tensor **out)
{
	eng_tensor *a = n->nsrc > 0 ? T(ctx, n->src[0]) : NULL;
	eng_tensor *b = n->nsrc > 1 ? T(ctx, n->src[1]) : NULL;
	eng_tensor *self = T(ctx, n);
	const double ln2 = M_LN2;
	switch (n->op) {
	case ENG_OP_EXP2:
		out[0] = eng_mul(g, eng_mul_s(self, ln2));
		break;
	case ENG_OP_LOG2:
		out[0] = eng_div(g, eng_mul_s(a, ln2));
		break;
	case ENG_OP_SIN:
		out[0] = eng_mul(g, eng_sin(eng_rsub_s(M_PI / 2, a)));
		break;
	case ENG_OP_SQRT:
		out[0] = eng_div(g, eng_mul_s(self, 2));
		break;
	case ENG_OP_RECIP:
		out[0] = eng_neg(eng_mul(g, eng_mul(self, self)));
		break;
	case ENG_OP_NEG:
		out[0] = eng_neg(g);
		break;
	case ENG_OP_CAST:
		out[0] = eng_dtype_is_float(n->src[0]->dtype) ? eng_cast(g, n->src[0]->dtype) : NULL;
		break;
	case ENG_OP_ADD:
		out[0] = g;
		out[1] = g;
		break;
	case ENG_OP_SUB:
		out[0] = g;
		out[1] = eng_neg(g);
		break;
	case ENG_OP_MUL:
		out[0] = eng_mul(g, b);
		out[1] = eng_mul(g, a);
		break;
	case ENG_OP_MAX: {
		/* ties split the gradient evenly, as tinygrad does */
		eng_tensor *half = eng_mul_s(g, 0.5), *zero = eng_zeros(ctx, n->dtype, 0, NULL);
		eng_tensor *eq = eng_eq(a, b);
		out[0] = eng_where(eng_gt(a, b), g, eng_where(eq, half, zero));
		out[1] = eng_where(eng_gt(b, a), g, eng_where(eq, half, zero));
		break;
	}
	case ENG_OP_WHERE: {
		eng_tensor *c = a, *zero = eng_zeros(ctx, n->dtype, 0, NULL);
		out[1] = eng_where(c, g, zero);
		out[2] = eng_where(c, zero, g);
		break;
	}
	case ENG_OP_RSUM:
		out[0] = eng_expand(g, n->src[0]->ndim, n->src[0]->shape);
		break;
	case ENG_OP_RMAX: {
		eng_tensor *m = eng_expand(self, n->src[0]->ndim, n->src[0]->shape);
		eng_tensor *hit = eng_cast(eng_eq(a, m), n->dtype);
		int axes[ENG_MAX_DIMS], na = 0;
		for (int d = 0; d < n->ndim; d++)
			if ((n->arg.axes >> d) & 1)
				axes[na++] = d;
		eng_tensor *cnt = eng_expand(eng_sum(hit, axes, na, true), n->src[0]->ndim, n->src[0]->shape);
		out[0] = eng_div(eng_mul(hit, eng_expand(g, n->src[0]->ndim, n->src[0]->shape)), cnt);
		break;
	}
	case ENG_OP_RPROD:
		out[0] = eng_div(eng_expand(eng_mul(g, self), n->src[0]->ndim, n->src[0]->shape), a);
		break;
	case ENG_OP_RESHAPE:
		out[0] = eng_reshape(g, n->src[0]->ndim, n->src[0]->shape);
		break;
	case ENG_OP_PERMUTE: {
		int inv[ENG_MAX_DIMS];
		for (int d = 0; d < n->ndim; d++)
			inv[(int)n->arg.perm[d]] = d;
		out[0] = eng_permute(g, inv);
		break;
	}
	case ENG_OP_EXPAND:
		out[0] = reduce_axes_to(g, n->src[0]);
		break;
	case ENG_OP_PAD: {
		int64_t r[ENG_MAX_DIMS][2];
		for (int d = 0; d < n->ndim; d++) {
			r[d][0] = n->arg.pairs[d][0];
			r[d][1] = n->arg.pairs[d][0] + n->src[0]->shape[d];
		}
		out[0] = eng_shrink(g, (const int64_t(*)[2])r);
		break;
	}
	case ENG_OP_SHRINK: {
		int64_t p[ENG_MAX_DIMS][2];
		for (int d = 0; d < n->ndim; d++) {
			p[d][0] = n->arg.pairs[d][0];
			p[d][1] = n->src[0]->shape[d] - n->arg.pairs[d][1];
		}
		out[0] = eng_pad(g, (const int64_t(*)[2])p);
		break;
	}
	case ENG_OP_FLIP: {
		int axes[ENG_MAX_DIMS], na = 0;
		for (int d = 0; d < n->ndim; d++)
			if ((n->arg.axes >> d) & 1)
				axes[na++] = d;
		out[0] = eng_flip(g, axes, na);
		break;
	}
	case ENG_OP_CONTIGUOUS:
		out[0] = g;
		break;
	case ENG_OP_COPY: /* the gradient goes back to the source's device */
		out[0] = n->src[0]->dev >= 0 ? eng_to_device(g, n->src[0]->dev) : g;
		break;
	default:
		/* TRUNC, comparisons, integer and bitwise ops, BITCAST: no gradient */
		break;
	}
}

eng_status eng_backward(eng_tensor *loss)
{
	if (!loss)
		return ENG_EINVAL;
	eng_ctx *ctx = loss->ctx;
	if (ctx->err)
		return ctx->err;
	eng_node *root = loss->node;
	if (eng_node_numel(root) != 1)
		return eng_set_error(ctx, ENG_ESHAPE, "backward: loss has %lld elements; it must be a scalar",
				     (long long)eng_node_numel(root));
	if (!eng_dtype_is_float(root->dtype))
		return eng_set_error(ctx, ENG_EDTYPE, "backward: loss is %s; it must be float", eng_dtype_name(root->dtype));
	if (!ctx->ngradt)
		return eng_set_error(ctx, ENG_ESTATE, "backward: no tensor requires grad");

	eng_status st = ENG_OK;
	size_t cap = 1024;
	while (cap < 4 * (size_t)eng_graph_live_nodes(ctx->graph) + 16)
		cap *= 2;
	pmap targets = {0};
	walk w = {0};
	eng_tensor **grads = NULL;
	targets.cap = 64;
	while (targets.cap < 2 * (size_t)ctx->ngradt)
		targets.cap *= 2;
	targets.k = calloc(targets.cap, sizeof(*targets.k));
	targets.v = calloc(targets.cap, sizeof(int));
	w.idx.cap = cap;
	w.idx.k = calloc(cap, sizeof(*w.idx.k));
	w.idx.v = calloc(cap, sizeof(int));
	w.cap = (int)(cap / 2);
	w.order = calloc(w.cap, sizeof(*w.order));
	w.reach = calloc(w.cap, sizeof(bool));
	if (!targets.k || !targets.v || !w.idx.k || !w.idx.v || !w.order || !w.reach) {
		st = eng_set_error(ctx, ENG_ENOMEM, "backward: out of memory");
		goto out;
	}
	for (int i = 0; i < ctx->ngradt; i++)
		pmap_put(&targets, ctx->gradt[i]->node, i);
	if (!walk_graph(&w, root, &targets)) {
		st = eng_set_error(ctx, ENG_ENOMEM, "backward: out of memory walking the graph");
		goto out;
	}
	if (!w.reach[w.n - 1]) {
		st = eng_set_error(ctx, ENG_ESTATE, "backward: the loss does not depend on any tensor that requires grad");
		goto out;
	}
	grads = calloc(w.n, sizeof(*grads));
	if (!grads) {
		st = eng_set_error(ctx, ENG_ENOMEM, "backward: out of memory");
		goto out;
	}
	eng_scope_begin(ctx);
	grads[w.n - 1] = eng_ones(ctx, root->dtype, root->ndim, root->shape);
	for (int i = w.n - 1; i >= 0 && !ctx->err; i--) {
		eng_node *n = (eng_node *)w.order[i];
		if (!grads[i] || stops(n))
			continue;
		eng_tensor *out[ENG_VJP_MAX_IN > 3 ? ENG_VJP_MAX_IN : 3] = {0};
		if (n->vjp)
			n->vjp->rule(ctx, n, n->vjp, grads[i], out);
		else
			rule(ctx, n, grads[i], out);
		for (int k = 0; k < grad_nsrc(n); k++) {
			int j = pmap_get(&w.idx, grad_src(n, k));
			if (!out[k] || j < 0 || !w.reach[j])
				continue;
			grads[j] = grads[j] ? eng_add(grads[j], out[k]) : out[k];
		}
	}
	if (ctx->err) {
		st = ctx->err;
	} else {
		for (int i = 0; i < ctx->ngradt; i++) {
			eng_tensor *t = ctx->gradt[i];
			int j = pmap_get(&w.idx, t->node);
			if (j < 0 || !grads[j])
				continue;
			eng_tensor *g = eng_cast(grads[j], t->node->dtype);
			if (t->grad)
				g = eng_add(t->grad, g);
			if (!g) {
				st = ctx->err ? ctx->err : ENG_ENOMEM;
				break;
			}
			eng_tensor_unscope(g);
			eng_tensor_free(t->grad);
			t->grad = g;
		}
	}
	eng_scope_end(ctx);
out:
	free(grads);
	free(targets.k);
	free(targets.v);
	free(w.idx.k);
	free(w.idx.v);
	free(w.order);
	free(w.reach);
	return st;
}
