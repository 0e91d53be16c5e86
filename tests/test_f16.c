/* test_f16.c: float16 in generated C on every x86-64 and with every compiler the CPU backend
 * accepts: the CPU prelude's conversions (F16C and portable bit arithmetic) against an
 * independent reference for every half and every float near a rounding boundary, compiled with
 * gcc and clang (and $CC, such as a cross compiler); the host's conversions; and float16 kernels
 * compiled by each compiler, exact against the reference. */
#include <check.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/cpu/cpu.h"
#include "testutil.h"

/* ---- an independent reference, in double arithmetic ---- */

static uint16_t ref_f2h(float x)
{
	uint32_t u;
	memcpy(&u, &x, 4);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
	if (isnan(x))
		return sign | 0x7e00u | ((u >> 13) & 0x3ffu);
	double a = fabs((double)x);
	if (a >= 65520.0) /* halfway between 65504 and 2^16 rounds to even: Inf */
		return sign | 0x7c00u;
	if (a < ldexp(1, -14)) /* subnormal: multiples of 2^-24 (nearbyint rounds to even) */
		return sign | (uint16_t)nearbyint(ldexp(a, 24));
	int e;
	frexp(a, &e); /* a in [2^(e-1), 2^e) */
	double q = nearbyint(ldexp(a, 11 - e)); /* 1024..2048 */
	if (q == 2048) {
		q = 1024;
		e++;
	}
	return sign | (uint16_t)(((e - 1 + 15) << 10) | ((int)q - 1024));
}

static float ref_h2f(uint16_t h)
{
	int e = (h >> 10) & 0x1f, m = h & 0x3ff;
	if (e == 0x1f && m) { /* NaN: sign and payload carry over, quieted */
		uint32_t u = ((uint32_t)(h & 0x8000) << 16) | 0x7fc00000u | ((uint32_t)m << 13);
		float f;
		memcpy(&f, &u, 4);
		return f;
	}
	double v = e == 0x1f ? INFINITY : e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
	return (float)((h & 0x8000) ? -v : v);
}

/* Floats next to every rounding boundary of float16 (each midpoint between neighbouring
 * halves, one float ulp either side, both signs), specials, and pseudo-random bit patterns. */
static float *boundary_floats(int *n)
{
	int cap = 0x7c00 * 6 + 64 + 200000, k = 0;
	float *f = malloc(sizeof(float) * cap);
	ck_assert_ptr_nonnull(f);
	for (int h = 0; h < 0x7c00; h++) {
		double mid = ((double)ref_h2f((uint16_t)h) + (h == 0x7bff ? 65536.0 : ref_h2f((uint16_t)(h + 1)))) / 2;
		float m = (float)mid;
		float c[3] = {m, nextafterf(m, 0), nextafterf(m, INFINITY)};
		for (int j = 0; j < 3; j++) {
			f[k++] = c[j];
			f[k++] = -c[j];
		}
	}
	const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 65504.0f, 65519.99f, 65520.0f,
				 1e10f, 1e-30f, 1e-45f, 5.9604645e-08f, 2.9802322e-08f, 2.9802326e-08f,
				 6.1035156e-05f, 6.1035152e-05f, 0.33333334f};
	for (size_t j = 0; j < sizeof(special) / sizeof(special[0]); j++)
		f[k++] = special[j];
	uint64_t s = 0x9e3779b97f4a7c15ull;
	while (k < cap) {
		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		uint32_t u = (uint32_t)(s >> 11);
		memcpy(&f[k++], &u, 4);
	}
	*n = k;
	return f;
}

/* ---- the prelude's conversions, compiled on their own ---- */

/* A shared object made of the CPU prelude and a function writing eng_f2h of n floats, then
 * eng_h2f of every half (no system headers: the prelude has none either). It is loaded into
 * this process as the backend loads kernels, so it runs where kernels run (under qemu-user too,
 * where the host's kernel could not start an executable built for the emulated CPU). */
static const char harness_fn[] =
	"void eng_f16_harness(const float *in, long n, uint16_t *h, float *back)\n{\n"
	"  for (long i = 0; i < n; i++) h[i] = eng_f2h(in[i]);\n"
	"  for (long i = 0; i < 65536; i++) back[i] = eng_h2f((uint16_t)i);\n}\n";

