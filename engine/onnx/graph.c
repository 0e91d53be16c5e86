/* graph.c: eng_onnx_build: walks the nodes in topological order, looks each up in the op table,
 * checks its attributes, and binds values by name; constants propagate so that values needed at
 * build time (shapes, axes, pads) are read from folded constants. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/context.h"
#include "onnx_int.h"
#include "ops.h"

/* The narrow type (onx_narrow_of) a graph's input or output is declared with, or 0. */
static int vi_narrow(const Onnx__ValueInfoProto *v)
{
	const Onnx__TypeProto *t = v ? v->type : NULL;
	return t && t->tensor_type && t->tensor_type->has_elem_type ? onx_narrow_of(t->tensor_type->elem_type) : 0;
}

int onx_in_narrow(const onx_node *n, int i)
{
	return i >= 0 && i < n->n_in && n->in[i] ? n->in[i]->narrow : 0;
}

/* The narrow type output i (t) of node n holds (onx_narrow_of), or 0: a (Bit)Cast's target, CastLike's
 * input 1, a Constant's or ConstantOfShape's value; else that of the first input held the same
 * way in the same engine type (the elementwise ops' T, a shape op's data, Where's branches). */
static int output_narrow(onx_node *n, int i, const eng_tensor *t)
{
	const char *op = n->pb->op_type ? n->pb->op_type : "";
	if (!t)
		return 0;
	if (!strcmp(op, "Cast") || !strcmp(op, "BitCast"))
		return onx_narrow_of((int)onx_attr_i(n, "to", 0));
	if (!strcmp(op, "CastLike"))
		return onx_in_narrow(n, 1);
	if (!strcmp(op, "DequantizeLinear")) /* the scale's type, or output_dtype's: never x's */
		return onx_attr_i(n, "output_dtype", 0) ? onx_narrow_of((int)onx_attr_i(n, "output_dtype", 0)) : onx_in_narrow(n, 1);
	if (!strcmp(op, "QuantizeLinear") && !onx_in_narrow(n, 2))
		return onx_narrow_of((int)onx_attr_i(n, "output_dtype", 0)); /* else the zero point's */
	if (!strcmp(op, "MatMulInteger") || !strcmp(op, "ConvInteger"))
		return 0; /* int32 sums of int8 products */
	/* indices and shapes (int64, the engine type uint32 is held in) */
	static const char *const index_ops[] = {"ArgMax", "ArgMin", "Shape", "Size", "NonZero", "NonMaxSuppression"};
	for (size_t k = 0; k < sizeof(index_ops) / sizeof(index_ops[0]); k++)
		if (!strcmp(op, index_ops[k]))
			return 0;
	if ((!strcmp(op, "TopK") || !strcmp(op, "Unique")) && i > 0)
		return 0; /* their values first, then indices (and Unique's counts) */
	/* If, Loop, Scan: as their body declares (a Loop's outputs after its condition) */
	const char *body = !strcmp(op, "If") ? "then_branch" : !strcmp(op, "Loop") || !strcmp(op, "Scan") ? "body" : NULL;
	if (body) {
		const Onnx__AttributeProto *a = onx_attr(n, body);
		size_t k = (size_t)i + (op[0] == 'L');
		return a && a->g && k < a->g->n_output ? vi_narrow(a->g->output[k]) : 0;
	}
	if (!strcmp(op, "Constant") || !strcmp(op, "ConstantOfShape")) {
		const Onnx__AttributeProto *a = onx_attr(n, "value");
		return a && a->t ? onx_narrow_of(a->t->data_type) : 0;
	}
	for (int k = 0; k < n->n_in; k++)
		if (n->in[k] && n->in[k]->narrow && eng_tensor_dtype(n->in[k]->t) == eng_tensor_dtype(t))
			return n->in[k]->narrow;
	return 0;
}

static eng_status run_node(onx_build *b, const Onnx__NodeProto *pb);

struct onx_build {
	eng_onnx_model *m;
	eng_ctx *ctx;
	unsigned flags;
	onx_map names;
	onx_val *vals;
	int nvals, cap;
	int depth;     /* nested If/Loop bodies being built */
	int loops;     /* of which Loop and Scan bodies (values differ per iteration: not kept folded) */
	int64_t nodes; /* nodes built, unrolled loops included (bounded: a hostile nest of loops) */
};

static int add_val(onx_build *b, const char *name, eng_tensor *t, bool is_const, uint64_t deps)
{
	if (b->nvals == b->cap) {
		int cap = b->cap ? b->cap * 2 : 256;
		onx_val *v = realloc(b->vals, (size_t)cap * sizeof(*v));
		if (!v)
			return -1;
		b->vals = v;
		b->cap = cap;
	}
	b->vals[b->nvals] = (onx_val){t, is_const, deps, 0};
	if (!onx_map_put(&b->names, name, b->nvals))
		return -1;
	return b->nvals++;
}

