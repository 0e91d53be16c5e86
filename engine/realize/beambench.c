/* beambench.c: the kernel search's timing bench (beam.h): scratch buffers of one kernel's sizes,
 * seeded random inputs, a run on poisoned outputs checked against the first program's, then
 * timed launches, best of a few. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "beam.h"

struct eng_beam_bench {
	eng_device *dev;
	int nbufs;
	void *h[ENG_MAX_KERNEL_BUFS];
	size_t nbytes[ENG_MAX_KERNEL_BUFS];
	eng_dtype dt[ENG_MAX_KERNEL_BUFS];
	bool out[ENG_MAX_KERNEL_BUFS];
	void *ref[ENG_MAX_KERNEL_BUFS]; /* the first program's outputs (host copies) */
	bool have_ref;
	unsigned char *host; /* staging for fills and reads, as large as the largest buffer */
};

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* splitmix64: the inputs' values, reproducible per seed */
static uint64_t next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* n elements of dt: floats uniform in [-1, 1), integers in [0, 4), bools 0/1 (small values, so
 * an integer used as an index stays near range: gathers clamp it anyway). */
static void fill(unsigned char *p, eng_dtype dt, int64_t n, uint64_t *s)
{
	for (int64_t i = 0; i < n; i++) {
		uint64_t r = next(s);
		double f = (double)(r >> 11) / 9007199254740992.0 * 2 - 1;
		switch (dt) {
		case ENG_F32:
			((float *)p)[i] = (float)f;
			break;
		case ENG_F16:
			((uint16_t *)p)[i] = eng_f16_bits(f);
			break;
		case ENG_I64:
			((int64_t *)p)[i] = (int64_t)(r & 3);
			break;
		case ENG_I32:
			((int32_t *)p)[i] = (int32_t)(r & 3);
			break;
		case ENG_U8:
			p[i] = (unsigned char)(r & 3);
			break;
		default:
			p[i] = (unsigned char)(r & 1);
			break;
		}
	}
}

eng_beam_bench *eng_beam_bench_create(eng_device *dev, const eng_kernel_ir *ir, uint64_t seed,
				      char *err, size_t errlen)
{
	eng_beam_bench *b = calloc(1, sizeof(*b));
	size_t most = 1;
	for (int i = 0; i < ir->nbufs; i++) {
		size_t n = (size_t)ir->bufs[i].numel * eng_dtype_size(ir->bufs[i].dtype);
		most = n > most ? n : most;
	}
	if (!b || !(b->host = malloc(most))) {
		snprintf(err, errlen, "out of host memory");
		goto fail;
	}
	b->dev = dev;
	const bk_device_ops *ops = dev->bk.ops;
	for (int i = 0; i < ir->nbufs; i++) {
		bk_err berr;
		b->dt[i] = ir->bufs[i].dtype;
		b->out[i] = ir->bufs[i].output;
		b->nbytes[i] = (size_t)ir->bufs[i].numel * eng_dtype_size(b->dt[i]);
		if (ops->alloc(dev->bk.ctx, b->nbytes[i] ? b->nbytes[i] : 1, &b->h[i], &berr)) {
			snprintf(err, errlen, "scratch buffer of %zu bytes: %s", b->nbytes[i],
				 berr.msg);
			goto fail;
		}
		b->nbufs = i + 1;
		if (b->out[i] && !(b->ref[i] = malloc(b->nbytes[i] ? b->nbytes[i] : 1))) {
			snprintf(err, errlen, "out of host memory");
			goto fail;
		}
		if (b->out[i] || !b->nbytes[i])
			continue;
		fill(b->host, b->dt[i], ir->bufs[i].numel, &seed);
		if (ops->copy_in(dev->bk.ctx, b->h[i], 0, b->host, b->nbytes[i], &berr)) {
			snprintf(err, errlen, "filling a scratch buffer: %s", berr.msg);
			goto fail;
		}
	}
	return b;
fail:
	eng_beam_bench_destroy(b);
	return NULL;
}

