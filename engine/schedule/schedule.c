/* schedule.c: the scheduler. Starting from the requested nodes, it grows the set of nodes
 * that must be stored until every kernel lowers cleanly (see lower.c for the rules), merges
 * independent same-shaped outputs into one kernel, and orders the kernels. */
#include "schedule.h"
#include "graph/nodeset.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "codegen/lower.h"

static bool in_set(void *arg, const eng_node *n) { return eng_nodeset_has(arg, n); }

static int cmp_id(const void *a, const void *b)
{
	const eng_node *x = *(const eng_node *const *)a, *y = *(const eng_node *const *)b;
	return x->id < y->id ? -1 : x->id > y->id;
}


/* Find nodes that must be stored regardless of fusion: buffer-level ops. */
static bool collect_forced(const eng_node *n, eng_nodeset *seen, eng_nodeset *store)
{
	if (n->buf || eng_nodeset_has(seen, n))
		return true;
	if (!eng_nodeset_add(seen, n))
		return false;
	if (eng_op_kind_of(n->op) == ENG_KIND_BUFFEROP && n->op != ENG_OP_DETACH && !eng_nodeset_add(store, n))
		return false;
	for (int i = 0; i < n->nsrc; i++)
		if (!collect_forced(n->src[i], seen, store))
			return false;
	return true;
}

#define MAX_DEPS 512

typedef struct member {
	const eng_node *node;
	const eng_node *deps[MAX_DEPS]; /* what its kernel reads: members (or realized nodes) */
	int nafter;
	const eng_node *after[MAX_DEPS]; /* readers of an assign's old contents: run first, or in
					  * the same kernel at the same element (lowering checks) */
	int ndeps;
	int group;
	int set; /* members that must share a kernel (assigns reading each other in place) */
} member;

static int member_of(const member *m, int n, const eng_node *x)
{
	for (int i = 0; i < n; i++)
		if (m[i].node == x)
			return i;
	return -1;
}

/* Is the graph of kernels acyclic when members are merged as their .group says? Grouped
 * members are nodes g in [0, ngroups); ungrouped member i is node ngroups + i. */
static bool groups_acyclic(const member *m, int nm, int ngroups)
{
	int nn = ngroups + nm;
	int *indeg = calloc(nn, sizeof(int)), *queue = calloc(nn, sizeof(int));
	char *adj = calloc((size_t)nn * nn, 1);
	bool ok = false;
	if (!indeg || !queue || !adj)
		goto out;
#define NODE(i) (m[m[i].set].group >= 0 ? m[m[i].set].group : ngroups + m[i].set)
	for (int i = 0; i < nm; i++)
		for (int k = 0; k < m[i].ndeps + m[i].nafter; k++) {
			bool hard = k < m[i].ndeps;
			int d = member_of(m, nm, hard ? m[i].deps[k] : m[i].after[k - m[i].ndeps]);
			if (d < 0)
				continue;
			int a = NODE(d), b = NODE(i);
			if (a == b) {
				if (d != i && hard)
					goto out; /* a member reads another member of its own kernel */
				continue;     /* in place in one kernel: lowering checks the indices */
			}
			if (!adj[(size_t)a * nn + b]) {
				adj[(size_t)a * nn + b] = 1;
				indeg[b]++;
			}
		}
#undef NODE
	int head = 0, tail = 0, seen = 0;
	for (int x = 0; x < nn; x++)
		if (!indeg[x])
			queue[tail++] = x;
	while (head < tail) {
		int x = queue[head++];
		seen++;
		for (int y = 0; y < nn; y++)
			if (adj[(size_t)x * nn + y] && --indeg[y] == 0)
				queue[tail++] = y;
	}
	ok = seen == nn;
out:
	free(indeg);
	free(queue);
	free(adj);
	return ok;
}