/* add_val for a subgraph's input v (its name and declared narrow type). */
static int add_val_vi(onx_build *b, const Onnx__ValueInfoProto *v, eng_tensor *t, bool is_const, uint64_t deps)
{
	int k = add_val(b, v->name ? v->name : "", t, is_const, deps);
	if (k >= 0)
		b->vals[k].narrow = vi_narrow(v);
	return k;
}

unsigned onx_model_flags(const onx_node *n) { return n->b->m->flags; }
bool *onx_model_narrowed(onx_node *n) { return &n->b->m->narrowed; }

bool onx_node_dtype(onx_node *n, int onnx_type, eng_dtype *out)
{
	return onx_dtype(onnx_type, n->b->m->flags, &n->b->m->narrowed, out);
}

/* The built graph now depends on the values of the graph inputs in deps. */
static void mark_static(onx_build *b, uint64_t deps)
{
	for (int k = 0; k < b->m->n_in; k++)
		if (deps >> (k < 63 ? k : 63) & 1)
			b->m->in_static[k] = true;
}

eng_status onx_in_check_static(onx_node *n, int i)
{
	(void)onx_in(n, i);
	const onx_val *v = n->in[i];
	if (v->is_const)
		return ENG_OK;
	onx_build *b = n->b;
	if (!(b->flags & ENG_ONNX_SPECIALIZE))
		return onx_fail(n, ENG_ENOTSUP, "input %d ('%.200s') is needed while building and must be a constant "
			"(an initializer, a Constant node or computed from them)", i, n->pb->input[i]);
	mark_static(b, v->deps);
	return ENG_OK;
}

eng_status onx_in_ints(onx_node *n, int i, int64_t *out, int max, int *count)
{
	(void)onx_in(n, i);
	*count = -1;
	if (i >= n->n_in || !n->in[i])
		return ENG_OK;
	const onx_val *v = n->in[i];
	eng_status s = onx_in_check_static(n, i);
	if (s)
		return s;
	int64_t numel = eng_numel(v->t);
	if (eng_ndim(v->t) > 1 || numel > max)
		return onx_fail(n, ENG_ENOTSUP, "input %d ('%.200s'): %lld values (at most %d, rank <= 1)", i, n->pb->input[i], (long long)numel, max);
	eng_dtype dt = eng_tensor_dtype(v->t);
	if (eng_dtype_is_float(dt))
		return onx_fail(n, ENG_EDTYPE, "input %d ('%.200s') must be integer, not %s", i, n->pb->input[i], eng_dtype_name(dt));
	eng_tensor *c = dt == ENG_I64 ? (eng_tensor *)v->t : eng_cast(v->t, ENG_I64);
	s = c ? eng_tensor_read(c, out, (size_t)numel * sizeof(int64_t)) : eng_error(n->ctx);
	if (c != v->t)
		eng_tensor_free(c);
	if (s)
		return s;
	*count = (int)numel;
	return ENG_OK;
}

eng_status onx_in_scalar(onx_node *n, int i, double *out, bool *present)
{
	(void)onx_in(n, i);
	*present = false;
	if (i >= n->n_in || !n->in[i])
		return ENG_OK;
	const onx_val *v = n->in[i];
	eng_status s = onx_in_check_static(n, i);
	if (s)
		return s;
	if (eng_numel(v->t) != 1)
		return onx_fail(n, ENG_ESHAPE, "input %d ('%.200s') must hold one value, not %lld", i, n->pb->input[i], (long long)eng_numel(v->t));
	*out = eng_item(v->t);
	if (eng_error(n->ctx))
		return eng_error(n->ctx);
	*present = true;
	return ENG_OK;
}

/* Every attribute of the node must be one the op's entry lists. */
static eng_status check_attrs(onx_node *n, const onx_op *op)
{
	for (size_t i = 0; i < n->pb->n_attribute; i++) {
		const char *a = n->pb->attribute[i]->name ? n->pb->attribute[i]->name : "";
		size_t al = strlen(a);
		bool ok = false;
		for (const char *p = op->attrs; p && *p && !ok;) {
			size_t l = strcspn(p, ",");
			ok = l == al && !strncmp(p, a, l);
			p += l + (p[l] == ',');
		}
		if (!ok)
			return onx_fail(n, ENG_ENOTSUP, "attribute '%.100s' is not supported", a);
		if (n->pb->attribute[i]->ref_attr_name && *n->pb->attribute[i]->ref_attr_name)
			return onx_fail(n, ENG_ENOTSUP, "attribute '%.100s' refers to a function attribute", a);
	}
	return ENG_OK;
}

/* Ops whose constant outputs stay lazy: views of their input and fills, free where they are
 * read; control flow, whose outputs come from nodes folded on their own. (An op drawing random
 * numbers, none supported yet, would belong here too: folded, it would draw once.) */
