/* realize.c: runs a realize: the schedule cache, or a schedule whose kernels it renders for the
 * device's target, compiles the ones not in the program
 * cache as one batch handed to the backend, allocates output buffers, launches in order, and keeps
 * the counters and DEBUG output. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "realize.h"

#include "cache/progcache.h"
#include "cache/progdisk.h"
#include "beam.h"
#include "capture.h"
#include "graph/nodeset.h"
#include "renderer/cstyle.h"
#include "schedule/schedcache.h"
#include "schedule/schedule.h"

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

typedef struct kprep {
	char name[96];
	char *src; /* rendered kernel with its final name */
	bk_program *prog;
} kprep;

static eng_status render_item(eng_ctx *ctx, eng_device *dev, eng_sched_item *it, kprep *k)
{
	eng_status s = eng_render_kernel(&dev->target, &it->ir, k->name, &k->src);
	if (s == ENG_EINVAL)
		return eng_set_error(ctx, s, "render: %s cannot run kernels as work-groups of %d threads", dev->name,
				     it->ir.group);
	return s ? eng_set_error(ctx, s, "render: out of memory") : ENG_OK;
}

static eng_status compile_missing(eng_ctx *ctx, eng_device *dev, kprep *ks, int n)
{
	const char **srcs = calloc(n, sizeof(*srcs)), **names = calloc(n, sizeof(*names));
	int *which = calloc(n, sizeof(int));
	bk_program **progs = calloc(n, sizeof(*progs));
	eng_status s = ENG_OK;
	if (!srcs || !names || !which || !progs) {
		s = eng_set_error(ctx, ENG_ENOMEM, "out of memory compiling");
		goto out;
	}
	int m = 0;
	for (int i = 0; i < n; i++) {
		ks[i].prog = eng_progcache_get(dev->progs, ks[i].src);
		if (ks[i].prog)
			continue;
		bool dup = false; /* the same kernel twice in one schedule compiles once */
		for (int j = 0; j < m && !dup; j++)
			dup = !strcmp(ks[which[j]].src, ks[i].src);
		if (dup)
			continue;
		which[m] = i;
		srcs[m] = ks[i].src;
		names[m++] = ks[i].name;
	}
	if (!m)
		goto out;
	/* the disk cache first: loaded kernels join the memory cache, the rest compile together */
	double t0 = now_ms();
	int loaded = eng_progdisk_lookup(dev, srcs, names, progs, m);
	if (loaded) {
		ctx->stats.disk_loads += (uint64_t)loaded;
		eng_logmsg(ctx, 2, "loaded %d kernel%s from the disk cache in %.2f ms", loaded, loaded == 1 ? "" : "s",
			   now_ms() - t0);
	}
	int nc = 0; /* the misses, moved to the front */
	for (int j = 0; j < m; j++) {
		if (progs[j]) {
			if (!eng_progcache_put(dev->progs, srcs[j], progs[j])) {
				dev->bk.ops->program_free(dev->bk.ctx, progs[j]);
				s = eng_set_error(ctx, ENG_ENOMEM, "out of memory caching programs");
				goto out;
			}
			progs[j] = NULL;
			continue;
		}
		srcs[nc] = srcs[j];
		names[nc++] = names[j];
	}
	if (!nc)
		goto found;
	if ((s = eng_cancel_point(ctx, "compiling kernels", NULL)))
		goto out;
	bk_err berr;
	t0 = now_ms();
	s = dev->bk.ops->compile(dev->bk.ctx, srcs, nc, names, progs, &berr);
	ctx->stats.compiles++;
	if (s) {
		eng_set_error(ctx, s, "%s: compiling %d kernel%s: %s", dev->name, nc, nc == 1 ? "" : "s", berr.msg);
		goto out;
	}
	eng_logmsg(ctx, 2, "compiled %d kernel%s in %.2f ms", nc, nc == 1 ? "" : "s", now_ms() - t0);
	eng_progdisk_store(dev, srcs, progs, nc);
	for (int j = 0; j < nc; j++) {
		if (!eng_progcache_put(dev->progs, srcs[j], progs[j])) {
			for (int r = j; r < nc; r++)
				dev->bk.ops->program_free(dev->bk.ctx, progs[r]);
			s = eng_set_error(ctx, ENG_ENOMEM, "out of memory caching programs");
			goto out;
		}
	}
found:
	for (int i = 0; i < n; i++)
		if (!ks[i].prog)
			ks[i].prog = eng_progcache_get(dev->progs, ks[i].src);
out:
	free(srcs);
	free(names);
	free(which);
	free(progs);
	return s;
}

