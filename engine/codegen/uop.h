/* uop.h: the kernel-level value graph ("uops"): loop variables, loads, accumulators and ALU
 * ops, hash-consed per kernel, with symbolic simplification of integer index arithmetic. */
#ifndef ENG_UOP_H
#define ENG_UOP_H

#include <stdbool.h>
#include <stdint.h>

#include "graph/node.h"

typedef enum eng_uop_kind {
	U_CONST, /* arg.c */
	U_VAR,   /* loop variable arg.var, range [0, vmax] */
	U_ALU,   /* op on src[0..nsrc) */
	U_LOAD,  /* buffer arg.buf at src[0] (int64 index), guarded by src[1] (bool) if present */
	U_ACC,   /* accumulator of phase arg.acc at tile position (src[0], src[1]) when tiled */
} eng_uop_kind;

typedef struct eng_uop eng_uop;
struct eng_uop {
	uint8_t kind;
	uint8_t op; /* eng_op for U_ALU */
	uint8_t dtype;
	uint8_t nsrc;
	eng_uop *src[3];
	union {
		eng_const_value c;
		int var;
		int buf;
		int acc;
	} arg;
	int64_t vmin, vmax; /* value bounds for integer and bool uops */
	uint64_t deps;      /* loop variables this value depends on (bit per var) */
	uint64_t accdeps;   /* phases whose accumulator it reads (bit per phase) */
	uint64_t hash;
	uint32_t id;
	eng_uop *next;
	int stamp; /* lowering scratch: visit mark of graph walks */
	int defined_at; /* linearizer scratch: open-block instance where defined, 0 = none */
};

typedef struct eng_uops eng_uops;

eng_uops *eng_uops_create(void);
void eng_uops_destroy(eng_uops *u);
/* Loop nesting rank of a variable (0 outer .. higher inner): sums list inner variables last. */
void eng_uops_set_var_rank(eng_uops *u, int var, int rank);
/* Non-zero after an allocation failure; every constructor then returns a dummy constant. */
bool eng_uops_failed(const eng_uops *u);

eng_uop *u_const(eng_uops *u, eng_dtype dt, eng_const_value c);
eng_uop *u_int_const(eng_uops *u, int64_t v); /* int64 constant */
eng_uop *u_bool(eng_uops *u, bool v);
eng_uop *u_var(eng_uops *u, int var, int64_t n); /* values 0..n-1 */
eng_uop *u_load(eng_uops *u, int buf, eng_dtype dt, eng_uop *idx, eng_uop *valid);
eng_uop *u_acc(eng_uops *u, int phase, eng_dtype dt, eng_uop *ta, eng_uop *tb);
/* Generic ALU (no simplification beyond constant folding of int/bool index math). */
eng_uop *u_alu(eng_uops *u, eng_op op, eng_dtype dt, eng_uop *a, eng_uop *b, eng_uop *c);
/* Simplifying int64 index arithmetic. c > 0 for div/mod. */
eng_uop *u_add(eng_uops *u, eng_uop *a, eng_uop *b);
eng_uop *u_mul_const(eng_uops *u, eng_uop *a, int64_t c);
eng_uop *u_add_const(eng_uops *u, eng_uop *a, int64_t c);
eng_uop *u_div_const(eng_uops *u, eng_uop *a, int64_t c);
eng_uop *u_mod_const(eng_uops *u, eng_uop *a, int64_t c);
/* Bool: a < b for int64 a, b; and; not. */
eng_uop *u_lt(eng_uops *u, eng_uop *a, eng_uop *b);
eng_uop *u_and(eng_uops *u, eng_uop *a, eng_uop *b);
eng_uop *u_where(eng_uops *u, eng_dtype dt, eng_uop *c, eng_uop *a, eng_uop *b);

static inline bool u_is_const(const eng_uop *x) { return x->kind == U_CONST; }
static inline bool u_is_true(const eng_uop *x) { return !x || (x->kind == U_CONST && x->arg.c.i); }

/* Coefficient of loop variable var in x if x is linear in it (0 if absent or non-linear). */
int64_t u_coef_of_var(const eng_uop *x, int var);
/* Whether x = coef * var + terms that do not depend on var (x an int64 index), with *coef. */
bool u_linear_in_var(const eng_uop *x, int var, int64_t *coef);

#endif