static const char *const lazy_ops[] = {"Constant", "ConstantOfShape", "Shape", "Size", "Identity", "Reshape",
	"Squeeze", "Unsqueeze", "Flatten", "Expand", "Range", "EyeLike", "If", "Loop", "Scan"};
#define ONX_FOLD_MAX ((int64_t)1 << 20)         /* elements of one folded constant */
#define ONX_FOLD_TOTAL ((int64_t)64 << 20)       /* bytes a model keeps folded, all together */

/* Constant folding: a node whose inputs are all constants computed from the model alone
 * (initializers, Constant nodes; no graph input, not inside a Loop or Scan body, whose values
 * change per iteration) computes its outputs once, at the first build, and the model keeps them:
 * later builds, and the replays of a JIT holding the graph, load the stored values instead of
 * recomputing them (e.g. an LSTM weight put together by Slice and Concat nodes, which would
 * otherwise be gathered in every matmul). Not for ops free where read (views, fills), nor for
 * large outputs or past a total per model (they stay lazy: computed where read). */
static bool foldable(const onx_build *b, const onx_node *n)
{
	if (!n->out_const || n->deps || b->loops)
		return false;
	for (size_t i = 0; i < sizeof(lazy_ops) / sizeof(lazy_ops[0]); i++)
		if (!strcmp(n->pb->op_type, lazy_ops[i]))
			return false;
	return true;
}

/* Every output of n from the model's folded constants (new handles); false if one is missing. */
static bool fold_lookup(onx_build *b, const onx_node *n, eng_tensor **out)
{
	eng_onnx_model *m = b->m;
	for (int i = 0; i < n->n_out; i++)
		if (*n->pb->output[i] && onx_map_get(&m->fold_map, n->pb->output[i]) < 0)
			return false;
	for (int i = 0; i < n->n_out; i++) {
		if (!*n->pb->output[i])
			continue;
		eng_tensor *t = m->folded[onx_map_get(&m->fold_map, n->pb->output[i])];
		out[i] = eng_reshape(t, eng_ndim(t), eng_shape(t));
	}
	return true;
}

/* Keep t (realized) in the model under name in map; false on failure (the context's error set). */
static bool keep_folded(eng_onnx_model *m, onx_map *map, const char *name, eng_tensor *t)
{
	if (m->n_folded == m->cap_folded) {
		int cap = m->cap_folded ? 2 * m->cap_folded : 64;
		eng_tensor **f = realloc(m->folded, sizeof(*f) * (size_t)cap);
		if (!f)
			return eng_set_error(m->ctx, ENG_ENOMEM, "onnx: out of memory"), false;
		m->folded = f;
		m->cap_folded = cap;
	}
	eng_tensor *k = eng_keep_root(eng_reshape(t, eng_ndim(t), eng_shape(t)));
	if (!k || !onx_map_put(map, name, m->n_folded)) {
		eng_tensor_free(k);
		if (k)
			eng_set_error(m->ctx, ENG_ENOMEM, "onnx: out of memory");
		return false;
	}
	m->folded[m->n_folded++] = k;
	return true;
}

static eng_status fold(onx_build *b, onx_node *n, eng_tensor **out)
{
	eng_tensor *todo[64];
	int idx[64], k = 0;
	eng_onnx_model *m = b->m;
	int64_t bytes = 0;
	for (int i = 0; i < n->n_out; i++) { /* all outputs or none, as fold_lookup takes them */
		if (!*n->pb->output[i])
			continue;
		if (eng_numel(out[i]) > ONX_FOLD_MAX)
			return ENG_OK;
		bytes += eng_numel(out[i]) * (int64_t)eng_dtype_size(eng_tensor_dtype(out[i]));
		idx[k] = i, todo[k++] = out[i];
	}
	if (!k || m->folded_bytes + bytes > ONX_FOLD_TOTAL)
		return ENG_OK;
	m->folded_bytes += bytes;
	eng_status s = eng_realize(todo, k);
	for (int j = 0; j < k && !s; j++)
		if (!keep_folded(m, &m->fold_map, n->pb->output[idx[j]], todo[j]))
			s = eng_error(b->ctx);
	return s;
}

bool onx_derived_ok(const onx_node *n, int i)
{
	return i < n->n_in && n->in[i] && n->in[i]->is_const && !n->in[i]->deps && !n->b->loops && n->n_out > 0 &&
	       *n->pb->output[0];
}

eng_tensor *onx_derived_get(onx_node *n)
{
	eng_onnx_model *m = n->b->m;
	int k = onx_map_get(&m->derived_map, n->pb->output[0]);
	return k < 0 ? NULL : eng_reshape(m->folded[k], eng_ndim(m->folded[k]), eng_shape(m->folded[k]));
}