static bool same_shape(const eng_node *a, const eng_node *b)
{
	return a->ndim == b->ndim && !memcmp(a->shape, b->shape, sizeof(int64_t) * a->ndim);
}

static eng_status trial(eng_ctx *ctx, const bk_target *par, eng_nodeset *store, const eng_node *const *roots, int nroots,
			bool optimize, eng_kernel_ir *ir, const eng_node **must)
{
	eng_lower_opts o = {.is_stored = in_set, .arg = store, .optimize = optimize, .target = *par};
	char err[512] = "";
	memset(ir, 0, sizeof(*ir));
	eng_status s = eng_lower(roots, nroots, &o, ir, must, err, sizeof(err));
	if (s && s != ENG_ESTATE)
		eng_set_error(ctx, s, "lowering: %s", err);
	if (s == ENG_ESTATE && !*must)
		eng_set_error(ctx, s, "lowering: %s", err);
	return s;
}

/* Every allocation failure of the scheduler reports the same way. */
static eng_status sched_oom(eng_ctx *ctx)
{
	return eng_set_error(ctx, ENG_ENOMEM, "out of memory while scheduling");
}

/* Phase 1: the requested nodes, the buffer-level ops they reach, and the targets of assigns. */
static eng_status collect_stores(eng_ctx *ctx, eng_node *const *nodes, int n, eng_nodeset *store)
{
	eng_nodeset seen = {0};
	eng_status st = ENG_OK;
	for (int i = 0; i < n && !st; i++)
		if (!nodes[i]->buf &&
		    (!eng_nodeset_add(store, nodes[i]) || !collect_forced(nodes[i], &seen, store)))
			st = sched_oom(ctx);
	/* an assign writes into its target's buffer: the target must exist first */
	for (size_t i = 0; i < store->n && !st; i++)
		if (store->list[i]->op == ENG_OP_ASSIGN && !store->list[i]->src[0]->buf &&
		    (!eng_nodeset_add(store, store->list[i]->src[0]) ||
		     !collect_forced(store->list[i]->src[0], &seen, store)))
			st = sched_oom(ctx);
	eng_nodeset_free(&seen);
	return st;
}

/* Phase 2: grow the stored set until every kernel lowers, then store every reduction that more
 * than one kernel would compute as a phase (computing it once is cheaper), and repeat.
 * One lowering per member and pass: the phases are only used from a pass that changed
 * nothing, when every member's lowering saw the final stored set. */
static eng_status grow_stores(eng_ctx *ctx, const bk_target *par, eng_nodeset *store)
{
	eng_status st = ENG_OK;
	for (int iter = 0;; iter++) {
		if (iter > 10000)
			return eng_set_error(ctx, ENG_ESTATE, "scheduler did not converge");
		bool changed = false;
		eng_nodeset seen_phase = {0}, shared = {0};
		for (size_t i = 0; i < store->n && !st; i++) {
			const eng_node *r = store->list[i];
			if (eng_node_numel(r) == 0)
				continue;
			eng_kernel_ir ir;
			const eng_node *must = NULL;
			st = trial(ctx, par, store, &r, 1, false, &ir, &must);
			if (st == ENG_ESTATE && must) {
				st = eng_nodeset_add(store, must) ? ENG_OK : ENG_ENOMEM;
				changed = true;
			}
			for (int p = 0; p < ir.nphases && !st && !changed; p++) {
				const eng_node *ph = ir.phases[p].node;
				/* one kernel may use a reduction in several phases */
				bool dup = false;
				for (int q = 0; q < p && !dup; q++)
					dup = ir.phases[q].node == ph;
				if (dup)
					continue;
				if ((eng_nodeset_has(&seen_phase, ph) && !eng_nodeset_add(&shared, ph)) ||
				    !eng_nodeset_add(&seen_phase, ph))
					st = ENG_ENOMEM;
			}
			eng_kernel_ir_free(&ir);
		}
		for (size_t i = 0; i < shared.n && !st && !changed; i++)
			if (!eng_nodeset_add(store, shared.list[i]))
				st = ENG_ENOMEM;
		changed |= shared.n > 0;
		eng_nodeset_free(&seen_phase);
		eng_nodeset_free(&shared);
		if (st == ENG_ENOMEM)
			return sched_oom(ctx);
		if (st || !changed)
			return st;
	}
}

