/* realize.c: runs a schedule: renders each kernel, compiles the ones not in the program
 * cache as one batch handed to the backend, allocates output buffers, launches in order, and keeps
 * the counters and DEBUG output. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "progcache.h"
#include "schedule.h"
#include "strbuf.h"

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

/* tinygrad-style name: r_ for kernels with reductions, E_ otherwise, then the loop sizes. */
static void base_name(const eng_kernel_ir *ir, char *out, size_t len)
{
	size_t l = (size_t)snprintf(out, len, "%s", ir->nphases ? "r" : "E");
	for (int d = 0; d < ir->ndim && l < len; d++)
		if (ir->shape[d] > 1)
			l += (size_t)snprintf(out + l, len - l, "_%lld", (long long)ir->shape[d]);
	if (ir->nphases && l < len) {
		const eng_phase *ph = &ir->phases[0];
		for (int k = 0; k < ph->nred && l < len; k++)
			l += (size_t)snprintf(out + l, len - l, "_%lld", (long long)ir->loops[ph->red[k]].n);
	}
}

/* Render with a placeholder name, then name the kernel after a hash of its text so equal
 * kernels get equal names (and hit the program cache). */
static eng_status render_item(eng_ctx *ctx, eng_device *dev, eng_sched_item *it, kprep *k)
{
	eng_strbuf b;
	bk_err berr;
	eng_sb_init(&b);
	eng_status s = dev->bk.ops->render(dev->bk.ctx, &it->ir, "KERNEL_NAME", &b, &berr);
	if (s) {
		eng_sb_free(&b);
		return eng_set_error(ctx, s, "render: %s", berr.msg);
	}
	char *body = eng_sb_take(&b);
	char base[64];
	base_name(&it->ir, base, sizeof(base));
	snprintf(k->name, sizeof(k->name), "%s_%08llx", base, (unsigned long long)(eng_hash_str(body) & 0xffffffffu));
	char *p = strstr(body, "KERNEL_NAME");
	eng_sb_init(&b);
	if (p) {
		*p = 0;
		eng_sb_puts(&b, body);
		eng_sb_puts(&b, k->name);
		eng_sb_puts(&b, p + strlen("KERNEL_NAME"));
	}
	free(body);
	if (b.failed || !p) {
		eng_sb_free(&b);
		return eng_set_error(ctx, ENG_ENOMEM, "render: out of memory");
	}
	k->src = eng_sb_take(&b);
	snprintf(it->ir.name, sizeof(it->ir.name), "%s", k->name);
	return ENG_OK;
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
	bk_err berr;
	double t0 = now_ms();
	s = dev->bk.ops->compile(dev->bk.ctx, srcs, m, names, progs, &berr);
	ctx->stats.compiles++;
	if (s) {
		eng_set_error(ctx, s, "%s: compiling %d kernel%s: %s", dev->name, m, m == 1 ? "" : "s", berr.msg);
		goto out;
	}
	if (ctx->debug >= 2)
		fprintf(stderr, "compiled %d kernel%s in %.2f ms\n", m, m == 1 ? "" : "s", now_ms() - t0);
	for (int j = 0; j < m; j++) {
		if (!eng_progcache_put(dev->progs, srcs[j], progs[j])) {
			for (int r = j; r < m; r++)
				dev->bk.ops->program_free(dev->bk.ctx, progs[r]);
			s = eng_set_error(ctx, ENG_ENOMEM, "out of memory caching programs");
			goto out;
		}
	}
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

static eng_status launch_item(eng_ctx *ctx, eng_device *dev, eng_sched_item *it, kprep *k, double *total_ms)
{
	eng_kernel_ir *ir = &it->ir;
	void *handles[ENG_MAX_KBUFS];
	eng_buffer *outs[ENG_MAX_STORES] = {0};
	int nouts = 0;
	eng_status s = ENG_OK;
	for (int i = 0; i < ir->nbufs; i++) {
		const eng_kbuf *kb = &ir->bufs[i];
		eng_buffer *b;
		if (kb->output) {
			const eng_node *r = kb->node;
			if (r->op == ENG_OP_ASSIGN) {
				b = eng_buffer_ref(r->src[0]->buf);
				if (!b) {
					s = eng_set_error(ctx, ENG_ESTATE, "assign target has no buffer");
					goto fail;
				}
			} else {
				b = eng_buffer_alloc(dev, r->dtype, eng_node_numel(r));
				if (!b) {
					s = ENG_ENOMEM;
					goto fail;
				}
			}
			outs[nouts++] = b;
		} else {
			b = kb->node->buf;
			if (!b) {
				s = eng_set_error(ctx, ENG_ESTATE, "kernel input %%%u was not computed", kb->node->id);
				goto fail;
			}
		}
		handles[i] = b->handle;
	}
	bk_launch l = {.nparallel = ir->nparallel, .cost = ir->flops + ir->bytes};
	bk_err berr;
	double t0 = now_ms();
	s = dev->bk.ops->launch(dev->bk.ctx, k->prog, handles, ir->nbufs, &l, &berr);
	if (!s && dev->bk.ops->synchronize)
		s = dev->bk.ops->synchronize(dev->bk.ctx, &berr);
	double ms = now_ms() - t0;
	if (s) {
		eng_set_error(ctx, s, "%s: launching %s: %s", dev->name, k->name, berr.msg);
		goto fail;
	}
	*total_ms += ms;
	ctx->stats.kernels++;
	ctx->stats.flops += (uint64_t)ir->flops;
	ctx->stats.bytes += (uint64_t)ir->bytes;
	ctx->stats.kernel_ns += (uint64_t)(ms * 1e6);
	if (ctx->debug >= 2) {
		double gflops = ms > 0 ? ir->flops / (ms * 1e6) : 0, gbs = ms > 0 ? ir->bytes / (ms * 1e6) : 0;
		fprintf(stderr, "*** %-4s %5llu %-36s arg %2d mem %6.3f GB tm %9.2fus/%9.2fms (%8.2f GFLOPS %7.2f GB/s)\n",
			dev->name, (unsigned long long)ctx->stats.kernels, k->name, ir->nbufs, ir->bytes / 1e9, ms * 1e3,
			*total_ms, gflops, gbs);
	}
	/* the roots now hold their values; an assign has a new version of its target */
	int o = 0;
	for (int i = 0; i < ir->nbufs; i++)
		if (ir->bufs[i].output) {
			eng_node *r = (eng_node *)ir->bufs[i].node;
			r->buf = outs[o++];
			if (r->op == ENG_OP_ASSIGN)
				r->buf->version++;
		}
	return ENG_OK;
fail:
	for (int i = 0; i < nouts; i++)
		eng_buffer_unref(outs[i]);
	return s;
}

eng_status eng_realize_nodes(eng_ctx *ctx, eng_node *const *nodes, int n)
{
	if (ctx->err)
		return ctx->err; /* an earlier error is pending: don't compute on a broken graph */
	eng_device *dev = ctx->devs[ctx->default_dev];
	double t0 = now_ms();
	eng_schedule sch;
	eng_status s = eng_schedule_build(ctx, nodes, n, &sch);
	if (s)
		return s;
	for (int i = 0; i < sch.nempty; i++) {
		eng_node *e = (eng_node *)sch.empty[i];
		if (!e->buf) {
			if (e->op == ENG_OP_ASSIGN)
				e->buf = eng_buffer_ref(e->src[0]->buf);
			else
				e->buf = eng_buffer_alloc(dev, e->dtype, 0);
			if (!e->buf) {
				eng_schedule_free(&sch);
				return ctx->err ? ctx->err : eng_set_error(ctx, ENG_ENOMEM, "out of memory");
			}
		}
	}
	if (!sch.n) {
		eng_schedule_free(&sch);
		return ENG_OK;
	}
	kprep *ks = calloc(sch.n, sizeof(*ks));
	if (!ks) {
		eng_schedule_free(&sch);
		return eng_set_error(ctx, ENG_ENOMEM, "out of memory");
	}
	for (int i = 0; i < sch.n && !s; i++)
		s = render_item(ctx, dev, &sch.items[i], &ks[i]);
	double t_sched = now_ms() - t0;
	if (!s) {
		ctx->stats.schedules++;
		if (ctx->debug >= 1)
			fprintf(stderr, "scheduled %d kernels in %.2f ms\n", sch.n, t_sched);
		for (int i = 0; i < sch.n; i++) {
			eng_kernel_ir *ir = &sch.items[i].ir;
			if (ctx->debug >= 3)
				fprintf(stderr, "%s opts: %s | %d phases, %d outputs, parallel %lld\n", ks[i].name,
					ir->opts[0] ? ir->opts : "none", ir->nphases, ir->nstores, (long long)ir->nparallel);
			if (ctx->debug >= 5)
				eng_kernel_ir_dump(ir, stderr);
			if (ctx->debug >= 4)
				fprintf(stderr, "%s\n", ks[i].src);
		}
		s = compile_missing(ctx, dev, ks, sch.n);
	}
	double total = 0;
	for (int i = 0; i < sch.n && !s; i++)
		s = launch_item(ctx, dev, &sch.items[i], &ks[i], &total);
	for (int i = 0; i < sch.n; i++)
		free(ks[i].src);
	free(ks);
	eng_schedule_free(&sch);
	return s;
}