eng_tensor *onx_derived_put(onx_node *n, eng_tensor *t)
{
	eng_onnx_model *m = n->b->m;
	if (!t)
		return NULL;
	int64_t bytes = eng_numel(t) * (int64_t)eng_dtype_size(eng_tensor_dtype(t));
	if (eng_numel(t) > ONX_FOLD_MAX || m->folded_bytes + bytes > ONX_FOLD_TOTAL)
		return t;
	m->folded_bytes += bytes;
	if (eng_realize(&t, 1) || !keep_folded(m, &m->derived_map, n->pb->output[0], t))
		return NULL;
	return t;
}

static eng_status run_node(onx_build *b, const Onnx__NodeProto *pb)
{
	const onx_val *inv[64];
	eng_tensor *outv[64] = {0};
	const char *dom = pb->domain ? pb->domain : "";
	uint64_t read = 0;
	onx_node n = {.b = b, .ctx = b->ctx, .pb = pb, .opset = eng_onnx_opset(b->m, dom), .n_in = (int)pb->n_input,
		      .n_out = (int)pb->n_output, .in = inv, .out = outv, .out_const = true, .read = &read};
	if (n.opset <= 0)
		return onx_fail(&n, ENG_EINVAL, "the model imports no opset of domain '%.100s'", dom);
	if (pb->n_input > 64 || pb->n_output > 64)
		return onx_fail(&n, ENG_ENOTSUP, "%zu inputs, %zu outputs (at most 64)", pb->n_input, pb->n_output);
	if (++b->nodes > ONX_MAX_BUILT_NODES)
		return onx_fail(&n, ENG_ENOTSUP, "more than %d nodes to build (loops unrolled)", ONX_MAX_BUILT_NODES);
	bool known;
	const onx_op *op = onx_op_find(dom, pb->op_type ? pb->op_type : "", n.opset, &known);
	if (!op)
		return onx_fail(&n, ENG_ENOTSUP, known ? "this opset's version of the op is not supported"
			: *dom && strcmp(dom, "ai.onnx") ? "op of domain '%.100s' is not supported" : "op is not supported", dom);
	eng_status s = check_attrs(&n, op);
	if (s)
		return s;
	for (int i = 0; i < n.n_in; i++) {
		inv[i] = NULL;
		if (!*pb->input[i])
			continue;
		int k = onx_map_get(&b->names, pb->input[i]);
		if (k < 0)
			return onx_fail(&n, ENG_EINVAL, "input '%.200s' has no value", pb->input[i]);
		inv[i] = &b->vals[k];
		n.out_const &= b->vals[k].is_const;
		n.deps |= b->vals[k].deps;
	}
	for (int i = 0; i < n.n_in; i++)
		if (inv[i] && inv[i]->narrow == ONX_UINT64 && !onx_uint64_ok(pb->op_type ? pb->op_type : "") &&
		    !(!strcmp(pb->op_type ? pb->op_type : "", "BitShift") && !strcmp(onx_attr_s(&n, "direction", "", (char[8]){0}, 8), "LEFT")))
			return onx_fail(&n, ENG_ENOTSUP, "input %d ('%.200s') is uint64, held as int64's bits: this op would read values from 2^63 as negative",
					i, pb->input[i]);
	bool cached = foldable(b, &n) && fold_lookup(b, &n, outv);
	if (!cached && (s = op->fn(&n)))
		return eng_error(b->ctx) ? s : onx_fail(&n, s, "failed");
	if (eng_error(b->ctx))
		return eng_error(b->ctx);
	for (int i = 0; i < n.n_in && !cached; i++)
		if (inv[i] && !((read >> i) & 1))
			return onx_fail(&n, ENG_ENOTSUP, "input %d ('%.200s') is given, and this opset's version of the op is not read with it: refused, not ignored",
					i, pb->input[i]);
	for (int i = 0; i < n.n_out; i++)
		if (*pb->output[i] && !outv[i])
			return onx_fail(&n, ENG_ENOTSUP, "output %d ('%.200s') is not produced", i, pb->output[i]);
	int tags[64] = {0};
	for (int i = 0; i < n.n_out && i < 64; i++) {
		tags[i] = *pb->output[i] ? output_narrow(&n, i, outv[i]) : 0;
		if (tags[i] && !cached && !(outv[i] = onx_narrow_wrap(b->ctx, outv[i], tags[i])))
			return onx_fail(&n, eng_error(b->ctx) ? eng_error(b->ctx) : ENG_ENOMEM, "failed");
	}
	if (!cached && foldable(b, &n) && (s = fold(b, &n, outv)))
		return s;
	for (int i = 0, k; i < n.n_out && i < 64; i++) {
		if (!*pb->output[i])
			continue;
		if ((k = add_val(b, pb->output[i], outv[i], n.out_const, n.deps)) < 0)
			return eng_set_error(b->ctx, ENG_ENOMEM, "onnx: out of memory");
		b->vals[k].narrow = tags[i];
	}
	return ENG_OK;
}

