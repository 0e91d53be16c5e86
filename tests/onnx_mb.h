/* onnx_mb.h: building small ONNX models in tests (onnx_mb.c): fill an mb with mb_init, add
 * inputs, outputs, initializers and nodes (strings and arrays are borrowed, not copied), then
 * mb_pack it into the bytes of a .onnx file. */
#ifndef TEST_ONNX_MB_H
#define TEST_ONNX_MB_H

#include <stddef.h>
#include <stdint.h>

#include "onnx.pb-c.h"

typedef struct mb {
	Onnx__ModelProto m;
	Onnx__GraphProto g;
	Onnx__OperatorSetIdProto op;
	Onnx__OperatorSetIdProto *ops[1];
	Onnx__NodeProto nodes[8], *np[8];
	Onnx__TensorProto inits[4], *ip[4];
	Onnx__ValueInfoProto in[4], out[4], *inp[4], *outp[4];
	Onnx__TypeProto ty[8];
	Onnx__TypeProto__Tensor tt[8];
	Onnx__TensorShapeProto shp[8];
	Onnx__TensorShapeProto__Dimension dims[8][4], *dimp[8][4];
	int nty;
} mb;

void mb_init(mb *b, int64_t opset);
/* A tensor value of element type elem named name with dims d (-1: the symbol "batch"). */
Onnx__ValueInfoProto *mb_value(mb *b, Onnx__ValueInfoProto *v, const char *name, int elem, int nd, const int64_t *d);
/* A float graph input or output. */
void mb_input(mb *b, const char *name, int nd, const int64_t *d);
void mb_output(mb *b, const char *name, int nd, const int64_t *d);
Onnx__NodeProto *mb_node(mb *b, const char *op, int nin, char **in, int nout, char **out);
Onnx__TensorProto *mb_init_f32(mb *b, const char *name, int nd, int64_t *dims, float *data, size_t n);
Onnx__TensorProto *mb_init_i64(mb *b, const char *name, int nd, int64_t *dims, int64_t *data, size_t n);
/* Attribute a: ints (n of them, borrowed), or one int (ints[0]) when n is 0; a float. */
Onnx__AttributeProto *mb_attr_ints(Onnx__AttributeProto *a, const char *name, int64_t *ints, size_t n);
Onnx__AttributeProto *mb_attr_f(Onnx__AttributeProto *a, const char *name, float v);
Onnx__AttributeProto *mb_attr_s(Onnx__AttributeProto *a, const char *name, const char *v); /* v kept, not copied */
/* The packed model (malloc'd; asserts) and its length. */
uint8_t *mb_pack(mb *b, size_t *len);

#endif
