/* onnx.h: importing ONNX models: a .onnx file becomes a lazy engine graph built from the Tensor
 * API, so imported models fuse, schedule-cache and JIT like any other. */
#ifndef ENG_ONNX_H
#define ENG_ONNX_H

#include "engine.h"

typedef struct eng_onnx_model eng_onnx_model;

/* Load flags. */
/* float64 (double) tensors, inputs, outputs and Cast targets become float32: the engine has no
 * float64, and with this flag such a model runs in single precision instead of being refused
 * (eng_onnx_narrowed then says it happened). Without it float64 is ENG_ENOTSUP. */
#define ENG_ONNX_F64_AS_F32 1u

/* Load a model file. The file is untrusted input: every field is checked (dtypes, dims, data
 * lengths, node order, attributes); external data files must lie inside the model's directory
 * (no absolute paths, no "..", no symlink leading out). Initializers become engine tensors once
 * (owned by the model, kept in the context's root scope, freed by eng_onnx_free). On failure
 * returns NULL and writes a message naming the file, and where it applies the node, op, opset
 * and attribute, to err (if non-NULL). The model belongs to ctx and must be freed before it. */
eng_onnx_model *eng_onnx_load(eng_ctx *ctx, const char *path, unsigned flags, char *err, size_t errlen);
/* The same from memory (copied; data may be freed after the call). External data is read from
 * dir, or refused when dir is NULL. */
eng_onnx_model *eng_onnx_load_mem(eng_ctx *ctx, const void *data, size_t len, const char *dir,
				  unsigned flags, char *err, size_t errlen);
/* Free the model and its initializers (NULL is allowed). Tensors built from it stay valid. */
void eng_onnx_free(eng_onnx_model *m);

/* A graph input (initializers excluded) or output. */
typedef struct eng_onnx_io {
	const char *name;       /* valid while the model lives */
	int onnx_type;          /* TensorProto.DataType */
	bool dtype_ok;          /* the engine has this element type */
	eng_dtype dtype;        /* when dtype_ok */
	int ndim;               /* -1: rank unknown */
	int64_t shape[ENG_MAX_DIMS];     /* -1 for a symbolic or unknown dim */
	const char *dim_names[ENG_MAX_DIMS]; /* the symbol (e.g. "batch") or NULL */
} eng_onnx_io;

int eng_onnx_input_count(const eng_onnx_model *m);
int eng_onnx_output_count(const eng_onnx_model *m);
/* Fill *out for input (output) i; ENG_EINVAL for an index out of range. */
eng_status eng_onnx_input(const eng_onnx_model *m, int i, eng_onnx_io *out);
eng_status eng_onnx_output(const eng_onnx_model *m, int i, eng_onnx_io *out);
/* The opset the model imports for domain ("" or "ai.onnx" is the default domain); 0 if none. */
int64_t eng_onnx_opset(const eng_onnx_model *m, const char *domain);

/* eng_onnx_build flags. */
/* A value needed while building (a Reshape's shape, a Slice's starts, ...) that comes from a
 * graph input is read from the given input tensor (realizing it) instead of being an error;
 * the built graph then holds only for those input values (eng_onnx_input_static says which
 * inputs were read). Without it such a value must be a constant: an initializer, a Constant
 * node or something computed from them (folded at build time). */
#define ENG_ONNX_SPECIALIZE 1u
/* Inputs may have other sizes than the file's static dims (the rank must agree), and outputs'
 * declared dims are not checked: exporters often fix an example's sizes (a batch of 1). An op
 * that cannot take the new sizes fails the build as for any other bad shape. */
#define ENG_ONNX_FREE_DIMS 2u

/* Build the lazy engine graph of the model for the given inputs: inputs[i] for graph input i
 * (eng_onnx_input_count of them, dtypes as declared; shapes must agree with the declared static
 * dims unless ENG_ONNX_FREE_DIMS). On success outputs[i] holds output i (eng_onnx_output_count
 * of them), new tensors in the caller's current scope; intermediate tensors are freed. Nothing
 * is computed except values needed at build time, and constants folded: a node computed from
 * initializers and Constant nodes alone (not a view or a fill, not too large) is computed at the
 * first build and kept by the model, so that later builds and JIT replays read it instead of
 * recomputing it. On failure returns the status, with the context's error
 * (eng_errmsg) naming the node, op, opset and attribute; ENG_ENOTSUP for an op, attribute
 * value or dtype the importer does not handle (never a wrong answer). The context's error is
 * left set, as for any engine call. */
eng_status eng_onnx_build(eng_onnx_model *m, eng_tensor *const *inputs, eng_tensor **outputs,
			  unsigned flags);
/* Whether float64 values were narrowed to float32 (ENG_ONNX_F64_AS_F32) at load or build. */
bool eng_onnx_narrowed(const eng_onnx_model *m);
/* Whether the last build read input i's values (ENG_ONNX_SPECIALIZE): a value read while
 * building was computed from it (the importer tracks which inputs each value comes from, through
 * If, Loop and Scan bodies too). A caller replaying the built graph (eng_jit) must rebuild when
 * such an input changes. */
bool eng_onnx_input_static(const eng_onnx_model *m, int i);

/* Decode one serialized TensorProto (as in ONNX's test_data_set_N/input_K.pb files) into a new
 * tensor in the current scope. name (if non-NULL) receives the tensor's name (truncated to
 * namelen). Same checks as initializers; external data is refused; flags as for loads
 * (ENG_ONNX_F64_AS_F32). NULL on failure, with a message in err. */
eng_tensor *eng_onnx_tensor_load_mem(eng_ctx *ctx, const void *data, size_t len, unsigned flags,
				     char *name, size_t namelen, char *err, size_t errlen);
/* The same from a file (a regular file, read whole; "missing" and read errors in err). */
eng_tensor *eng_onnx_tensor_load(eng_ctx *ctx, const char *path, unsigned flags, char *name, size_t namelen, char *err,
				 size_t errlen);

#endif
