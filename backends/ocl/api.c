/* api.c: the OpenCL backend's access to the driver: loads the ICD loader with dlopen, resolves
 * the entry points, enumerates devices and turns CL error codes into statuses and names. */
#include "ocl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

eng_status ocl_api_open(ocl_api *api, bk_err *err)
{
	memset(api, 0, sizeof(*api));
	/* never unloaded: the loader keeps its platform list (and the drivers it opened, with their
	 * threads) for the process's life; unloading would leak the list and reload every driver */
	void *lib = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!lib) {
		snprintf(err->msg, sizeof(err->msg), "OpenCL: libOpenCL.so.1 not found (%s)", dlerror());
		return ENG_ENOTFOUND;
	}
	const char *missing = NULL;
#define OCL_API_LOAD(f) \
	if (!missing && !(api->f = (__typeof__(api->f))dlsym(lib, #f))) \
		missing = #f;
	OCL_API_FUNCS(OCL_API_LOAD)
#undef OCL_API_LOAD
	if (missing) {
		dlclose(lib);
		memset(api, 0, sizeof(*api));
		snprintf(err->msg, sizeof(err->msg), "OpenCL: libOpenCL.so.1 has no %s", missing);
		return ENG_ENOTFOUND;
	}
	api->lib = lib;
	return ENG_OK;
}

void ocl_api_close(ocl_api *api)
{
	if (api->lib)
		dlclose(api->lib);
	memset(api, 0, sizeof(*api));
}

eng_status ocl_enumerate(const ocl_api *api, cl_platform_id *plats, cl_device_id *devs, int *n, bk_err *err)
{
	cl_platform_id ps[16];
	cl_uint np = 0;
	*n = 0;
	cl_int rc = api->clGetPlatformIDs(16, ps, &np);
	if (rc == CL_SUCCESS)
		for (cl_uint p = 0; p < np && p < 16 && *n < OCL_MAX_DEVICES; p++) {
			cl_uint nd = 0;
			if (api->clGetDeviceIDs(ps[p], CL_DEVICE_TYPE_ALL, (cl_uint)(OCL_MAX_DEVICES - *n), devs + *n, &nd))
				continue; /* CL_DEVICE_NOT_FOUND: a platform without devices */
			if (nd > (cl_uint)(OCL_MAX_DEVICES - *n))
				nd = (cl_uint)(OCL_MAX_DEVICES - *n);
			for (cl_uint d = 0; d < nd; d++)
				plats[*n + (int)d] = ps[p];
			*n += (int)nd;
		}
	/* no platform at all is an error code of its own (-1001, CL_PLATFORM_NOT_FOUND_KHR) */
	if (*n == 0) {
		char nb[32];
		snprintf(err->msg, sizeof(err->msg), "no OpenCL devices (clGetPlatformIDs: %s, %u platforms)",
			 ocl_errname(rc, nb, sizeof(nb)), (unsigned)np);
		return ENG_ENOTFOUND;
	}
	return ENG_OK;
}

/* clGetPlatformInfo or clGetDeviceInfo. */
static cl_int get_info(const ocl_api *api, void *obj, bool platform, cl_uint what, size_t size, void *buf, size_t *ret)
{
	return platform ? api->clGetPlatformInfo((cl_platform_id)obj, what, size, buf, ret)
			: api->clGetDeviceInfo((cl_device_id)obj, what, size, buf, ret);
}

/* A string property, whole (however long) then truncated to cap; empty on failure. */
static void info_str(const ocl_api *api, void *obj, bool platform, cl_uint what, char *out, size_t cap)
{
	size_t len = 0;
	char *full = NULL;
	out[0] = 0;
	if (get_info(api, obj, platform, what, 0, NULL, &len) == CL_SUCCESS && len && (full = malloc(len)) &&
	    get_info(api, obj, platform, what, len, full, NULL) == CL_SUCCESS) {
		full[len - 1] = 0;
		snprintf(out, cap, "%s", full);
	}
	free(full);
}

void ocl_device_str(const ocl_api *api, cl_device_id dev, cl_device_info what, char *out, size_t cap)
{
	info_str(api, dev, false, what, out, cap);
}

void ocl_platform_str(const ocl_api *api, cl_platform_id p, cl_platform_info what, char *out, size_t cap)
{
	info_str(api, p, true, what, out, cap);
}

#define OCL_ERRORS(X) \
	X(CL_SUCCESS) X(CL_DEVICE_NOT_FOUND) X(CL_DEVICE_NOT_AVAILABLE) X(CL_COMPILER_NOT_AVAILABLE) \
	X(CL_MEM_OBJECT_ALLOCATION_FAILURE) X(CL_OUT_OF_RESOURCES) X(CL_OUT_OF_HOST_MEMORY) \
	X(CL_PROFILING_INFO_NOT_AVAILABLE) X(CL_MEM_COPY_OVERLAP) X(CL_IMAGE_FORMAT_MISMATCH) \
	X(CL_IMAGE_FORMAT_NOT_SUPPORTED) X(CL_BUILD_PROGRAM_FAILURE) X(CL_MAP_FAILURE) \
	X(CL_MISALIGNED_SUB_BUFFER_OFFSET) X(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST) \
	X(CL_COMPILE_PROGRAM_FAILURE) X(CL_LINKER_NOT_AVAILABLE) X(CL_LINK_PROGRAM_FAILURE) \
	X(CL_DEVICE_PARTITION_FAILED) X(CL_KERNEL_ARG_INFO_NOT_AVAILABLE) X(CL_INVALID_VALUE) \
	X(CL_INVALID_DEVICE_TYPE) X(CL_INVALID_PLATFORM) X(CL_INVALID_DEVICE) X(CL_INVALID_CONTEXT) \
	X(CL_INVALID_QUEUE_PROPERTIES) X(CL_INVALID_COMMAND_QUEUE) X(CL_INVALID_HOST_PTR) \
	X(CL_INVALID_MEM_OBJECT) X(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR) X(CL_INVALID_IMAGE_SIZE) \
	X(CL_INVALID_SAMPLER) X(CL_INVALID_BINARY) X(CL_INVALID_BUILD_OPTIONS) X(CL_INVALID_PROGRAM) \
	X(CL_INVALID_PROGRAM_EXECUTABLE) X(CL_INVALID_KERNEL_NAME) X(CL_INVALID_KERNEL_DEFINITION) \
	X(CL_INVALID_KERNEL) X(CL_INVALID_ARG_INDEX) X(CL_INVALID_ARG_VALUE) X(CL_INVALID_ARG_SIZE) \
	X(CL_INVALID_KERNEL_ARGS) X(CL_INVALID_WORK_DIMENSION) X(CL_INVALID_WORK_GROUP_SIZE) \
	X(CL_INVALID_WORK_ITEM_SIZE) X(CL_INVALID_GLOBAL_OFFSET) X(CL_INVALID_EVENT_WAIT_LIST) \
	X(CL_INVALID_EVENT) X(CL_INVALID_OPERATION) X(CL_INVALID_GL_OBJECT) X(CL_INVALID_BUFFER_SIZE) \
	X(CL_INVALID_MIP_LEVEL) X(CL_INVALID_GLOBAL_WORK_SIZE) X(CL_INVALID_PROPERTY) \
	X(CL_INVALID_IMAGE_DESCRIPTOR) X(CL_INVALID_COMPILER_OPTIONS) X(CL_INVALID_LINKER_OPTIONS) \
	X(CL_INVALID_DEVICE_PARTITION_COUNT)

const char *ocl_errname(cl_int rc, char *buf, size_t cap)
{
	switch (rc) {
#define OCL_ERROR_CASE(e) \
	case e: \
		return #e;
		OCL_ERRORS(OCL_ERROR_CASE)
#undef OCL_ERROR_CASE
	case -1001:
		return "CL_PLATFORM_NOT_FOUND_KHR";
	default:
		snprintf(buf, cap, "CL error %d", (int)rc);
		return buf;
	}
}

eng_status ocl_fail(ocl_dev *d, cl_int rc, const char *what, bk_err *err)
{
	char nb[32];
	snprintf(err->msg, sizeof(err->msg), "%s: %s", what, ocl_errname(rc, nb, sizeof(nb)));
	/* after these the queue's state is unknown (a faulting kernel, a lost device) */
	bool lost = rc == CL_OUT_OF_RESOURCES || rc == CL_DEVICE_NOT_AVAILABLE ||
		    rc == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST || rc == CL_INVALID_COMMAND_QUEUE;
	if (d && lost && !d->failed) {
		d->failed = true;
		snprintf(d->failmsg, sizeof(d->failmsg), "%.500s", err->msg);
	}
	switch (rc) {
	case CL_OUT_OF_RESOURCES:
	case CL_OUT_OF_HOST_MEMORY:
	case CL_MEM_OBJECT_ALLOCATION_FAILURE:
		return ENG_ENOMEM;
	case CL_BUILD_PROGRAM_FAILURE:
	case CL_COMPILE_PROGRAM_FAILURE:
	case CL_LINK_PROGRAM_FAILURE:
	case CL_COMPILER_NOT_AVAILABLE:
	case CL_LINKER_NOT_AVAILABLE:
	case CL_INVALID_BINARY:
	case CL_INVALID_BUILD_OPTIONS:
	case CL_INVALID_KERNEL_NAME:
	case CL_INVALID_KERNEL_DEFINITION:
		return ENG_ECOMPILE;
	default:
		return ENG_EDEVICE;
	}
}

eng_status ocl_alive(const ocl_dev *d, bk_err *err)
{
	if (!d->failed)
		return ENG_OK;
	snprintf(err->msg, sizeof(err->msg), "OpenCL device %s failed earlier (%s)", d->name, d->failmsg);
	return ENG_EDEVICE;
}