/* Compile the harness with cc and flags, run it on in[0..n), check every result. */
static void check_conversions(const char *cc, const char *flags, const float *in, int n)
{
	char dir[] = "/tmp/tensord-f16-XXXXXX", path[512], cmd[1600];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/h.c", dir);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(cpu_dialect.prelude, f);
	fputs(harness_fn, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "%s -O2 -fPIC -shared %s -w %s/h.c -o %s/h.so 2>%s/err", cc, flags, dir, dir, dir);
	int rc = system(cmd);
	char err[2048] = "";
	snprintf(path, sizeof(path), "%s/err", dir);
	if ((f = fopen(path, "r"))) {
		err[fread(err, 1, sizeof(err) - 1, f)] = 0;
		fclose(f);
	}
	ck_assert_msg(rc == 0, "%s %s: %s", cc, flags, err);
	snprintf(path, sizeof(path), "%s/h.so", dir);
	void *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	ck_assert_msg(so != NULL, "%s %s: %s", cc, flags, dlerror());
	void (*harness)(const float *, long, uint16_t *, float *) =
		(void (*)(const float *, long, uint16_t *, float *))dlsym(so, "eng_f16_harness");
	ck_assert_ptr_nonnull(harness);
	uint16_t *h = malloc(sizeof(uint16_t) * (size_t)n);
	float *back = malloc(sizeof(float) * 65536);
	ck_assert(h && back);
	harness(in, n, h, back);
	dlclose(so);
	for (int i = 0; i < n; i++)
		ck_assert_msg(h[i] == ref_f2h(in[i]), "%s %s: f2h(%a) = 0x%04x, want 0x%04x", cc, flags, (double)in[i], h[i],
			      ref_f2h(in[i]));
	for (int i = 0; i < 65536; i++) {
		float want = ref_h2f((uint16_t)i);
		uint32_t gb, wb;
		memcpy(&gb, &back[i], 4);
		memcpy(&wb, &want, 4);
		ck_assert_msg(gb == wb, "%s %s: h2f(0x%04x) = 0x%08x, want 0x%08x", cc, flags, i, gb, wb);
	}
	free(h);
	free(back);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Both paths of the prelude (portable bit arithmetic without F16C, the F16C instructions with
 * it; elsewhere than x86-64 the portable one), each compiled by every compiler that builds for
 * this process (gcc, clang, $CC: tu_kernel_ccs). */
START_TEST(prelude_conversions_are_exact)
{
	int n;
	float *in = boundary_floats(&n);
	const char *ccs[3];
	int nccs = tu_kernel_ccs(ccs);
#if defined(__x86_64__)
	const char *paths[] = {"-march=x86-64", "-march=x86-64-v3"}; /* v3 has F16C */
#else
	const char *paths[] = {""};
#endif
	int ran = 0;
	for (int c = 0; c < nccs; c++)
		for (size_t p = 0; p < sizeof(paths) / sizeof(paths[0]); p++, ran++)
			check_conversions(ccs[c], paths[p], in, n);
	ck_assert_msg(ran > 0, "no compiler (gcc, clang, $CC) builds for this process's architecture");
	free(in);
}
END_TEST

/* The host's conversions (eng_f16_round, eng_f16_bits, eng_f16_to_double in dtype.h), no
 * _Float16 needed. */
START_TEST(host_conversions_are_exact)
{
	int n;
	float *in = boundary_floats(&n);
	for (int i = 0; i < n; i++) {
		double got = eng_f16_round(in[i]), want = ref_h2f(ref_f2h(in[i]));
		ck_assert_msg((isnan(want) && isnan(got)) || (got == want && signbit(got) == signbit(want)),
			      "f16_round(%a) = %a, want %a", (double)in[i], got, want);
		uint16_t bits = eng_f16_bits(in[i]), wbits = ref_f2h(in[i]);
		ck_assert_msg(isnan(want) ? (bits & 0x7e00) == 0x7e00 : bits == wbits, "f16_bits(%a) = 0x%04x, want 0x%04x",
			      (double)in[i], bits, wbits);
	}
	for (int h = 0; h < 65536; h++) {
		double got = eng_f16_to_double((uint16_t)h), want = ref_h2f((uint16_t)h);
		ck_assert_msg((isnan(want) && isnan(got)) || (got == want && signbit(got) == signbit(want)),
			      "f16_to_double(0x%04x) = %a, want %a", h, got, want);
		ck_assert_msg(isnan(want) || eng_f16_bits(want) == h, "f16_bits(%a) = 0x%04x, want 0x%04x", want,
			      eng_f16_bits(want), h);
	}
	free(in);
}
END_TEST

/* ---- float16 kernels, compiled by each compiler ---- */

/* float32 values -> float16 (rounding at the store), ops in float16 (rounding after each), back
 * to float32, and the float16 tensor's bits: exact against the reference, with cc as the
 * backend's compiler. */
static void check_kernels_with(const char *cc)
{
	char bopts[128], err[512];
	snprintf(bopts, sizeof(bopts), "CPU.cc=%s", cc);
	eng_ctx_opts o;
	eng_ctx_opts_default(&o);
	o.debug = tu_debug();
	o.device = "CPU";
	o.backend_opts = bopts;
	o.no_disk_cache = true;
	eng_ctx *ctx = tu_ctx_shadow(eng_ctx_create(&o, err, sizeof(err)));
	ck_assert_msg(ctx != NULL, "%s", err);
	int n;
	float *in = boundary_floats(&n);
	n = 4096 * 16; /* boundaries of the first ~11000 halves, both signs, plus the specials */
	memcpy(in + n - 18, in + 0x7c00 * 6, 18 * sizeof(float));
	int64_t s[1] = {n};
	eng_tensor *x = eng_from_data(ctx, ENG_F32, 1, s, in);
	eng_tensor *h = eng_cast(x, ENG_F16);
	eng_tensor *y = eng_cast(eng_add(eng_mul(h, h), h), ENG_F32); /* h*h rounds, + h rounds */
	float *got = malloc(sizeof(float) * (size_t)n);
	ck_assert_ptr_nonnull(got);
	ck_assert_msg(eng_tensor_read(y, got, sizeof(float) * (size_t)n) == ENG_OK, "%s: %s", cc, eng_errmsg(ctx));
	for (int i = 0; i < n; i++) {
		float hv = ref_h2f(ref_f2h(in[i]));
		float want = ref_h2f(ref_f2h(ref_h2f(ref_f2h(hv * hv)) + hv));
		ck_assert_msg((isnan(want) && isnan(got[i])) || got[i] == want, "%s: (h*h)+h of %a: %a, want %a", cc,
			      (double)in[i], (double)got[i], (double)want);
	}
	/* the float16 tensor itself, read back as binary16 bits */
	uint16_t *bits = malloc(sizeof(uint16_t) * (size_t)n);
	ck_assert_ptr_nonnull(bits);
	ck_assert_msg(eng_tensor_read(h, bits, sizeof(uint16_t) * (size_t)n) == ENG_OK, "%s: %s", cc, eng_errmsg(ctx));
	for (int i = 0; i < n; i++)
		ck_assert_msg(bits[i] == ref_f2h(in[i]), "%s: float16 of %a: 0x%04x, want 0x%04x", cc, (double)in[i],
			      bits[i], ref_f2h(in[i]));
	free(bits);
	free(got);
	free(in);
	eng_ctx_destroy(ctx);
}

/* With each compiler that builds for this process: gcc and clang, and $CC (a cross compiler
 * under qemu-user). */
START_TEST(kernels_with_gcc_and_clang)
{
	const char *ccs[3];
	int nccs = tu_kernel_ccs(ccs);
	for (int c = 0; c < nccs; c++)
		check_kernels_with(ccs[c]);
	ck_assert_msg(nccs > 0, "no compiler (gcc, clang, $CC) builds for this process's architecture");
}
END_TEST

Suite *f16_suite(void)
{
	const TTest *const tests[] = {prelude_conversions_are_exact, host_conversions_are_exact, kernels_with_gcc_and_clang};
	return tu_suite("f16", tests, (int)(sizeof(tests) / sizeof(tests[0])), TU_TIMEOUT);
}
