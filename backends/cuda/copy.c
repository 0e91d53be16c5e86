/* copy.c: the CUDA backend's copies between host and device memory on the device's stream:
 * small ones straight from the caller's memory, large ones through two pinned staging halves so
 * the host copy of one chunk overlaps the DMA of the other. */
#include "cu.h"

#include <stdio.h>
#include <string.h>

/* Wait until staging half h is free (its last copy done). */
static CUresult stage_wait(cu_dev *d, int h)
{
	if (!d->stage_busy[h])
		return CUDA_SUCCESS;
	d->stage_busy[h] = false;
	return d->api.EventSynchronize(d->stage_done[h]);
}

static CUresult stage_mark(cu_dev *d, int h)
{
	d->stage_busy[h] = true;
	return d->api.EventRecord(d->stage_done[h], d->stream);
}

eng_status cu_copy_in(void *dev, void *handle, size_t off, const void *src, size_t n, bk_err *err)
{
	cu_dev *d = dev;
	eng_status st = cu_enter(d, err);
	if (st || !n)
		return st;
	CUdeviceptr p = (CUdeviceptr)(uintptr_t)handle + off;
	CUresult rc = CUDA_SUCCESS;
	if (!d->stage || n < CU_STAGE_MIN) {
		/* from pageable memory the driver stages the bytes before it returns */
		rc = d->api.MemcpyHtoDAsync(p, src, n, d->stream);
		return rc ? cu_fail(d, rc, "cuMemcpyHtoDAsync", err) : ENG_OK;
	}
	const size_t half = CU_STAGE_BYTES / 2;
	int h = 0;
	for (size_t done = 0; done < n && !rc; done += half, h ^= 1) {
		size_t k = n - done < half ? n - done : half;
		unsigned char *buf = d->stage + (size_t)h * half;
		if ((rc = stage_wait(d, h)))
			break;
		memcpy(buf, (const unsigned char *)src + done, k);
		if (!(rc = d->api.MemcpyHtoDAsync(p + done, buf, k, d->stream)))
			rc = stage_mark(d, h);
	}
	/* the staged bytes are the driver's now; the caller's memory may be reused at once */
	return rc ? cu_fail(d, rc, "copy to the device", err) : ENG_OK;
}

eng_status cu_copy_out(void *dev, void *handle, size_t off, void *dst, size_t n, bk_err *err)
{
	cu_dev *d = dev;
	eng_status st = cu_enter(d, err);
	if (st || !n)
		return st;
	CUdeviceptr p = (CUdeviceptr)(uintptr_t)handle + off;
	CUresult rc;
	if (!d->stage || n < CU_STAGE_MIN) {
		if (!(rc = d->api.MemcpyDtoHAsync(dst, p, n, d->stream)))
			rc = d->api.StreamSynchronize(d->stream);
		return rc ? cu_fail(d, rc, "copy from the device", err) : ENG_OK;
	}
	const size_t half = CU_STAGE_BYTES / 2;
	size_t prev = 0, prev_k = 0; /* the chunk in flight in the other half */
	int h = 0;
	rc = stage_wait(d, 0);
	if (!rc)
		rc = stage_wait(d, 1);
	for (size_t done = 0; done < n && !rc; done += half, h ^= 1) {
		size_t k = n - done < half ? n - done : half;
		if ((rc = d->api.MemcpyDtoHAsync(d->stage + (size_t)h * half, p + done, k, d->stream)) ||
		    (rc = stage_mark(d, h)))
			break;
		if (prev_k && !(rc = stage_wait(d, h ^ 1)))
			memcpy((unsigned char *)dst + prev, d->stage + (size_t)(h ^ 1) * half, prev_k);
		prev = done;
		prev_k = k;
	}
	if (!rc && prev_k && !(rc = stage_wait(d, h ^ 1)))
		memcpy((unsigned char *)dst + prev, d->stage + (size_t)(h ^ 1) * half, prev_k);
	return rc ? cu_fail(d, rc, "copy from the device", err) : ENG_OK;
}
