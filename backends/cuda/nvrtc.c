/* nvrtc.c: NVRTC, opened with dlopen: CUDA C to PTX for a GPU architecture, the build log as the
 * compile error. Needs no GPU and no driver, so the compile check runs on any machine with it. */
#include <nvrtc.h> /* types only: libnvrtc is opened with dlopen, never linked */

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudac.h"

#define NVRTC_FUNCS(X) \
	X(nvrtcVersion) X(nvrtcCreateProgram) X(nvrtcDestroyProgram) X(nvrtcCompileProgram) X(nvrtcGetPTXSize) \
	X(nvrtcGetPTX) X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) X(nvrtcGetErrorString)

struct cuda_nvrtc {
	void *lib;
	char version[16];
#define NVRTC_FIELD(f) __typeof__(f) *f;
	NVRTC_FUNCS(NVRTC_FIELD)
#undef NVRTC_FIELD
};

/* The library: $CUDA_HOME/lib64 first, then the loader's search path, then /usr/local/cuda. */
static void *open_lib(char *tried, size_t cap)
{
	static const char *const names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"};
	const char *home = getenv("CUDA_HOME");
	const char *dirs[] = {home && *home ? home : NULL, "", "/usr/local/cuda"};
	size_t used = 0;
	tried[0] = 0;
	for (size_t d = 0; d < sizeof(dirs) / sizeof(dirs[0]); d++)
		for (size_t i = 0; dirs[d] && i < sizeof(names) / sizeof(names[0]); i++) {
			char path[1024];
			snprintf(path, sizeof(path), "%s%s%s", dirs[d], *dirs[d] ? "/lib64/" : "", names[i]);
			/* never unloaded (as the driver): its static C++ runtime keeps an allocation for the
			 * process's life, which unloading would turn into a leak */
			void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
			if (lib)
				return lib;
			if (used < cap)
				used += (size_t)snprintf(tried + used, cap - used, "%s%s", used ? ", " : "", path);
		}
	return NULL;
}

