/* isa.c: the CPU backend's target facts, read from the compiler's view of the instruction set it
 * builds kernels for: the predefined macros of `cc -march=X -dM -E` (vector bytes and registers,
 * FMA, float16 conversion and arithmetic, the x86-64 level), never from the CPU's model name;
 * and whether this process's CPU can run such code. */
#include "cpu.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

extern char **environ;

/* Whether the macro list (one "#define NAME VALUE" a line) defines name. */
static bool defines(const char *macros, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = macros; (p = strstr(p, "#define ")); p += 8)
		if (!strncmp(p + 8, name, n) && (p[8 + n] == ' ' || p[8 + n] == '\n'))
			return true;
	return false;
}

/* The facts of a target whose predefined macros are `m`. */
static void facts_of(const char *m, cpu_isa *isa)
{
	memset(isa, 0, sizeof(*isa));
	if (defines(m, "__x86_64__")) {
		isa->arch = CPU_ARCH_X86_64;
		bool v2 = defines(m, "__SSE4_2__") && defines(m, "__POPCNT__") && defines(m, "__SSSE3__");
		bool v3 = v2 && defines(m, "__AVX2__") && defines(m, "__FMA__") && defines(m, "__BMI2__") &&
			  defines(m, "__F16C__");
		bool v4 = v3 && defines(m, "__AVX512F__") && defines(m, "__AVX512BW__") && defines(m, "__AVX512DQ__") &&
			  defines(m, "__AVX512VL__") && defines(m, "__AVX512CD__");
		snprintf(isa->name, sizeof(isa->name), "%s", v4 ? "x86-64-v4" : v3 ? "x86-64-v3" : v2 ? "x86-64-v2" : "x86-64");
		isa->vector_bytes = defines(m, "__AVX512F__") ? 64 : defines(m, "__AVX__") ? 32 : 16;
		isa->vector_regs = defines(m, "__AVX512F__") ? 32 : 16;
		isa->fma = defines(m, "__FMA__");
		isa->f16_convert = defines(m, "__F16C__");
		isa->f16_arith = defines(m, "__AVX512FP16__");
	} else if (defines(m, "__aarch64__")) {
		isa->arch = CPU_ARCH_AARCH64;
		/* Advanced SIMD (NEON) is part of every ARMv8-A profile: 32 registers of 16 bytes */
		bool fp16 = defines(m, "__ARM_FEATURE_FP16_VECTOR_ARITHMETIC");
		snprintf(isa->name, sizeof(isa->name), "armv8-a%s%s%s%s", defines(m, "__ARM_NEON") ? "+simd" : "",
			 fp16 ? "+fp16" : "", defines(m, "__ARM_FEATURE_DOTPROD") ? "+dotprod" : "",
			 defines(m, "__ARM_FEATURE_SVE") ? "+sve" : "");
		isa->vector_bytes = defines(m, "__ARM_NEON") ? 16 : 8;
		isa->vector_regs = 32;
		isa->fma = defines(m, "__ARM_FEATURE_FMA");
		isa->f16_convert = defines(m, "__ARM_FP16_FORMAT_IEEE");
		isa->f16_arith = fp16;
	} else {
		isa->arch = CPU_ARCH_OTHER;
		snprintf(isa->name, sizeof(isa->name), "unknown");
		isa->vector_bytes = 16; /* what a compiler's generic vectors assume */
		isa->vector_regs = 16;
	}
}

int cpu_run_output(char *const argv[], bool with_stderr, char *out, size_t cap, int *status)
{
	out[0] = 0;
	*status = 0;
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) < 0)
		return errno;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
	if (with_stderr)
		posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
	else
		posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	pid_t pid;
	int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	size_t len = 0;
	char scratch[256];
	while (!rc) { /* read to the end, so the program never blocks on a full pipe */
		bool keep = len + 1 < cap;
		ssize_t r = read(fds[0], keep ? out + len : scratch, keep ? cap - 1 - len : sizeof(scratch));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += keep ? (size_t)r : 0;
	}
	close(fds[0]);
	out[len] = 0;
	if (!rc)
		while (waitpid(pid, status, 0) < 0 && errno == EINTR)
			;
	return rc;
}