/* Phase 3: one member per stored node, in topological (creation) order, with the buffers its
 * kernel reads; *nk counts the members that get a kernel (not of zero elements). */
static eng_status make_members(eng_ctx *ctx, const bk_target *par, eng_nodeset *store, member **out_m,
			       int *nk)
{
	int nm = (int)store->n;
	member *m = calloc(nm, sizeof(*m));
	/* sorted in a copy: the set's own order stays, it is indexed */
	const eng_node **ord = malloc(nm * sizeof(*ord));
	*out_m = m;
	*nk = 0;
	if (!m || !ord) {
		free(ord);
		return sched_oom(ctx);
	}
	memcpy(ord, store->list, nm * sizeof(*ord));
	qsort(ord, nm, sizeof(*ord), cmp_id);
	for (int i = 0; i < nm; i++)
		m[i].node = ord[i];
	free(ord);
	for (int i = 0; i < nm; i++) {
		m[i].group = -1;
		if (eng_node_numel(m[i].node) == 0)
			continue;
		eng_kernel_ir ir;
		const eng_node *must = NULL;
		eng_status st = trial(ctx, par, store, &m[i].node, 1, false, &ir, &must);
		if (st) {
			eng_kernel_ir_free(&ir);
			return st;
		}
		m[i].ndeps = eng_lower_inputs(&ir, m[i].deps, ENG_MAX_KERNEL_BUFS);
		eng_kernel_ir_free(&ir);
		if (m[i].node->op == ENG_OP_ASSIGN && !m[i].node->src[0]->buf)
			m[i].deps[m[i].ndeps++] = m[i].node->src[0];
		(*nk)++;
	}
	return ENG_OK;
}

/* Phase 4: an assign runs after every kernel that reads the old contents of its target. */
static eng_status order_assigns_after_readers(eng_ctx *ctx, member *m, int nm)
{
	for (int i = 0; i < nm; i++) {
		if (m[i].node->op != ENG_OP_ASSIGN)
			continue;
		const eng_node *target = m[i].node->src[0];
		for (int j = 0; j < nm; j++) {
			if (j == i)
				continue;
			bool reads = false;
			for (int k = 0; k < m[j].ndeps && !reads; k++)
				reads = m[j].deps[k] == target;
			if (!reads)
				continue;
			if (m[i].nafter == MAX_DEPS)
				return eng_set_error(
					ctx, ENG_ERANGE,
					"scheduler: too many readers of one assigned buffer");
			m[i].after[m[i].nafter++] = m[j].node;
		}
	}
	return ENG_OK;
}

/* Phase 5: assigns that read each other's old contents (Adam's m, v and parameter) must be one
 * kernel, reading before writing each element: join them into sets first. The set's
 * representative (its first member) carries the group. */
static void join_mutual_assigns(member *m, int nm)
{
	for (int i = 0; i < nm; i++)
		m[i].set = i;
	for (int i = 0; i < nm; i++)
		for (int k = 0; k < m[i].nafter; k++) {
			int j = member_of(m, nm, m[i].after[k]);
			if (j < 0 || !same_shape(m[i].node, m[j].node))
				continue;
			bool mutual = false;
			for (int q = 0; q < m[j].nafter && !mutual; q++)
				mutual = m[j].after[q] == m[i].node;
			if (!mutual)
				continue;
			int a = m[i].set, b = m[j].set, lo = a < b ? a : b, hi = a < b ? b : a;
			for (int x = 0; x < nm; x++)
				if (m[x].set == hi)
					m[x].set = lo;
		}
}

