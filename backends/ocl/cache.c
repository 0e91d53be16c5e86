/* cache.c: the OpenCL backend's disk-caching methods: the identity of the compiled code
 * (platform, device, driver, build options, prelude), a program's binary, and programs built
 * back from binaries. */
#include "ocl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/hash.h"
#include "util/strbuf.h"

const char *ocl_cache_id(void *dev)
{
	ocl_dev *d = dev;
	if (d->cache_id)
		return d->cache_id;
	char plat[256], pver[256], driver[256], version[256];
	ocl_platform_str(&d->api, d->platform, CL_PLATFORM_NAME, plat, sizeof(plat));
	ocl_platform_str(&d->api, d->platform, CL_PLATFORM_VERSION, pver, sizeof(pver));
	ocl_device_str(&d->api, d->device, CL_DRIVER_VERSION, driver, sizeof(driver));
	ocl_device_str(&d->api, d->device, CL_DEVICE_VERSION, version, sizeof(version));
	eng_strbuf sb;
	eng_strbuf_init(&sb);
	eng_strbuf_printf(&sb, "cl-abi%d platform=%s (%s) device=%s driver=%s version=%s options=%s prelude=%016llx",
		      BK_ABI_VERSION, plat, pver, d->name, driver, version, ocl_build_options(d),
		      (unsigned long long)eng_hash_str(ocl_prelude()));
	/* out of memory: no identity, so nothing is cached (an empty id would match anything) */
	d->cache_id = sb.failed ? NULL : eng_strbuf_take(&sb);
	eng_strbuf_free(&sb);
	return d->cache_id ? d->cache_id : "";
}

/* The binary of mod's program for the device, fetched once and kept with the module. */
static eng_status fetch_binary(ocl_dev *d, ocl_module *m, bk_err *err)
{
	if (m->bin)
		return ENG_OK;
	cl_uint ndev = 0;
	size_t size = 0;
	cl_int rc = d->api.clGetProgramInfo(m->prog, CL_PROGRAM_NUM_DEVICES, sizeof(ndev), &ndev, NULL);
	if (!rc && ndev != 1) {
		snprintf(err->msg, sizeof(err->msg), "OpenCL program for %u devices, expected one", ndev);
		return ENG_EDEVICE;
	}
	if (!rc)
		rc = d->api.clGetProgramInfo(m->prog, CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, NULL);
	if (rc)
		return ocl_fail(d, rc, "clGetProgramInfo(CL_PROGRAM_BINARY_SIZES)", err);
	unsigned char *bin = size ? malloc(size) : NULL;
	if (!bin) {
		snprintf(err->msg, sizeof(err->msg), size ? "out of memory" : "OpenCL driver gave an empty binary");
		return size ? ENG_ENOMEM : ENG_EDEVICE;
	}
	rc = d->api.clGetProgramInfo(m->prog, CL_PROGRAM_BINARIES, sizeof(bin), &bin, NULL);
	if (rc) {
		free(bin);
		return ocl_fail(d, rc, "clGetProgramInfo(CL_PROGRAM_BINARIES)", err);
	}
	m->bin = bin;
	m->nbin = size;
	return ENG_OK;
}

eng_status ocl_program_blob(void *dev, bk_program *prog, const void **bytes, size_t *n, const char **symbol,
			   bk_err *err)
{
	ocl_dev *d = dev;
	ocl_prog *p = (ocl_prog *)prog;
	eng_status st = ocl_alive(d, err);
	if (!st)
		st = fetch_binary(d, p->mod, err);
	if (st)
		return st;
	*bytes = p->mod->bin;
	*n = p->mod->nbin;
	*symbol = p->name;
	return ENG_OK;
}

eng_status ocl_load(void *dev, const void *bytes, size_t n, const char *const *names, int nkern,
		   bk_program **progs, bk_err *err)
{
	ocl_dev *d = dev;
	eng_status st = ocl_progs_begin(d, progs, nkern, err);
	if (st)
		return st;
	if (!n) {
		snprintf(err->msg, sizeof(err->msg), "empty OpenCL program binary");
		return ENG_ECOMPILE;
	}
	ocl_module *mod = calloc(1, sizeof(*mod));
	unsigned char *copy = mod ? malloc(n) : NULL;
	if (!copy) {
		free(mod);
		snprintf(err->msg, sizeof(err->msg), "out of memory");
		return ENG_ENOMEM;
	}
	memcpy(copy, bytes, n);
	cl_int rc, status = CL_SUCCESS;
	const unsigned char *bin = copy;
	mod->prog = d->api.clCreateProgramWithBinary(d->context, 1, &d->device, &n, &bin, &status, &rc);
	if (!mod->prog || status != CL_SUCCESS) {
		if (mod->prog)
			d->api.clReleaseProgram(mod->prog);
		free(copy);
		free(mod);
		return ocl_fail(d, rc ? rc : status, "clCreateProgramWithBinary", err);
	}
	/* the module's blob is what it was loaded from */
	mod->bin = copy;
	mod->nbin = n;
	return ocl_build_kernels(d, mod, names, nkern, progs, err);
}
