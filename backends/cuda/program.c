/* program.c: the CUDA backend's programs: a batch of kernels compiled by NVRTC to PTX as one
 * module (NVRTC's log is the error), loaded with cuModuleLoadData, one CUfunction per name, and
 * launches with one thread per parallel iteration (or one block per iteration when grouped). */
#include "cu.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const cuda_nvrtc *cu_nvrtc(cu_dev *d, bk_err *err)
{
	if (!d->nvrtc && !d->nvrtc_err[0]) {
		bk_err e;
		if (cuda_nvrtc_open(&d->nvrtc, &e))
			snprintf(d->nvrtc_err, sizeof(d->nvrtc_err), "%.500s", e.msg);
	}
	if (!d->nvrtc)
		snprintf(err->msg, sizeof(err->msg), "%s", d->nvrtc_err);
	return d->nvrtc;
}

static void module_release(cu_dev *d, cu_module *m)
{
	if (m && --m->refs == 0) {
		if (m->mod && d->api.CtxSetCurrent(d->ctx) == CUDA_SUCCESS)
			d->api.ModuleUnload(m->mod);
		free(m->ptx);
		free(m);
	}
}

void cu_program_free(void *dev, bk_program *prog)
{
	cu_prog *p = (cu_prog *)prog;
	if (!p)
		return;
	module_release(dev, p->mod);
	free(p->name);
	free(p);
}

/* A program for kernel name of mod (taking a reference on mod). */
static eng_status make_kernel(cu_dev *d, cu_module *mod, const char *name, cu_prog **out, bk_err *err)
{
	cu_prog *p = calloc(1, sizeof(*p));
	char *nm = p ? strdup(name) : NULL;
	if (!nm) {
		free(p);
		snprintf(err->msg, sizeof(err->msg), "out of memory");
		return ENG_ENOMEM;
	}
	CUresult rc = d->api.ModuleGetFunction(&p->fn, mod->mod, name);
	if (rc != CUDA_SUCCESS) {
		char what[160];
		snprintf(what, sizeof(what), "kernel %.100s: cuModuleGetFunction", name);
		free(nm);
		free(p);
		return cu_fail(d, rc, what, err);
	}
	p->name = nm;
	p->mod = mod;
	mod->refs++;
	*out = p;
	cuda_ptx_entry(mod->ptx, name, &p->nparams, &p->group);
	rc = d->api.FuncGetAttribute(&p->max_block, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, p->fn);
	return rc ? cu_fail(d, rc, "cuFuncGetAttribute", err) : ENG_OK;
}

eng_status cu_load_kernels(cu_dev *d, cu_module *mod, const char *const *names, int nkern, bk_program **progs,
			   bk_err *err)
{
	for (int i = 0; i < nkern; i++)
		progs[i] = NULL;
	mod->refs = 1; /* held here until the kernels take theirs */
	eng_status st = cu_enter(d, err);
	CUresult rc = st ? CUDA_SUCCESS : d->api.ModuleLoadData(&mod->mod, mod->ptx);
	if (rc != CUDA_SUCCESS) {
		mod->mod = NULL;
		st = cu_fail(d, rc, "cuModuleLoadData", err);
	}
	for (int i = 0; i < nkern && !st; i++)
		st = make_kernel(d, mod, names[i], (cu_prog **)&progs[i], err);
	if (st)
		for (int i = 0; i < nkern; i++) {
			cu_program_free(d, progs[i]);
			progs[i] = NULL;
		}
	module_release(d, mod);
	return st;
}

eng_status cu_compile(void *dev, const char *const *srcs, int nkern, const char *const *names, bk_program **progs,
		      bk_err *err)
{
	cu_dev *d = dev;
	for (int i = 0; i < nkern; i++)
		progs[i] = NULL;
	eng_status st = cu_enter(d, err);
	if (st)
		return st;
	const cuda_nvrtc *nv = cu_nvrtc(d, err);
	if (!nv)
		return ENG_ECOMPILE;
	char *src = cuda_module_source(srcs, nkern);
	cu_module *mod = src ? calloc(1, sizeof(*mod)) : NULL;
	if (!mod) {
		free(src);
		snprintf(err->msg, sizeof(err->msg), "out of memory");
		return ENG_ENOMEM;
	}
	st = cuda_nvrtc_ptx(nv, src, d->arch, &mod->ptx, &mod->nptx, err);
	free(src);
	if (st) {
		free(mod);
		return st;
	}
	return cu_load_kernels(d, mod, names, nkern, progs, err);
}

eng_status cu_launch(void *dev, bk_program *prog, void *const *bufs, int nbufs, const bk_launch *l, bk_err *err)
{
	cu_dev *d = dev;
	cu_prog *p = (cu_prog *)prog;
	eng_status st = cu_enter(d, err);
	if (st)
		return st;
	if (p->nparams >= 0 && p->nparams != nbufs + 2) {
		snprintf(err->msg, sizeof(err->msg), "kernel %s takes %d arguments, not %d buffers + (start, end)", p->name,
			 p->nparams, nbufs);
		return ENG_EINVAL;
	}
	/* one thread per iteration of the parallel loop; a kernel without one runs as one thread */
	int64_t n = l->nparallel > 0 ? l->nparallel : 1, start = 0, end = n;
	CUdeviceptr ptrs[CU_MAX_BUFS];
	void *args[CU_MAX_BUFS + 2];
	if (nbufs > CU_MAX_BUFS) {
		snprintf(err->msg, sizeof(err->msg), "kernel %s: %d buffers, at most %d", p->name, nbufs, CU_MAX_BUFS);
		return ENG_ERANGE;
	}
	for (int i = 0; i < nbufs; i++) {
		ptrs[i] = (CUdeviceptr)(uintptr_t)bufs[i];
		args[i] = &ptrs[i];
	}
	args[nbufs] = &start;
	args[nbufs + 1] = &end;
	int64_t block, grid;
	if (p->group) { /* written for blocks of this size: one per iteration */
		if (p->group > p->max_block) {
			snprintf(err->msg, sizeof(err->msg), "kernel %s needs a block of %d threads, it can have %d", p->name,
				 p->group, p->max_block);
			return ENG_ERANGE; /* this kernel cannot run here; the device is fine */
		}
		block = p->group;
		grid = n;
	} else {
		block = p->max_block < CUDA_BLOCK_SIZE ? p->max_block : CUDA_BLOCK_SIZE;
		if (block < 1)
			block = 1;
		if (block > n)
			block = n;
		grid = (n + block - 1) / block;
	}
	if (grid > INT32_MAX) {
		snprintf(err->msg, sizeof(err->msg), "kernel %s: %lld blocks, more than a grid holds", p->name, (long long)grid);
		return ENG_ERANGE;
	}
	CUresult rc = CUDA_SUCCESS;
	if (d->t0 && (rc = d->api.EventRecord(d->t0, d->stream)))
		return cu_fail(d, rc, "cuEventRecord", err);
	rc = d->api.LaunchKernel(p->fn, (unsigned)grid, 1, 1, (unsigned)block, 1, 1, 0, d->stream, args, NULL);
	if (rc != CUDA_SUCCESS) {
		char what[160];
		snprintf(what, sizeof(what), "launching %.100s", p->name);
		return cu_fail(d, rc, what, err);
	}
	if (d->t1 && !(rc = d->api.EventRecord(d->t1, d->stream))) {
		d->timing = true;
		snprintf(d->last_name, sizeof(d->last_name), "%s", p->name);
	}
	return ENG_OK;
}