/* If: the condition is needed while building (a constant, or ENG_ONNX_SPECIALIZE); the chosen
 * branch's nodes are built in place, seeing the outer values. */
eng_status onx_op_if(onx_node *n)
{
	double c;
	bool present;
	eng_status s = onx_in_scalar(n, 0, &c, &present);
	if (s)
		return s;
	if (!present)
		return onx_fail(n, ENG_EINVAL, "the condition is missing");
	const char *which = c != 0 ? "then_branch" : "else_branch";
	const Onnx__AttributeProto *a = onx_attr(n, which);
	if (!a || !a->g)
		return onx_fail(n, ENG_EINVAL, "attribute '%s' holds no graph", which);
	const Onnx__GraphProto *g = a->g;
	if (g->n_initializer || g->n_sparse_initializer)
		return onx_fail(n, ENG_ENOTSUP, "initializers inside a branch are not supported");
	if ((int)g->n_output != n->n_out)
		return onx_fail(n, ENG_EINVAL, "attribute '%s' has %zu outputs, the node %d", which, g->n_output, n->n_out);
	onx_build *b = n->b;
	if (b->depth >= 16)
		return onx_fail(n, ENG_ENOTSUP, "If nested more than 16 deep");
	b->depth++;
	for (size_t k = 0; k < g->n_node && !s; k++)
		s = run_node(b, g->node[k]);
	b->depth--;
	if (s)
		return s;
	for (int i = 0; i < n->n_out; i++) {
		const char *nm = g->output[i]->name ? g->output[i]->name : "";
		int k = onx_map_get(&b->names, nm);
		if (k < 0)
			return onx_fail(n, ENG_EINVAL, "branch output '%.200s' is never computed", nm);
		eng_tensor *t = b->vals[k].t;
		n->out[i] = eng_reshape(t, eng_ndim(t), eng_shape(t));
		n->out_const &= b->vals[k].is_const;
		n->deps |= b->vals[k].deps;
	}
	return ENG_OK;
}

/* A boolean value needed while building (Loop's condition): a constant, or any value under
 * ENG_ONNX_SPECIALIZE (the graph then depends on the inputs' values). */
static eng_status read_flag(onx_node *n, const onx_val *v, const char *what, bool *out)
{
	if (!v->is_const) {
		if (!(n->b->flags & ENG_ONNX_SPECIALIZE))
			return onx_fail(n, ENG_ENOTSUP, "the %s is needed while building and must be a constant", what);
		mark_static(n->b, v->deps);
	}
	if (eng_numel(v->t) != 1)
		return onx_fail(n, ENG_ESHAPE, "the %s must hold one value", what);
	double d = eng_item(v->t);
	if (eng_error(n->ctx))
		return eng_error(n->ctx);
	*out = d != 0;
	return ENG_OK;
}

/* Loop, unrolled while building: the trip count and the condition are needed while building;
 * each iteration builds the body in place with its inputs bound to the iteration number, the
 * condition and the carried values; scan outputs are stacked along a new first axis. */
