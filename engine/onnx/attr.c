/* attr.c: node attributes (typed access with defaults, checked types) and the node-prefixed
 * error messages every op reports through. */
#include <stdio.h>
#include <string.h>

#include "core/context.h"
#include "onnx_int.h"

eng_status onx_fail(onx_node *n, eng_status code, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return eng_set_error(n->ctx, code, "onnx: node '%.200s' (%.100s, opset %lld): %s", n->pb->name ? n->pb->name : "",
			     n->pb->op_type ? n->pb->op_type : "", (long long)n->opset, msg);
}

eng_status onx_check(onx_node *n, eng_tensor *t)
{
	if (t)
		return ENG_OK;
	if (eng_error(n->ctx))
		return eng_error(n->ctx);
	return onx_fail(n, ENG_EINVAL, "the engine returned no tensor");
}

const Onnx__AttributeProto *onx_attr(const onx_node *n, const char *name)
{
	for (size_t i = 0; i < n->pb->n_attribute; i++) {
		const Onnx__AttributeProto *a = n->pb->attribute[i];
		if (a->name && !strcmp(a->name, name))
			return a;
	}
	return NULL;
}

int64_t onx_attr_i(const onx_node *n, const char *name, int64_t def)
{
	const Onnx__AttributeProto *a = onx_attr(n, name);
	return a && a->has_i ? a->i : def;
}

double onx_attr_f(const onx_node *n, const char *name, double def)
{
	const Onnx__AttributeProto *a = onx_attr(n, name);
	if (a && a->has_f)
		return a->f;
	if (a && a->has_i) /* some exporters write an int for a float attribute */
		return (double)a->i;
	return def;
}

const char *onx_attr_s(const onx_node *n, const char *name, const char *def, char *buf, size_t len)
{
	const Onnx__AttributeProto *a = onx_attr(n, name);
	if (!a || !a->has_s)
		return def;
	size_t k = a->s.len < len - 1 ? a->s.len : len - 1;
	memcpy(buf, a->s.data, k);
	buf[k] = 0;
	return buf;
}

eng_status onx_attr_ints(onx_node *n, const char *name, int64_t *out, int max, int *count)
{
	const Onnx__AttributeProto *a = onx_attr(n, name);
	*count = -1;
	if (!a)
		return ENG_OK;
	if (a->n_ints > (size_t)max)
		return onx_fail(n, ENG_ENOTSUP, "attribute '%s': %zu values (at most %d)", name, a->n_ints, max);
	for (size_t i = 0; i < a->n_ints; i++)
		out[i] = a->ints[i];
	*count = (int)a->n_ints;
	return ENG_OK;
}

eng_status onx_attr_floats(onx_node *n, const char *name, float *out, int max, int *count)
{
	const Onnx__AttributeProto *a = onx_attr(n, name);
	*count = -1;
	if (!a)
		return ENG_OK;
	if (a->n_floats > (size_t)max)
		return onx_fail(n, ENG_ENOTSUP, "attribute '%s': %zu values (at most %d)", name, a->n_floats, max);
	for (size_t i = 0; i < a->n_floats; i++)
		out[i] = a->floats[i];
	*count = (int)a->n_floats;
	return ENG_OK;
}
