/* buffer.c: reference-counted device buffers: allocation and release through the caching
 * allocator (alloc.c), and copies to and from host memory through the owning device's backend. */
#include <stdlib.h>

#include "core/context.h"
#include "device.h"

/* A buffer record of numel dt elements on dev with one reference, no storage yet. */
static eng_buffer *new_record(eng_device *dev, eng_dtype dt, int64_t numel)
{
	eng_buffer *b = calloc(1, sizeof(*b));
	if (!b) {
		eng_set_error(dev->ctx, ENG_ENOMEM, "out of host memory for a buffer record");
		return NULL;
	}
	b->dev = dev;
	b->dtype = dt;
	b->numel = numel;
	b->nbytes = (size_t)numel * eng_dtype_size(dt);
	b->refs = 1;
	b->id = ++dev->ctx->next_buf_id;
	b->dev_index = dev->index;
	return b;
}

eng_buffer *eng_buffer_alloc(eng_device *dev, eng_dtype dt, int64_t numel)
{
	eng_buffer *b = new_record(dev, dt, numel);
	if (!b)
		return NULL;
	if (eng_alloc_get(dev, b->nbytes, &b->handle, &b->cap)) {
		free(b);
		return NULL;
	}
	return b;
}

eng_buffer *eng_buffer_wrap(eng_device *dev, eng_dtype dt, int64_t numel, void *data,
			    void (*release)(void *arg, void *data), void *arg)
{
	if (!dev->bk.ops->wrap_host)
		return NULL;
	eng_buffer *b = new_record(dev, dt, numel);
	bk_err berr;
	if (!b)
		return NULL;
	if (dev->bk.ops->wrap_host(dev->bk.ctx, data, b->nbytes, &b->handle, &berr)) {
		free(b);
		return NULL;
	}
	b->wrapped = true;
	b->host = data;
	b->release = release;
	b->release_arg = arg;
	return b;
}

eng_buffer *eng_buffer_ref(eng_buffer *b)
{
	if (b)
		b->refs++;
	return b;
}

void eng_buffer_unref(eng_buffer *b)
{
	if (!b || --b->refs)
		return;
	if (b->wrapped) { /* caller memory: give it back, neither the backend nor the cache owns it */
		if (b->release)
			b->release(b->release_arg, b->host);
	} else {
		eng_alloc_put(b->dev, b->handle, b->cap);
	}
	free(b);
}

eng_status eng_buffer_write(eng_buffer *b, const void *src, size_t nbytes)
{
	return eng_buffer_write_at(b, 0, src, nbytes);
}

eng_status eng_buffer_write_at(eng_buffer *b, size_t off, const void *src, size_t n)
{
	bk_err berr;
	eng_status s = b->dev->bk.ops->copy_in(b->dev->bk.ctx, b->handle, off, src, n, &berr);
	if (s)
		eng_set_error(b->dev->ctx, s, "%s: copy in: %s", b->dev->name, berr.msg);
	return s;
}

eng_status eng_buffer_read(eng_buffer *b, void *dst, size_t nbytes)
{
	if (b->dev->failed)
		return eng_set_error(b->dev->ctx, ENG_EDEVICE, "%s: the value was lost when the device failed: %s",
				     b->dev->name, b->dev->failmsg);
	bk_err berr;
	eng_status s = b->dev->bk.ops->copy_out(b->dev->bk.ctx, b->handle, 0, dst, nbytes, &berr);
	if (s)
		eng_set_error(b->dev->ctx, s, "%s: copy out: %s", b->dev->name, berr.msg);
	return s;
}

