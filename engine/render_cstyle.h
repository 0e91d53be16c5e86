/* render_cstyle.h: renders the loop IR into C-family source. Backends supply a dialect
 * (C for the CPU; OpenCL C and CUDA C later reuse the same renderer). */
#ifndef ENG_RENDER_CSTYLE_H
#define ENG_RENDER_CSTYLE_H

#include "kernel.h"
#include "strbuf.h"

typedef struct eng_cstyle {
	const char *kernel_prefix; /* e.g. "void" */
	const char *restrict_kw;   /* "restrict" or "__restrict__" */
} eng_cstyle;

/* Helpers every kernel source needs (safe integer division, saturating casts, ...). */
const char *eng_cstyle_prelude(const eng_cstyle *d);

/* Append kernel `name` rendered from ir to out. */
eng_status eng_render_cstyle(const eng_cstyle *d, const eng_kernel_ir *ir, const char *name,
			     eng_strbuf *out);

#endif
