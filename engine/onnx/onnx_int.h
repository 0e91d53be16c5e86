/* onnx_int.h: the ONNX importer's internal types: the loaded model, the values of a build, the
 * node context an op function gets, and the op table's entry. Engine-private (prefix onx_). */
#ifndef ENG_ONNX_INT_H
#define ENG_ONNX_INT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include <tensord/onnx.h>
#include "onnx.pb-c.h"

/* TensorProto.DataType values the importer names. */
enum {
	ONX_FLOAT = 1, ONX_UINT8 = 2, ONX_INT8 = 3, ONX_UINT16 = 4, ONX_INT16 = 5, ONX_INT32 = 6,
	ONX_INT64 = 7, ONX_STRING = 8, ONX_BOOL = 9, ONX_FLOAT16 = 10, ONX_DOUBLE = 11,
	ONX_UINT32 = 12, ONX_UINT64 = 13, ONX_BFLOAT16 = 16, ONX_FLOAT8E4M3FN = 17, ONX_FLOAT8E4M3FNUZ = 18,
	ONX_FLOAT8E5M2 = 19, ONX_FLOAT8E5M2FNUZ = 20, ONX_UINT4 = 21, ONX_INT4 = 22, ONX_FLOAT4E2M1 = 23,
	ONX_UINT2 = 25, ONX_INT2 = 26,
};

/* Limits on what an untrusted file may declare. */
#define ONX_MAX_FILE ((uint64_t)2 << 30)  /* a .onnx file (protobuf's own limit is 2 GiB) */
#define ONX_MAX_NODES 1000000
#define ONX_MAX_IO 65536                   /* inputs or outputs of a graph or node */
#define ONX_MAX_BUILT_NODES 2000000         /* nodes one build may create, loops unrolled */

/* Messages nested deeper than this are refused before protobuf-c unpacks them (pbdepth.c). */
#define ONX_MAX_NESTING 100
bool onx_pb_depth_ok(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len, int depth_left);

/* Name -> int map (open addressing; keys are borrowed, they live in the protobuf). */
typedef struct onx_map {
	const char **keys;
	int *vals;
	uint32_t cap, n;
} onx_map;
bool onx_map_put(onx_map *m, const char *key, int val); /* false: out of memory */
int onx_map_get(const onx_map *m, const char *key);     /* -1: absent */
void onx_map_free(onx_map *m);

struct eng_onnx_model {
	eng_ctx *ctx;
	Onnx__ModelProto *pb; /* owned */
	Onnx__GraphProto *g;
	char *dir;            /* realpath of the model's directory, or NULL: no external data */
	char *label;          /* the file name, for messages */
	int64_t opset;        /* of the default domain */
	int n_init;
	eng_tensor **init;    /* by initializer index; root scope, owned */
	onx_map init_map;     /* name -> initializer index */
	int n_in, n_out;
	eng_onnx_io *in, *out;
	int *in_graph_idx;    /* graph input index of each non-initializer input */
	bool *in_static;      /* inputs the last build read */
	int *order;           /* node indices in topological order */
	unsigned flags;       /* ENG_ONNX_F64_AS_F32 */
	bool narrowed;        /* a float64 became float32 */
	/* Constants a build computed (graph.c, fold): node output name -> index into folded (root
	 * scope, owned); later builds reuse them instead of computing them again. */
	onx_map fold_map;
	onx_map derived_map;  /* node's first output name -> index into folded: a value the op
			       * derived from its constant inputs (onx_derived_get/put) */
	eng_tensor **folded;
	int n_folded, cap_folded;
	int64_t folded_bytes;
};

/* One value of a build: its tensor, whether it is a constant (computed from initializers and
 * Constant nodes only, so that reading it while building is sound), and the graph inputs it is
 * computed from (ENG_ONNX_SPECIALIZE marks those static when it is read while building). */
typedef struct onx_val {
	eng_tensor *t;
	bool is_const;
	uint64_t deps; /* bit i: graph input i; bit 63: any input from 63 on */
	int narrow;    /* onx_narrow_of the ONNX type held widened in t (int8 in int32), or 0 */
} onx_val;

