/* registry.c: the table of backends compiled into tensord; the only file that names them. */
#include "registry.h"

#include <string.h>

extern const bk_backend bk_cpu_backend; /* backends/cpu/cpu.c */
extern const bk_backend bk_ocl_backend; /* backends/ocl/device.c */
#ifdef TSD_HAVE_CUDA /* built where the CUDA toolkit's headers are (see the Makefile) */
extern const bk_backend bk_cuda_backend; /* backends/cuda/device.c */
#endif

static const bk_backend *const backends[] = {
	&bk_cpu_backend,
	&bk_ocl_backend,
#ifdef TSD_HAVE_CUDA
	&bk_cuda_backend,
#endif
};

const bk_backend *bk_backend_at(int i)
{
	return i >= 0 && i < (int)(sizeof(backends) / sizeof(backends[0])) ? backends[i] : NULL;
}

const bk_backend *bk_backend_find(const char *name)
{
	for (int i = 0; bk_backend_at(i); i++)
		if (!strcmp(backends[i]->name, name))
			return backends[i];
	return NULL;
}

const char *bk_backend_absent(const char *spec)
{
#ifndef TSD_HAVE_CUDA
	if (spec && !strncmp(spec, "CUDA", 4) && (!spec[4] || spec[4] == ':'))
		return "this build has no CUDA backend (it was built without the CUDA toolkit's headers)";
#endif
	(void)spec;
	return NULL;
}
