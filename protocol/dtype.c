/* dtype.c: dtype.h's functions of the client API (libtensord), the engine's dtype table under the
 * client's names: one table (engine/core/dtype.c, f16.c) for the wire, the client and the engine. */
#include <tensord/eng_dtype.h>

size_t tsd_dtype_size(tsd_dtype dt) { return eng_dtype_size(dt); }
const char *tsd_dtype_name(tsd_dtype dt) { return eng_dtype_name(dt); }
bool tsd_dtype_parse(const char *name, tsd_dtype *out) { return name && eng_dtype_parse(name, out); }
bool tsd_dtype_valid(tsd_dtype dt) { return eng_dtype_valid(dt); }
bool tsd_dtype_is_float(tsd_dtype dt) { return eng_dtype_is_float(dt); }
double tsd_f16_round(double v) { return eng_f16_round(v); }
uint16_t tsd_f16_bits(double v) { return eng_f16_bits(v); }
double tsd_f16_to_double(uint16_t h) { return eng_f16_to_double(h); }