void eng_beam_bench_destroy(eng_beam_bench *b)
{
	if (!b)
		return;
	for (int i = 0; i < b->nbufs; i++)
		b->dev->bk.ops->free(b->dev->bk.ctx, b->h[i]);
	for (int i = 0; i < ENG_MAX_KERNEL_BUFS; i++)
		free(b->ref[i]);
	free(b->host);
	free(b);
}

/* Whether got matches want (n bytes of dt): exact for integers, floats within tolerance. */
static bool same(const void *got, const void *want, eng_dtype dt, size_t n)
{
	if (dt != ENG_F32 && dt != ENG_F16)
		return !memcmp(got, want, n);
	size_t m = n / eng_dtype_size(dt);
	double scale = 0;
#define AT(p, i)                                         \
	(dt == ENG_F32 ? (double)((const float *)(p))[i] \
		       : eng_f16_to_double(((const uint16_t *)(p))[i]))
	for (size_t i = 0; i < m; i++)
		if (isfinite(AT(want, i)) && fabs(AT(want, i)) > scale)
			scale = fabs(AT(want, i));
	for (size_t i = 0; i < m; i++) {
		double g = AT(got, i), w = AT(want, i);
		if (isnan(w)   ? !isnan(g)
		    : isinf(w) ? g != w
			       : !(fabs(g - w) <= 1e-3 * scale + 1e-6))
			return false;
	}
#undef AT
	return true;
}

static eng_status launch(eng_beam_bench *b, bk_program *prog, const eng_kernel_ir *ir, double *ms,
			 char *err, size_t errlen)
{
	const bk_device_ops *ops = b->dev->bk.ops;
	bk_launch l = {.nparallel = ir->nparallel, .cost = ir->flops + ir->bytes};
	bk_err berr;
	double t0 = now_ms();
	eng_status s = ops->launch(b->dev->bk.ctx, prog, b->h, b->nbufs, &l, &berr);
	if (!s && ops->synchronize)
		s = ops->synchronize(b->dev->bk.ctx, &berr);
	*ms = now_ms() - t0;
	if (s)
		snprintf(err, errlen, "%s", berr.msg);
	return s;
}

eng_status eng_beam_bench_run(eng_beam_bench *b, bk_program *prog, const eng_kernel_ir *ir,
			      int runs, double cutoff_ms, double *ms, char *err, size_t errlen)
{
	const bk_device_ops *ops = b->dev->bk.ops;
	bk_err berr;
	eng_status s = ENG_OK;
	*ms = INFINITY;
	if (ir->nbufs != b->nbufs) {
		snprintf(err, errlen, "a kernel of other buffers");
		return ENG_EINVAL;
	}
	for (int i = 0; i < b->nbufs && !s; i++) /* outputs poisoned: all ones (NaN, -1) */
		if (b->out[i] && b->nbytes[i]) {
			memset(b->host, 0xff, b->nbytes[i]);
			s = ops->copy_in(b->dev->bk.ctx, b->h[i], 0, b->host, b->nbytes[i], &berr);
		}
	if (s) {
		snprintf(err, errlen, "%s", berr.msg);
		return s;
	}
	double t;
	if ((s = launch(b, prog, ir, &t, err, errlen)))
		return s;
	for (int i = 0; i < b->nbufs; i++) {
		if (!b->out[i] || !b->nbytes[i])
			continue;
		void *dst = b->have_ref ? (void *)b->host : b->ref[i];
		if ((s = ops->copy_out(b->dev->bk.ctx, b->h[i], 0, dst, b->nbytes[i], &berr))) {
			snprintf(err, errlen, "%s", berr.msg);
			return s;
		}
		if (b->have_ref && !same(b->host, b->ref[i], b->dt[i], b->nbytes[i])) {
			snprintf(err, errlen, "its output %d differs from the heuristic kernel's",
				 i);
			return ENG_ERANGE;
		}
	}
	b->have_ref = true;
	*ms = t;
	double total = t; /* small kernels run more often: the fastest of a few is less noisy */
	for (int r = 0; r < runs && t <= cutoff_ms && (r < 3 || total < 20); r++) {
		if ((s = launch(b, prog, ir, &t, err, errlen)))
			return s;
		*ms = t < *ms ? t : *ms;
		total += t;
	}
	return ENG_OK;
}
