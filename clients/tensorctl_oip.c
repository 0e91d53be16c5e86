/* tensorctl_oip.c: what the Open Inference Protocol clients of `tensorctl bench` share: the table
 * of protocols (http, grpc) and the protocol's names and sizes of a tensor's data. */
#include "tensorctl_oip.h"

#include <string.h>

const tctl_oip_ops *const tctl_oip_protocols[TCTL_OIP_COUNT] = {&tctl_oip_http, &tctl_oip_grpc};

const tctl_oip_ops *tctl_oip_find(const char *name)
{
	for (int i = 0; i < TCTL_OIP_COUNT; i++)
		if (!strcmp(tctl_oip_protocols[i]->name, name))
			return tctl_oip_protocols[i];
	return NULL;
}

const char *tctl_oip_dtype(tsd_dtype dt)
{
	static const char *const names[TSD_DTYPE_COUNT] = {
		[TSD_BOOL] = "BOOL", [TSD_U8] = "UINT8", [TSD_I32] = "INT32",
		[TSD_I64] = "INT64", [TSD_F16] = "FP16", [TSD_F32] = "FP32",
	};
	return tsd_dtype_valid(dt) && names[dt] ? names[dt] : "?";
}

size_t tctl_oip_nbytes(const tsd_tensor *t)
{
	size_t nb = tsd_dtype_size(t->dtype);
	for (int d = 0; d < t->ndim; d++)
		nb *= (size_t)t->shape[d];
	return nb;
}
