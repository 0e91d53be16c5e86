/* api.c: the CUDA backend's access to the driver: loads libcuda.so.1 with dlopen, resolves the
 * entry points, and turns CUresult codes into statuses, names and a failed device. */
#include "cu.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

eng_status cu_api_open(cu_api *api, bk_err *err)
{
	memset(api, 0, sizeof(*api));
	/* never unloaded: the driver keeps threads and state for the process's life */
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!lib) {
		snprintf(err->msg, sizeof(err->msg),
			 "CUDA: libcuda.so.1 not found: no NVIDIA driver on this machine (%s)", dlerror());
		return ENG_ENOTFOUND;
	}
	const char *missing = NULL;
#define CU_API_LOAD(f, type, sym) \
	if (!missing && !(api->f = (type)dlsym(lib, sym))) \
		missing = sym;
	CU_API_FUNCS(CU_API_LOAD)
#undef CU_API_LOAD
	if (missing) {
		dlclose(lib);
		memset(api, 0, sizeof(*api));
		snprintf(err->msg, sizeof(err->msg), "CUDA: libcuda.so.1 has no %s (driver too old)", missing);
		return ENG_ENOTFOUND;
	}
	api->lib = lib;
	api->EventElapsedTime = (PFN_cuEventElapsedTime_v2000)dlsym(lib, "cuEventElapsedTime_v2");
	if (!api->EventElapsedTime)
		api->EventElapsedTime = (PFN_cuEventElapsedTime_v2000)dlsym(lib, "cuEventElapsedTime");
	CUresult rc = api->Init(0);
	if (rc != CUDA_SUCCESS) {
		const char *name = NULL;
		if (api->GetErrorName(rc, &name) != CUDA_SUCCESS || !name)
			name = "unknown error";
		snprintf(err->msg, sizeof(err->msg), "CUDA: cuInit failed: %s (%d)%s", name, (int)rc,
			 rc == CUDA_ERROR_NO_DEVICE	    ? ": no CUDA GPU"
			 : rc == CUDA_ERROR_STUB_LIBRARY ? ": libcuda.so.1 is the toolkit's stub, not a driver"
							 : "");
		cu_api_close(api);
		return ENG_ENOTFOUND;
	}
	return ENG_OK;
}

void cu_api_close(cu_api *api)
{
	if (api->lib)
		dlclose(api->lib);
	memset(api, 0, sizeof(*api));
}

bool cu_sticky(CUresult rc)
{
	switch (rc) {
	case CUDA_ERROR_ILLEGAL_ADDRESS:
	case CUDA_ERROR_LAUNCH_FAILED:
	case CUDA_ERROR_LAUNCH_TIMEOUT:
	case CUDA_ERROR_HARDWARE_STACK_ERROR:
	case CUDA_ERROR_ILLEGAL_INSTRUCTION:
	case CUDA_ERROR_MISALIGNED_ADDRESS:
	case CUDA_ERROR_INVALID_ADDRESS_SPACE:
	case CUDA_ERROR_INVALID_PC:
	case CUDA_ERROR_ECC_UNCORRECTABLE:
	case CUDA_ERROR_CONTEXT_IS_DESTROYED:
	case CUDA_ERROR_DEVICE_UNAVAILABLE:
	case CUDA_ERROR_DEVICE_NOT_LICENSED:
	case CUDA_ERROR_SYSTEM_NOT_READY:
	case CUDA_ERROR_UNKNOWN:
		return true;
	default:
		return false;
	}
}

eng_status cu_fail(cu_dev *d, CUresult rc, const char *what, bk_err *err)
{
	const char *name = NULL;
	if (!d || d->api.GetErrorName(rc, &name) != CUDA_SUCCESS || !name)
		name = "CUDA error";
	snprintf(err->msg, sizeof(err->msg), "%s: %s (%d)", what, name, (int)rc);
	if (d && cu_sticky(rc) && !d->failed) {
		d->failed = true;
		snprintf(d->failmsg, sizeof(d->failmsg), "%.500s", err->msg);
	}
	if (d && cu_sticky(rc))
		return ENG_EDEVICE;
	switch (rc) {
	case CUDA_ERROR_OUT_OF_MEMORY:
		return ENG_ENOMEM;
	case CUDA_ERROR_INVALID_PTX:
	case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
	case CUDA_ERROR_INVALID_IMAGE:
	case CUDA_ERROR_NO_BINARY_FOR_GPU:
	case CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
	case CUDA_ERROR_NOT_FOUND: /* cuModuleGetFunction: no such kernel */
		return ENG_ECOMPILE;
	case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
	case CUDA_ERROR_INVALID_VALUE:
		return ENG_ERANGE; /* this launch cannot be made; the device is fine */
	default:
		return ENG_EDEVICE;
	}
}

eng_status cu_enter(cu_dev *d, bk_err *err)
{
	if (d->failed) {
		snprintf(err->msg, sizeof(err->msg), "CUDA device %s failed earlier (%s)", d->name, d->failmsg);
		return ENG_EDEVICE;
	}
	CUresult rc = d->api.CtxSetCurrent(d->ctx);
	return rc == CUDA_SUCCESS ? ENG_OK : cu_fail(d, rc, "cuCtxSetCurrent", err);
}