/* Launch one kernel whose buffer i belongs to node nodes[i]: outputs get a fresh buffer (an
 * assign writes into its target's), and the nodes hold their values afterwards. */
static eng_status launch_kernel(eng_ctx *ctx, eng_device *dev, const eng_schedcache_kernel *k, eng_node *const *nodes,
				double *total_ms)
{
	void *handles[ENG_MAX_KERNEL_BUFS];
	eng_buffer *outs[ENG_MAX_KERNEL_BUFS] = {0};
	eng_status s = ENG_OK;
	for (int i = 0; i < k->nbufs; i++) {
		eng_node *r = nodes[i];
		eng_buffer *b;
		if ((k->outputs >> i) & 1) {
			if (r->op == ENG_OP_ASSIGN) {
				b = eng_buffer_ref(r->src[0]->buf);
				if (!b) {
					s = eng_set_error(ctx, ENG_ESTATE, "assign target has no buffer");
					goto fail;
				}
			} else if (r == ctx->into_node && ctx->into_buf->dev == dev) {
				b = eng_buffer_ref(ctx->into_buf); /* eng_realize_into: the caller's memory */
			} else {
				b = eng_buffer_alloc(dev, r->dtype, eng_node_numel(r));
				if (!b) {
					s = ENG_ENOMEM;
					goto fail;
				}
			}
			outs[i] = b;
		} else {
			b = r->buf;
			if (!b) {
				s = eng_set_error(ctx, ENG_ESTATE, "kernel input %%%u was not computed", r->id);
				goto fail;
			}
			if (b->dev != dev && b->dev->failed) {
				s = eng_set_error(ctx, ENG_EDEVICE,
						  "a value computed on %s was lost when that device failed (%s): compute it "
						  "again", b->dev->name, b->dev->failmsg);
				goto fail;
			}
			if (b->dev != dev) {
				s = eng_set_error(ctx, ENG_EDEVICE,
						  "a value computed on %s is used on %s; move it with eng_to_device",
						  b->dev->name, dev->name);
				goto fail;
			}
		}
		handles[i] = b->handle;
	}
	bk_launch l = {.nparallel = k->nparallel, .cost = k->cost};
	bk_err berr;
	double t0 = now_ms();
	s = dev->bk.ops->launch(dev->bk.ctx, k->prog, handles, k->nbufs, &l, &berr);
	/* an asynchronous device (OpenCL) is waited for only to time kernels; reads wait anyway */
	if (!s && dev->bk.ops->synchronize && ctx->debug >= 2)
		s = dev->bk.ops->synchronize(dev->bk.ctx, &berr);
	double ms = now_ms() - t0;
	if (s) {
		if (s == ENG_EDEVICE)
			eng_device_fail(dev, s, berr.msg);
		else
			eng_set_error(ctx, s, "%s: launching %s: %s", dev->name, k->name, berr.msg);
		goto fail;
	}
	*total_ms += ms;
	ctx->stats.kernels++;
	ctx->stats.flops += (uint64_t)k->flops;
	ctx->stats.bytes += (uint64_t)k->bytes;
	ctx->stats.kernel_ns += (uint64_t)(ms * 1e6);
	if (ctx->debug >= 2) {
		double gflops = ms > 0 ? k->flops / (ms * 1e6) : 0, gbs = ms > 0 ? k->bytes / (ms * 1e6) : 0;
		eng_logmsg(ctx, 2, "*** %-4s %5llu %-36s arg %2d mem %6.3f GB tm %9.2fus/%9.2fms (%8.2f GFLOPS %7.2f GB/s)",
			dev->name, (unsigned long long)ctx->stats.kernels, k->name, k->nbufs, k->bytes / 1e9, ms * 1e3,
			*total_ms, gflops, gbs);
	}
	if (ctx->capture && !eng_capture_add(ctx->capture, dev, k, nodes, outs)) {
		s = eng_set_error(ctx, ENG_ENOMEM, "jit: out of memory capturing a launch");
		goto fail;
	}
	/* the roots now hold their values; an assign has a new version of its target (and the
	 * call can no longer be cancelled: see eng_cancel_point) */
	for (int i = 0; i < k->nbufs; i++)
		if (outs[i]) {
			nodes[i]->buf = outs[i];
			if (nodes[i]->op == ENG_OP_ASSIGN) {
				outs[i]->version++;
				ctx->in_place_done = true;
			}
		}
	return ENG_OK;
fail:
	for (int i = 0; i < k->nbufs; i++)
		eng_buffer_unref(outs[i]);
	return s;
}