eng_status onx_op_loop(onx_node *n)
{
	const Onnx__AttributeProto *a = onx_attr(n, "body");
	if (!a || !a->g)
		return onx_fail(n, ENG_EINVAL, "attribute 'body' holds no graph");
	const Onnx__GraphProto *g = a->g;
	int nc = n->n_in - 2; /* carried values */
	if (nc < 0 || (int)g->n_input != nc + 2 || (int)g->n_output < nc + 1 || n->n_out != (int)g->n_output - 1)
		return onx_fail(n, ENG_EINVAL, "the body's inputs and outputs do not match the node's");
	if (g->n_initializer || g->n_sparse_initializer)
		return onx_fail(n, ENG_ENOTSUP, "initializers inside a body are not supported");
	int nscan = (int)g->n_output - 1 - nc;
	double trip = -1;
	bool has_trip = false, cond = true;
	eng_status s = onx_in_scalar(n, 0, &trip, &has_trip);
	if (s)
		return s;
	if (onx_in(n, 1) && (s = read_flag(n, n->in[1], "condition", &cond)))
		return s;
	if (!has_trip && !(n->n_in > 1 && n->in[1]))
		return onx_fail(n, ENG_ENOTSUP, "a loop without trip count or condition");
	onx_build *b = n->b;
	if (b->depth >= 16)
		return onx_fail(n, ENG_ENOTSUP, "subgraphs nested more than 16 deep");
	enum { MAX_ITER = 4096 };
	eng_tensor *carried[64];
	bool carried_const[64];
	uint64_t carried_deps[64];
	for (int i = 0; i < nc; i++) {
		carried[i] = onx_in(n, 2 + i);
		carried_const[i] = n->in[2 + i] && n->in[2 + i]->is_const;
		carried_deps[i] = n->in[2 + i] ? n->in[2 + i]->deps : 0;
		if (!carried[i])
			return onx_fail(n, ENG_ENOTSUP, "an omitted loop-carried value");
	}
	eng_tensor **scans = NULL;
	int64_t it = 0;
	if (nscan > 0 && !(scans = calloc((size_t)nscan * MAX_ITER, sizeof(*scans))))
		return onx_fail(n, ENG_ENOMEM, "out of memory");
	b->depth++, b->loops++;
	for (; (!has_trip || it < (int64_t)trip) && cond && !s; it++) {
		if (it >= MAX_ITER) {
			s = onx_fail(n, ENG_ENOTSUP, "more than %d iterations", MAX_ITER);
			break;
		}
		bool cflag = cond;
		eng_tensor *iv = eng_from_data(n->ctx, ENG_I64, 0, NULL, &it);
		eng_tensor *cv = eng_from_data(n->ctx, ENG_BOOL, 0, NULL, &cflag);
		if (add_val_vi(b, g->input[0], iv, true, 0) < 0 ||
		    add_val_vi(b, g->input[1], cv, true, 0) < 0) {
			s = eng_set_error(n->ctx, ENG_ENOMEM, "onnx: out of memory");
			break;
		}
		for (int i = 0; i < nc && !s; i++)
			if (add_val_vi(b, g->input[2 + i], carried[i], carried_const[i], carried_deps[i]) < 0)
				s = eng_set_error(n->ctx, ENG_ENOMEM, "onnx: out of memory");
		for (size_t k = 0; k < g->n_node && !s; k++)
			s = run_node(b, g->node[k]);
		for (int o = 0; o < (int)g->n_output && !s; o++) {
			const char *nm = g->output[o]->name ? g->output[o]->name : "";
			int k = onx_map_get(&b->names, nm);
			if (k < 0) {
				s = onx_fail(n, ENG_EINVAL, "body output '%.200s' is never computed", nm);
				break;
			}
			if (o == 0)
				s = read_flag(n, &b->vals[k], "condition", &cond);
			else if (o <= nc) {
				carried[o - 1] = b->vals[k].t;
				carried_const[o - 1] = b->vals[k].is_const;
				carried_deps[o - 1] = b->vals[k].deps;
			} else {
				scans[(o - 1 - nc) * MAX_ITER + it] = b->vals[k].t;
				n->deps |= b->vals[k].deps;
			}
		}
	}
	b->depth--, b->loops--;
	for (int i = 0; i < nc && !s; i++)
		n->out[i] = eng_reshape(carried[i], eng_ndim(carried[i]), eng_shape(carried[i]));
	for (int j = 0; j < nscan && !s; j++) {
		if (it == 0) {
			s = onx_fail(n, ENG_ENOTSUP, "scan outputs of a loop that runs no iteration");
			break;
		}
		n->out[nc + j] = eng_stack(scans + j * MAX_ITER, (int)it, 0);
		s = onx_check(n, n->out[nc + j]);
	}
	for (int i = 0; i < nc; i++) {
		n->out_const &= carried_const[i];
		n->deps |= carried_deps[i];
	}
	free(scans);
	return s;
}

/* Scan (opset >= 9), unrolled while building: N state values, M scan inputs sliced along their
 * axes (in either direction); the body's K scan outputs are stacked along their axes. */
