/* cpu.h: internals of the CPU backend shared by its files: the device, compiled shared
 * objects and programs. */
#ifndef BK_CPU_H
#define BK_CPU_H

#include "../backend.h"
#include "pool.h"

typedef void (*cpu_kernel_fn)(void *const *bufs, int64_t start, int64_t end);

typedef struct cpu_so {
	void *handle; /* dlopen handle */
	int refs;     /* programs using it */
} cpu_so;

typedef struct cpu_program {
	cpu_kernel_fn fn;
	cpu_so *so;
} cpu_program;

typedef struct cpu_dev {
	char cc[256];
	bk_pool *pool;
	int nthreads;
	int debug;
} cpu_dev;

/* Compile kernels srcs[0..nkern) (each preceded by prelude) into shared objects, split over
 * up to one compiler process per worker thread, and load them. */
eng_status cpu_compile(cpu_dev *d, const char *prelude, const char *const *srcs, int nkern, const char *const *names,
		       bk_program **progs, bk_err *err);
void cpu_program_release(cpu_program *p);

#endif