/* launch_kernel after a cancellation check. */
static eng_status launch_checked(eng_ctx *ctx, eng_device *dev, const eng_schedcache_kernel *k, eng_node *const *nodes,
				 double *total_ms)
{
	eng_status s = eng_cancel_point(ctx, "launching ", k->name);
	return s ? s : launch_kernel(ctx, dev, k, nodes, total_ms);
}

/* DEBUG=5: a kernel's loop IR through the log. */
static void log_ir(eng_ctx *ctx, const eng_kernel_ir *ir)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return;
	eng_kernel_ir_dump(ir, f);
	if (!fclose(f) && text)
		eng_logmsg(ctx, 5, "%s", text);
	free(text);
}

/* Give zero-element nodes their (empty) buffers. */
static eng_status give_empty(eng_ctx *ctx, eng_device *dev, eng_node *e)
{
	if (e->buf)
		return ENG_OK;
	e->buf = e->op == ENG_OP_ASSIGN ? eng_buffer_ref(e->src[0]->buf) : eng_buffer_alloc(dev, e->dtype, 0);
	return e->buf ? ENG_OK : ctx->err ? ctx->err : eng_set_error(ctx, ENG_ENOMEM, "out of memory");
}

/* A schedule cache hit: bind the cached kernels to this graph's nodes and launch them. */
static eng_status run_cached(eng_ctx *ctx, eng_device *dev, const eng_schedcache_entry *e, const eng_schedcache_walk *w)
{
	int nk, ne;
	const eng_schedcache_kernel *ks = eng_schedcache_kernels(e, &nk);
	const int *empty = eng_schedcache_empty(e, &ne);
	eng_status s = ENG_OK;
	ctx->stats.schedule_hits++;
	eng_logmsg(ctx, 1, "schedule cache hit: %d kernels", nk);
	for (int i = 0; i < ne && !s; i++)
		s = give_empty(ctx, dev, (eng_node *)w->nodes.list[empty[i]]);
	double total = 0;
	for (int i = 0; i < nk && !s; i++) {
		eng_node *nodes[ENG_MAX_KERNEL_BUFS];
		for (int j = 0; j < ks[i].nbufs; j++)
			nodes[j] = (eng_node *)w->nodes.list[ks[i].node[j]];
		s = launch_checked(ctx, dev, &ks[i], nodes, &total);
	}
	return s;
}

/* The launch description of a freshly scheduled kernel; node numbers from w (if given). */
static bool describe_kernel(const eng_sched_item *it, const kprep *k, const eng_schedcache_walk *w, eng_schedcache_kernel *out,
			    eng_node **nodes)
{
	const eng_kernel_ir *ir = &it->ir;
	bool numbered = w != NULL;
	memset(out, 0, sizeof(*out));
	out->prog = k->prog;
	snprintf(out->name, sizeof(out->name), "%s", k->name);
	out->nbufs = ir->nbufs;
	for (int i = 0; i < ir->nbufs; i++) {
		nodes[i] = (eng_node *)ir->bufs[i].node;
		if (ir->bufs[i].output)
			out->outputs |= (uint64_t)1 << i;
		out->node[i] = w ? eng_nodeset_index(&w->nodes, nodes[i]) : -1;
		numbered &= out->node[i] >= 0;
	}
	out->nparallel = ir->nparallel;
	out->cost = ir->flops + ir->bytes;
	out->flops = ir->flops;
	out->bytes = ir->bytes;
	return numbered;
}

