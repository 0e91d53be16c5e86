/* weights.c: the robot brain's weights as named float32 tensors: a seeded random init and the
 * safetensors file format (8-byte header length, JSON header, raw little-endian data). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "weights.h"

int rb_weights_init(rb_weights *w, uint64_t seed)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 3;
	memset(w, 0, sizeof(*w));
	for (int k = 0; k < RB_NPARAMS; k++) {
		int nd;
		rb_param_shape(k, &nd, w->shape[k]);
		w->ndim[k] = nd;
		w->numel[k] = w->shape[k][0] * (nd > 1 ? w->shape[k][1] : 1);
		w->data[k] = malloc(sizeof(float) * (size_t)w->numel[k]);
		if (!w->data[k])
			return -1;
		/* embedding rows (emb, prev_emb, pos) uniform in +-0.5, w_out with variance 1/H, biases 0 */
		double scale = k == 4 ? sqrt(3.0 / RB_H) : nd > 1 ? 0.5 : 0;
		for (int64_t i = 0; i < w->numel[k]; i++) {
			s ^= s << 13, s ^= s >> 7, s ^= s << 17;
			w->data[k][i] = (float)(scale * ((double)(s >> 11) / 4503599627370496.0 - 1.0));
		}
	}
	return 0;
}

void rb_weights_free(rb_weights *w)
{
	for (int k = 0; k < RB_NPARAMS; k++)
		free(w->data[k]);
	memset(w, 0, sizeof(*w));
}

void rb_weights_tensors(const rb_weights *w, tsd_tensor *ts)
{
	for (int k = 0; k < RB_NPARAMS; k++) {
		ts[k] = (tsd_tensor){.name = rb_param_names[k], .dtype = TSD_F32, .ndim = w->ndim[k],
				     .data = w->data[k], .nbytes = sizeof(float) * (size_t)w->numel[k]};
		memcpy(ts[k].shape, w->shape[k], sizeof(w->shape[k]));
	}
}

int rb_weights_from_reply(rb_weights *w, const tsd_reply *r)
{
	memset(w, 0, sizeof(*w));
	for (int k = 0; k < RB_NPARAMS; k++) {
		int nd;
		rb_param_shape(k, &nd, w->shape[k]);
		w->ndim[k] = nd;
		w->numel[k] = w->shape[k][0] * (nd > 1 ? w->shape[k][1] : 1);
		const tsd_tensor *t = tsd_reply_find(r, rb_param_names[k]);
		size_t nb = sizeof(float) * (size_t)w->numel[k];
		if (!t || t->dtype != TSD_F32 || t->nbytes != nb || !(w->data[k] = malloc(nb))) {
			fprintf(stderr, "model.save: no float32 tensor \"%s\" of %zu bytes\n", rb_param_names[k], nb);
			rb_weights_free(w);
			return -1;
		}
		memcpy(w->data[k], t->data, nb);
	}
	return 0;
}

int rb_weights_save(const rb_weights *w, const char *path)
{
	char hdr[2048];
	size_t at = 0, off = 0;
	at += (size_t)snprintf(hdr + at, sizeof(hdr) - at, "{");
	for (int k = 0; k < RB_NPARAMS; k++) {
		size_t nb = sizeof(float) * (size_t)w->numel[k];
		at += (size_t)snprintf(hdr + at, sizeof(hdr) - at, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld", k ? "," : "",
				       rb_param_names[k], (long long)w->shape[k][0]);
		if (w->ndim[k] > 1)
			at += (size_t)snprintf(hdr + at, sizeof(hdr) - at, ",%lld", (long long)w->shape[k][1]);
		at += (size_t)snprintf(hdr + at, sizeof(hdr) - at, "],\"data_offsets\":[%zu,%zu]}", off, off + nb);
		off += nb;
	}
	at += (size_t)snprintf(hdr + at, sizeof(hdr) - at, "}");
	while (at % 8) /* the data starts 8-aligned */
		hdr[at++] = ' ';
	FILE *f = fopen(path, "wb");
	if (!f) {
		perror(path);
		return -1;
	}
	uint8_t len[8];
	for (int b = 0; b < 8; b++)
		len[b] = (uint8_t)((uint64_t)at >> (8 * b));
	bool ok = fwrite(len, 8, 1, f) == 1 && fwrite(hdr, at, 1, f) == 1;
	for (int k = 0; k < RB_NPARAMS && ok; k++) /* floats are written little-endian (x86, arm) */
		ok = fwrite(w->data[k], sizeof(float), (size_t)w->numel[k], f) == (size_t)w->numel[k];
	if (fclose(f) || !ok) {
		fprintf(stderr, "%s: write failed\n", path);
		return -1;
	}
	return 0;
}
