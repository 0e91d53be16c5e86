/* cstyle.h: renders the loop IR into C-family source for a device's target: its dialect (C for
 * the CPU, OpenCL C; CUDA C can follow with the same fields) and its vector width. */
#ifndef ENG_RENDER_CSTYLE_H
#define ENG_RENDER_CSTYLE_H

#include "backends/backend.h"
#include "codegen/kernel.h"
#include "util/strbuf.h"

/* The lanes (2, 4, 8 or 16) of ir's wide tile as vectors of at most max_width lanes, or 0 if
 * it has none or something along it has no vector form. Along it every value must be a
 * float32 load (consecutive elements, or gathered a constant stride apart), lane-wise
 * arithmetic (+ - * max neg recip exp2 log2 sqrt sin trunc), a comparison of floats or
 * and/or/xor of comparisons (lane masks, intN), a select, a mask turned into 0.0f/1.0f, an
 * accumulator (all float32), or index maths; stores along it write float32 elements
 * (consecutive, or scattered a constant stride apart). Index maths is computed for lane 0. */
int eng_render_vector_lanes(const eng_kernel_ir *ir, int max_width);

/* Append kernel `name` rendered from ir in t's dialect to out (the wide tile as vectors of at
 * most t->vector_width lanes where eng_render_vector_lanes allows). ENG_EINVAL: ir->group asks
 * for work-groups the dialect has not (or of a size that is no power of two); ENG_ENOMEM. */
eng_status eng_render_cstyle(const bk_target *t, const eng_kernel_ir *ir, const char *name,
			     eng_strbuf *out);

/* Render ir for target t and name the kernel after a hash of its text (tinygrad-style: r_ or E_
 * and the loop sizes, then the hash), so equal kernels get equal names: name gets it (also
 * into ir->name), *src the source (caller frees). ENG_EINVAL: t has no work-groups of ir's
 * size; ENG_ENOMEM. (render.c) */
eng_status eng_render_kernel(const bk_target *t, eng_kernel_ir *ir, char name[96], char **src);

#endif