typedef struct onx_build onx_build;

/* What an op function sees: its node, the opset, inputs (NULL for an omitted optional one) and
 * where it puts outputs (it sets out[0..n_out-1]; an output left NULL is an error if used). */
typedef struct onx_node {
	onx_build *b;
	eng_ctx *ctx;
	const Onnx__NodeProto *pb;
	int64_t opset;
	int n_in, n_out;
	const onx_val *const *in;
	eng_tensor **out;
	bool out_const; /* every input constant: outputs are constants too */
	uint64_t deps;  /* the inputs' onx_val.deps together: the outputs'; ops that build subgraphs add
			 * what their bodies' outputs depend on */
	uint64_t *read; /* inputs the op function looked at (bit per input, set by onx_in and the other
			 * accessors): a given input it never read is refused after it returns, so that
			 * an input an opset added is never ignored silently */
} onx_node;

typedef eng_status (*onx_op_fn)(onx_node *n);

/* One row of the op table: op_type for opsets [since, until] of its domain, the function, the
 * attributes it understands (comma-separated; any other is ENG_ENOTSUP), and the domain (NULL:
 * the default one, "" or "ai.onnx"). */
typedef struct onx_op {
	const char *name;
	int since, until;
	onx_op_fn fn;
	const char *attrs;
	const char *domain;
} onx_op;

/* The entry for op name of domain (NULL, "" or "ai.onnx": the default) at that domain's opset
 * (optable.c); NULL if none, *name_known if another opset has one. */
const onx_op *onx_op_find(const char *domain, const char *name, int64_t opset, bool *name_known);

