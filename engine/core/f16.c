/* f16.c: float16 (IEEE binary16) on the host without _Float16, which not every compiler has
 * on every x86-64 (clang only with AVX512-FP16): rounding to nearest even, encoding, decoding. */
#include <math.h>

#include <tensord/eng_dtype.h>

double eng_f16_round(double v)
{
	if (isnan(v) || isinf(v))
		return v;
	double a = fabs(v), r;
	if (a >= 65520.0) /* halfway past the largest half rounds to even: Inf */
		r = INFINITY;
	else if (a < 0x1p-14) /* subnormal halves are multiples of 2^-24 */
		r = ldexp(nearbyint(ldexp(a, 24)), -24);
	else {
		int e;
		frexp(a, &e); /* a in [2^(e-1), 2^e): 11 significant bits */
		r = ldexp(nearbyint(ldexp(a, 11 - e)), e - 11);
	}
	return copysign(r, v);
}

double eng_f16_to_double(uint16_t h)
{
	int e = (h >> 10) & 0x1f, m = h & 0x3ff;
	double v = e == 0x1f ? (m ? NAN : INFINITY) : e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
	return (h & 0x8000) ? -v : v;
}

uint16_t eng_f16_bits(double v)
{
	uint16_t sign = signbit(v) ? 0x8000 : 0;
	double r = fabs(eng_f16_round(v));
	if (isnan(r))
		return sign | 0x7e00;
	if (isinf(r))
		return sign | 0x7c00;
	if (r < 0x1p-14) /* subnormal or zero: a multiple of 2^-24 */
		return sign | (uint16_t)ldexp(r, 24);
	int e;
	double m = frexp(r, &e); /* r = m 2^e, m in [0.5, 1) */
	return sign | (uint16_t)((e + 14) << 10) | (uint16_t)(ldexp(m, 11) - 1024);
}
