/* node.h: the op graph. Nodes are interned (hash-consed), immutable and reference-counted;
 * a node may cache the buffer holding its realized value, which never changes its meaning. */
#ifndef ENG_NODE_H
#define ENG_NODE_H

#include <stdint.h>

#include <tensord/engine.h>

typedef enum eng_op {
#define ENG_OP(name, kind, nsrc) ENG_OP_##name,
#include "ops.def"
#undef ENG_OP
	ENG_OP_COUNT
} eng_op;

typedef enum eng_op_kind {
	ENG_KIND_LEAF,
	ENG_KIND_UNARY,
	ENG_KIND_BINARY,
	ENG_KIND_TERNARY,
	ENG_KIND_REDUCE,
	ENG_KIND_MOVEMENT,
	ENG_KIND_BUFFEROP,
	ENG_KIND_COUNT
} eng_op_kind;

const char *eng_op_name(eng_op op);
eng_op_kind eng_op_kind_of(eng_op op);
int eng_op_nsrc(eng_op op);

/* A scalar constant: f for float dtypes, i for integer and bool dtypes. */
typedef union eng_const_value {
	double f;
	int64_t i;
} eng_const_value;

typedef struct eng_buffer eng_buffer;
typedef struct eng_graph eng_graph;

typedef struct eng_node eng_node;
typedef struct eng_vjp eng_vjp;
struct eng_node {
	eng_op op;
	eng_dtype dtype;
	uint8_t ndim;
	uint8_t nsrc;
	int8_t dev; /* device index its value lives on; -1: none of its own (constants), follows use */
	int64_t shape[ENG_MAX_DIMS];
	eng_node *src[3];
	union {
		eng_const_value c;                    /* CONST; BUFFER: c.i is the buffer version */
		uint32_t axes;                   /* RSUM/RMAX/RPROD/FLIP: bit d set = axis d */
		int axis;                        /* INDEX */
		int8_t perm[ENG_MAX_DIMS];       /* PERMUTE: output axis d reads source axis perm[d] */
		int64_t pairs[ENG_MAX_DIMS][2];  /* PAD: (before, after); SHRINK: [begin, end) */
		int dev;                         /* COPY: target device index */
	} arg;
	eng_buffer *buf; /* BUFFER: its storage (owned ref); others: realized value or NULL */
	eng_vjp *vjp;    /* a composite's own gradient rule (owned), or NULL: see below */
	/* interning */
	uint64_t hash;
	uint32_t refs;
	uint32_t id; /* unique, increasing in creation order */
	eng_node *next; /* hash chain */
	eng_graph *graph;
};

/* Node constructor arguments; zero-initialise then fill. */
typedef struct eng_node_desc {
	eng_op op;
	eng_dtype dtype;
	int ndim;
	const int64_t *shape;
	eng_node *src[3];
	eng_const_value c;
	uint32_t axes;
	int axis;
	const int8_t *perm;
	const int64_t (*pairs)[2];
	int dev;
	eng_buffer *buf; /* BUFFER only: the node takes a new reference */
} eng_node_desc;

/* A composite function (e.g. conv2d) may give the node holding its result a gradient rule of
 * its own: autograd then differentiates the node with respect to in[] by calling rule, instead
 * of walking the primitive ops that compute it. The node owns the record and holds a reference
 * on each in[] (they are ancestors of the node, so no cycle forms). */
#define ENG_VJP_MAX_IN 3
#define ENG_VJP_MAX_ARGS 8
struct eng_vjp {
	/* Fill out[i] with the gradient for in[i] (NULL: none) given g, the gradient of n. */
	void (*rule)(eng_ctx *ctx, const eng_node *n, const eng_vjp *v, eng_tensor *g, eng_tensor **out);
	int nin;
	eng_node *in[ENG_VJP_MAX_IN];
	int64_t args[ENG_VJP_MAX_ARGS];
};

/* Attach a copy of v to n (taking references on v->in). A node that already has a rule keeps
 * it: equal nodes compute equal values, so either rule is right. Returns false on ENOMEM. */
bool eng_node_set_vjp(eng_node *n, const eng_vjp *v);

/* The intern table. */
eng_graph *eng_graph_create(void);
/* Frees the table; all nodes must have been released. Returns the count of leaked nodes. */
size_t eng_graph_destroy(eng_graph *g);
/* Computed values cached on nodes whose buffer lives on dev (a failed device) are forgotten,
 * so rebuilding an expression computes it again; buffer nodes (data) keep theirs. */
struct eng_device;
void eng_graph_forget_values_on(eng_graph *g, const struct eng_device *dev);
size_t eng_graph_live_nodes(const eng_graph *g);

/* Return the unique node for desc with one new reference for the caller (NULL on ENOMEM).
 * Does no validation: callers (the tensor layer) check shapes and dtypes first. */
eng_node *eng_node_get(eng_graph *g, const eng_node_desc *d);
eng_node *eng_node_ref(eng_node *n);
void eng_node_unref(eng_node *n);
int64_t eng_node_numel(const eng_node *n);

/* Buffers: created by the device layer (device.h); these manage the reference count. */

/* Row-major contiguous strides for a shape (in elements). */
void eng_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);

/* Print a node and its sources, indented, to f. */
void eng_node_dump(const eng_node *n, void *file);

#endif
