/* optim.h: optimizers (SGD with momentum/nesterov/weight decay, Adam, AdamW). A step builds
 * the parameter updates as lazy assignments and realizes them together with whatever the
 * caller passes (the loss, BatchNorm statistics), so a training step is one schedule. */
#ifndef ENG_OPTIM_H
#define ENG_OPTIM_H

#include "engine.h"

typedef enum eng_optim_kind { ENG_OPTIM_SGD, ENG_OPTIM_ADAM, ENG_OPTIM_ADAMW, ENG_OPTIM_KIND_COUNT } eng_optim_kind;

typedef struct eng_optim_opts {
	eng_optim_kind kind;
	double lr;
	double momentum;     /* SGD */
	bool nesterov;       /* SGD, needs momentum > 0 */
	double weight_decay; /* SGD and Adam: added to the gradient; AdamW: decoupled */
	double beta1, beta2, eps; /* Adam, AdamW */
} eng_optim_opts;

/* Defaults of the kind: lr 0.001 (Adam/AdamW) or 0.01 (SGD), betas (0.9, 0.999), eps 1e-8,
 * AdamW weight decay 0.01, others 0. */
void eng_optim_opts_default(eng_optim_opts *o, eng_optim_kind kind);

typedef struct eng_optim eng_optim;

/* An optimizer over params (float tensors that require grad; the array is copied, the tensors
 * are borrowed and must outlive the optimizer). NULL with the context error set on bad
 * options. */
eng_optim *eng_optim_create(eng_ctx *ctx, eng_tensor *const *params, int n, const eng_optim_opts *o);
void eng_optim_destroy(eng_optim *opt);
/* The learning rate lives in a device buffer: changing it recompiles nothing. */
eng_status eng_optim_set_lr(eng_optim *opt, double lr);
double eng_optim_lr(const eng_optim *opt);
/* Update every parameter that has a gradient, realizing the updates, the optimizer state
 * and extra[0..nextra) in one schedule; then clear the gradients. */
eng_status eng_optim_step(eng_optim *opt, eng_tensor *const *extra, int nextra);
void eng_optim_zero_grad(eng_optim *opt);

#endif
