/* onnx_models.h: the real-world ONNX models the ONNX benchmarks run (files from PyPI packages in
 * bench/.venv-onnx) and their inputs at a batch size, made in one place so that every mode
 * (in-process now, the daemon later) and the onnxruntime peer (via the .npy files) see the same. */
#ifndef TSD_BENCH_ONNX_MODELS_H
#define TSD_BENCH_ONNX_MODELS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cJSON.h>
#include <tensord/engine.h>

#define OBM_BATCH (-1) /* in a shape: the batch size */
#define OBM_MAX_IN 4

/* How an input is filled: uniform noise in [-1, 1) (an image), a 16 kHz audio chunk (a tone plus
 * noise, one per stream), zeros, or one constant value. */
typedef enum { OBM_NOISE, OBM_AUDIO, OBM_ZEROS, OBM_CONST } obm_fill;

typedef struct obm_input {
	const char *name; /* the graph input's name */
	eng_dtype dtype;
	int ndim;
	int64_t shape[4]; /* OBM_BATCH where the batch goes */
	obm_fill fill;
	double value;     /* OBM_CONST */
} obm_input;

typedef struct obm_model {
	const char *name; /* short name in tables and file names (at most 10 characters) */
	const char *file; /* path under the venv's site-packages */
	int nin;
	obm_input in[OBM_MAX_IN];
	bool named; /* run only when named on the command line (bench/compare_quant.sh's models) */
} obm_model;

/* PaddleOCR's text direction classifier (opset 11, MobileNetV3-like) on rapidocr's 3x48x192
 * crops; silero-vad's opset-18 model on 512-sample chunks at 16 kHz, one stream per batch row,
 * with its LSTM state [2, batch, 128]; and silero-vad's default model (opset 16: If nodes around
 * ONNX LSTM) on the same. sr must be 16000 or 8000 (the graphs branch on it: the importer reads
 * it at build time, ENG_ONNX_SPECIALIZE). */
static const obm_model obm_models[] = {
	{"ppocr-cls", "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx", 1,
	 {{"x", ENG_F32, 4, {OBM_BATCH, 3, 48, 192}, OBM_NOISE, 0}}, false},
	{"silero-vad", "silero_vad/data/silero_vad_op18_ifless.onnx", 3,
	 {{"input", ENG_F32, 2, {OBM_BATCH, 512}, OBM_AUDIO, 0},
	  {"sr", ENG_I64, 0, {0}, OBM_CONST, 16000},
	  {"state", ENG_F32, 3, {2, OBM_BATCH, 128}, OBM_NOISE, 0}}, false},
	{"silero-v16", "silero_vad/data/silero_vad.onnx", 3,
	 {{"input", ENG_F32, 2, {OBM_BATCH, 512}, OBM_AUDIO, 0},
	  {"sr", ENG_I64, 0, {0}, OBM_CONST, 16000},
	  {"state", ENG_F32, 3, {2, OBM_BATCH, 128}, OBM_NOISE, 0}}, false},
	/* ppocr-cls quantized by onnxruntime's tools (bench/quantize_models.py writes them into the
	 * venv's site-packages, tensord_quant/): static QDQ and dynamic */
	{"ppocr-qdq", "tensord_quant/ppocr-cls-qdq.onnx", 1, {{"x", ENG_F32, 4, {OBM_BATCH, 3, 48, 192}, OBM_NOISE, 0}}, true},
	{"ppocr-dyn", "tensord_quant/ppocr-cls-dyn.onnx", 1, {{"x", ENG_F32, 4, {OBM_BATCH, 3, 48, 192}, OBM_NOISE, 0}}, true},
};
#define OBM_COUNT ((int)(sizeof(obm_models) / sizeof(obm_models[0])))

/* The shape of in at batch size bs into shape; returns the element count. */
static inline int64_t obm_shape(const obm_input *in, int64_t bs, int64_t *shape)
{
	int64_t n = 1;
	for (int d = 0; d < in->ndim; d++)
		n *= shape[d] = in->shape[d] == OBM_BATCH ? bs : in->shape[d];
	return n;
}

/* The parts of m's model.load (format "onnx") that come from its inputs: shapes ({input: dims}, the
 * batch axis -1) and constants ({input: value}, NULL when it has none). Caller owns both. */
static inline cJSON *obm_shapes_json(const obm_model *m)
{
	cJSON *shapes = cJSON_CreateObject();
	for (int k = 0; shapes && k < m->nin; k++) {
		const obm_input *in = &m->in[k];
		if (in->fill == OBM_CONST)
			continue;
		cJSON *a = cJSON_AddArrayToObject(shapes, in->name);
		for (int d = 0; a && d < in->ndim; d++)
			cJSON_AddItemToArray(a, cJSON_CreateNumber(in->shape[d] == OBM_BATCH ? -1 : (double)in->shape[d]));
	}
	return shapes;
}

