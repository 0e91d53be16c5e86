/* device.c: the OpenCL backend's device: listing and creation (CL:<index> over all platforms),
 * device memory as cl_mem buffers, blocking copies, synchronisation and the ops table. */
#include "ocl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/strbuf.h"

static const char *type_name(cl_device_type t)
{
	return (t & CL_DEVICE_TYPE_GPU) ? "GPU" : (t & CL_DEVICE_TYPE_CPU) ? "CPU"
		: (t & CL_DEVICE_TYPE_ACCELERATOR) ? "accelerator" : "other";
}

/* One listing line for device i. */
static void describe(const ocl_api *api, cl_platform_id p, cl_device_id dev, int i, eng_strbuf *sb)
{
	char name[256], vendor[256], version[256], driver[256], plat[256], ext[16384];
	cl_uint units = 0, vec = 0;
	cl_ulong mem = 0;
	size_t wg = 0;
	cl_device_type type = 0;
	ocl_device_str(api, dev, CL_DEVICE_NAME, name, sizeof(name));
	ocl_device_str(api, dev, CL_DEVICE_VENDOR, vendor, sizeof(vendor));
	ocl_device_str(api, dev, CL_DEVICE_VERSION, version, sizeof(version));
	ocl_device_str(api, dev, CL_DRIVER_VERSION, driver, sizeof(driver));
	ocl_device_str(api, dev, CL_DEVICE_EXTENSIONS, ext, sizeof(ext));
	ocl_platform_str(api, p, CL_PLATFORM_NAME, plat, sizeof(plat));
	api->clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof(units), &units, NULL);
	api->clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof(mem), &mem, NULL);
	api->clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof(wg), &wg, NULL);
	api->clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof(type), &type, NULL);
	api->clGetDeviceInfo(dev, CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT, sizeof(vec), &vec, NULL);
	eng_strbuf_printf(sb,
		      "CL:%d %s | %s | vendor %s | platform %s | %s | driver %s | %u compute units | "
		      "%.1f GiB | max work-group %zu | float vectors of %u | fp16 %s\n",
		      i, name, type_name(type), vendor, plat, version, driver, units, (double)mem / (1 << 30), wg, vec,
		      strstr(ext, "cl_khr_fp16") ? "yes" : "no");
}

eng_status ocl_list(char *out, size_t len, int *ndevices, bk_err *err)
{
	ocl_api api;
	cl_platform_id plats[OCL_MAX_DEVICES];
	cl_device_id devs[OCL_MAX_DEVICES];
	int n = 0;
	if (len)
		out[0] = 0;
	if (ndevices)
		*ndevices = 0;
	eng_status st = ocl_api_open(&api, err);
	if (st)
		return st;
	st = ocl_enumerate(&api, plats, devs, &n, err);
	eng_strbuf sb;
	eng_strbuf_init(&sb);
	for (int i = 0; i < n && !st; i++)
		describe(&api, plats[i], devs[i], i, &sb);
	ocl_api_close(&api);
	if (!st && sb.failed) {
		snprintf(err->msg, sizeof(err->msg), "out of memory listing OpenCL devices");
		st = ENG_ENOMEM;
	}
	if (!st && len)
		snprintf(out, len, "%s", sb.s);
	if (!st && ndevices)
		*ndevices = n;
	eng_strbuf_free(&sb);
	return st;
}

static eng_status ocl_alloc(void *dev, size_t nbytes, void **handle, bk_err *err)
{
	ocl_dev *d = dev;
	eng_status st = ocl_alive(d, err);
	if (st)
		return st;
	if (nbytes > d->max_alloc) {
		snprintf(err->msg, sizeof(err->msg), "OpenCL device %s: %zu bytes exceed its largest buffer (%llu)",
			 d->name, nbytes, (unsigned long long)d->max_alloc);
		return ENG_ENOMEM;
	}
	cl_int rc;
	/* a zero-size buffer is CL_INVALID_BUFFER_SIZE; empty tensors still need a handle */
	cl_mem m = d->api.clCreateBuffer(d->context, CL_MEM_READ_WRITE, nbytes ? nbytes : 4, NULL, &rc);
	if (!m)
		return ocl_fail(d, rc, "clCreateBuffer", err);
	*handle = m;
	return ENG_OK;
}