/* Remember how w's graph was realized, if every buffer of every kernel is one of its nodes. */
static void cache_schedule(eng_ctx *ctx, eng_device *dev, const eng_schedcache_walk *w, const eng_schedule *sch,
			   const kprep *ks)
{
	eng_schedcache_kernel *sk = calloc(sch->n ? sch->n : 1, sizeof(*sk));
	int *empty = calloc(sch->nempty ? sch->nempty : 1, sizeof(int));
	bool ok = sk && empty;
	for (int i = 0; i < sch->n && ok; i++) {
		eng_node *nodes[ENG_MAX_KERNEL_BUFS];
		ok = describe_kernel(&sch->items[i], &ks[i], w, &sk[i], nodes);
	}
	for (int i = 0; i < sch->nempty && ok; i++)
		ok = (empty[i] = eng_nodeset_index(&w->nodes, sch->empty[i])) >= 0;
	if (ok && !eng_schedcache_insert(dev->scache, w, sk, sch->n, empty, sch->nempty))
		eng_logmsg(ctx, 1, "schedule cache: out of memory, not cached");
	free(sk);
	free(empty);
}

/* Realize nodes that all run on dev. */
static eng_status realize_on(eng_ctx *ctx, eng_device *dev, eng_node *const *nodes, int n)
{
	if (dev->failed)
		return eng_set_error(ctx, ENG_EDEVICE, "%s: device is unusable after an earlier failure: %s", dev->name,
				     dev->failmsg);
	double t0 = now_ms();
	eng_schedcache_walk w;
	bool walked = dev->scache && eng_schedcache_walk_build(&w, nodes, n);
	if (walked) {
		const eng_schedcache_entry *e = eng_schedcache_lookup(dev->scache, &w);
		if (e) {
			eng_status s = run_cached(ctx, dev, e, &w);
			eng_schedcache_walk_free(&w);
			return s;
		}
	}
	eng_schedule sch;
	eng_status s = eng_schedule_build_on(ctx, &dev->target, nodes, n, &sch);
	if (s) {
		if (walked)
			eng_schedcache_walk_free(&w);
		return s;
	}
	if (ctx->shadow_fn)
		eng_realize_shadow(ctx, nodes, n);
	for (int i = 0; i < sch.nempty && !s; i++)
		s = give_empty(ctx, dev, (eng_node *)sch.empty[i]);
	kprep *ks = calloc(sch.n ? sch.n : 1, sizeof(*ks));
	if (!ks && !s)
		s = eng_set_error(ctx, ENG_ENOMEM, "out of memory");
	for (int i = 0; i < sch.n && !s; i++) {
		s = render_item(ctx, dev, &sch.items[i], &ks[i]);
		if (!s && ctx->beam > 0) /* the kernel search, where it is on (beam.c) */
			s = eng_beam_item(ctx, dev, &sch.items[i], ks[i].name, &ks[i].src);
	}
	double t_sched = now_ms() - t0;
	if (!s && sch.n) {
		ctx->stats.schedules++;
		eng_logmsg(ctx, 1, "scheduled %d kernels in %.2f ms", sch.n, t_sched);
		for (int i = 0; i < sch.n; i++) {
			eng_kernel_ir *ir = &sch.items[i].ir;
			char scratch[48] = "";
			if (ir->scratch > 0) /* packed blocks of rows (eng_rpack) */
				snprintf(scratch, sizeof(scratch), ", scratch %lld bytes", (long long)ir->scratch);
			const bk_target *t = &dev->target;
			eng_logmsg(ctx, 3, "%s opts: %s | %d phases, %d outputs, parallel %lld%s%.0d%s | target %s %s%s%s%s",
				   ks[i].name, ir->opts[0] ? ir->opts : "none", ir->nphases, ir->nstores,
				   (long long)ir->nparallel, ir->group ? " in work-groups of " : "", ir->group, scratch,
				   dev->name, t->isa, t->march[0] ? " (march " : "", t->march, t->march[0] ? ")" : "");
			if (ctx->debug >= 5)
				log_ir(ctx, ir);
			eng_logmsg(ctx, 4, "%s", ks[i].src);
		}
		s = compile_missing(ctx, dev, ks, sch.n);
	}
	if (!s && walked)
		cache_schedule(ctx, dev, &w, &sch, ks);
	double total = 0;
	for (int i = 0; i < sch.n && !s; i++) {
		eng_schedcache_kernel k;
		eng_node *kn[ENG_MAX_KERNEL_BUFS];
		describe_kernel(&sch.items[i], &ks[i], NULL, &k, kn);
		s = launch_checked(ctx, dev, &k, kn, &total);
	}
	for (int i = 0; i < sch.n && ks; i++)
		free(ks[i].src);
	free(ks);
	eng_schedule_free(&sch);
	if (walked)
		eng_schedcache_walk_free(&w);
	return s;
}

