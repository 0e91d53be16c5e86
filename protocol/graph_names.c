/* graph_names.c: the graph format's op names (graph_ops.def), for every part of the protocol
 * library (parse, inference, batch check, build) and the daemon that names a node's op. */
#include "proto_graph.h"

static const char *const names[PROTO_G_COUNT] = {
#define PG_OP(e, n, l, h, a) [PROTO_G_##e] = #n,
#include "graph_ops.def"
#undef PG_OP
};

const char *proto_gop_name(proto_gop op)
{
	return (unsigned)op < PROTO_G_COUNT ? names[op] : "?";
}
