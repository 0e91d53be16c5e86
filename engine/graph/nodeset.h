/* nodeset.h: an insertion-ordered set of graph nodes (open addressing on the pointer): each
 * member's position in list is its number, so a walk can number the nodes it meets. */
#ifndef ENG_NODESET_H
#define ENG_NODESET_H

#include <stdbool.h>
#include <stddef.h>

#include "node.h"

typedef struct eng_nset {
	int *tab;               /* cap slots: member index + 1, 0 = empty */
	const eng_node **list;  /* members in insertion order */
	size_t n, cap;
} eng_nset;

/* Zero-initialise an eng_nset before use. */
bool eng_nset_has(const eng_nset *s, const eng_node *x);
/* x's position in list, or -1. */
int eng_nset_index(const eng_nset *s, const eng_node *x);
/* Add x (no-op if present). False on ENOMEM (the set is unchanged). */
bool eng_nset_add(eng_nset *s, const eng_node *x);
void eng_nset_free(eng_nset *s);

#endif