static eng_status realize_all(eng_ctx *ctx, eng_node *const *nodes, int n);

/* Move a copy's source (realized on its own device) into a new buffer on the copy's device,
 * through host memory. */
static eng_status transfer(eng_ctx *ctx, eng_node *c)
{
	eng_buffer *from = c->src[0]->buf;
	eng_device *to = ctx->devs[c->dev];
	if (to->failed)
		return eng_set_error(ctx, ENG_EDEVICE, "%s: device is unusable after an earlier failure: %s", to->name,
				     to->failmsg);
	eng_buffer *b = eng_buffer_alloc(to, c->dtype, eng_node_numel(c));
	if (!b)
		return ctx->err ? ctx->err : ENG_ENOMEM;
	void *tmp = malloc(b->nbytes ? b->nbytes : 1);
	eng_status s = tmp ? ENG_OK : eng_set_error(ctx, ENG_ENOMEM, "copy: out of host memory");
	if (!s)
		s = eng_buffer_read(from, tmp, b->nbytes);
	if (!s)
		s = eng_buffer_write(b, tmp, b->nbytes);
	free(tmp);
	if (s) {
		eng_buffer_unref(b);
		return s;
	}
	c->buf = b;
	return ENG_OK;
}

/* Copies between devices are transfers, not kernels: realize each one's source on its own
 * device (recursively: it may hold copies itself), then move the bytes. */
static eng_status run_transfers(eng_ctx *ctx, eng_node *const *nodes, int n)
{
	eng_schedcache_walk w; /* the graph under the roots, sources first (so inner copies come first) */
	if (!eng_schedcache_walk_build(&w, nodes, n))
		return eng_set_error(ctx, ENG_ENOMEM, "out of memory planning copies between devices");
	eng_status s = ENG_OK;
	for (size_t i = 0; i < w.nodes.n && !s; i++) {
		eng_node *c = (eng_node *)w.nodes.list[i];
		if (c->buf || c->op != ENG_OP_COPY || c->src[0]->dev < 0 || c->src[0]->dev == c->dev)
			continue; /* realized (a nested copy done by an earlier one), or not a transfer */
		eng_node *src = c->src[0];
		s = realize_all(ctx, &src, 1);
		if (!s)
			s = eng_cancel_point(ctx, "a copy between devices", NULL);
		if (!s)
			s = transfer(ctx, c);
	}
	eng_schedcache_walk_free(&w);
	return s;
}

eng_status eng_realize_nodes(eng_ctx *ctx, eng_node *const *nodes, int n)
{
	eng_call_begin(ctx);
	if (ctx->err)
		return ctx->err; /* an earlier error is pending: don't compute on a broken graph */
	int todo = 0;
	for (int i = 0; i < n; i++)
		todo += !nodes[i]->buf;
	if (!todo)
		return ENG_OK; /* computed already: nothing to cancel either */
	eng_status s = eng_cancel_point(ctx, "realizing", NULL);
	if (!s)
		s = realize_all(ctx, nodes, n);
	/* the program bound applies between realizes: every launch above has its program by now */
	for (int d = 0; d < ctx->ndevs; d++)
		eng_device_caches_bound(ctx->devs[d]);
	return s;
}

/* Every device's part of a realize: copies between devices first, then each device's roots. */
static eng_status realize_all(eng_ctx *ctx, eng_node *const *nodes, int n)
{
	if (ctx->ndevs == 1) {
		eng_status s = realize_on(ctx, ctx->devs[0], nodes, n);
		return s ? s : eng_device_sync(ctx->devs[0]);
	}
	eng_status s = run_transfers(ctx, nodes, n);
	/* then each device's roots on their own */
	eng_node **mine = s ? NULL : malloc((n ? n : 1) * sizeof(*mine));
	if (!s && !mine)
		s = eng_set_error(ctx, ENG_ENOMEM, "out of memory");
	for (int d = 0; d < ctx->ndevs && !s; d++) {
		int k = 0;
		for (int i = 0; i < n; i++)
			if ((nodes[i]->dev >= 0 ? nodes[i]->dev : ctx->default_dev) == d)
				mine[k++] = nodes[i];
		if (k)
			s = realize_on(ctx, ctx->devs[d], mine, k);
		if (k && !s)
			s = eng_device_sync(ctx->devs[d]);
	}
	free(mine);
	return s;
}