eng_status onx_op_scan(onx_node *n)
{
	const Onnx__AttributeProto *a = onx_attr(n, "body");
	if (!a || !a->g)
		return onx_fail(n, ENG_EINVAL, "attribute 'body' holds no graph");
	if (n->opset < 9)
		return onx_fail(n, ENG_ENOTSUP, "Scan before opset 9 (with sequence_lens) is not supported");
	const Onnx__GraphProto *g = a->g;
	int M = (int)onx_attr_i(n, "num_scan_inputs", -1), N = n->n_in - M, K = n->n_out - N;
	if (M < 1 || N < 0 || K < 0 || (int)g->n_input != N + M || (int)g->n_output != N + K || N + M > 64 || N + K > 64)
		return onx_fail(n, ENG_EINVAL, "the body's inputs and outputs do not match the node's");
	if (g->n_initializer || g->n_sparse_initializer)
		return onx_fail(n, ENG_ENOTSUP, "initializers inside a body are not supported");
	int64_t iax[64], idir[64], oax[64], odir[64];
	int ni, nid, no, nod;
	eng_status s;
	if ((s = onx_attr_ints(n, "scan_input_axes", iax, 64, &ni)) || (s = onx_attr_ints(n, "scan_input_directions", idir, 64, &nid)) ||
	    (s = onx_attr_ints(n, "scan_output_axes", oax, 64, &no)) || (s = onx_attr_ints(n, "scan_output_directions", odir, 64, &nod)))
		return s;
	eng_tensor *state[64], *xs[64];
	bool st_const[64];
	uint64_t st_deps[64];
	int ax[64];
	int64_t len = -1;
	for (int i = 0; i < N; i++) {
		state[i] = onx_in(n, i);
		st_const[i] = n->in[i] && n->in[i]->is_const;
		st_deps[i] = n->in[i] ? n->in[i]->deps : 0;
		if (!state[i])
			return onx_fail(n, ENG_EINVAL, "state %d is missing", i);
	}
	for (int j = 0; j < M; j++) {
		xs[j] = onx_in(n, N + j);
		if (!xs[j] || !onx_axis(ni > j ? iax[j] : 0, eng_ndim(xs[j]), &ax[j]))
			return onx_fail(n, ENG_EINVAL, "scan input %d is missing or its axis out of range", j);
		int64_t l = eng_shape(xs[j])[ax[j]];
		if (len >= 0 && l != len)
			return onx_fail(n, ENG_ESHAPE, "scan inputs differ in length");
		len = l;
	}
	enum { MAX_ITER = 4096 };
	if (len > MAX_ITER || len < 1)
		return onx_fail(n, ENG_ENOTSUP, "a scan of %lld steps", (long long)len);
	onx_build *b = n->b;
	if (b->depth >= 16)
		return onx_fail(n, ENG_ENOTSUP, "subgraphs nested more than 16 deep");
	eng_tensor **outs = K ? calloc((size_t)K * (size_t)len, sizeof(*outs)) : NULL;
	if (K && !outs)
		return onx_fail(n, ENG_ENOMEM, "out of memory");
	s = ENG_OK;
	b->depth++, b->loops++;
	for (int64_t t = 0; t < len && !s; t++) {
		for (int i = 0; i < N && !s; i++)
			if (add_val_vi(b, g->input[i], state[i], st_const[i], st_deps[i]) < 0)
				s = eng_set_error(n->ctx, ENG_ENOMEM, "onnx: out of memory");
		for (int j = 0; j < M && !s; j++) {
			int64_t at = nid > j && idir[j] ? len - 1 - t : t;
			eng_tensor *sl = eng_slice(xs[j], ax[j], at, at + 1, 1);
			int64_t sh[ENG_MAX_DIMS];
			int r = eng_ndim(xs[j]), k = 0;
			for (int d = 0; d < r; d++)
				if (d != ax[j])
					sh[k++] = eng_shape(xs[j])[d];
			if (add_val_vi(b, g->input[N + j], eng_reshape(sl, r - 1, sh), false, n->in[N + j]->deps) < 0)
				s = eng_set_error(n->ctx, ENG_ENOMEM, "onnx: out of memory");
		}
		for (size_t k = 0; k < g->n_node && !s; k++)
			s = run_node(b, g->node[k]);
		for (int o = 0; o < N + K && !s; o++) {
			const char *nm = g->output[o]->name ? g->output[o]->name : "";
			int k = onx_map_get(&b->names, nm);
			if (k < 0) {
				s = onx_fail(n, ENG_EINVAL, "body output '%.200s' is never computed", nm);
				break;
			}
			if (o < N) {
				state[o] = b->vals[k].t;
				st_const[o] = b->vals[k].is_const;
				st_deps[o] = b->vals[k].deps;
			} else
				outs[(o - N) * len + t] = b->vals[k].t;
			n->deps |= b->vals[k].deps;
		}
	}
	b->depth--, b->loops--;
	for (int i = 0; i < N && !s; i++)
		n->out[i] = eng_reshape(state[i], eng_ndim(state[i]), eng_shape(state[i]));
	for (int k = 0; k < K && !s; k++) {
		eng_tensor **seq = outs + k * len;
		if (nod > k && odir[k]) /* reverse: the last step first */
			for (int64_t i = 0; i < len / 2; i++) {
				eng_tensor *tmp = seq[i];
				seq[i] = seq[len - 1 - i];
				seq[len - 1 - i] = tmp;
			}
		int oa;
		if (!onx_axis(no > k ? oax[k] : 0, eng_ndim(seq[0]) + 1, &oa)) {
			s = onx_fail(n, ENG_EAXIS, "scan output %d's axis is out of range", k);
			break;
		}
		n->out[N + k] = eng_stack(seq, (int)len, oa);
		s = onx_check(n, n->out[N + k]);
	}
	free(outs);
	n->out_const = false;
	return s;
}

