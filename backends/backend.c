/* backend.c: checks a backend's ops table before the engine uses it (version, size and the
 * methods every backend must provide; the disk-caching ones are optional, as a set). */
#include "backend.h"

#include <stdio.h>

eng_status bk_device_check(const bk_device *d, bk_err *err)
{
	const bk_device_ops *o = d->ops;
	if (!o) {
		snprintf(err->msg, sizeof(err->msg), "backend has no ops table");
		return ENG_EINVAL;
	}
	if (o->abi_version != BK_ABI_VERSION || o->struct_size < sizeof(bk_device_ops)) {
		snprintf(err->msg, sizeof(err->msg), "backend %s: ABI version %u (size %zu), engine wants %u (size %zu)",
			 o->name ? o->name : "?", o->abi_version, o->struct_size, BK_ABI_VERSION, sizeof(bk_device_ops));
		return ENG_EINVAL;
	}
	const char *missing = !o->name ? "name" : !o->alloc ? "alloc" : !o->free ? "free" : !o->copy_in ? "copy_in"
		: !o->copy_out ? "copy_out" : !o->compile ? "compile" : !o->program_free ? "program_free"
		: !o->launch ? "launch" : !o->render ? "render" : !o->destroy ? "destroy" : NULL;
	if (missing) {
		snprintf(err->msg, sizeof(err->msg), "backend %s: required method %s is missing",
			 o->name ? o->name : "?", missing);
		return ENG_EINVAL;
	}
	int ncache = !!o->cache_id + !!o->program_blob + !!o->load;
	if (ncache != 0 && ncache != 3) {
		snprintf(err->msg, sizeof(err->msg), "backend %s: cache_id, program_blob and load go together (%d of 3 set)",
			 o->name, ncache);
		return ENG_EINVAL;
	}
	return ENG_OK;
}
