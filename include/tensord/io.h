/* io.h: tensors to and from files: safetensors (state dicts) and IDX (MNIST-style data). */
#ifndef ENG_IO_H
#define ENG_IO_H

#include "engine.h"

/* A named tensor, as in a state dict. */
typedef struct eng_named {
	const char *name;
	eng_tensor *t;
} eng_named;

/* Realize the tensors and write them to path in the safetensors format (8-byte little-endian
 * header length, JSON header with dtype/shape/data_offsets, raw little-endian data), written
 * to a temporary file and renamed into place. Names must be unique and non-empty. */
eng_status eng_safetensors_save(eng_ctx *ctx, const char *path, const eng_named *ts, int n);

/* Load every tensor of a safetensors file. On success *out is a malloc'd array of *n entries
 * whose names are malloc'd too (free with eng_named_free); the tensors belong to the current
 * scope. Every header field is validated (dtypes, shapes, offsets inside the file, no
 * overlaps, sizes matching); any problem is an error naming the tensor and field. */
eng_status eng_safetensors_load(eng_ctx *ctx, const char *path, eng_named **out, int *n);
void eng_named_free(eng_named *ts, int n);

/* Load a file into existing tensors matched by name. Every mismatch (missing name, unexpected
 * name, dtype, shape) is reported in one error message; nothing is changed unless all match.
 * On success each tensor's contents are replaced by the file's. */
eng_status eng_safetensors_load_into(eng_ctx *ctx, const char *path, const eng_named *ts, int n);

/* Load an IDX file (as used by MNIST and Fashion-MNIST), gzip-compressed or raw, as a uint8
 * tensor of the file's shape. Only the unsigned-byte element type is accepted. Missing files,
 * bad magic numbers, absurd dimensions and truncated data are errors with the path in the
 * message. */
eng_tensor *eng_idx_load(eng_ctx *ctx, const char *path);

#endif
