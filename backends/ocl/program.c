/* program.c: the OpenCL backend's programs: a batch of kernels built as one cl_program (the
 * driver's build log is the error), one cl_kernel per name, and NDRange launches with one
 * work-item (or work-group) per iteration of the kernel's parallel loop, a split reduction's
 * <name>_fin enqueued after it. */
#include "ocl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/strbuf.h"

const char *ocl_build_options(const ocl_dev *d)
{
	return d->exact_div ? "-cl-fp32-correctly-rounded-divide-sqrt" : "";
}

static void module_release(ocl_dev *d, ocl_module *m)
{
	if (m && --m->refs == 0) {
		d->api.clReleaseProgram(m->prog);
		free(m->bin);
		free(m);
	}
}

void ocl_program_free(void *dev, bk_program *prog)
{
	ocl_dev *d = dev;
	ocl_prog *p = (ocl_prog *)prog;
	if (!p)
		return;
	if (p->kernel)
		d->api.clReleaseKernel(p->kernel);
	if (p->fin)
		d->api.clReleaseKernel(p->fin);
	module_release(d, p->mod);
	free(p->name);
	free(p);
}

/* The build log after a failed build, as the error message. */
static eng_status build_error(ocl_dev *d, cl_program prog, cl_int rc, bk_err *err)
{
	char nb[32];
	eng_status st = ocl_fail(d, rc, "clBuildProgram", err);
	int used = snprintf(err->msg, sizeof(err->msg), "OpenCL build failed on %s (%s): ", d->name,
			    ocl_errname(rc, nb, sizeof(nb)));
	size_t len = 0;
	char *log = NULL;
	if (d->api.clGetProgramBuildInfo(prog, d->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &len) == CL_SUCCESS && len &&
	    (log = malloc(len)) &&
	    d->api.clGetProgramBuildInfo(prog, d->device, CL_PROGRAM_BUILD_LOG, len, log, NULL) == CL_SUCCESS) {
		log[len - 1] = 0;
		snprintf(err->msg + used, sizeof(err->msg) - (size_t)used, "%s", log);
	}
	free(log);
	return st;
}

/* A program for kernel `name` of mod (taking a reference on mod). */
static eng_status make_kernel(ocl_dev *d, ocl_module *mod, const char *name, ocl_prog **out, bk_err *err)
{
	cl_int rc;
	ocl_prog *p = calloc(1, sizeof(*p));
	char *nm = p ? strdup(name) : NULL;
	if (!nm) {
		free(p);
		snprintf(err->msg, sizeof(err->msg), "out of memory");
		return ENG_ENOMEM;
	}
	p->name = nm;
	p->kernel = d->api.clCreateKernel(mod->prog, name, &rc);
	if (!p->kernel) {
		char what[160];
		snprintf(what, sizeof(what), "kernel %.100s: clCreateKernel", name);
		free(nm);
		free(p);
		return ocl_fail(d, rc, what, err); /* CL_INVALID_KERNEL_NAME: ECOMPILE */
	}
	p->mod = mod;
	mod->refs++;
	*out = p;
	rc = d->api.clGetKernelInfo(p->kernel, CL_KERNEL_NUM_ARGS, sizeof(p->nargs), &p->nargs, NULL);
	if (!rc)
		rc = d->api.clGetKernelWorkGroupInfo(p->kernel, d->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof(p->wg), &p->wg,
						     NULL);
	size_t cwg[3] = {0, 0, 0}; /* reqd_work_group_size, as the renderer declares grouped kernels */
	if (!rc)
		rc = d->api.clGetKernelWorkGroupInfo(p->kernel, d->device, CL_KERNEL_COMPILE_WORK_GROUP_SIZE, sizeof(cwg),
						     cwg, NULL);
	p->group = cwg[0];
	if (rc)
		return ocl_fail(d, rc, "clGetKernelInfo", err);
	/* a split reduction: the program also has <name>_fin (bk_target.split_scratch) */
	char fin[320];
	snprintf(fin, sizeof(fin), "%s_fin", name);
	cl_int frc;
	p->fin = d->api.clCreateKernel(mod->prog, fin, &frc);
	size_t fwg[3] = {0, 0, 0};
	if (p->fin && (rc = d->api.clGetKernelWorkGroupInfo(p->fin, d->device, CL_KERNEL_COMPILE_WORK_GROUP_SIZE,
							     sizeof(fwg), fwg, NULL)))
		return ocl_fail(d, rc, "clGetKernelWorkGroupInfo", err);
	p->fin_group = fwg[0];
	return ENG_OK;
}