/* Phase 6: the kernels (out->items, unordered): independent same-shaped outputs merged into
 * one where they still lower and the kernel graph stays acyclic; zero-element nodes go to
 * out->empty. */
static eng_status group_outputs(eng_ctx *ctx, const bk_target *par, eng_nodeset *store, member *m,
				int nm, int nk, eng_schedule *out)
{
	out->items = calloc(nk ? nk : 1, sizeof(*out->items));
	out->empty = calloc(nm, sizeof(*out->empty));
	if (!out->items || !out->empty)
		return sched_oom(ctx);
	for (int i = 0; i < nm; i++) {
		const eng_node *r = m[i].node;
		if (eng_node_numel(r) == 0) {
			out->empty[out->nempty++] = r;
			continue;
		}
		bool placed = false;
		int rep = m[i].set;
		if (rep != i && m[rep].group >= 0) { /* its set already has a kernel: join it */
			eng_sched_item *it = &out->items[m[rep].group];
			if (it->nroots == ENG_MAX_STORES)
				return eng_set_error(
					ctx, ENG_ERANGE,
					"scheduler: too many in-place updates in one kernel");
			it->roots[it->nroots++] = r;
			m[i].group = m[rep].group;
			continue;
		}
		for (int g = 0; g < out->n && !placed; g++) {
			eng_sched_item *it = &out->items[g];
			if (it->nroots == ENG_MAX_STORES || !same_shape(it->roots[0], r) ||
			    r->op == ENG_OP_COPY || it->roots[0]->op == ENG_OP_COPY)
				continue;
			/* merged groups must still be orderable: no cycle between groups */
			m[i].group = g;
			bool indep = groups_acyclic(m, nm, out->n);
			m[i].group = -1;
			if (!indep)
				continue;
			const eng_node *roots[ENG_MAX_STORES];
			memcpy(roots, it->roots, sizeof(roots[0]) * it->nroots);
			roots[it->nroots] = r;
			eng_kernel_ir ir;
			const eng_node *must = NULL;
			eng_status s =
				trial(ctx, par, store, roots, it->nroots + 1, false, &ir, &must);
			eng_kernel_ir_free(&ir);
			if (s == ENG_ESTATE && must)
				continue;
			else if (s)
				return s;
			it->roots[it->nroots++] = r;
			m[i].group = g;
			placed = true;
		}
		if (!placed) {
			eng_sched_item *it = &out->items[out->n];
			it->roots[0] = r;
			it->nroots = 1;
			m[i].group = out->n++;
		}
	}
	return ENG_OK;
}

/* With DEBUG>=6, what each member reads and waits for: the trail to a dependency cycle. */
static void dump_members(eng_ctx *ctx, const member *m, int nm)
{
	for (int i = 0; i < nm; i++) {
		char line[1024];
		size_t l = (size_t)snprintf(line, sizeof(line), "member %d %%%u %s (group %d) reads", i, m[i].node->id,
					    eng_op_name(m[i].node->op), m[i].group);
		for (int k = 0; k < m[i].ndeps && l < sizeof(line); k++)
			l += (size_t)snprintf(line + l, sizeof(line) - l, " %%%u", m[i].deps[k]->id);
		if (l < sizeof(line))
			l += (size_t)snprintf(line + l, sizeof(line) - l, "; after");
		for (int k = 0; k < m[i].nafter && l < sizeof(line); k++)
			l += (size_t)snprintf(line + l, sizeof(line) - l, " %%%u", m[i].after[k]->id);
		eng_logmsg(ctx, 6, "%s", line);
	}
}

