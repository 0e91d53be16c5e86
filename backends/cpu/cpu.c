/* cpu.c: the CPU backend's device: host memory, launches that split a kernel's parallel loop
 * over the process's shared worker pool (then run a split reduction's <name>_fin), its target,
 * and the backend's registry entry. */
#include "cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static eng_status cpu_alloc(void *dev, size_t nbytes, void **handle, bk_err *err)
{
	/* 64-byte alignment for full-width vector loads */
	size_t sz = (nbytes + 63) & ~(size_t)63;
	void *p = aligned_alloc(64, sz ? sz : 64);
	if (!p) {
		snprintf(err->msg, sizeof(err->msg), "out of host memory (%zu bytes)", nbytes);
		return ENG_ENOMEM;
	}
	*handle = p;
	return ENG_OK;
}

static void cpu_free(void *dev, void *handle) { free(handle); }

/* Host memory is the CPU's memory: a kernel reads and writes it where it is. */
static eng_status cpu_wrap_host(void *dev, void *ptr, size_t n, void **handle, bk_err *err)
{
	*handle = ptr;
	return ENG_OK;
}

static eng_status cpu_copy_in(void *dev, void *handle, size_t off, const void *src, size_t n, bk_err *err)
{
	memcpy((char *)handle + off, src, n);
	return ENG_OK;
}

static eng_status cpu_copy_out(void *dev, void *handle, size_t off, void *dst, size_t n, bk_err *err)
{
	memcpy(dst, (const char *)handle + off, n);
	return ENG_OK;
}

static eng_status cpu_compile_op(void *dev, const char *const *srcs, int nkern, const char *const *names,
				 bk_program **progs, bk_err *err)
{
	return cpu_compile(dev, cpu_prelude(), srcs, nkern, names, progs, err);
}

static void cpu_program_free(void *dev, bk_program *p) { cpu_program_release((cpu_program *)p); }

typedef struct job {
	cpu_kernel_fn fn;
	void *const *bufs;
	/* heap scratch (else NULL): `per` bytes of it for each slot of the pool's job (at most
	 * `ways`: pool.h), passed after the buffers (nbufs of them) to each call of fn that slot
	 * runs; the slot's thread runs its calls one after another, and a call uses its scratch
	 * only within itself (a packed block of rows, written before it is read), so they share it */
	char *heap;
	size_t per;
	int nbufs;
} job;

static void run_range(void *arg, int64_t s, int64_t e, int slot)
{
	job *j = arg;
	if (!j->heap) {
		j->fn(j->bufs, s, e);
		return;
	}
	void *bufs[CPU_MAX_ARGS];
	memcpy(bufs, j->bufs, (size_t)j->nbufs * sizeof(void *));
	bufs[j->nbufs] = j->heap + (size_t)slot * j->per;
	j->fn(bufs, s, e);
}

/* At least n bytes of heap scratch, 64-aligned: the device's kept buffer (grown as needed;
 * *kept then, to be given back by clearing scratch_busy) unless another launch holds it, else
 * one of its own for the caller to free. NULL when out of memory. */
static void *scratch_take(cpu_dev *d, int64_t n, bool *kept)
{
	size_t sz = ((size_t)n + 63) & ~(size_t)63;
	*kept = false;
	if (__atomic_exchange_n(&d->scratch_busy, 1, __ATOMIC_ACQUIRE))
		return aligned_alloc(64, sz);
	if (d->scratch_n < n) {
		free(d->scratch);
		d->scratch_n = 0;
		if (!(d->scratch = aligned_alloc(64, sz))) {
			__atomic_store_n(&d->scratch_busy, 0, __ATOMIC_RELEASE);
			return NULL;
		}
		d->scratch_n = n;
	}
	*kept = true;
	return d->scratch;
}

