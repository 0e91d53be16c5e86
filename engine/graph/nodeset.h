/* nodeset.h: an insertion-ordered set of graph nodes (open addressing on the pointer): each
 * member's position in list is its number, so a walk can number the nodes it meets. */
#ifndef ENG_NODESET_H
#define ENG_NODESET_H

#include <stdbool.h>
#include <stddef.h>

#include "node.h"

typedef struct eng_nodeset {
	int *tab;               /* cap slots: member index + 1, 0 = empty */
	const eng_node **list;  /* members in insertion order */
	size_t n, cap;
} eng_nodeset;

/* Zero-initialise an eng_nodeset before use. */
bool eng_nodeset_has(const eng_nodeset *s, const eng_node *x);
/* x's position in list, or -1. */
int eng_nodeset_index(const eng_nodeset *s, const eng_node *x);
/* Add x (no-op if present). False on ENOMEM (the set is unchanged). */
bool eng_nodeset_add(eng_nodeset *s, const eng_node *x);
void eng_nodeset_free(eng_nodeset *s);

#endif
