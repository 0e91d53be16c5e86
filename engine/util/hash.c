/* hash.c: the string hash (64-bit FNV-1a) that names kernels and keys the program caches. */
#include "hash.h"

uint64_t eng_hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ull;
	}
	return h;
}