eng_status ocl_build_kernels(ocl_dev *d, ocl_module *mod, const char *const *names, int nkern, bk_program **progs,
			    bk_err *err)
{
	mod->refs = 1; /* held here until the kernels take theirs */
	cl_int rc = d->api.clBuildProgram(mod->prog, 1, &d->device, ocl_build_options(d), NULL, NULL);
	eng_status st = rc ? build_error(d, mod->prog, rc, err) : ENG_OK;
	for (int i = 0; i < nkern && !st; i++)
		st = make_kernel(d, mod, names[i], (ocl_prog **)&progs[i], err);
	if (st)
		for (int i = 0; i < nkern; i++) {
			ocl_program_free(d, progs[i]);
			progs[i] = NULL;
		}
	module_release(d, mod);
	return st;
}

eng_status ocl_progs_begin(const ocl_dev *d, bk_program **progs, int nkern, bk_err *err)
{
	for (int i = 0; i < nkern; i++)
		progs[i] = NULL;
	return ocl_alive(d, err);
}

eng_status ocl_compile(void *dev, const char *const *srcs, int nkern, const char *const *names, bk_program **progs,
		      bk_err *err)
{
	ocl_dev *d = dev;
	eng_status st = ocl_progs_begin(d, progs, nkern, err);
	if (st)
		return st;
	eng_strbuf sb;
	eng_strbuf_init(&sb);
	eng_strbuf_puts(&sb, ocl_prelude());
	for (int i = 0; i < nkern; i++) {
		eng_strbuf_puts(&sb, "\n");
		eng_strbuf_puts(&sb, srcs[i]);
	}
	ocl_module *mod = sb.failed ? NULL : calloc(1, sizeof(*mod));
	if (!mod) {
		eng_strbuf_free(&sb);
		snprintf(err->msg, sizeof(err->msg), "out of memory");
		return ENG_ENOMEM;
	}
	cl_int rc;
	const char *text = sb.s;
	mod->prog = d->api.clCreateProgramWithSource(d->context, 1, &text, NULL, &rc);
	eng_strbuf_free(&sb);
	if (!mod->prog) {
		free(mod);
		return ocl_fail(d, rc, "clCreateProgramWithSource", err);
	}
	return ocl_build_kernels(d, mod, names, nkern, progs, err);
}

/* Work-group size of a kernel with one work-item per iteration: the kernel's limit, at most 256
 * (enough to fill a GPU's SIMD units, while the tail stays small), less when the groups would be
 * too few for the compute units; never more than the work.
 * (Grouped kernels declare their size: see ocl_launch.) */
static size_t local_size(const ocl_dev *d, const ocl_prog *p, int64_t n)
{
	size_t l = p->wg < d->max_items ? p->wg : d->max_items;
	if (l > 256)
		l = 256;
	if (l < 1)
		l = 1;
	/* smaller groups (down to a GPU's SIMD width; a CPU device's core runs any) while there are
	 * too few of them for every compute unit to have several: a unit runs whole groups */
	int64_t want = 4 * (int64_t)(d->units ? d->units : 1);
	while (l > d->min_group && (n + (int64_t)l - 1) / (int64_t)l < want)
		l /= 2;
	if (l < 1)
		l = 1;
	return (int64_t)l > n ? (size_t)n : l;
}

