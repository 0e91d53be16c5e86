/* graph_builder.h: what the graph builder's files share (graph.c: nodes, ids, errors;
 * graph_ops.c: the typed node functions). Not installed. */
#ifndef TSD_GRAPH_BUILDER_H
#define TSD_GRAPH_BUILDER_H

#include <tensord/graph.h>

/* Keep the first failure on g (later ones are dropped); returns -1. */
int gb_fail(tsd_graph *g, tsd_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Append a node {"id", "op", "in"} (id NULL: generated) after checking the graph is not failed,
 * the input count for a known op and every handle; returns it to add attributes to, or NULL
 * with the failure kept. */
cJSON *gb_node(tsd_graph *g, const char *op, const char *id, const int *in, int nin);
/* The handle of the node just made (o from gb_node, NULL: -1); attrs_ok false: out of memory. */
int gb_done(tsd_graph *g, cJSON *o, bool attrs_ok);
/* o[key] = v[0..n) as a JSON array; false when out of memory. */
bool gb_ints(cJSON *o, const char *key, const int64_t *v, int n);

#endif
