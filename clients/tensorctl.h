/* tensorctl.h: what tensorctl's files share: tensors read from and written as JSON
 * ({"dtype", "shape", "data"}) or raw bytes, and whole files read into memory. */
#ifndef TCTL_H
#define TCTL_H

#include <stdbool.h>
#include <stddef.h>

#include <tensord/client.h>

#define TCTL_MAX_TENSORS 64
#define TCTL_FILE_MAX	 ((size_t)1 << 30) /* bytes of an input file */

/* Tensors to send, owning their names and data. Zero it before use; free with tctl_inputs_free. */
typedef struct tctl_inputs {
	int n;
	tsd_tensor t[TCTL_MAX_TENSORS];
} tctl_inputs;

void tctl_inputs_free(tctl_inputs *in);

/* The whole file at path, NUL-terminated (*len bytes before the NUL); free() it. NULL with the
 * reason in err[errlen] when it cannot be read or is over TCTL_FILE_MAX bytes. */
char *tctl_read_file(const char *path, size_t *len, char *err, size_t errlen);

/* Add every member of obj, {"NAME": {"dtype", "shape", "data"}, ...}, to in. data: numbers (true
 * and false for bool), nested arrays flattened in row-major order, exactly numel of them.
 * False with the reason (naming the tensor) in err. */
bool tctl_inputs_from_json(tctl_inputs *in, const cJSON *obj, char *err, size_t errlen);

/* Add a tensor named name of dtype and shape ("1,4"; "" is a scalar) over data[len] (raw
 * little-endian elements; len must be numel * dtype size). Takes data (freed with in, or here
 * on failure). False with the reason in err. */
bool tctl_inputs_raw(tctl_inputs *in, const char *name, const char *dtype, const char *shape,
		     void *data, size_t len, char *err, size_t errlen);

/* t as {"dtype", "shape", "data": [flat numbers]} (int64 beyond 2^53 loses precision, NaN and
 * Inf print as null); the caller owns it. NULL when out of memory. */
cJSON *tctl_tensor_json(const tsd_tensor *t);

#endif
