/* backend.c: checks a backend device before the engine uses it (ops table version, size and the
 * methods every backend must provide, its target), and reads backend options. */
#include "backend.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

eng_status bk_device_check(const bk_device *d, bk_target *t, bk_err *err)
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
		: !o->launch ? "launch" : !o->destroy ? "destroy" : !o->target ? "target" : NULL;
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
	memset(t, 0, sizeof(*t));
	o->target(d->ctx, t);
	const bk_dialect *dl = t->dialect;
	const char *bad = !dl ? "has no dialect" : !dl->kernel_prefix || !dl->restrict_kw || !dl->prelude ? "dialect lacks kernel_prefix, restrict_kw or prelude"
		: t->parallelism < 1 ? "parallelism < 1" : t->vector_width < 0 || t->vector_width > 16 ? "vector_width outside 0..16"
		: t->reduce_group < 0 || (t->reduce_group > 1 && !dl->local_id) ? "reduce_group without work-groups in its dialect"
		: t->kind == BK_KIND_CPU && (t->vector_bytes < 4 || t->vector_regs < 8) ? "kind CPU without vector_bytes >= 4 and vector_regs >= 8"
		: NULL;
	if (bad) {
		snprintf(err->msg, sizeof(err->msg), "backend %s: target %s", o->name, bad);
		return ENG_EINVAL;
	}
	return ENG_OK;
}

const char *bk_opts_get(const bk_opts *o, const char *key)
{
	for (int i = 0; o && i < o->n; i++)
		if (!strcmp(o->key[i], key))
			return o->value[i];
	return NULL;
}

eng_status bk_opts_int(const bk_opts *o, const char *key, long lo, long hi, int *out, bk_err *err)
{
	const char *v = bk_opts_get(o, key);
	if (!v)
		return ENG_OK;
	char *end;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (end == v || *end || errno || x < lo || x > hi) {
		snprintf(err->msg, sizeof(err->msg), "option %s=%s: want an integer in %ld..%ld", key, v, lo, hi);
		return ENG_EINVAL;
	}
	*out = (int)x;
	return ENG_OK;
}
