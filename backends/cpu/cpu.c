/* cpu.c: the CPU backend's device: host memory, the C renderer dialect and launches that
 * split a kernel's parallel loop over the worker pool. */
#include "cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "renderer/cstyle.h"

static const eng_cstyle cpu_dialect = {.kernel_prefix = "void", .restrict_kw = "restrict"};

static eng_status cpu_alloc(void *dev, size_t nbytes, void **handle, bk_err *err)
{
	/* 64-byte alignment for full-width vector loads */
	size_t sz = (nbytes + 63) & ~(size_t)63;
	void *p = aligned_alloc(64, sz ? sz : 64);
	if (!p) {
		snprintf(err->msg, sizeof(err->msg), "out of host memory (%zu bytes)", nbytes);
		return ENG_ENOMEM;
	}
	*handle = p;
	return ENG_OK;
}

static void cpu_free(void *dev, void *handle) { free(handle); }

static eng_status cpu_copy_in(void *dev, void *handle, size_t off, const void *src, size_t n, bk_err *err)
{
	memcpy((char *)handle + off, src, n);
	return ENG_OK;
}

static eng_status cpu_copy_out(void *dev, void *handle, size_t off, void *dst, size_t n, bk_err *err)
{
	memcpy(dst, (const char *)handle + off, n);
	return ENG_OK;
}

const char *cpu_prelude(void) { return eng_cstyle_prelude(&cpu_dialect); }

static eng_status cpu_compile_op(void *dev, const char *const *srcs, int nkern, const char *const *names,
				 bk_program **progs, bk_err *err)
{
	return cpu_compile(dev, cpu_prelude(), srcs, nkern, names, progs, err);
}

static void cpu_program_free(void *dev, bk_program *p) { cpu_program_release((cpu_program *)p); }

typedef struct job {
	cpu_kernel_fn fn;
	void *const *bufs;
} job;

static void run_range(void *arg, int64_t s, int64_t e)
{
	job *j = arg;
	j->fn(j->bufs, s, e);
}

static eng_status cpu_launch(void *dev, bk_program *prog, void *const *bufs, int nbufs, const bk_launch *l,
			     bk_err *err)
{
	cpu_dev *d = dev;
	cpu_program *p = (cpu_program *)prog;
	job j = {.fn = p->fn, .bufs = bufs};
	/* spreading costs ~10us: only worth it for kernels doing enough work */
	int ways = l->cost < 32768 ? 1 : bk_pool_size(d->pool);
	bk_pool_run(d->pool, run_range, &j, l->nparallel > 0 ? l->nparallel : 1, ways);
	return ENG_OK;
}

static eng_status cpu_render(void *dev, const struct eng_kernel_ir *ir, const char *name, struct eng_strbuf *out,
			     bk_err *err)
{
	eng_status s = eng_render_cstyle(&cpu_dialect, ir, name, out);
	if (s)
		snprintf(err->msg, sizeof(err->msg), "out of memory rendering %s", name);
	return s;
}

static void cpu_destroy(void *dev)
{
	cpu_dev *d = dev;
	bk_pool_destroy(d->pool);
	free(d->cache_id);
	free(d);
}

static const bk_device_ops cpu_ops = {
	.abi_version = BK_ABI_VERSION,
	.struct_size = sizeof(bk_device_ops),
	.name = "CPU",
	.alloc = cpu_alloc,
	.free = cpu_free,
	.copy_in = cpu_copy_in,
	.copy_out = cpu_copy_out,
	.compile = cpu_compile_op,
	.program_free = cpu_program_free,
	.launch = cpu_launch,
	.synchronize = NULL,
	.render = cpu_render,
	.destroy = cpu_destroy,
	.cache_id = cpu_cache_id,
	.program_blob = cpu_program_blob,
	.load = cpu_load,
};

eng_status bk_cpu_create(const char *cc, int nthreads, int debug, bk_device *out, bk_err *err)
{
	cpu_dev *d = calloc(1, sizeof(*d));
	if (!d) {
		snprintf(err->msg, sizeof(err->msg), "out of memory");
		return ENG_ENOMEM;
	}
	if (!cc)
		cc = getenv("CC");
	snprintf(d->cc, sizeof(d->cc), "%s", cc && *cc ? cc : "cc");
	if (nthreads <= 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		nthreads = n > 0 ? (int)n : 1;
	}
	if (nthreads > 256)
		nthreads = 256;
	d->debug = debug;
	d->nthreads = nthreads;
	d->pool = bk_pool_create(nthreads);
	if (!d->pool) {
		free(d);
		snprintf(err->msg, sizeof(err->msg), "cannot start worker threads");
		return ENG_ENOMEM;
	}
	out->ops = &cpu_ops;
	out->ctx = d;
	return ENG_OK;
}
