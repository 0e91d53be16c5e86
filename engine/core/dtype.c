/* dtype.c: element type table and promotion rules (see eng_dtype.h). */
#include <tensord/eng_dtype.h>

#include <string.h>

static const struct {
	const char *name, *alias;
	size_t size;
} dtype_table[ENG_DTYPE_COUNT] = {
	[ENG_BOOL] = {"bool", "b1", 1},     [ENG_U8] = {"uint8", "u8", 1},
	[ENG_I32] = {"int32", "i32", 4},    [ENG_I64] = {"int64", "i64", 8},
	[ENG_F16] = {"float16", "f16", 2},  [ENG_F32] = {"float32", "f32", 4},
};

bool eng_dtype_valid(eng_dtype dt) { return (unsigned)dt < ENG_DTYPE_COUNT; }

size_t eng_dtype_size(eng_dtype dt) { return eng_dtype_valid(dt) ? dtype_table[dt].size : 0; }

const char *eng_dtype_name(eng_dtype dt) { return eng_dtype_valid(dt) ? dtype_table[dt].name : "?"; }

bool eng_dtype_parse(const char *name, eng_dtype *out)
{
	for (int i = 0; i < ENG_DTYPE_COUNT; i++) {
		if (!strcmp(name, dtype_table[i].name) || !strcmp(name, dtype_table[i].alias)) {
			*out = (eng_dtype)i;
			return true;
		}
	}
	return false;
}

bool eng_dtype_is_float(eng_dtype dt) { return dt == ENG_F16 || dt == ENG_F32; }
bool eng_dtype_is_int(eng_dtype dt) { return dt == ENG_U8 || dt == ENG_I32 || dt == ENG_I64; }
bool eng_dtype_is_unsigned(eng_dtype dt) { return dt == ENG_BOOL || dt == ENG_U8; }
eng_dtype eng_dtype_promote(eng_dtype a, eng_dtype b) { return a > b ? a : b; }
eng_dtype eng_dtype_float_of(eng_dtype a) { return a == ENG_F16 ? ENG_F16 : ENG_F32; }
int eng_dtype_bits(eng_dtype dt) { return (int)eng_dtype_size(dt) * 8; }
