/* device.c: the CUDA backend's device: listing and opening (CUDA:<ordinal>) on the primary
 * context with one stream, device memory, synchronisation with DEBUG>=2 timing, the ops table
 * and the registry entry. */
#include "cu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/strbuf.h"

/* Name, compute capability, SMs, memory, threads per block of device dev. */
static CUresult query(const cu_api *api, CUdevice dev, char *name, size_t cap, int *major, int *minor, int *sms,
		      int *max_block, size_t *mem)
{
	CUresult rc = api->DeviceGetName(name, (int)cap, dev);
	if (!rc)
		rc = api->DeviceGetAttribute(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
	if (!rc)
		rc = api->DeviceGetAttribute(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
	if (!rc)
		rc = api->DeviceGetAttribute(sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
	if (!rc)
		rc = api->DeviceGetAttribute(max_block, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, dev);
	if (!rc)
		rc = api->DeviceTotalMem(mem, dev);
	return rc;
}

static eng_status cu_list(char *out, size_t len, int *ndevices, bk_err *err)
{
	cu_api api;
	if (len)
		out[0] = 0;
	if (ndevices)
		*ndevices = 0;
	eng_status st = cu_api_open(&api, err);
	if (st)
		return st;
	int n = 0, drv = 0;
	if (api.DeviceGetCount(&n) != CUDA_SUCCESS || n <= 0) {
		cu_api_close(&api);
		snprintf(err->msg, sizeof(err->msg), "no CUDA devices");
		return ENG_ENOTFOUND;
	}
	api.DriverGetVersion(&drv);
	eng_strbuf sb;
	eng_strbuf_init(&sb);
	for (int i = 0; i < n; i++) {
		CUdevice dev;
		char name[256] = "";
		int major = 0, minor = 0, sms = 0, mb = 0;
		size_t mem = 0;
		if (api.DeviceGet(&dev, i) || query(&api, dev, name, sizeof(name), &major, &minor, &sms, &mb, &mem)) {
			eng_strbuf_printf(&sb, "CUDA:%d (could not be queried)\n", i);
			continue;
		}
		eng_strbuf_printf(&sb, "CUDA:%d %s | compute capability %d.%d (sm_%d%d) | %d SMs | %.1f GiB | "
				  "max block %d | driver %d.%d\n",
				  i, name, major, minor, major, minor, sms, (double)mem / (1 << 30), mb, drv / 1000,
				  drv % 1000 / 10);
	}
	cu_api_close(&api);
	if (sb.failed) {
		eng_strbuf_free(&sb);
		snprintf(err->msg, sizeof(err->msg), "out of memory listing CUDA devices");
		return ENG_ENOMEM;
	}
	if (len)
		snprintf(out, len, "%s", sb.s);
	if (ndevices)
		*ndevices = n;
	eng_strbuf_free(&sb);
	return ENG_OK;
}

static eng_status cu_alloc(void *dev, size_t nbytes, void **handle, bk_err *err)
{
	cu_dev *d = dev;
	eng_status st = cu_enter(d, err);
	if (st)
		return st;
	CUdeviceptr p = 0;
	/* empty tensors still need a handle; cuMemAlloc refuses 0 bytes */
	CUresult rc = d->api.MemAlloc(&p, nbytes ? nbytes : 4);
	if (rc != CUDA_SUCCESS)
		return cu_fail(d, rc, "cuMemAlloc", err);
	*handle = (void *)(uintptr_t)p;
	return ENG_OK;
}

static void cu_free(void *dev, void *handle)
{
	cu_dev *d = dev;
	if (handle && d->api.CtxSetCurrent(d->ctx) == CUDA_SUCCESS)
		d->api.MemFree((CUdeviceptr)(uintptr_t)handle);
}

/* DEBUG >= 2: the device's own time for the last launch. */
static void report_last(cu_dev *d)
{
	float ms = 0;
	if (d->api.EventElapsedTime && d->api.EventSynchronize(d->t1) == CUDA_SUCCESS &&
	    d->api.EventElapsedTime(&ms, d->t0, d->t1) == CUDA_SUCCESS)
		fprintf(stderr, "  CUDA %s: %.2f us on the device\n", d->last_name, (double)ms * 1e3);
	d->timing = false;
}

static eng_status cu_synchronize(void *dev, bk_err *err)
{
	cu_dev *d = dev;
	eng_status st = cu_enter(d, err);
	if (st)
		return st;
	CUresult rc = d->api.StreamSynchronize(d->stream);
	if (rc != CUDA_SUCCESS)
		return cu_fail(d, rc, "cuStreamSynchronize", err);
	if (d->timing)
		report_last(d);
	return ENG_OK;
}

static void cu_destroy(void *dev)
{
	cu_dev *d = dev;
	if (d->ctx && d->api.CtxSetCurrent(d->ctx) == CUDA_SUCCESS) {
		if (d->stream)
			d->api.StreamSynchronize(d->stream);
		for (int i = 0; i < 2; i++)
			if (d->stage_done[i])
				d->api.EventDestroy(d->stage_done[i]);
		if (d->t0)
			d->api.EventDestroy(d->t0);
		if (d->t1)
			d->api.EventDestroy(d->t1);
		if (d->stage)
			d->api.MemFreeHost(d->stage);
		if (d->stream)
			d->api.StreamDestroy(d->stream);
	}
	if (d->ctx)
		d->api.PrimaryCtxRelease(d->device);
	cu_api_close(&d->api);
	cuda_nvrtc_close(d->nvrtc);
	free(d->cache_id);
	free(d);
}

static void cu_target(void *dev, bk_target *t)
{
	const cu_dev *d = dev;
	cuda_target_facts(d->sms, d->reduce_group > 0, t);
}

static const bk_device_ops cu_ops = {
	.abi_version = BK_ABI_VERSION,
	.struct_size = sizeof(bk_device_ops),
	.name = "CUDA",
	.alloc = cu_alloc,
	.free = cu_free,
	.copy_in = cu_copy_in,
	.copy_out = cu_copy_out,
	.compile = cu_compile,
	.program_free = cu_program_free,
	.launch = cu_launch,
	.synchronize = cu_synchronize,
	.destroy = cu_destroy,
	.cache_id = cu_cache_id,
	.program_blob = cu_program_blob,
	.load = cu_load,
	.target = cu_target,
};

/* The primary context, a stream, events and pinned staging for device d->ordinal. */
static eng_status open_device(cu_dev *d, const bk_opts *opts, bk_err *err)
{
	int n = 0;
	CUresult rc = d->api.DeviceGetCount(&n);
	if (rc != CUDA_SUCCESS)
		return cu_fail(d, rc, "cuDeviceGetCount", err);
	if (d->ordinal >= n) {
		snprintf(err->msg, sizeof(err->msg), "no CUDA device CUDA:%d (%d device%s found)", d->ordinal, n,
			 n == 1 ? "" : "s");
		return ENG_ENOTFOUND;
	}
	if ((rc = d->api.DeviceGet(&d->device, d->ordinal)) ||
	    (rc = query(&d->api, d->device, d->name, sizeof(d->name), &d->cc_major, &d->cc_minor, &d->sms,
			&d->max_block, &d->total_mem)))
		return cu_fail(d, rc, "querying the device", err);
	snprintf(d->arch, sizeof(d->arch), "sm_%d%d", d->cc_major, d->cc_minor);
	if ((rc = d->api.PrimaryCtxRetain(&d->ctx, d->device)) != CUDA_SUCCESS) {
		d->ctx = NULL;
		return cu_fail(d, rc, "cuDevicePrimaryCtxRetain", err);
	}
	eng_status st = cu_enter(d, err);
	if (st)
		return st;
	/* a kernel that faulted earlier in this process (a failed device being reopened) left the
	 * primary context unusable: reset it (the process's memory on this GPU goes with it) and
	 * take it afresh. Untested on a GPU. */
	if (cu_sticky(rc = d->api.CtxSynchronize())) {
		d->api.PrimaryCtxRelease(d->device);
		d->ctx = NULL;
		if ((rc = d->api.PrimaryCtxReset(d->device)) || (rc = d->api.PrimaryCtxRetain(&d->ctx, d->device))) {
			d->ctx = NULL;
			return cu_fail(d, rc, "resetting the device's primary context after a failure", err);
		}
		if ((st = cu_enter(d, err)))
			return st;
	}
	if ((rc = d->api.StreamCreate(&d->stream, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
		return cu_fail(d, rc, "cuStreamCreate", err);
	for (int i = 0; i < 2; i++)
		if ((rc = d->api.EventCreate(&d->stage_done[i], CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS)
			return cu_fail(d, rc, "cuEventCreate", err);
	if (d->debug >= 2 && ((rc = d->api.EventCreate(&d->t0, CU_EVENT_DEFAULT)) != CUDA_SUCCESS ||
			      (rc = d->api.EventCreate(&d->t1, CU_EVENT_DEFAULT)) != CUDA_SUCCESS))
		return cu_fail(d, rc, "cuEventCreate", err);
	void *stage = NULL; /* without it, large copies go from pageable memory: slower, still right */
	if (d->api.MemAllocHost(&stage, CU_STAGE_BYTES) == CUDA_SUCCESS)
		d->stage = stage;
	int groups = 1;
	if (bk_opts_int(opts, "reduce_groups", 0, 1, &groups, err))
		return ENG_EINVAL;
	d->reduce_group = groups ? CUDA_GROUP_SIZE : 0;
	return ENG_OK;
}

static eng_status cu_open(int ordinal, const bk_opts *opts, int debug, bk_device *out, bk_err *err)
{
	if (ordinal < 0) {
		snprintf(err->msg, sizeof(err->msg), "CUDA device ordinal %d is negative", ordinal);
		return ENG_EINVAL;
	}
	cu_dev *d = calloc(1, sizeof(*d));
	if (!d) {
		snprintf(err->msg, sizeof(err->msg), "out of memory");
		return ENG_ENOMEM;
	}
	d->ordinal = ordinal;
	d->debug = debug;
	eng_status st = cu_api_open(&d->api, err);
	if (!st)
		st = open_device(d, opts, err);
	if (st) {
		cu_destroy(d);
		return st;
	}
	out->ops = &cu_ops;
	out->ctx = d;
	return ENG_OK;
}

static const bk_option_spec cu_options[] = {
	{"reduce_groups", "TENSORD_CUDA_REDUCE_GROUPS", "1: reductions split over thread blocks (default), 0: one thread each"},
	{NULL, NULL, NULL},
};

const bk_backend bk_cuda_backend = {
	.name = "CUDA",
	.open = cu_open,
	.list = cu_list,
	.options = cu_options,
};
