/* map.c: a small string -> int hash map (open addressing, linear probing) for the importer's
 * value and initializer names; keys are borrowed from the protobuf. */
#include <stdlib.h>
#include <string.h>

#include "onnx_int.h"
#include "util/hash.h"

static bool grow(onx_map *m)
{
	uint32_t cap = m->cap ? m->cap * 2 : 64;
	const char **keys = calloc(cap, sizeof(*keys));
	int *vals = calloc(cap, sizeof(*vals));
	if (!keys || !vals) {
		free(keys);
		free(vals);
		return false;
	}
	for (uint32_t i = 0; i < m->cap; i++) {
		if (!m->keys[i])
			continue;
		uint32_t h = (uint32_t)eng_hash_str(m->keys[i]) & (cap - 1);
		while (keys[h])
			h = (h + 1) & (cap - 1);
		keys[h] = m->keys[i];
		vals[h] = m->vals[i];
	}
	free(m->keys);
	free(m->vals);
	m->keys = keys;
	m->vals = vals;
	m->cap = cap;
	return true;
}

bool onx_map_put(onx_map *m, const char *key, int val)
{
	if ((m->n + 1) * 2 > m->cap && !grow(m))
		return false;
	uint32_t h = (uint32_t)eng_hash_str(key) & (m->cap - 1);
	while (m->keys[h] && strcmp(m->keys[h], key))
		h = (h + 1) & (m->cap - 1);
	if (!m->keys[h])
		m->n++;
	m->keys[h] = key;
	m->vals[h] = val;
	return true;
}

int onx_map_get(const onx_map *m, const char *key)
{
	if (!m->cap)
		return -1;
	uint32_t h = (uint32_t)eng_hash_str(key) & (m->cap - 1);
	while (m->keys[h]) {
		if (!strcmp(m->keys[h], key))
			return m->vals[h];
		h = (h + 1) & (m->cap - 1);
	}
	return -1;
}

void onx_map_free(onx_map *m)
{
	free(m->keys);
	free(m->vals);
	*m = (onx_map){0};
}