static void ocl_free(void *dev, void *handle)
{
	ocl_dev *d = dev;
	if (handle)
		d->api.clReleaseMemObject((cl_mem)handle);
}

/* A blocking copy of n bytes at off: from src into the buffer, or (src NULL) out to dst. */
static eng_status transfer(ocl_dev *d, void *handle, size_t off, const void *src, void *dst, size_t n, bk_err *err)
{
	eng_status st = ocl_alive(d, err);
	if (st || !n)
		return st;
	cl_mem m = (cl_mem)handle;
	cl_int rc = src ? d->api.clEnqueueWriteBuffer(d->queue, m, CL_TRUE, off, n, src, 0, NULL, NULL)
			: d->api.clEnqueueReadBuffer(d->queue, m, CL_TRUE, off, n, dst, 0, NULL, NULL);
	return rc ? ocl_fail(d, rc, src ? "clEnqueueWriteBuffer" : "clEnqueueReadBuffer", err) : ENG_OK;
}

static eng_status ocl_copy_in(void *dev, void *handle, size_t off, const void *src, size_t n, bk_err *err)
{
	return transfer(dev, handle, off, src, NULL, n, err);
}

static eng_status ocl_copy_out(void *dev, void *handle, size_t off, void *dst, size_t n, bk_err *err)
{
	return transfer(dev, handle, off, NULL, dst, n, err);
}

/* DEBUG >= 2: the device's own time for the last launch. */
static void report_last(ocl_dev *d)
{
	cl_ulong t0 = 0, t1 = 0;
	if (d->api.clGetEventProfilingInfo(d->last, CL_PROFILING_COMMAND_START, sizeof(t0), &t0, NULL) == CL_SUCCESS &&
	    d->api.clGetEventProfilingInfo(d->last, CL_PROFILING_COMMAND_END, sizeof(t1), &t1, NULL) == CL_SUCCESS)
		fprintf(stderr, "  CL %s: %.2f us on the device\n", d->last_name, (double)(t1 - t0) / 1e3);
	d->api.clReleaseEvent(d->last);
	d->last = NULL;
}

static eng_status ocl_synchronize(void *dev, bk_err *err)
{
	ocl_dev *d = dev;
	eng_status st = ocl_alive(d, err);
	if (st)
		return st;
	cl_int rc = d->api.clFinish(d->queue);
	if (d->last)
		report_last(d);
	return rc ? ocl_fail(d, rc, "clFinish", err) : ENG_OK;
}

static void ocl_destroy(void *dev)
{
	ocl_dev *d = dev;
	if (d->last)
		d->api.clReleaseEvent(d->last);
	if (d->scratch)
		d->api.clReleaseMemObject(d->scratch);
	if (d->queue) {
		d->api.clFinish(d->queue);
		d->api.clReleaseCommandQueue(d->queue);
	}
	if (d->context)
		d->api.clReleaseContext(d->context);
	ocl_api_close(&d->api);
	free(d->cache_id);
	free(d);
}

/* The target: work-items a kernel should offer are a few work-groups of 256 per compute unit,
 * so every unit has groups to switch between while others wait on memory. */
static void ocl_target(void *dev, bk_target *t)
{
	const ocl_dev *d = dev;
	long n = (long)(d->units ? d->units : 1) * 4 * 256;
	t->dialect = &ocl_dialect;
	t->parallelism = n > (1 << 20) ? 1 << 20 : (int)n;
	t->reduce_group = d->reduce_group;
	t->vector_width = (int)d->vec_float;
	t->split_scratch = d->reduce_group ? OCL_SPLIT_SCRATCH : 0; /* split over work-groups */
}

static const bk_device_ops ocl_ops = {
	.abi_version = BK_ABI_VERSION,
	.struct_size = sizeof(bk_device_ops),
	.name = "CL",
	.alloc = ocl_alloc,
	.free = ocl_free,
	.copy_in = ocl_copy_in,
	.copy_out = ocl_copy_out,
	.compile = ocl_compile,
	.program_free = ocl_program_free,
	.launch = ocl_launch,
	.synchronize = ocl_synchronize,
	.destroy = ocl_destroy,
	.cache_id = ocl_cache_id,
	.program_blob = ocl_program_blob,
	.load = ocl_load,
	.target = ocl_target,
};

/* Context, queue and the properties launches need, for the chosen device; options
 * vector_width (0 or 1: scalars only) and reduce_groups (0: one work-item per reduction)
 * override what the device prefers. */
