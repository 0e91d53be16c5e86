/* ops_nms.c: ONNX NonMaxSuppression. Its output size depends on the values, so boxes and scores
 * are read while building (constants, or inputs under ENG_ONNX_SPECIALIZE) and the selection is
 * computed here; the result is a constant int64 tensor (num_selected, 3). */
#include <stdlib.h>
#include <string.h>

#include "onnx_int.h"
#include "ops.h"

/* Input i as floats on the host (malloc'd), under the rule of build-time values. */
static eng_status host_floats(onx_node *n, int i, float **out)
{
	*out = NULL;
	eng_status s = onx_in_check_static(n, i);
	if (s)
		return s;
	eng_tensor *t = onx_in(n, i);
	int64_t k = eng_numel(t);
	if (k > ((int64_t)1 << 24))
		return onx_fail(n, ENG_ENOTSUP, "input %d holds %lld values", i, (long long)k);
	*out = malloc(sizeof(float) * (size_t)(k + 1));
	if (!*out)
		return onx_fail(n, ENG_ENOMEM, "out of memory");
	eng_tensor *c = eng_contiguous(eng_cast(t, ENG_F32));
	s = c ? eng_tensor_read(c, *out, sizeof(float) * (size_t)k) : eng_error(n->ctx);
	eng_tensor_free(c);
	if (s) {
		free(*out);
		*out = NULL;
	}
	return s;
}

typedef struct nms_sort {
	const float *score;
	int64_t *idx;
} nms_sort;

static float fmin2(float a, float b) { return a < b ? a : b; }
static float fmax2(float a, float b) { return a > b ? a : b; }

/* IoU of boxes a and b (4 floats each; center_point or corners in any order). */
static float iou(const float *a, const float *b, bool center)
{
	float ay1, ax1, ay2, ax2, by1, bx1, by2, bx2;
	if (center) {
		ax1 = a[0] - a[2] / 2, ax2 = a[0] + a[2] / 2, ay1 = a[1] - a[3] / 2, ay2 = a[1] + a[3] / 2;
		bx1 = b[0] - b[2] / 2, bx2 = b[0] + b[2] / 2, by1 = b[1] - b[3] / 2, by2 = b[1] + b[3] / 2;
	} else {
		ay1 = fmin2(a[0], a[2]), ay2 = fmax2(a[0], a[2]), ax1 = fmin2(a[1], a[3]), ax2 = fmax2(a[1], a[3]);
		by1 = fmin2(b[0], b[2]), by2 = fmax2(b[0], b[2]), bx1 = fmin2(b[1], b[3]), bx2 = fmax2(b[1], b[3]);
	}
	float iw = fmin2(ax2, bx2) - fmax2(ax1, bx1), ih = fmin2(ay2, by2) - fmax2(ay1, by1);
	if (iw <= 0 || ih <= 0)
		return 0;
	float inter = iw * ih, uni = (ax2 - ax1) * (ay2 - ay1) + (bx2 - bx1) * (by2 - by1) - inter;
	return uni > 0 ? inter / uni : 0;
}

eng_status onx_op_nms(onx_node *n)
{
	eng_tensor *bt = onx_in(n, 0), *st = onx_in(n, 1);
	if (!bt || !st)
		return onx_fail(n, ENG_EINVAL, "boxes and scores are needed");
	if (eng_ndim(bt) != 3 || eng_ndim(st) != 3 || eng_shape(bt)[2] != 4 || eng_shape(bt)[0] != eng_shape(st)[0] ||
	    eng_shape(bt)[1] != eng_shape(st)[2])
		return onx_fail(n, ENG_ESHAPE, "boxes must be (B, S, 4) and scores (B, C, S)");
	int64_t B = eng_shape(bt)[0], S = eng_shape(bt)[1], C = eng_shape(st)[1];
	double maxo = 0, iou_t = 0, score_t = 0;
	bool p1, p2, has_score;
	eng_status s;
	if ((s = onx_in_scalar(n, 2, &maxo, &p1)) || (s = onx_in_scalar(n, 3, &iou_t, &p2)) || (s = onx_in_scalar(n, 4, &score_t, &has_score)))
		return s;
	bool center = onx_attr_i(n, "center_point_box", 0) != 0;
	float *boxes, *scores;
	if ((s = host_floats(n, 0, &boxes)))
		return s;
	if ((s = host_floats(n, 1, &scores))) {
		free(boxes);
		return s;
	}
	int64_t cap = B * C * (maxo < (double)S ? (int64_t)maxo : S) + 1;
	int64_t *sel = malloc(sizeof(int64_t) * (size_t)(3 * cap)), *ord = malloc(sizeof(int64_t) * (size_t)(2 * S + 1));
	int64_t nsel = 0;
	for (int64_t b = 0; sel && ord && b < B; b++)
		for (int64_t c = 0; c < C; c++) {
			const float *sc = scores + (b * C + c) * S;
			int64_t m = 0;
			for (int64_t i = 0; i < S; i++)
				if (!has_score || sc[i] > score_t)
					ord[m++] = i;
			/* by score, descending; stable (insertion) */
			for (int64_t i = 1; i < m; i++) {
				int64_t t = ord[i], j = i;
				while (j > 0 && sc[ord[j - 1]] < sc[t]) {
					ord[j] = ord[j - 1];
					j--;
				}
				ord[j] = t;
			}
			int64_t *kept = ord + S, nk = 0;
			for (int64_t i = 0; i < m && nk < (int64_t)maxo; i++) {
				const float *bx = boxes + (b * S + ord[i]) * 4;
				bool keep = true;
				for (int64_t k = 0; k < nk && keep; k++)
					keep = iou(bx, boxes + (b * S + kept[k]) * 4, center) <= iou_t;
				if (!keep)
					continue;
				kept[nk++] = ord[i];
				sel[3 * nsel] = b, sel[3 * nsel + 1] = c, sel[3 * nsel + 2] = ord[i];
				nsel++;
			}
		}
	if (sel && ord)
		n->out[0] = eng_from_data(n->ctx, ENG_I64, 2, (int64_t[]){nsel, 3}, sel);
	else
		s = onx_fail(n, ENG_ENOMEM, "out of memory");
	free(sel), free(ord), free(boxes), free(scores);
	return s ? s : onx_check(n, n->out[0]);
}
