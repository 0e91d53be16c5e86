/* shape.c: checked shape arithmetic shared by the API builders and the file loaders. */
#include "context.h"

bool eng_shape_numel(int ndim, const int64_t *shape, int64_t *out)
{
	const int64_t limit = (int64_t)1 << 40;
	int64_t p = 1;
	for (int i = 0; i < ndim; i++) {
		if (shape[i] < 0)
			return false;
		if (shape[i] == 0) {
			p = 0;
			continue;
		}
		if (p > limit / shape[i])
			return false;
		p *= shape[i];
	}
	/* a zero anywhere makes the product zero, but every dim must still be in range */
	for (int i = 0; i < ndim; i++)
		if (shape[i] > limit)
			return false;
	*out = p;
	return true;
}