/* Phase 7: the kernels' dependencies, then out->items sorted into a topological order. */
static eng_status order_items(eng_ctx *ctx, const member *m, int nm, eng_schedule *out)
{
	int ni = out->n;
	int *indeg = calloc(ni, sizeof(int)), *order = calloc(ni, sizeof(int));
	char *adj = calloc((size_t)ni * ni, 1);
	if (!indeg || !order || !adj) {
		free(indeg);
		free(order);
		free(adj);
		return sched_oom(ctx);
	}
	for (int i = 0; i < nm; i++) {
		if (m[i].group < 0)
			continue;
		for (int k = 0; k < m[i].ndeps + m[i].nafter; k++) {
			int d = member_of(
				m, nm, k < m[i].ndeps ? m[i].deps[k] : m[i].after[k - m[i].ndeps]);
			if (d >= 0 && m[d].group >= 0 && m[d].group != m[i].group)
				adj[(size_t)m[d].group * ni + m[i].group] = 1;
		}
	}
	for (int a = 0; a < ni; a++)
		for (int b = 0; b < ni; b++)
			indeg[b] += adj[(size_t)a * ni + b];
	int head = 0, tail = 0;
	for (int i = 0; i < ni; i++)
		if (!indeg[i])
			order[tail++] = i;
	while (head < tail) {
		int a = order[head++];
		for (int b = 0; b < ni; b++)
			if (adj[(size_t)a * ni + b] && --indeg[b] == 0)
				order[tail++] = b;
	}
	free(indeg);
	free(adj);
	if (tail != ni) {
		free(order);
		if (ctx->debug >= 6)
			dump_members(ctx, m, nm);
		return eng_set_error(ctx, ENG_ESTATE,
				     "scheduler: kernel dependencies form a cycle");
	}
	eng_sched_item *sorted = calloc(ni ? ni : 1, sizeof(*sorted));
	if (!sorted) {
		free(order);
		return sched_oom(ctx);
	}
	for (int i = 0; i < ni; i++)
		sorted[i] = out->items[order[i]];
	free(order);
	free(out->items);
	out->items = sorted;
	return ENG_OK;
}

/* Phase 8: the final lowering of each kernel, with optimisations. */
static eng_status lower_items(eng_ctx *ctx, const bk_target *par, eng_nodeset *store,
			      eng_schedule *out)
{
	for (int i = 0; i < out->n; i++) {
		eng_sched_item *it = &out->items[i];
		const eng_node *must = NULL;
		eng_status st = trial(ctx, par, store, it->roots, it->nroots, true, &it->ir, &must);
		if (st) {
			if (st == ENG_ESTATE)
				eng_set_error(ctx, st,
					      "scheduler: kernel %d changed between passes", i);
			return st;
		}
	}
	return ENG_OK;
}

/* The phases in order; each sets the context error when it fails. */
eng_status eng_schedule_build_on(eng_ctx *ctx, const bk_target *par, eng_node *const *nodes, int n,
				 eng_schedule *out)
{
	eng_nodeset store = {0};
	member *m = NULL;
	int nk = 0;
	memset(out, 0, sizeof(*out));
	eng_status st = collect_stores(ctx, nodes, n, &store);
	if (!st && store.n) {
		st = grow_stores(ctx, par, &store);
		if (!st)
			st = make_members(ctx, par, &store, &m, &nk);
		int nm = (int)store.n; /* the stored set is final from here on */
		if (!st)
			st = order_assigns_after_readers(ctx, m, nm);
		if (!st) {
			join_mutual_assigns(m, nm);
			st = group_outputs(ctx, par, &store, m, nm, nk, out);
		}
		if (!st)
			st = order_items(ctx, m, nm, out);
		if (!st)
			st = lower_items(ctx, par, &store, out);
	}
	free(m);
	eng_nodeset_free(&store);
	if (st)
		eng_schedule_free(out);
	return st;
}

void eng_schedule_free(eng_schedule *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->n; i++) {
		eng_kernel_ir_free(&s->items[i].ir);
		free(s->items[i].deps);
	}
	free(s->items);
	free(s->empty);
	memset(s, 0, sizeof(*s));
}