static eng_status check_input(eng_onnx_model *m, int i, const eng_tensor *t, unsigned flags)
{
	const eng_onnx_io *io = &m->in[i];
	if (!t)
		return eng_set_error(m->ctx, ENG_EINVAL, "onnx: input %d ('%.200s') is NULL", i, io->name);
	if (!io->dtype_ok)
		return eng_set_error(m->ctx, ENG_ENOTSUP, "onnx: input %d ('%.200s'): element type %s is not supported", i, io->name, onx_type_name(io->onnx_type));
	if (eng_tensor_dtype(t) != io->dtype)
		return eng_set_error(m->ctx, ENG_EDTYPE, "onnx: input %d ('%.200s') must be %s, not %s", i, io->name, eng_dtype_name(io->dtype), eng_dtype_name(eng_tensor_dtype(t)));
	if (io->ndim >= 0) {
		bool ok = eng_ndim(t) == io->ndim;
		for (int d = 0; ok && !(flags & ENG_ONNX_FREE_DIMS) && d < io->ndim; d++)
			ok = io->shape[d] < 0 || io->shape[d] == eng_shape(t)[d];
		if (!ok)
			return eng_set_error(m->ctx, ENG_ESHAPE, "onnx: input %d ('%.200s'): shape does not match the declared one", i, io->name);
	}
	return ENG_OK;
}

/* Output i's value as a new tensor of the caller's scope, checked against the declared type. */
static eng_status take_output(onx_build *b, int i, eng_tensor **out)
{
	const eng_onnx_io *io = &b->m->out[i];
	int k = onx_map_get(&b->names, io->name);
	if (k < 0)
		return eng_set_error(b->ctx, ENG_EINVAL, "onnx: output %d ('%.200s') is never computed", i, io->name);
	eng_tensor *t = b->vals[k].t;
	if (io->dtype_ok && eng_tensor_dtype(t) != io->dtype)
		return eng_set_error(b->ctx, ENG_EDTYPE, "onnx: output %d ('%.200s') came out %s but is declared %s (an importer bug)", i, io->name,
				     eng_dtype_name(eng_tensor_dtype(t)), eng_dtype_name(io->dtype));
	if (!io->dtype_ok && io->onnx_type)
		return eng_set_error(b->ctx, ENG_ENOTSUP, "onnx: output %d ('%.200s'): element type %s is not supported", i, io->name, onx_type_name(io->onnx_type));
	if (io->ndim >= 0) {
		bool ok = eng_ndim(t) == io->ndim;
		for (int d = 0; ok && !(b->flags & ENG_ONNX_FREE_DIMS) && d < io->ndim; d++)
			ok = io->shape[d] < 0 || io->shape[d] == eng_shape(t)[d];
		if (!ok)
			return eng_set_error(b->ctx, ENG_ESHAPE, "onnx: output %d ('%.200s'): shape differs from the declared one (an importer bug)", i, io->name);
	}
	*out = eng_reshape(t, eng_ndim(t), eng_shape(t)); /* a handle of its own */
	return *out ? ENG_OK : eng_error(b->ctx);
}

eng_status eng_onnx_build(eng_onnx_model *m, eng_tensor *const *inputs, eng_tensor **outputs, unsigned flags)
{
	if (!m || (m->n_in && !inputs) || (m->n_out && !outputs))
		return m ? eng_set_error(m->ctx, ENG_EINVAL, "onnx: build: NULL inputs or outputs") : ENG_EINVAL;
	eng_ctx *ctx = m->ctx;
	if (eng_error(ctx))
		return eng_error(ctx);
	for (int i = 0; i < m->n_out; i++)
		outputs[i] = NULL;
	for (int i = 0; i < m->n_in; i++) {
		m->in_static[i] = false;
		eng_status s = check_input(m, i, inputs[i], flags);
		if (s)
			return s;
	}
	onx_build b = {.m = m, .ctx = ctx, .flags = flags};
	eng_status s = ENG_OK;
	eng_scope_begin(ctx);
	for (int i = 0, k; i < m->n_init && !s; i++) {
		if ((k = add_val(&b, m->g->initializer[i]->name, m->init[i], true, 0)) < 0)
			s = eng_set_error(ctx, ENG_ENOMEM, "onnx: out of memory");
		else
			b.vals[k].narrow = onx_narrow_of(m->g->initializer[i]->data_type);
	}
	for (int i = 0, k; i < m->n_in && !s; i++) {
		if ((k = add_val(&b, m->in[i].name, inputs[i], false, 1ull << (i < 63 ? i : 63))) < 0)
			s = eng_set_error(ctx, ENG_ENOMEM, "onnx: out of memory");
		else
			b.vals[k].narrow = onx_narrow_of(m->in[i].onnx_type);
	}
	for (size_t k = 0; k < m->g->n_node && !s; k++)
		s = run_node(&b, m->g->node[m->order[k]]);
	for (int i = 0; i < m->n_out && !s; i++)
		s = take_output(&b, i, &outputs[i]);
	for (int i = 0; i < m->n_out; i++) {
		if (outputs[i] && s) {
			eng_tensor_free(outputs[i]);
			outputs[i] = NULL;
		}
		if (outputs[i])
			eng_keep(outputs[i]);
	}
	eng_scope_end(ctx);
	onx_map_free(&b.names);
	free(b.vals);
	return s;
}