/* Runs `cc -march=<march> -mtune=<mtune> -dM -E -x c /dev/null` into out (at most cap - 1
 * bytes); false with the compiler's words (or why it did not run) in err. *ran: whether the
 * compiler could be started. */
static bool run_probe(const char *cc, const char *march, const char *mtune, char *out, size_t cap, bool *ran,
		      bk_err *err)
{
	*ran = false;
	char flag[96], tune[96];
	snprintf(flag, sizeof(flag), "-march=%s", march);
	snprintf(tune, sizeof(tune), "-mtune=%s", mtune);
	char *const argv[] = {(char *)cc, flag, tune, "-dM", "-E", "-x", "c", "/dev/null", NULL};
	int status;
	int rc = cpu_run_output(argv, true, out, cap, &status);
	if (rc) {
		snprintf(err->msg, sizeof(err->msg), "cannot run compiler '%s': %s", cc, strerror(rc));
		return false;
	}
	/* a compiler whose exec failed in the child exits 127 without a word */
	*ran = !(WIFEXITED(status) && WEXITSTATUS(status) == 127 && !out[0]);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		out[strcspn(out, "\n")] = 0;
		snprintf(err->msg, sizeof(err->msg), "option march=%s, mtune=%s: '%s %s %s' fails: %.3400s", march, mtune,
			 cc, flag, tune, out[0] ? out : "(no message)");
		return false;
	}
	return true;
}

/* Whether this process's CPU runs code of the target whose macros are m; else the first feature
 * it lacks in *lacks. Checked with the CPU's own feature bits: cpuid on x86-64, the kernel's
 * hardware capabilities (getauxval: AT_HWCAP, AT_HWCAP2) on ARM64. */
