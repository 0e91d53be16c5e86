/* matmul_beam: a float32 matmul with the default heuristics and with the kernel search's choice,
 * call by call in one process (two contexts on one cache directory: one with the search off, one
 * with TENSORD_BEAM's width, default 2), each pair's calls in alternating order, so the host's
 * speed changes, which move both alike, cancel. The searched context's first call searches, or
 * takes the choice recorded for this machine (a first pair, not counted, makes sure of it).
 * Prints both medians and the median of the per-pair ratio heuristics / searched with its
 * quartiles, of the realize's wall time and of the time inside its kernel launches (small
 * matmuls' calls are as much the realize around the kernel as the kernel) (bench/compare_beam.sh).
 * Usage: bench_matmul_beam [N | MxKxN[t]] [pairs]. */
#include "bench.h"
#include "matmul_shape.h"

static eng_ctx *ctx_with_beam(int beam, char *err, size_t errlen)
{
	eng_ctx_opts o;
	eng_ctx_opts_default(&o);
	o.beam = beam;
	return eng_ctx_create(&o, err, errlen);
}

/* One timed realize of s's matmul in ctx on fresh inputs (bench_realize_once). */
static int one_run(eng_ctx *ctx, mm_shape *s, float *out, double *ms, double *kms)
{
	return bench_realize_once(ctx, "bench_matmul_beam", mm_shape_build, s, out, (size_t)(s->m * s->n) * sizeof(float),
				  ms, kms);
}

int main(int argc, char **argv)
{
	mm_shape s;
	int pairs = argc > 2 ? atoi(argv[2]) : 21;
	const char *w = getenv("TENSORD_BEAM");
	int beam = w && atoi(w) > 0 ? atoi(w) : 2;
	if (!mm_shape_parse(argc > 1 ? argv[1] : "1024", &s) || pairs < 3 || pairs > 1000) {
		fprintf(stderr, "usage: bench_matmul_beam [N | MxKxN[t]] [pairs]\n");
		return 2;
	}
	char err[256];
	eng_ctx *heur = ctx_with_beam(-1, err, sizeof(err)), *searched = heur ? ctx_with_beam(beam, err, sizeof(err)) : NULL;
	double *th = calloc(pairs, sizeof(double)), *ts = calloc(pairs, sizeof(double)), *q = calloc(pairs, sizeof(double));
	double *kh = calloc(pairs, sizeof(double)), *ks = calloc(pairs, sizeof(double)), *kq = calloc(pairs, sizeof(double));
	float *out = malloc((size_t)(s.m * s.n) * sizeof(float));
	if (!heur || !searched || !th || !ts || !q || !kh || !ks || !kq || !out) {
		fprintf(stderr, "bench_matmul_beam: %s\n", heur && searched ? "out of memory" : err);
		return 1;
	}
	int bad = one_run(searched, &s, out, &ts[0], &ks[0]) || one_run(heur, &s, out, &th[0], &kh[0]); /* warm-up, search */
	for (int p = 0; p < pairs && !bad; p++) {
		for (int k = 0; k < 2 && !bad; k++)
			bad = (p + k) % 2 ? one_run(searched, &s, out, &ts[p], &ks[p]) : one_run(heur, &s, out, &th[p], &kh[p]);
		q[p] = th[p] / ts[p];
		kq[p] = kh[p] / ks[p];
	}
	if (bad)
		return 1;
	eng_stats st;
	eng_get_stats(searched, &st);
	bench_sort(th, pairs);
	bench_sort(ts, pairs);
	bench_sort(q, pairs);
	bench_sort(kq, pairs);
	printf("matmul %s, %d pairs: heuristics median %.3f ms, searched median %.3f ms (%llu searched, %llu recorded); "
	       "heuristics / searched per pair: median %.3fx (quartiles %.3f..%.3f); kernel time only: median %.3fx "
	       "(quartiles %.3f..%.3f)\n",
	       argc > 1 ? argv[1] : "1024", pairs, th[pairs / 2], ts[pairs / 2], (unsigned long long)st.searches,
	       (unsigned long long)st.search_hits, q[pairs / 2], q[pairs / 4], q[3 * pairs / 4], kq[pairs / 2],
	       kq[pairs / 4], kq[3 * pairs / 4]);
	free(kh), free(ks), free(kq), free(out);
	free(th), free(ts), free(q);
	eng_ctx_destroy(searched);
	eng_ctx_destroy(heur);
	return 0;
}
