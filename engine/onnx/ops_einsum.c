/* ops_einsum.c: ONNX Einsum (a label repeated within an operand takes its diagonal): an ellipsis is first rewritten
 * into placeholder labels (aligned from the right, broadcast), then every operand is permuted and
 * reshaped to the equation's label space, multiplied (broadcast), the labels not in the output
 * summed, the rest permuted into the output's order. */
#include <stdio.h>
#include <string.h>

#include "onnx_int.h"
#include "ops.h"

/* Parse one operand's labels (letters, spaces skipped) from *p up to ',' '-' or the end. */
static int labels(const char **p, char *out)
{
	int k = 0;
	for (; **p && **p != ',' && **p != '-'; (*p)++) {
		char c = **p;
		if (c == ' ')
			continue;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '7')) || k == ENG_MAX_DIMS)
			return -1;
		out[k++] = c;
	}
	return k;
}

/* Rewrite the ellipses of eq into placeholder labels '0'.. (the broadcast dims, aligned from
 * the right), with an explicit output; false if the equation does not fit the inputs. */
static bool expand_ellipsis(onx_node *n, const char *eq, char *out, size_t cap)
{
	const char *arrow = strstr(eq, "->");
	size_t lhs_len = arrow ? (size_t)(arrow - eq) : strlen(eq);
	int e[64], E = 0, op = 0, letters = 0;
	bool has = false;
	/* pass 1: ellipsis ranks */
	for (size_t i = 0; i <= lhs_len; i++) {
		if (i == lhs_len || eq[i] == ',') {
			if (op >= 64 || op >= n->n_in || !onx_in(n, op))
				return false;
			int r = eng_ndim(onx_in(n, op));
			e[op] = has ? r - letters : 0;
			if (e[op] < 0 || (!has && r != letters))
				return false;
			E = e[op] > E ? e[op] : E;
			op++, letters = 0, has = false;
		} else if (!strncmp(eq + i, "...", 3)) {
			has = true;
			i += 2;
		} else if (eq[i] != ' ')
			letters++;
	}
	if (E > 8)
		return false;
	size_t k = 0;
	op = 0;
	for (size_t i = 0; i < lhs_len && k + 10 < cap; i++) {
		if (eq[i] == ',') {
			op++;
			out[k++] = ',';
		} else if (!strncmp(eq + i, "...", 3)) {
			for (int d = E - e[op]; d < E; d++)
				out[k++] = (char)('0' + d);
			i += 2;
		} else if (eq[i] != ' ')
			out[k++] = eq[i];
	}
	out[k++] = '-', out[k++] = '>';
	if (arrow) {
		for (const char *q = arrow + 2; *q && k + 10 < cap; q++) {
			if (!strncmp(q, "...", 3)) {
				for (int d = 0; d < E; d++)
					out[k++] = (char)('0' + d);
				q += 2;
			} else if (*q != ' ')
				out[k++] = *q;
		}
	} else { /* implicit: the broadcast dims, then the letters used once, alphabetically */
		for (int d = 0; d < E; d++)
			out[k++] = (char)('0' + d);
		for (char c = 'A'; c <= 'z' && k + 2 < cap; c++) {
			int cnt = 0;
			for (size_t i = 0; i < lhs_len; i++)
				cnt += eq[i] == c;
			if (cnt == 1 && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
				out[k++] = c;
		}
	}
	out[k] = 0;
	return k + 10 < cap;
}

/* The diagonal of t over its axes j < k (the same size d): axis k dropped, axis j indexing
 * t[.., i, .., i, ..]. The two axes moved last and flattened, the d*d elements padded to
 * d*(d+1) and read d+1 apart: element i*(d+1) of the flat pair is (i, i). NULL with the error
 * set on a size mismatch. */
static eng_tensor *diagonal(onx_node *n, eng_tensor *t, int j, int k)
{
	int r = eng_ndim(t), perm[ENG_MAX_DIMS], np = 0;
	const int64_t *sh = eng_shape(t);
	int64_t d = sh[j];
	if (sh[k] != d) {
		onx_fail(n, ENG_ESHAPE, "a repeated label's axes %d and %d have sizes %lld and %lld", j, k, (long long)d, (long long)sh[k]);
		return NULL;
	}
	int64_t s[ENG_MAX_DIMS], pads[ENG_MAX_DIMS][2] = {{0}}, rg[ENG_MAX_DIMS][2];
	for (int a = 0; a < r; a++)
		if (a != j && a != k) {
			s[np] = sh[a];
			perm[np++] = a;
		}
	perm[np] = j, perm[np + 1] = k;
	const int m = np; /* the other axes, then the flat pair */
	s[m] = d * d;
	eng_tensor *x = eng_reshape(eng_permute(t, perm), m + 1, s);
	pads[m][1] = d;
	x = eng_pad(x, pads);
	s[m] = d, s[m + 1] = d + 1;
	x = eng_reshape(x, m + 2, s);
	for (int a = 0; a < m + 2; a++)
		rg[a][0] = 0, rg[a][1] = a == m + 1 ? 1 : s[a];
	x = eng_reshape(eng_shrink(x, rg), m + 1, s);
	/* back to t's order without axis k: the diagonal at j */
	int back[ENG_MAX_DIMS];
	for (int a = 0, o = 0; a < r; a++) {
		if (a == k)
			continue;
		back[o++] = a == j ? m : a < j ? a : a < k ? a - 1 : a - 2;
	}
	return eng_permute(x, back);
}

eng_status onx_op_einsum(onx_node *n)
{
	char raw[256], eq[512], lab[64][ENG_MAX_DIMS], outl[ENG_MAX_DIMS], all[ENG_MAX_DIMS + 1];
	onx_attr_s(n, "equation", "", raw, sizeof(raw));
	if (strstr(raw, "...")) {
		if (!expand_ellipsis(n, raw, eq, sizeof(eq)))
			return onx_fail(n, ENG_EINVAL, "equation '%s' does not match the inputs", raw);
	} else
		snprintf(eq, sizeof(eq), "%s", raw);
	int nop = n->n_in, nl[64], nall = 0, nout = -1;
	eng_tensor *ops[64];
	const char *p = eq;
	for (int i = 0; i < nop; i++) {
		nl[i] = labels(&p, lab[i]);
		if (nl[i] < 0 || !onx_in(n, i) || nl[i] != eng_ndim(onx_in(n, i)))
			return onx_fail(n, ENG_EINVAL, "equation '%s' does not match input %d", eq, i);
		ops[i] = onx_in(n, i);
		/* a label repeated within an operand: its diagonal, one label for both axes */
		for (int k = 1; k < nl[i]; k++)
			for (int j = 0; j < k; j++)
				if (lab[i][j] == lab[i][k]) {
					if (!(ops[i] = diagonal(n, ops[i], j, k)))
						return eng_error(n->ctx);
					memmove(&lab[i][k], &lab[i][k + 1], (size_t)(nl[i] - k - 1));
					nl[i]--, k--;
					break;
				}
		for (int k = 0; k < nl[i]; k++) {
			if (!memchr(all, lab[i][k], (size_t)nall)) {
				if (nall == ENG_MAX_DIMS)
					return onx_fail(n, ENG_ENOTSUP, "more than %d labels", ENG_MAX_DIMS);
				all[nall++] = lab[i][k];
			}
		}
		if (i < nop - 1) {
			if (*p != ',')
				return onx_fail(n, ENG_EINVAL, "equation '%s' names %d operands, not %d", eq, i + 1, nop);
			p++;
		}
	}
	if (*p == '-') {
		if (p[1] != '>')
			return onx_fail(n, ENG_EINVAL, "equation '%s'", eq);
		p += 2;
		nout = labels(&p, outl);
		if (nout < 0 || *p)
			return onx_fail(n, ENG_EINVAL, "equation '%s'", eq);
	} else if (*p)
		return onx_fail(n, ENG_EINVAL, "equation '%s'", eq);
	else { /* implicit: labels written once in the equation (a diagonal's twice), alphabetically */
		nout = 0;
		for (char c = 'A'; c <= 'z'; c++) {
			int cnt = 0;
			for (const char *q = eq; *q; q++)
				cnt += *q == c;
			if (cnt == 1)
				outl[nout++] = c;
		}
	}
	/* every operand as rank nall in the order of all */
	int64_t dim[ENG_MAX_DIMS];
	for (int k = 0; k < nall; k++)
		dim[k] = -1;
	eng_tensor *prod = NULL;
	for (int i = 0; i < nop; i++) {
		eng_tensor *t = ops[i];
		int perm[ENG_MAX_DIMS], np = 0;
		int64_t sh[ENG_MAX_DIMS];
		for (int k = 0; k < nall; k++) {
			const char *at = memchr(lab[i], all[k], (size_t)nl[i]);
			sh[k] = 1;
			if (!at)
				continue;
			int ax = (int)(at - lab[i]);
			perm[np++] = ax;
			sh[k] = eng_shape(t)[ax];
			if (dim[k] >= 0 && dim[k] != sh[k] && sh[k] != 1 && dim[k] != 1)
				return onx_fail(n, ENG_ESHAPE, "label '%c' has sizes %lld and %lld", all[k], (long long)dim[k], (long long)sh[k]);
			if (dim[k] < 0 || dim[k] == 1)
				dim[k] = sh[k];
		}
		t = eng_reshape(eng_permute(t, perm), nall, sh);
		prod = prod ? eng_mul(prod, t) : t;
	}
	int red[ENG_MAX_DIMS], nred = 0, keep[ENG_MAX_DIMS], nkeep = 0;
	for (int k = 0; k < nall; k++) {
		if (memchr(outl, all[k], (size_t)nout))
			keep[nkeep++] = k;
		else
			red[nred++] = k;
	}
	if (nkeep != nout)
		return onx_fail(n, ENG_EINVAL, "output labels of '%s' not among the inputs'", eq);
	eng_tensor *y = nred ? eng_sum(prod, red, nred, false) : prod;
	/* y's axes are keep[] in order; permute to outl */
	int perm[ENG_MAX_DIMS];
	for (int o = 0; o < nout; o++)
		for (int k = 0; k < nkeep; k++)
			if (all[keep[k]] == outl[o])
				perm[o] = k;
	if (y && nout > 1)
		y = eng_permute(y, perm);
	if (y && eng_tensor_dtype(y) != eng_tensor_dtype(onx_in(n, 0)))
		y = eng_cast(y, eng_tensor_dtype(onx_in(n, 0)));
	n->out[0] = y;
	return onx_check(n, y);
}
