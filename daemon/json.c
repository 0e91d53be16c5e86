/* json.c: the daemon's error-message helper and JSON field readers, shared by every parser
 * (model specs, verbs, preloads). */
#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

bool dmn_name_valid(const char *s, size_t n)
{
	if (!s || !n || n > DMN_NAME_LEN_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
		      c == '-'))
			return false;
	}
	return true;
}

tsd_status dmn_bad(char *err, size_t errlen, tsd_status st, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return st;
}

const char *dmn_json_str(const cJSON *j, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

const char *dmn_json_unknown(const cJSON *obj, const char *const *known, size_t n)
{
	for (const cJSON *f = obj->child; f; f = f->next) {
		size_t k = 0;
		while (k < n && strcmp(f->string, known[k]))
			k++;
		if (k == n)
			return f->string;
	}
	return NULL;
}

bool dmn_json_numbers(const cJSON *a, int max, int *n)
{
	if (cJSON_IsNumber(a)) {
		*n = 1;
		return true;
	}
	*n = 0;
	if (!cJSON_IsArray(a))
		return false;
	for (const cJSON *e = a->child; e; e = e->next)
		if (!cJSON_IsNumber(e) || ++*n > max)
			return false;
	return *n > 0;
}
