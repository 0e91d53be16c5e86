/* io_limits.h: how much an untrusted file may make the loaders allocate, and the one place where
 * a context's memory limit sets that. Engine-private. */
#ifndef ENG_IO_LIMITS_H
#define ENG_IO_LIMITS_H

#include <stdint.h>

#include <tensord/io.h>

/* Bytes of tensor data one load may allocate when nothing tighter is set: 16 GiB (the most an
 * IDX file could always describe, 2^34 uint8 elements). */
#define ENG_IO_MAX_BYTES ((uint64_t)1 << 34)

/* Tensors one safetensors header may name. cJSON builds the whole tree before anything can be
 * checked, ~200 bytes per JSON value: 1.5 M tensors in a 99 MB header took 2.1 GB. 100 000 is
 * far past real checkpoints (a 70B-parameter model has ~1 000) and keeps the tree near 150 MB. */
#define ENG_SAFETENSORS_MAX_TENSORS 100000
/* JSON values (objects, arrays, strings, numbers) a header may hold: 16 per tensor is a full
 * 8-dimensional entry plus room for __metadata__. Counted before cJSON parses anything. */
#define ENG_SAFETENSORS_MAX_VALUES ((uint64_t)16 * ENG_SAFETENSORS_MAX_TENSORS)

/* The most tensor bytes a load through ctx may allocate (io_limits.c): ENG_IO_MAX_BYTES, or what
 * the context's memory limit (eng_ctx_opts.mem_limit) has left if that is less, so a hostile
 * file is refused before anything is allocated. */
uint64_t eng_io_max_bytes(const eng_ctx *ctx);

/* eng_idx_load with an explicit cap on the data bytes (the fuzz target and tests use small
 * ones): a file whose dimensions describe more is an ENG_ENOMEM error naming both sizes,
 * before anything is allocated. */
eng_tensor *eng_idx_load_max(eng_ctx *ctx, const char *path, uint64_t max_bytes);

#endif
