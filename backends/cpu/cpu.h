/* cpu.h: internals of the CPU backend shared by its files: the device, compiled shared
 * objects and programs. */
#ifndef BK_CPU_H
#define BK_CPU_H

#include "backends/backend.h"
#include "pool.h"

typedef void (*cpu_kernel_fn)(void *const *bufs, int64_t start, int64_t end);

typedef struct cpu_so {
	void *handle;  /* dlopen handle */
	int refs;      /* programs using it */
	void *bytes;   /* the shared object file's contents (for the disk cache), owned */
	size_t nbytes;
} cpu_so;

/* Bytes of scratch a launch gives a split reduction (bk_target.split_scratch), on its stack. */
#define CPU_SPLIT_SCRATCH 16384
/* Pointers a launch with scratch passes: the buffers and the scratch. */
#define CPU_MAX_ARGS 128
/* Bytes of scratch another kernel may ask for per call (a blocked matmul's packed block of rows:
 * a block's rows x one reduction block), from the heap: a launch takes one such per thread (per
 * slot of the pool's job: pool.h). */
#define CPU_MAX_SCRATCH ((int64_t)1 << 30)

typedef struct cpu_program {
	cpu_kernel_fn fn;
	cpu_so *so;
	char *name; /* fn's symbol in so, owned */
	/* <name>_scratch's bytes of scratch, passed after the buffers (0: none): a split
	 * reduction's partials, combined by <name>_fin after fn's chunks (NULL: not split), on the
	 * launch's stack; else that many for each slot of the pool's job (each thread running fn's
	 * chunks, one after another), from the heap */
	cpu_kernel_fn fin;
	int64_t scratch;
} cpu_program;

/* The instruction set kernels are built for, as the compiler states it (isa.c). */
typedef enum cpu_arch { CPU_ARCH_OTHER, CPU_ARCH_X86_64, CPU_ARCH_AARCH64 } cpu_arch;
typedef struct cpu_isa {
	cpu_arch arch;
	char name[32]; /* "x86-64-v3", "armv8-a+simd", ... (bk_target.isa) */
	int vector_bytes, vector_regs;
	bool fma, f16_convert, f16_arith;
} cpu_isa;

/* The facts of kernels built by cc with -march=<march> -mtune=<mtune> (isa.c): from the
 * compiler's predefined macros, remembered for the process. ENG_EINVAL with a message naming the
 * option where the compiler rejects march or mtune, or this process's CPU cannot run its code (an x86-64-v4 target on an
 * AVX2 machine, an aarch64 one in an x86-64 process); a compiler that cannot be started gives
 * a baseline's facts (the first compile then reports it). */
eng_status cpu_isa_probe(const char *cc, const char *march, const char *mtune, cpu_isa *out, bk_err *err);
/* Runs argv (argv[0] looked up in PATH) with its stdout, and its stderr too if with_stderr (else
 * /dev/null), read to the end into out (at most cap - 1 bytes kept, NUL-terminated); *status
 * its wait status. 0, or the errno why it could not be started. */
int cpu_run_output(char *const argv[], bool with_stderr, char *out, size_t cap, int *status);

typedef struct cpu_dev {
	char cc[256];
	/* the march option ("native", "x86-64-v3", "armv8.2-a"), its facts, and the flags it adds
	 * to cpu_cc_flags: -march=<march>, and -mprefer-vector-width=512 where the target has
	 * AVX-512 (vector_bytes then holds: gcc's tunings would otherwise write 256-bit code) */
	char march[64];
	cpu_isa isa;
	char march_flag[80];
	const char *width_flag; /* NULL: none */
	/* the mtune option (default generic) and its flag, -mtune=<mtune>: the instruction
	 * scheduling is the same on every CPU of a target; a CPU's own tuning can be worse (gcc 12's
	 * znver3 tuning folds a packed panel's loads into every FMA: 1.5x slower matmuls) */
	char mtune[64];
	char mtune_flag[80];
	cpu_pool *pool; /* the process's shared pool (pool.h), one reference */
	int nthreads;   /* ways a kernel is split (the threads option; the pool grows to it) */
	int debug;
	int64_t cache_l1, cache_l2; /* one core's data caches in bytes (options, else the machine's) */
	char *cache_id; /* made on first use (cache.c), owned */
	/* heap scratch kept between launches (owned); a launch that finds it taken (busy, set
	 * atomically) allocates its own */
	void *scratch;
	int64_t scratch_n;
	int scratch_busy;
} cpu_dev;

/* The CPU's dialect of the C-family renderer, with its prelude (dialect.c). */
extern const bk_dialect cpu_dialect;
/* The source every kernel is preceded by. */
const char *cpu_prelude(void);
/* The compiler flags every kernel is built with (NULL-terminated), before the device's
 * march_flag, mtune_flag and width_flag. */
extern const char *const cpu_cc_flags[];

/* Compile kernels srcs[0..nkern) (each preceded by prelude) into shared objects, split over
 * up to one compiler process per worker thread, and load them. */
eng_status cpu_compile(cpu_dev *d, const char *prelude, const char *const *srcs, int nkern, const char *const *names,
		       bk_program **progs, bk_err *err);
void cpu_program_release(cpu_program *p);
/* dlopen the shared object at path, whose contents are bytes[0..n) (taken over: kept with the
 * loaded object, or freed here on failure), and look up names[0..nkern) into progs[0..nkern).
 * On failure no program is left and err says why. */
eng_status cpu_load_so(const char *path, void *bytes, size_t n, const char *const *names, int nkern,
		       bk_program **progs, bk_err *err);

/* The disk-caching methods of bk_device_ops (cache.c). */
const char *cpu_cache_id(void *dev);
eng_status cpu_program_blob(void *dev, bk_program *p, const void **bytes, size_t *n, const char **symbol,
			    bk_err *err);
eng_status cpu_load(void *dev, const void *bytes, size_t n, const char *const *names, int nkern,
		    bk_program **progs, bk_err *err);

#endif
