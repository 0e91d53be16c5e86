/* dtype.h: the element types of tensors as every part of tensord numbers them (the client API,
 * the wire's tsd_tensor, the engine, which names them ENG_* in eng_dtype.h), and the largest rank.
 * Promotion is a total order: bool < uint8 < int32 < int64 < float16 < float32. */
#ifndef TSD_DTYPE_H
#define TSD_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Dimensions of a tensor, at most. */
#define TSD_MAX_DIMS 8

/* The numbers are ABI: they cross the C boundary in tsd_tensor.dtype (the Python client's
 * ctypes too); the wire names them ("float32", tsd_dtype_name). */
typedef enum tsd_dtype {
	TSD_BOOL,
	TSD_U8,
	TSD_I32,
	TSD_I64,
	TSD_F16,
	TSD_F32,
	TSD_DTYPE_COUNT
} tsd_dtype;

/* The functions below are libtensord's (the client library). */

/* Bytes per element; 0 for an invalid value. */
size_t tsd_dtype_size(tsd_dtype dt);
/* Wire name, e.g. "float32"; "?" for an invalid value. Static string. */
const char *tsd_dtype_name(tsd_dtype dt);
/* Parse a name ("float32", "f32", "int64", ...); false (and *out untouched) if unknown. */
bool tsd_dtype_parse(const char *name, tsd_dtype *out);
bool tsd_dtype_valid(tsd_dtype dt);
bool tsd_dtype_is_float(tsd_dtype dt);
/* float16 elements hold IEEE binary16 bits. v rounded to the nearest float16 value (ties to
 * even; past the largest, Inf; NaN stays NaN), the bits of that value, and the value of bits h. */
double tsd_f16_round(double v);
uint16_t tsd_f16_bits(double v);
double tsd_f16_to_double(uint16_t h);

#endif
