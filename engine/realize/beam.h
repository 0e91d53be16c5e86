/* beam.h: the search over kernel options (tinygrad's BEAM): variants of a scheduled kernel
 * compiled and timed on the device, the fastest that computes the same values kept per kernel
 * and machine (beamcache.h). Engine-private; realize.c calls it where kernels are rendered. */
#ifndef ENG_BEAM_H
#define ENG_BEAM_H

#include "device/device.h"
#include "schedule/schedule.h"

/* With the context's search on (ctx->beam > 0) and a kernel with reductions: the recorded
 * choice for it (memory, then disk), else a search on dev within ctx->beam_budget seconds,
 * replaces it->ir, and *name and *src (the kernel as rendered under the heuristics; the old
 * text is freed) with the chosen kernel's; its program, if the search compiled it, joins the
 * program cache. A record that does not apply to the kernel any more is ignored and searched
 * again. Anything failing inside the search keeps the heuristics' kernel. Returns ENG_OK, or
 * ENG_ECANCELED (the context error set) when the call was cancelled while searching. */
eng_status eng_beam_item(eng_ctx *ctx, eng_device *dev, eng_sched_item *it, char name[96],
			 char **src);

/* The timing bench of one kernel (beambench.c): scratch buffers of the kernel's sizes on the
 * device (never the caller's), inputs filled with seeded pseudo-random values. */
typedef struct eng_beam_bench eng_beam_bench;

/* A bench for ir's buffers on dev; NULL with a message in err when the device memory or host
 * memory is short. Freed with eng_beam_bench_destroy. */
eng_beam_bench *eng_beam_bench_create(eng_device *dev, const eng_kernel_ir *ir, uint64_t seed,
				      char *err, size_t errlen);
void eng_beam_bench_destroy(eng_beam_bench *b);

/* Run prog (compiled from a lowering of the bench's kernel: ir, with the same buffers) once on
 * poisoned outputs: the first program run gives the reference outputs, every later one must
 * match them (floats within a relative 1e-3 of the output's largest magnitude), else ENG_ERANGE.
 * Then up to runs more launches (past 3 only while they took under 20 ms together), stopping
 * early once one takes over cutoff_ms; *ms is the fastest (asynchronous devices are synchronised for each). Launch errors come back as the
 * backend's status with err set. */
eng_status eng_beam_bench_run(eng_beam_bench *b, bk_program *prog, const eng_kernel_ir *ir,
			      int runs, double cutoff_ms, double *ms, char *err, size_t errlen);

#endif
