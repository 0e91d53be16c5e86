/* onnx_mb.c: ONNX models built in tests with protobuf-c (the generated onnx.pb-c.h): a graph of
 * up to 8 nodes, 4 initializers, 4 inputs and outputs, packed to the bytes of a .onnx file. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_mb.h"

void mb_init(mb *b, int64_t opset)
{
	memset(b, 0, sizeof(*b));
	onnx__model_proto__init(&b->m);
	onnx__graph_proto__init(&b->g);
	onnx__operator_set_id_proto__init(&b->op);
	b->op.domain = "";
	b->op.has_version = 1;
	b->op.version = opset;
	b->ops[0] = &b->op;
	b->m.has_ir_version = 1;
	b->m.ir_version = 8;
	b->m.n_opset_import = 1;
	b->m.opset_import = b->ops;
	b->m.graph = &b->g;
	b->g.name = "g";
	b->g.node = b->np;
	b->g.initializer = b->ip;
	b->g.input = b->inp;
	b->g.output = b->outp;
}

/* A float tensor value named name with the given dims (-1: the symbol "batch"). */
Onnx__ValueInfoProto *mb_value(mb *b, Onnx__ValueInfoProto *v, const char *name, int elem, int nd, const int64_t *d)
{
	int k = b->nty++;
	onnx__value_info_proto__init(v);
	onnx__type_proto__init(&b->ty[k]);
	onnx__type_proto__tensor__init(&b->tt[k]);
	onnx__tensor_shape_proto__init(&b->shp[k]);
	v->name = (char *)name;
	v->type = &b->ty[k];
	b->ty[k].value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
	b->ty[k].tensor_type = &b->tt[k];
	b->tt[k].has_elem_type = 1;
	b->tt[k].elem_type = elem;
	b->tt[k].shape = &b->shp[k];
	b->shp[k].n_dim = (size_t)nd;
	b->shp[k].dim = b->dimp[k];
	for (int i = 0; i < nd; i++) {
		onnx__tensor_shape_proto__dimension__init(&b->dims[k][i]);
		if (d[i] < 0) {
			b->dims[k][i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
			b->dims[k][i].dim_param = "batch";
		} else {
			b->dims[k][i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
			b->dims[k][i].dim_value = d[i];
		}
		b->dimp[k][i] = &b->dims[k][i];
	}
	return v;
}

void mb_input(mb *b, const char *name, int nd, const int64_t *d)
{
	b->inp[b->g.n_input] = mb_value(b, &b->in[b->g.n_input], name, 1, nd, d);
	b->g.n_input++;
}

void mb_output(mb *b, const char *name, int nd, const int64_t *d)
{
	b->outp[b->g.n_output] = mb_value(b, &b->out[b->g.n_output], name, 1, nd, d);
	b->g.n_output++;
}

Onnx__NodeProto *mb_node(mb *b, const char *op, int nin, char **in, int nout, char **out)
{
	Onnx__NodeProto *n = &b->nodes[b->g.n_node];
	onnx__node_proto__init(n);
	n->op_type = (char *)op;
	n->name = (char *)op;
	n->n_input = (size_t)nin;
	n->input = in;
	n->n_output = (size_t)nout;
	n->output = out;
	b->np[b->g.n_node++] = n;
	return n;
}

/* The next initializer: name, element type and dims (borrowed); the caller sets the data. */
static Onnx__TensorProto *next_init(mb *b, const char *name, int type, int nd, int64_t *dims)
{
	Onnx__TensorProto *t = &b->inits[b->g.n_initializer];
	onnx__tensor_proto__init(t);
	t->name = (char *)name;
	t->has_data_type = 1;
	t->data_type = type;
	t->n_dims = (size_t)nd;
	t->dims = dims;
	b->ip[b->g.n_initializer++] = t;
	return t;
}

Onnx__TensorProto *mb_init_f32(mb *b, const char *name, int nd, int64_t *dims, float *data, size_t n)
{
	Onnx__TensorProto *t = next_init(b, name, 1, nd, dims);
	t->n_float_data = n;
	t->float_data = data;
	return t;
}

Onnx__TensorProto *mb_init_i64(mb *b, const char *name, int nd, int64_t *dims, int64_t *data, size_t n)
{
	Onnx__TensorProto *t = next_init(b, name, 7, nd, dims);
	t->n_int64_data = n;
	t->int64_data = data;
	return t;
}

Onnx__AttributeProto *mb_attr_ints(Onnx__AttributeProto *a, const char *name, int64_t *ints, size_t n)
{
	onnx__attribute_proto__init(a);
	a->name = (char *)name;
	a->has_type = 1;
	if (n) {
		a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
		a->n_ints = n;
		a->ints = ints;
	} else {
		a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
		a->has_i = 1;
		a->i = ints[0];
	}
	return a;
}

Onnx__AttributeProto *mb_attr_f(Onnx__AttributeProto *a, const char *name, float v)
{
	onnx__attribute_proto__init(a);
	a->name = (char *)name;
	a->has_type = 1;
	a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
	a->has_f = 1;
	a->f = v;
	return a;
}

Onnx__AttributeProto *mb_attr_s(Onnx__AttributeProto *a, const char *name, const char *v)
{
	onnx__attribute_proto__init(a);
	a->name = (char *)name;
	a->has_type = 1;
	a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
	a->has_s = 1;
	a->s.data = (uint8_t *)v;
	a->s.len = strlen(v);
	return a;
}

/* The packed model (malloc'd) and its length. */
uint8_t *mb_pack(mb *b, size_t *len)
{
	*len = onnx__model_proto__get_packed_size(&b->m);
	uint8_t *buf = malloc(*len + 1);
	ck_assert_ptr_nonnull(buf);
	onnx__model_proto__pack(&b->m, buf);
	return buf;
}

