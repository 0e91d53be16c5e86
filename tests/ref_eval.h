/* ref_eval.h: a slow, obviously-correct interpreter of the engine's op graph, written apart from
 * the codegen path; the tests compare every realized result with it. */
#ifndef TEST_REF_EVAL_H
#define TEST_REF_EVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device/device.h"
#include "realize/realize.h"
#include "tensor/tensor.h"

/* A dense row-major array of a node's shape. Exactly one of f and i is non-NULL: f for float
 * dtypes (values already rounded to the dtype), i for bool (0/1) and integer dtypes (in the
 * dtype's range: uint8 0..255, int32 sign-extended). */
typedef struct ref_array {
	eng_dtype dtype;
	int ndim;
	int64_t shape[ENG_MAX_DIMS];
	int64_t numel;
	double *f;
	int64_t *i;
} ref_array;

/* Evaluate node n op by op from its leaves (a realized non-BUFFER node's cached buffer is
 * ignored). Fills *out, which the caller frees with ref_free. Returns false (out zeroed, a
 * note on stderr) for an op or dtype the reference does not know or on out of memory. */
bool ref_eval(const eng_node *n, ref_array *out);
/* Options of ref_eval_opts. */
typedef struct ref_override {
	const eng_node *node; /* takes these values instead of being evaluated from its sources */
	const double *vals;   /* numel(node) values, row-major (converted to node's dtype) */
} ref_override;

typedef struct ref_opts {
	/* float64 mode: float results are kept in double, never rounded to float32 / float16
	 * (after ops, reductions, casts between float dtypes and int -> float casts) */
	bool f64;
	const ref_override *over; /* nover entries (NULL if none); nodes must differ */
	int nover;
} ref_opts;

/* ref_eval with options; opts NULL is ref_eval. Overrides let a caller perturb one input
 * element (finite differences) without touching device buffers. The options are only read. */
bool ref_eval_opts(const eng_node *n, const ref_opts *opts, ref_array *out);
/* ref_eval of t's node. */
bool ref_tensor(const eng_tensor *t, ref_array *out);
/* Free the arrays of a (NULL and zeroed arrays are fine). */
void ref_free(ref_array *a);
/* Element k (row-major) as double. */
double ref_get(const ref_array *a, int64_t k);

/* Decode numel elements of dtype dt stored row-major at src into *out (caller frees). */
bool ref_decode(eng_dtype dt, int ndim, const int64_t *shape, const void *src, ref_array *out);

/* Compare got with want: equal shapes, exact for bool/int; for floats |g-w| <= atol + rtol*|w|,
 * NaN matches NaN and inf matches inf of the same sign. On mismatch writes a message naming
 * the first bad index and both values into msg. */
bool ref_match(const ref_array *got, const ref_array *want, double rtol, double atol, char *msg,
	       size_t len);

/* Evaluate the reference of each of ts first, realize them together (one eng_realize), read
 * each back and compare with ref_match. Returns false with a message saying which tensor and
 * element differ, or why realizing or reading failed. */
bool ref_compare_n(eng_tensor *const *ts, int n, double rtol, double atol, char *msg, size_t len);
/* ref_compare_n of one tensor. */
bool ref_compare(eng_tensor *t, double rtol, double atol, char *msg, size_t len);

#endif
