/* cache.c: the CUDA backend's disk-caching methods: the identity of the compiled code (device,
 * architecture, NVRTC and driver versions, prelude), a program's PTX, and programs loaded back
 * from PTX. */
#include "cu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/hash.h"
#include "util/strbuf.h"

const char *cu_cache_id(void *dev)
{
	cu_dev *d = dev;
	if (d->cache_id)
		return d->cache_id;
	bk_err err;
	const cuda_nvrtc *nv = cu_nvrtc(d, &err);
	int drv = 0;
	d->api.DriverGetVersion(&drv);
	eng_strbuf sb;
	eng_strbuf_init(&sb);
	eng_strbuf_printf(&sb, "cuda-abi%d device=%s arch=%s nvrtc=%s driver=%d prelude=%016llx", BK_ABI_VERSION, d->name,
			  d->arch, nv ? cuda_nvrtc_version(nv) : "none", drv,
			  (unsigned long long)eng_hash_str(cuda_dialect.prelude));
	/* out of memory: no identity, so nothing is cached (an empty id would match anything) */
	d->cache_id = sb.failed ? NULL : eng_strbuf_take(&sb);
	eng_strbuf_free(&sb);
	return d->cache_id ? d->cache_id : "";
}

eng_status cu_program_blob(void *dev, bk_program *prog, const void **bytes, size_t *n, const char **symbol,
			   bk_err *err)
{
	cu_prog *p = (cu_prog *)prog;
	*bytes = p->mod->ptx;
	*n = p->mod->nptx;
	*symbol = p->name;
	return ENG_OK;
}

eng_status cu_load(void *dev, const void *bytes, size_t n, const char *const *names, int nkern, bk_program **progs,
		   bk_err *err)
{
	cu_dev *d = dev;
	for (int i = 0; i < nkern; i++)
		progs[i] = NULL;
	if (!n) {
		snprintf(err->msg, sizeof(err->msg), "empty PTX");
		return ENG_ECOMPILE;
	}
	cu_module *mod = calloc(1, sizeof(*mod));
	char *ptx = mod ? malloc(n + 1) : NULL;
	if (!ptx) {
		free(mod);
		snprintf(err->msg, sizeof(err->msg), "out of memory");
		return ENG_ENOMEM;
	}
	memcpy(ptx, bytes, n);
	ptx[n] = 0; /* cuModuleLoadData reads PTX as a C string */
	mod->ptx = ptx;
	mod->nptx = n;
	return cu_load_kernels(d, mod, names, nkern, progs, err);
}
