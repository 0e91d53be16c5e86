/* graph_builder.h: what the graph builder's files share (graph.c: nodes, ids, errors;
 * graph_ops.c: the typed node functions). Not installed. */
#ifndef TSD_GRAPH_BUILDER_H
#define TSD_GRAPH_BUILDER_H

#include <tensord/graph.h>

/* Shared between the builder's files only: kept out of libtensord.so's exports (tsd_*). */
#ifndef TSD_HIDDEN
#define TSD_HIDDEN __attribute__((visibility("hidden")))
#endif

/* Keep the first failure on g (later ones are dropped); returns -1. */
TSD_HIDDEN int tsd_gb_fail(tsd_graph *g, tsd_status s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Append a node {"id", "op", "in"} (id NULL: generated) after checking the graph is not failed,
 * the input count for a known op and every handle; returns it to add attributes to, or NULL
 * with the failure kept. */
TSD_HIDDEN cJSON *tsd_gb_node(tsd_graph *g, const char *op, const char *id, const int *in, int nin);
/* The handle of the node just made (o from tsd_gb_node, NULL: -1); attrs_ok false: out of memory. */
TSD_HIDDEN int tsd_gb_done(tsd_graph *g, cJSON *o, bool attrs_ok);
/* o[key] = v[0..n) as a JSON array; false when out of memory. */
TSD_HIDDEN bool tsd_gb_ints(cJSON *o, const char *key, const int64_t *v, int n);

#endif
