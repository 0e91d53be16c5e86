/* ops.c: the op table (name, kind, number of sources of every op), made from ops.def. */
#include "node.h"

static const struct {
	const char *name;
	eng_op_kind kind;
	int nsrc;
} op_table[ENG_OP_COUNT] = {
#define ENG_OP(name, kind, nsrc) [ENG_OP_##name] = {#name, ENG_KIND_##kind, nsrc},
#include "ops.def"
#undef ENG_OP
};

const char *eng_op_name(eng_op op) { return op < ENG_OP_COUNT ? op_table[op].name : "?"; }
eng_op_kind eng_op_kind_of(eng_op op) { return op_table[op].kind; }
int eng_op_nsrc(eng_op op) { return op_table[op].nsrc; }