/* Kernel k's arguments: the buffers, scratch (if not NULL), start and end. */
static cl_int set_args(ocl_dev *d, cl_kernel k, void *const *bufs, int nbufs, cl_mem scratch, cl_long start,
		       cl_long end)
{
	cl_int rc = CL_SUCCESS;
	cl_uint i = 0;
	for (; i < (cl_uint)nbufs && !rc; i++)
		rc = d->api.clSetKernelArg(k, i, sizeof(cl_mem), &bufs[i]);
	if (!rc && scratch)
		rc = d->api.clSetKernelArg(k, i++, sizeof(cl_mem), &scratch);
	if (!rc)
		rc = d->api.clSetKernelArg(k, i++, sizeof(start), &start);
	if (!rc)
		rc = d->api.clSetKernelArg(k, i, sizeof(end), &end);
	return rc;
}

eng_status ocl_launch(void *dev, bk_program *prog, void *const *bufs, int nbufs, const bk_launch *l, bk_err *err)
{
	ocl_dev *d = dev;
	ocl_prog *p = (ocl_prog *)prog;
	eng_status st = ocl_alive(d, err);
	if (st)
		return st;
	cl_uint extra = p->fin ? 1 : 0; /* a split reduction's scratch */
	if ((cl_uint)nbufs + 2 + extra != p->nargs) {
		snprintf(err->msg, sizeof(err->msg), "kernel %s takes %u arguments, not %d buffers%s + (start, end)", p->name,
			 p->nargs, nbufs, extra ? " + scratch" : "");
		return ENG_EINVAL;
	}
	if (p->fin && !d->scratch) {
		cl_int mrc;
		d->scratch = d->api.clCreateBuffer(d->context, CL_MEM_READ_WRITE, OCL_SPLIT_SCRATCH, NULL, &mrc);
		if (!d->scratch)
			return ocl_fail(d, mrc, "clCreateBuffer (scratch)", err);
	}
	/* one work-item per iteration of the parallel loop; a kernel without one runs as one item */
	int64_t n = l->nparallel > 0 ? l->nparallel : 1;
	cl_long start = 0, end = n;
	cl_int rc = set_args(d, p->kernel, bufs, nbufs, p->fin ? d->scratch : NULL, start, end);
	if (!rc && p->fin)
		rc = set_args(d, p->fin, bufs, nbufs, d->scratch, start, end);
	if (rc)
		return ocl_fail(d, rc, "clSetKernelArg", err);
	size_t local = local_size(d, p, n);
	size_t global = ((size_t)n + local - 1) / local * local;
	if (p->group) { /* rendered for work-groups: one per iteration, reductions split over it */
		if (p->wg < p->group || d->max_items < p->group) {
			snprintf(err->msg, sizeof(err->msg), "kernel %s needs a work-group of %zu, the device allows %zu",
				 p->name, p->group, p->wg < d->max_items ? p->wg : d->max_items);
			return ENG_ERANGE; /* this kernel cannot run here; the device is fine */
		}
		local = p->group;
		global = (size_t)n * p->group;
	}
	if (d->last)
		d->api.clReleaseEvent(d->last); /* launched without a synchronize in between */
	d->last = NULL;
	rc = d->api.clEnqueueNDRangeKernel(d->queue, p->kernel, 1, NULL, &global, &local, 0, NULL,
					   d->debug >= 2 && !p->fin ? &d->last : NULL);
	/* a split reduction's partials combined, after the chunks (the queue is in order) */
	size_t fg = p->fin_group ? p->fin_group : 1;
	if (!rc && p->fin)
		rc = d->api.clEnqueueNDRangeKernel(d->queue, p->fin, 1, NULL, &fg, &fg, 0, NULL,
						   d->debug >= 2 ? &d->last : NULL);
	if (rc)
		return ocl_fail(d, rc, "clEnqueueNDRangeKernel", err);
	snprintf(d->last_name, sizeof(d->last_name), "%s", p->name);
	return ENG_OK;
}