eng_status cuda_nvrtc_open(cuda_nvrtc **out, bk_err *err)
{
	char tried[1024];
	*out = NULL;
	cuda_nvrtc *nv = calloc(1, sizeof(*nv));
	if (!nv) {
		snprintf(err->msg, sizeof(err->msg), "out of memory");
		return ENG_ENOMEM;
	}
	nv->lib = open_lib(tried, sizeof(tried));
	if (!nv->lib) {
		snprintf(err->msg, sizeof(err->msg), "CUDA: NVRTC not found (tried %s)", tried);
		free(nv);
		return ENG_ENOTFOUND;
	}
	const char *missing = NULL;
#define NVRTC_LOAD(f) \
	if (!missing && !(nv->f = (__typeof__(nv->f))dlsym(nv->lib, #f))) \
		missing = #f;
	NVRTC_FUNCS(NVRTC_LOAD)
#undef NVRTC_LOAD
	int major = 0, minor = 0;
	if (!missing && nv->nvrtcVersion(&major, &minor) != NVRTC_SUCCESS)
		missing = "a working nvrtcVersion";
	if (missing) {
		snprintf(err->msg, sizeof(err->msg), "CUDA: the NVRTC library has no %s", missing);
		cuda_nvrtc_close(nv);
		return ENG_ENOTFOUND;
	}
	snprintf(nv->version, sizeof(nv->version), "%d.%d", major, minor);
	*out = nv;
	return ENG_OK;
}

void cuda_nvrtc_close(cuda_nvrtc *nv)
{
	if (!nv)
		return;
	if (nv->lib)
		dlclose(nv->lib);
	free(nv);
}

const char *cuda_nvrtc_version(const cuda_nvrtc *nv) { return nv->version; }

/* The program's log into err after "what: ". */
static void put_log(const cuda_nvrtc *nv, nvrtcProgram prog, const char *what, bk_err *err)
{
	int used = snprintf(err->msg, sizeof(err->msg), "%s: ", what);
	size_t len = 0;
	char *log = NULL;
	if (nv->nvrtcGetProgramLogSize(prog, &len) == NVRTC_SUCCESS && len && (log = malloc(len)) &&
	    nv->nvrtcGetProgramLog(prog, log) == NVRTC_SUCCESS) {
		log[len - 1] = 0;
		snprintf(err->msg + used, sizeof(err->msg) - (size_t)used, "%s", log);
	}
	free(log);
}

eng_status cuda_nvrtc_ptx(const cuda_nvrtc *nv, const char *src, const char *arch, char **ptx, size_t *n,
			  bk_err *err)
{
	char archopt[64];
	snprintf(archopt, sizeof(archopt), "--gpu-architecture=%s", arch);
	/* precise maths (no --use_fast_math): results must match the CPU's; unused prelude
	 * helpers (warning 177) are no news */
	const char *opts[] = {archopt, "--device-as-default-execution-space", "--diag-suppress=177"};
	nvrtcProgram prog;
	*ptx = NULL;
	*n = 0;
	nvrtcResult rc = nv->nvrtcCreateProgram(&prog, src, "tensord.cu", 0, NULL, NULL);
	if (rc != NVRTC_SUCCESS) {
		snprintf(err->msg, sizeof(err->msg), "nvrtcCreateProgram: %s", nv->nvrtcGetErrorString(rc));
		return rc == NVRTC_ERROR_OUT_OF_MEMORY ? ENG_ENOMEM : ENG_ECOMPILE;
	}
	eng_status st = ENG_OK;
	rc = nv->nvrtcCompileProgram(prog, (int)(sizeof(opts) / sizeof(opts[0])), opts);
	if (rc != NVRTC_SUCCESS) {
		char what[128];
		snprintf(what, sizeof(what), "NVRTC %s for %s: %s", nv->version, arch, nv->nvrtcGetErrorString(rc));
		put_log(nv, prog, what, err);
		st = rc == NVRTC_ERROR_OUT_OF_MEMORY ? ENG_ENOMEM : ENG_ECOMPILE;
	}
	size_t size = 0;
	if (!st && (rc = nv->nvrtcGetPTXSize(prog, &size)) != NVRTC_SUCCESS) {
		snprintf(err->msg, sizeof(err->msg), "nvrtcGetPTXSize: %s", nv->nvrtcGetErrorString(rc));
		st = ENG_ECOMPILE;
	}
	char *buf = st || !size ? NULL : malloc(size);
	if (!st && !buf) {
		snprintf(err->msg, sizeof(err->msg), size ? "out of memory" : "NVRTC gave no PTX");
		st = size ? ENG_ENOMEM : ENG_ECOMPILE;
	}
	if (!st && (rc = nv->nvrtcGetPTX(prog, buf)) != NVRTC_SUCCESS) {
		snprintf(err->msg, sizeof(err->msg), "nvrtcGetPTX: %s", nv->nvrtcGetErrorString(rc));
		st = ENG_ECOMPILE;
	}
	nv->nvrtcDestroyProgram(&prog);
	if (st) {
		free(buf);
		return st;
	}
	buf[size - 1] = 0;
	*ptx = buf;
	*n = size;
	return ENG_OK;
}

void cuda_ptx_entry(const char *ptx, const char *name, int *nparams, int *maxntid)
{
	char pat[160];
	*nparams = -1;
	*maxntid = 0;
	snprintf(pat, sizeof(pat), ".entry %s(", name);
	const char *e = strstr(ptx, pat);
	if (!e)
		return;
	const char *close = strchr(e, ')'), *body = strchr(e, '{');
	if (!close || !body)
		return;
	*nparams = 0;
	for (const char *q = e; (q = strstr(q, ".param")) && q < close; q++)
		(*nparams)++;
	const char *m = strstr(close, ".maxntid");
	if (m && m < body)
		*maxntid = atoi(m + strlen(".maxntid"));
}