static eng_status cpu_launch(void *dev, bk_program *prog, void *const *bufs, int nbufs, const bk_launch *l,
			     bk_err *err)
{
	cpu_dev *d = dev;
	cpu_program *p = (cpu_program *)prog;
	job j = {.fn = p->fn, .bufs = bufs, .nbufs = nbufs};
	/* spreading costs ~10us: only worth it for kernels doing enough work; a device asking for
	 * fewer threads than the shared pool has uses that many ways of it */
	int ways = l->cost < 32768 ? 1 : d->nthreads;
	/* scratch after the buffers: a split reduction's chunks put their partials there, on this
	 * stack, at their range index, and its _fin combines them (in chunk order, whichever threads
	 * ran the chunks and however the range was cut) once all are done; another kernel's (a
	 * packed block of rows) is per slot of the pool's job, from the heap */
	_Alignas(64) unsigned char scratch[CPU_SPLIT_SCRATCH];
	void *withscratch[CPU_MAX_ARGS];
	bool kept = false;
	if (p->fin || p->scratch > 0) {
		if (nbufs + 1 > CPU_MAX_ARGS) {
			snprintf(err->msg, sizeof(err->msg), "kernel %s: %d buffers, at most %d", p->name, nbufs,
				 CPU_MAX_ARGS - 1);
			return ENG_ERANGE;
		}
		j.per = ((size_t)p->scratch + 63) & ~(size_t)63;
		if (!p->fin && !(j.heap = scratch_take(d, (int64_t)j.per * ways, &kept))) {
			snprintf(err->msg, sizeof(err->msg), "kernel %s: out of memory for %lld bytes of scratch", p->name,
				 (long long)j.per * ways);
			return ENG_ENOMEM;
		}
		memcpy(withscratch, bufs, (size_t)nbufs * sizeof(void *));
		withscratch[nbufs] = scratch;
		j.bufs = withscratch;
	}
	cpu_pool_run(d->pool, run_range, &j, l->nparallel > 0 ? l->nparallel : 1, ways);
	if (p->fin)
		p->fin(j.bufs, 0, 0);
	if (kept)
		__atomic_store_n(&d->scratch_busy, 0, __ATOMIC_RELEASE);
	else
		free(j.heap);
	return ENG_OK;
}

/* One core's data cache of the given level in bytes: sysconf, else sysfs; 0 if unknown. */
static int64_t cpu_cache_size(int level)
{
	long v = -1;
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE)
	v = sysconf(level == 1 ? _SC_LEVEL1_DCACHE_SIZE : _SC_LEVEL2_CACHE_SIZE);
#endif
	for (int i = 0; i < 8 && v <= 0; i++) {
		char path[96], type[32] = "";
		int lv = 0;
		long kb = 0;
		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
		FILE *f = fopen(path, "r");
		if (!f)
			break;
		int ok = fscanf(f, "%d", &lv) == 1;
		fclose(f);
		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
		if (ok && lv == level && (f = fopen(path, "r"))) {
			ok = fscanf(f, "%31s", type) == 1 && strcmp(type, "Instruction") != 0;
			fclose(f);
			snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
			if (ok && (f = fopen(path, "r"))) {
				if (fscanf(f, "%ldK", &kb) == 1)
					v = kb * 1024;
				fclose(f);
			}
		}
	}
	return v > 0 ? v : 0;
}

static void cpu_target(void *dev, bk_target *t)
{
	const cpu_dev *d = dev;
	t->dialect = &cpu_dialect;
	t->parallelism = d->nthreads;
	t->reduce_group = 0; /* a core runs a reduction best as one loop */
	t->vector_width = 0; /* gcc vectorises the tile loops itself */
	t->kind = BK_KIND_CPU;
	snprintf(t->isa, sizeof(t->isa), "%s", d->isa.name);
	snprintf(t->march, sizeof(t->march), "%s", d->march);
	t->vector_bytes = d->isa.vector_bytes;
	t->vector_regs = d->isa.vector_regs;
	t->fma = d->isa.fma;
	t->f16_convert = d->isa.f16_convert;
	t->f16_arith = d->isa.f16_arith;
	t->cache_l1 = d->cache_l1;
	t->cache_l2 = d->cache_l2;
	t->split_scratch = CPU_SPLIT_SCRATCH;
}

static void cpu_destroy(void *dev)
{
	cpu_dev *d = dev;
	cpu_pool_release(d->pool);
	free(d->cache_id);
	free(d->scratch);
	free(d);
}

static const bk_device_ops cpu_ops = {
	.abi_version = BK_ABI_VERSION,
	.struct_size = sizeof(bk_device_ops),
	.name = "CPU",
	.alloc = cpu_alloc,
	.free = cpu_free,
	.copy_in = cpu_copy_in,
	.copy_out = cpu_copy_out,
	.compile = cpu_compile_op,
	.program_free = cpu_program_free,
	.launch = cpu_launch,
	.synchronize = NULL,
	.destroy = cpu_destroy,
	.cache_id = cpu_cache_id,
	.program_blob = cpu_program_blob,
	.load = cpu_load,
	.target = cpu_target,
	.wrap_host = cpu_wrap_host,
};

/* The option key (a compiler's -march or -mtune name), def where unset or empty, into *out;
 * false with a message where it is no such name (it becomes a compiler flag) or too long. */
_Static_assert(sizeof(((cpu_dev *)0)->march) == sizeof(((cpu_dev *)0)->mtune), "march and mtune hold the same names");
static bool compiler_name(const bk_opts *opts, const char *key, const char *def, const char **out, bk_err *err)
{
	const char *v = bk_opts_get(opts, key);
	v = v && *v ? v : def;
	size_t cap = sizeof(((cpu_dev *)0)->march);
	if (strlen(v) >= cap || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789.-+_") != strlen(v)) {
		snprintf(err->msg, sizeof(err->msg), "option %s=%.80s: want a compiler's -%s name (letters, digits, . - + _; at most %zu bytes)",
			 key, v, key, cap - 1);
		return false;
	}
	*out = v;
	return true;
}