static bool host_runs(const char *m, const cpu_isa *isa, const char **lacks)
{
	*lacks = NULL;
#if defined(__x86_64__)
	if (isa->arch != CPU_ARCH_X86_64) {
		*lacks = "its architecture (this process runs x86-64)";
		return false;
	}
	__builtin_cpu_init();
	struct {
		const char *macro, *feature;
		int have;
	} need[] = {
		{"__SSE4_2__", "sse4.2", __builtin_cpu_supports("sse4.2")},
		{"__POPCNT__", "popcnt", __builtin_cpu_supports("popcnt")},
		{"__AVX__", "avx", __builtin_cpu_supports("avx")},
		{"__AVX2__", "avx2", __builtin_cpu_supports("avx2")},
		{"__FMA__", "fma", __builtin_cpu_supports("fma")},
		{"__BMI2__", "bmi2", __builtin_cpu_supports("bmi2")},
		{"__AVX512F__", "avx512f", __builtin_cpu_supports("avx512f")},
		{"__AVX512BW__", "avx512bw", __builtin_cpu_supports("avx512bw")},
		{"__AVX512DQ__", "avx512dq", __builtin_cpu_supports("avx512dq")},
		{"__AVX512VL__", "avx512vl", __builtin_cpu_supports("avx512vl")},
		{"__AVX512CD__", "avx512cd", __builtin_cpu_supports("avx512cd")},
	};
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
		if (defines(m, need[i].macro) && !need[i].have) {
			*lacks = need[i].feature;
			return false;
		}
	/* F16C: the kernels' float16 conversions; cpuid's bit is not among __builtin_cpu_supports'
	 * names in every compiler, so it is read directly (leaf 1, ecx bit 29) */
	if (defines(m, "__F16C__")) {
		unsigned a = 1, b, c = 0, d;
		__asm__("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
		if (!((c >> 29) & 1)) {
			*lacks = "f16c";
			return false;
		}
	}
	return true;
#elif defined(__aarch64__)
	if (isa->arch != CPU_ARCH_AARCH64) {
		*lacks = "its architecture (this process runs aarch64)";
		return false;
	}
	/* ARMv8-A's NEON is always there; the optional features a -march can add, by the macro
	 * the compiler then defines and the capability bit Linux reports (bits/hwcap.h) */
	const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
	struct {
		const char *macro, *feature;
		unsigned long word, bit;
	} need[] = {
		{"__ARM_FEATURE_CRC32", "crc32", hw, HWCAP_CRC32},
		{"__ARM_FEATURE_ATOMICS", "atomics (lse)", hw, HWCAP_ATOMICS},
		{"__ARM_FEATURE_FP16_SCALAR_ARITHMETIC", "fphp", hw, HWCAP_FPHP},
		{"__ARM_FEATURE_FP16_VECTOR_ARITHMETIC", "asimdhp", hw, HWCAP_ASIMDHP},
		{"__ARM_FEATURE_QRDMX", "asimdrdm", hw, HWCAP_ASIMDRDM},
		{"__ARM_FEATURE_DOTPROD", "asimddp", hw, HWCAP_ASIMDDP},
		{"__ARM_FEATURE_SVE", "sve", hw, HWCAP_SVE},
		{"__ARM_FEATURE_SVE2", "sve2", hw2, HWCAP2_SVE2},
		{"__ARM_FEATURE_MATMUL_INT8", "i8mm", hw2, HWCAP2_I8MM},
		{"__ARM_FEATURE_BF16_VECTOR_ARITHMETIC", "bf16", hw2, HWCAP2_BF16},
	};
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
		if (defines(m, need[i].macro) && !(need[i].word & need[i].bit)) {
			*lacks = need[i].feature;
			return false;
		}
	return true;
#else
	(void)m, (void)isa;
	return true;
#endif
}

/* The answers for (cc, march, mtune) triples already probed: the compiler's macros do not change while
 * the process runs, and contexts open CPU devices often (every test, every daemon reload). A
 * synchronised process-wide memo of a pure function: entries only added, under memo_mu. */
#define MEMO_MAX 8
typedef struct memo_entry {
	char cc[256], march[64], mtune[64];
	cpu_isa isa;
} memo_entry;
static pthread_mutex_t memo_mu = PTHREAD_MUTEX_INITIALIZER;
static memo_entry memo[MEMO_MAX];
static int memo_n;

eng_status cpu_isa_probe(const char *cc, const char *march, const char *mtune, cpu_isa *out, bk_err *err)
{
	pthread_mutex_lock(&memo_mu);
	for (int i = 0; i < memo_n; i++)
		if (!strcmp(memo[i].cc, cc) && !strcmp(memo[i].march, march) && !strcmp(memo[i].mtune, mtune)) {
			*out = memo[i].isa;
			pthread_mutex_unlock(&memo_mu);
			return ENG_OK;
		}
	pthread_mutex_unlock(&memo_mu);
	size_t cap = 64 * 1024;
	char *m = malloc(cap);
	if (!m) {
		snprintf(err->msg, sizeof(err->msg), "out of memory");
		return ENG_ENOMEM;
	}
	bool ran;
	if (!run_probe(cc, march, mtune, m, cap, &ran, err)) {
		free(m);
		if (ran)
			return ENG_EINVAL; /* the compiler rejects the target: say so at open */
		/* no compiler: kernels cannot be built, but cached ones can still load; the facts of
		 * the baseline a compiler would assume, and the first compile reports the compiler */
		facts_of("", out);
		snprintf(out->name, sizeof(out->name), "unknown (no compiler)");
		return ENG_OK;
	}
	facts_of(m, out);
	const char *lacks;
	if (!host_runs(m, out, &lacks)) {
		snprintf(err->msg, sizeof(err->msg), "option march=%s: kernels for %s need %s, which this CPU lacks", march,
			 out->name, lacks);
		free(m);
		return ENG_EINVAL;
	}
	free(m);
	pthread_mutex_lock(&memo_mu);
	if (memo_n < MEMO_MAX && strlen(cc) < sizeof(memo[0].cc) && strlen(march) < sizeof(memo[0].march) &&
	    strlen(mtune) < sizeof(memo[0].mtune)) {
		snprintf(memo[memo_n].cc, sizeof(memo[0].cc), "%s", cc);
		snprintf(memo[memo_n].march, sizeof(memo[0].march), "%s", march);
		snprintf(memo[memo_n].mtune, sizeof(memo[0].mtune), "%s", mtune);
		memo[memo_n++].isa = *out;
	}
	pthread_mutex_unlock(&memo_mu);
	return ENG_OK;
}