static eng_status open_device(ocl_dev *d, const bk_opts *opts, bk_err *err)
{
	cl_int rc;
	cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)d->platform, 0};
	ocl_device_str(&d->api, d->device, CL_DEVICE_NAME, d->name, sizeof(d->name));
	d->context = d->api.clCreateContext(props, 1, &d->device, NULL, NULL, &rc);
	if (!d->context)
		return ocl_fail(d, rc, "clCreateContext", err);
	d->queue = d->api.clCreateCommandQueue(d->context, d->device, d->debug >= 2 ? CL_QUEUE_PROFILING_ENABLE : 0, &rc);
	if (!d->queue)
		return ocl_fail(d, rc, "clCreateCommandQueue", err);
	size_t items[3] = {0};
	rc = d->api.clGetDeviceInfo(d->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof(d->max_alloc), &d->max_alloc, NULL);
	if (!rc)
		rc = d->api.clGetDeviceInfo(d->device, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof(items), items, NULL);
	d->max_items = items[0] ? items[0] : 1;
	if (!rc)
		rc = d->api.clGetDeviceInfo(d->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof(d->units), &d->units, NULL);
	if (!rc)
		rc = d->api.clGetDeviceInfo(d->device, CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT, sizeof(d->vec_float),
					    &d->vec_float, NULL);
	cl_device_type type = 0;
	cl_device_fp_config fp = 0;
	if (!rc)
		rc = d->api.clGetDeviceInfo(d->device, CL_DEVICE_TYPE, sizeof(type), &type, NULL);
	if (!rc)
		rc = d->api.clGetDeviceInfo(d->device, CL_DEVICE_SINGLE_FP_CONFIG, sizeof(fp), &fp, NULL);
	d->exact_div = (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
	d->min_group = (type & CL_DEVICE_TYPE_CPU) ? 1 : 32;
	if (rc)
		return ocl_fail(d, rc, "clGetDeviceInfo", err);
	int vw = d->vec_float > 16 ? 16 : (int)d->vec_float; /* OpenCL's widest vector */
	int groups = 1;
	if (bk_opts_int(opts, "vector_width", 0, 16, &vw, err) || bk_opts_int(opts, "reduce_groups", 0, 1, &groups, err))
		return ENG_EINVAL;
	d->vec_float = (cl_uint)vw;
	d->reduce_group = groups ? OCL_GROUP_SIZE : 0;
	return ENG_OK;
}

static eng_status ocl_open(int index, const bk_opts *opts, int debug, bk_device *out, bk_err *err)
{
	cl_platform_id plats[OCL_MAX_DEVICES];
	cl_device_id devs[OCL_MAX_DEVICES];
	int n = 0;
	if (index < 0) {
		snprintf(err->msg, sizeof(err->msg), "OpenCL device index %d is negative", index);
		return ENG_EINVAL;
	}
	ocl_dev *d = calloc(1, sizeof(*d));
	if (!d) {
		snprintf(err->msg, sizeof(err->msg), "out of memory");
		return ENG_ENOMEM;
	}
	d->debug = debug;
	eng_status st = ocl_api_open(&d->api, err);
	if (!st)
		st = ocl_enumerate(&d->api, plats, devs, &n, err);
	if (!st && index >= n) {
		snprintf(err->msg, sizeof(err->msg), "no OpenCL device CL:%d (%d device%s found)", index, n,
			 n == 1 ? "" : "s");
		st = ENG_ENOTFOUND;
	}
	if (!st) {
		d->platform = plats[index];
		d->device = devs[index];
		st = open_device(d, opts, err);
	}
	if (st) {
		ocl_destroy(d);
		return st;
	}
	out->ops = &ocl_ops;
	out->ctx = d;
	return ENG_OK;
}

static const bk_option_spec ocl_options[] = {
	{"vector_width", "TENSORD_CL_VECTOR_WIDTH",
	 "float lanes of register tiles rendered as vectors (0 or 1: scalars only; default: the device's preference)"},
	{"reduce_groups", "TENSORD_CL_REDUCE_GROUPS", "1: reductions split over work-groups (default), 0: one work-item each"},
	{NULL, NULL, NULL},
};

const bk_backend bk_ocl_backend = {
	.name = "CL",
	.open = ocl_open,
	.list = ocl_list,
	.options = ocl_options,
};