/* ---- errors (attr.c) ---- */
/* Set the context's error with "onnx: node 'name' (Op, opset N): " before the message. */
eng_status onx_fail(onx_node *n, eng_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The engine error of a NULL result, with the node prefixed if the error is not set yet. */
eng_status onx_check(onx_node *n, eng_tensor *t);

/* ---- attributes (attr.c) ---- */
const Onnx__AttributeProto *onx_attr(const onx_node *n, const char *name);
int64_t onx_attr_i(const onx_node *n, const char *name, int64_t def);
double onx_attr_f(const onx_node *n, const char *name, double def);
/* String attribute into buf (NUL-terminated), or def if absent. */
const char *onx_attr_s(const onx_node *n, const char *name, const char *def, char *buf, size_t len);
/* Ints attribute: count (or -1 if absent) and the values into out (at most max; more is an
 * error reported by the return value). */
eng_status onx_attr_ints(onx_node *n, const char *name, int64_t *out, int max, int *count);
eng_status onx_attr_floats(onx_node *n, const char *name, float *out, int max, int *count);

/* ---- inputs (graph.c) ---- */
/* onx_dtype with the model's flags (a Cast target, an attribute's dtype). */
bool onx_node_dtype(onx_node *n, int onnx_type, eng_dtype *out);
/* The model's load flags, and where a narrowing is recorded (for onx_tensor_decode). */
unsigned onx_model_flags(const onx_node *n);
bool *onx_model_narrowed(onx_node *n);
static inline eng_tensor *onx_in(const onx_node *n, int i)
{
	if (i >= 0 && i < n->n_in && i < 64 && n->read)
		*n->read |= 1ull << i;
	return i < n->n_in && n->in[i] ? n->in[i]->t : NULL;
}
/* The narrow ONNX type (int8, int16, uint16) input i holds widened to int32, or 0. */
int onx_in_narrow(const onx_node *n, int i);
/* Input i counts as read although the op does not use it: the spec says it has no effect in
 * the node's case (say why where this is called). */
static inline void onx_in_unused(const onx_node *n, int i) { (void)onx_in(n, i); }
/* Input i's values as int64 (it must be a constant, or a graph input with ENG_ONNX_SPECIALIZE):
 * at most max entries, *count of them; a missing input gives *count = -1. */
eng_status onx_in_ints(onx_node *n, int i, int64_t *out, int max, int *count);
/* ENG_OK if input i may be read while building (a constant, or ENG_ONNX_SPECIALIZE, which then
 * marks the inputs static); the error otherwise. */
eng_status onx_in_check_static(onx_node *n, int i);
/* The same as doubles (one scalar, e.g. Clip's min). */
eng_status onx_in_scalar(onx_node *n, int i, double *out, bool *present);

/* A value an op derives from its constant inputs alone (e.g. a rearranged weight), kept by the
 * model like a folded constant (graph.c), one per node: onx_derived_ok says whether input i
 * allows it (a constant computed from the model alone, outside Loop and Scan bodies);
 * onx_derived_get returns the kept value (a new handle) or NULL; onx_derived_put computes t,
 * keeps it and returns a new handle (t itself, lazy, when the model keeps too much already).
 * NULL with the context's error on failure. */
bool onx_derived_ok(const onx_node *n, int i);
eng_tensor *onx_derived_get(onx_node *n);
eng_tensor *onx_derived_put(onx_node *n, eng_tensor *t);

/* ---- tensors (tensor.c) ---- */
/* A regular file of at most ONX_MAX_FILE bytes, read whole (malloc'd, *len bytes); NULL with
 * "onnx: PATH: why" in err (a model, a TensorProto file). */
void *onx_read_file(const char *path, size_t *len, char *err, size_t errlen);
/* The engine dtype of a TensorProto.DataType; false if the engine has none. With
 * ENG_ONNX_F64_AS_F32 in flags, float64 maps to float32 and *narrowed (if non-NULL) is set. */
bool onx_dtype(int onnx_type, unsigned flags, bool *narrowed, eng_dtype *out);
int onx_type_of(eng_dtype dt);
const char *onx_type_name(int onnx_type);
/* ---- types held in a wider engine type (narrow.c) ---- */
/* int8, int16, uint16, int4, uint4, int2, uint2 are held as int32, uint32 as int64, bfloat16 and
 * the float8/float4 formats as float32 (all exact), their values wrapped or rounded back into
 * the type after every op that makes them (graph.c): the type if onnx_type is one, else 0. */
int onx_narrow_of(int onnx_type);
/* The bits an element of narrow type t takes in its own type (2 for int2 ... 64 for uint64), or 0. */
int onx_narrow_bits(int onnx_type);
/* t, held for narrow type nt, wrapped or rounded into it (the op results' rule). */
eng_tensor *onx_narrow_wrap(eng_ctx *ctx, eng_tensor *t, int nt);
/* Whether op reads uint64 values (held as int64's bits) as uint64 would: sign-blind ops only. */
bool onx_uint64_ok(const char *op);
/* Whether onnx_type is one of the float8 formats or float4e2m1. */
bool onx_minifloat(int onnx_type);
/* The value of code (its bits) in minifloat type t. */
float onx_minifloat_value(int t, unsigned code);
/* Float t rounded to nearest even into minifloat type nt: past its largest finite value to that
 * value when saturate, else to infinity (float8e5m2) or NaN (the others), as ONNX's Cast. */
eng_tensor *onx_minifloat_round(eng_ctx *ctx, const eng_tensor *t, int nt, bool saturate);
/* Decode a TensorProto into a new tensor in the current scope; external data from dir (NULL:
 * refused). ENG_ENOTSUP for an element type the engine lacks. Message in err. */
eng_status onx_tensor_decode(eng_ctx *ctx, const Onnx__TensorProto *tp, const char *dir, unsigned flags,
			     bool *narrowed, eng_tensor **out, char *err, size_t errlen);

/* Normalise axis (negatives from the end) against rank; false if out of range. */
static inline bool onx_axis(int64_t axis, int rank, int *out)
{
	if (axis < -rank || axis >= rank)
		return false;
	*out = (int)(axis < 0 ? axis + rank : axis);
	return true;
}

#endif
