/* shape.c: checked shape arithmetic shared by the API builders and the file loaders. */
#include "context.h"

bool eng_shape_numel(int ndim, const int64_t *shape, int64_t *out)
{
	const int64_t limit = (int64_t)1 << 40;
	int64_t p = 1; /* product of the non-zero dims */
	bool zero = false;
	for (int i = 0; i < ndim; i++) {
		if (shape[i] < 0)
			return false;
		if (shape[i] == 0) {
			zero = true;
			continue;
		}
		if (p > limit / shape[i]) /* also catches one dim past the limit */
			return false;
		p *= shape[i];
	}
	/* A zero makes the tensor empty, but the other dims are still bounded together: a permute
	 * moves the zero last, and products taken left to right (eng_node_numel, strides) would
	 * overflow on [2^40, 2^40, 0]. */
	*out = zero ? 0 : p;
	return true;
}