static eng_status cpu_open(int ordinal, const bk_opts *opts, int debug, bk_device *out, bk_err *err)
{
	long ncores = sysconf(_SC_NPROCESSORS_ONLN);
	int nthreads = ncores > 0 ? (int)ncores : 1;
	/* CPU:n for n > 0 are more devices on the same cores (own caches, the shared pool): a
	 * stand-in for a second device in tests, or separate queues */
	if (ordinal < 0) {
		snprintf(err->msg, sizeof(err->msg), "CPU device number %d is negative", ordinal);
		return ENG_EINVAL;
	}
	if (bk_opts_int(opts, "threads", 0, CPU_POOL_MAX, &nthreads, err))
		return ENG_EINVAL;
	if (nthreads == 0)
		nthreads = ncores > 0 ? (int)ncores : 1;
	int l1 = 0, l2 = 0;
	if (bk_opts_int(opts, "cache_l1", 0, 1 << 30, &l1, err) || bk_opts_int(opts, "cache_l2", 0, 1 << 30, &l2, err))
		return ENG_EINVAL;
	const char *cc = bk_opts_get(opts, "cc");
	if (cc && strlen(cc) >= sizeof(((cpu_dev *)0)->cc)) {
		snprintf(err->msg, sizeof(err->msg), "option cc: path longer than %zu bytes", sizeof(((cpu_dev *)0)->cc) - 1);
		return ENG_EINVAL;
	}
	const char *march, *mtune;
	if (!compiler_name(opts, "march", "native", &march, err) || !compiler_name(opts, "mtune", "generic", &mtune, err))
		return ENG_EINVAL;
	cpu_dev *d = calloc(1, sizeof(*d));
	if (!d) {
		snprintf(err->msg, sizeof(err->msg), "out of memory");
		return ENG_ENOMEM;
	}
	snprintf(d->cc, sizeof(d->cc), "%s", cc && *cc ? cc : "cc");
	snprintf(d->march, sizeof(d->march), "%s", march);
	snprintf(d->mtune, sizeof(d->mtune), "%s", mtune);
	eng_status st = cpu_isa_probe(d->cc, d->march, d->mtune, &d->isa, err);
	if (st) {
		free(d);
		return st;
	}
	snprintf(d->march_flag, sizeof(d->march_flag), "-march=%s", d->march);
	snprintf(d->mtune_flag, sizeof(d->mtune_flag), "-mtune=%s", d->mtune);
	d->width_flag = d->isa.arch == CPU_ARCH_X86_64 && d->isa.vector_bytes == 64 ? "-mprefer-vector-width=512" : NULL;
	d->debug = debug;
	d->nthreads = nthreads;
	d->cache_l1 = l1 ? l1 : cpu_cache_size(1);
	d->cache_l2 = l2 ? l2 : cpu_cache_size(2);
	d->pool = cpu_pool_acquire(nthreads);
	if (!d->pool) {
		free(d);
		snprintf(err->msg, sizeof(err->msg), "cannot start worker threads");
		return ENG_ENOMEM;
	}
	out->ops = &cpu_ops;
	out->ctx = d;
	return ENG_OK;
}

static eng_status cpu_list(char *out, size_t len, int *ndevices, bk_err *err)
{
	snprintf(out, len, "CPU | generated C compiled by cc | %ld cores\n", sysconf(_SC_NPROCESSORS_ONLN));
	if (ndevices)
		*ndevices = 1;
	return ENG_OK;
}

static const bk_option_spec cpu_options[] = {
	{"cc", "CC", "the C compiler kernels are built with (gcc or clang; default cc)"},
	{"march", "TENSORD_CPU_MARCH",
	 "the instruction set kernels are built for, the compiler's -march (native, x86-64-v2, x86-64-v3, x86-64-v4, armv8.2-a, ...; default native)"},
	{"mtune", "TENSORD_CPU_MTUNE",
	 "the CPU kernels' instructions are scheduled for, the compiler's -mtune (default generic: the same code for a target on every CPU; native: this CPU's tuning)"},
	{"threads", "TENSORD_CPU_THREADS", "threads a kernel is split over, of the process's shared pool (0: one per online core)"},
	{"cache_l1", "TENSORD_CPU_CACHE_L1", "bytes of one core's L1 data cache that kernels are blocked for (0: the machine's)"},
	{"cache_l2", "TENSORD_CPU_CACHE_L2", "bytes of one core's L2 cache that kernels are blocked for (0: the machine's)"},
	{NULL, NULL, NULL},
};

const bk_backend bk_cpu_backend = {
	.name = "CPU",
	.bare_zero = true,
	.open = cpu_open,
	.list = cpu_list,
	.options = cpu_options,
};
