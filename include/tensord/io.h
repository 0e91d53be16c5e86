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
 * scope. The file is untrusted input: only a regular file is read; every header field is
 * validated (dtypes, shapes, offsets inside the file, no overlaps, sizes matching, names
 * non-empty and without NUL characters, at most 100 000 tensors); any problem is an error
 * naming the file, tensor and field. Tensor data goes straight into the tensors' buffers. */
eng_status eng_safetensors_load(eng_ctx *ctx, const char *path, eng_named **out, int *n);
void eng_named_free(eng_named *ts, int n);

/* Load a file into existing tensors matched by name. Every mismatch (missing name, unexpected
 * name, dtype, shape) is reported in one error message; nothing is changed unless all match.
 * On success each tensor's contents are replaced by the file's. */
eng_status eng_safetensors_load_into(eng_ctx *ctx, const char *path, const eng_named *ts, int n);

/* Load an IDX file (as used by MNIST and Fashion-MNIST), gzip-compressed or raw, as a uint8
 * tensor of the file's shape. Only the unsigned-byte element type is accepted. Every error
 * message starts "idx: <path>: ": missing or non-regular files (a FIFO is refused, not waited
 * on), bad magic numbers, dimensions past the engine's shape limit or the loader's byte cap
 * (ENG_ENOMEM, 16 GiB today), truncated or excess data. Nothing is allocated for data the file
 * does not hold: a raw file's length is checked first, a gzip stream's buffer is allocated
 * once an eighth of its data has arrived; the data is read into the tensor's buffer. */
eng_tensor *eng_idx_load(eng_ctx *ctx, const char *path);

#endif