static inline cJSON *obm_constants_json(const obm_model *m)
{
	cJSON *c = NULL;
	for (int k = 0; k < m->nin; k++)
		if (m->in[k].fill == OBM_CONST && (c || (c = cJSON_CreateObject())))
			cJSON_AddNumberToObject(c, m->in[k].name, m->in[k].value);
	return c;
}

/* m's whole model.load object for a daemon whose models_dir is the venv's site-packages:
 * name, format "onnx", file, shapes, constants and batching {"max": batch_max}; NULL when out of
 * memory. Caller owns it (bench/compare_oip.sh loads it with tensorctl load). */
static inline cJSON *obm_load_json(const obm_model *m, int batch_max)
{
	cJSON *o = cJSON_CreateObject(), *c = obm_constants_json(m), *b;
	if (!o || !cJSON_AddStringToObject(o, "name", m->name) || !cJSON_AddStringToObject(o, "format", "onnx") ||
	    !cJSON_AddStringToObject(o, "file", m->file)) {
		cJSON_Delete(o);
		cJSON_Delete(c);
		return NULL;
	}
	cJSON_AddItemToObject(o, "shapes", obm_shapes_json(m));
	if (c)
		cJSON_AddItemToObject(o, "constants", c);
	if ((b = cJSON_AddObjectToObject(o, "batching")))
		cJSON_AddNumberToObject(b, "max", batch_max);
	return o;
}

/* Deterministic uniform [0, 1) from a 64-bit state (xorshift64*). */
static inline double obm_rand(uint64_t *s)
{
	*s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
	return (double)((*s * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

/* Fill data (n elements of in->dtype, float32 or int64) for input k at batch size bs. The noise
 * depends on the model, input and batch size only. */
static inline void obm_fill_data(const obm_model *m, int k, int64_t bs, void *data, int64_t n)
{
	const obm_input *in = &m->in[k];
	uint64_t s = 1469598103934665603ull; /* FNV-1a of the name, then k and bs mixed in */
	for (const char *c = m->name; *c; c++)
		s = (s ^ (unsigned char)*c) * 1099511628211ull;
	s ^= (uint64_t)(k + 1) << 40 ^ (uint64_t)bs;
	for (int64_t i = 0; i < n; i++) {
		double v = 0;
		if (in->fill == OBM_NOISE)
			v = obm_rand(&s) * 2 - 1;
		else if (in->fill == OBM_AUDIO) { /* row r: a tone of 200 + 50 r Hz at 16 kHz, noise */
			int64_t len = in->shape[in->ndim - 1], r = i / len, t = i % len;
			v = 0.3 * sin(2 * 3.141592653589793 * (200.0 + 50.0 * (double)r) * (double)t / 16000.0) +
			    0.05 * (obm_rand(&s) * 2 - 1);
		} else if (in->fill == OBM_CONST)
			v = in->value;
		if (in->dtype == ENG_I64)
			((int64_t *)data)[i] = (int64_t)v;
		else
			((float *)data)[i] = (float)v;
	}
}

/* Write n elements (float32 or int64) of the given shape as a NumPy .npy file (format 1.0, C
 * order), for the onnxruntime peer. Returns 0, or -1 when the file cannot be written. */
static inline int obm_write_npy(const char *path, eng_dtype dt, int ndim, const int64_t *shape, const void *data,
				int64_t n)
{
	char hdr[256], dims[160] = "";
	size_t dl = 0;
	for (int d = 0; d < ndim; d++)
		dl += (size_t)snprintf(dims + dl, sizeof(dims) - dl, "%lld,%s", (long long)shape[d],
				       d + 1 < ndim ? " " : "");
	if (ndim > 1) /* a 1-d tuple keeps its comma, longer ones lose the trailing one */
		dims[dl - 1] = 0;
	int hl = snprintf(hdr, sizeof(hdr), "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
			  dt == ENG_I64 ? "<i8" : "<f4", dims);
	int pad = 64 - (10 + hl + 1) % 64;
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	uint16_t len = (uint16_t)(hl + pad + 1);
	fwrite("\x93NUMPY\x01\x00", 1, 8, f);
	fwrite(&len, 2, 1, f);
	fprintf(f, "%s%*s\n", hdr, pad, "");
	size_t esz = dt == ENG_I64 ? 8 : 4;
	bool ok = fwrite(data, esz, (size_t)n, f) == (size_t)n;
	return fclose(f) == 0 && ok ? 0 : -1;
}

#endif
