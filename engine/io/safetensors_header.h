/* safetensors_header.h: the safetensors header shared by the loader and the saver: reading and
 * validating it from a file, and writing one for a list of tensors. Engine-private. */
#ifndef ENG_SAFETENSORS_HEADER_H
#define ENG_SAFETENSORS_HEADER_H

#include <stdint.h>
#include <sys/types.h>

#include <tensord/io.h>
#include "util/strbuf.h"

/* The reference implementation's limit on the JSON header. */
#define ENG_SAFETENSORS_MAX_HEADER ((uint64_t)100 * 1000 * 1000)

/* One tensor of a file: data is [begin, end) bytes after the header. */
typedef struct eng_safetensors_entry {
	char *name; /* malloc'd */
	eng_dtype dtype;
	int ndim;
	int64_t shape[ENG_MAX_DIMS];
	uint64_t begin, end;
} eng_safetensors_entry;

/* A validated header. Entries are in the file's order; by_name indexes them sorted by name. */
typedef struct eng_safetensors_header {
	eng_safetensors_entry *e;
	int *by_name;
	int n;
	uint64_t data_start; /* file offset of the data: 8 + header length */
	uint64_t data_size;  /* bytes of data after the header */
} eng_safetensors_header;

/* Read and validate the header of the open file fd (path is for messages). Every problem is
 * an error naming the path, the tensor and the field: ENG_EIO for an unreadable or truncated
 * file, ENG_EDTYPE for dtypes the engine lacks, ENG_ERANGE for too many elements, ENG_EINVAL
 * for anything else. On failure h is left empty (nothing to free). */
eng_status eng_safetensors_header_read(eng_ctx *ctx, const char *path, int fd, eng_safetensors_header *h);
/* Free what eng_safetensors_header_read allocated; h is left empty. */
void eng_safetensors_header_free(eng_safetensors_header *h);

/* The safetensors dtype name ("F32", ...) of an engine dtype. */
const char *eng_safetensors_dtype_name(eng_dtype dt);

/* Append to out the JSON header for tensors written back to back in the order ord[0..n) of ts
 * (data offsets follow from the shapes), padded with spaces to a multiple of 8 bytes. */
void eng_safetensors_header_write(eng_strbuf *out, const eng_named *ts, const int *ord, int n);

/* Format a shape as "[2, 3]" into buf (truncated to len). */
void eng_safetensors_fmt_shape(char *buf, size_t len, int ndim, const int64_t *shape);

/* pread until n bytes, end of file or an error (retrying EINTR): bytes read, or -1 (errno). */
ssize_t eng_safetensors_pread_all(int fd, void *buf, size_t n, uint64_t off);

/* True if s[0..n) is well-formed UTF-8 (no overlong forms, surrogates or code points past
 * U+10FFFF). */
bool eng_safetensors_utf8_valid(const char *s, size_t n);

#endif
