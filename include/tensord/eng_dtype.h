/* eng_dtype.h: the engine's names of dtype.h's element types (the same type and numbers) and its
 * dtype functions (engine/core/dtype.c, f16.c): sizes, names, promotion. Not installed. */
#ifndef ENG_DTYPE_H
#define ENG_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtype.h"

#define ENG_MAX_DIMS TSD_MAX_DIMS

typedef tsd_dtype eng_dtype;
#define ENG_BOOL TSD_BOOL
#define ENG_U8 TSD_U8
#define ENG_I32 TSD_I32
#define ENG_I64 TSD_I64
#define ENG_F16 TSD_F16
#define ENG_F32 TSD_F32
#define ENG_DTYPE_COUNT TSD_DTYPE_COUNT

/* Bytes per element. */
size_t eng_dtype_size(eng_dtype dt);
/* float16 buffers hold IEEE binary16 bits. v rounded to the nearest float16 value (ties to
 * even; past the largest, Inf; NaN stays NaN), the bits of that value (a NaN: the quiet NaN
 * 0x7e00 with v's sign), and the value of binary16 bits h. */
double eng_f16_round(double v);
uint16_t eng_f16_bits(double v);
double eng_f16_to_double(uint16_t h);
/* Short name, e.g. "float32"; "?" for an invalid value. */
const char *eng_dtype_name(eng_dtype dt);
/* Parse a name ("float32", "f32", "int64", ...); returns false if unknown. */
bool eng_dtype_parse(const char *name, eng_dtype *out);
bool eng_dtype_is_float(eng_dtype dt);
bool eng_dtype_is_int(eng_dtype dt); /* bool excluded */
bool eng_dtype_is_unsigned(eng_dtype dt); /* bool and uint8 */
bool eng_dtype_valid(eng_dtype dt);
/* Result type of a binary op on a and b: the larger in the order above. */
eng_dtype eng_dtype_promote(eng_dtype a, eng_dtype b);
/* Smallest float type that holds a's values for float math: float32 unless a is float16. */
eng_dtype eng_dtype_float_of(eng_dtype a);
/* Bit width of an integer or bool type (bool counts as 8). */
int eng_dtype_bits(eng_dtype dt);

#endif
