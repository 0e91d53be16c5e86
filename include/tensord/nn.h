/* nn.h: neural-network building blocks on the Tensor API: a named parameter list (state dict),
 * layers with their usual initialisations, and losses. Optimizers live in optim.h. */
#ifndef ENG_NN_H
#define ENG_NN_H

#include "engine.h"
#include "io.h"

/* ---- parameters: a state dict ------------------------------------------------------- */
typedef struct eng_param {
	char name[96];
	eng_tensor *t;  /* owned by the layer that registered it */
	bool trainable; /* false for buffers such as BatchNorm running statistics */
} eng_param;

typedef struct eng_params {
	eng_param *items;
	int n, cap;
} eng_params;

void eng_params_init(eng_params *p);
/* Append (name is prefix + "." + leaf, or leaf if prefix is NULL or empty; t is borrowed).
 * false, with t's context error set, on ENOMEM or a name longer than 95 characters. */
bool eng_params_add(eng_params *p, const char *prefix, const char *leaf, eng_tensor *t, bool trainable);
/* Append n entries (NULL tensors skipped) all or nothing: on failure p is left as it was. */
bool eng_params_add_n(eng_params *p, const char *prefix, const char *const *leaves,
		      eng_tensor *const *ts, const bool *trainable, int n);
/* The tensor registered under name, or NULL. */
eng_tensor *eng_params_find(const eng_params *p, const char *name);
/* The trainable tensors, in order (array malloc'd, caller frees; *n set). */
eng_tensor **eng_params_trainable(const eng_params *p, int *n);
/* As a list for eng_safetensors_save / load_into (array malloc'd, caller frees; names borrowed). */
eng_named *eng_params_named(const eng_params *p);
void eng_params_free(eng_params *p); /* frees the list, not the tensors */

/* A parameter's storage: a new tensor with a buffer of its own that will hold value's contents
 * (never shared with another tensor, so later assigns to it touch nothing else), in the
 * current scope. The copy is lazy: the first realize that uses the parameter fills it, so a
 * model's initialisation costs one schedule. value stays with its owner. NULL (error set) on
 * failure. */
eng_tensor *eng_param_copy(const eng_tensor *value);
/* Make t a parameter: move it to the root scope (it lives until eng_tensor_free or
 * eng_ctx_destroy) and make it require grad if trainable. Returns t; on failure frees t and
 * returns NULL. */
eng_tensor *eng_param_adopt(eng_tensor *t, bool trainable);

/* ---- initialisation (from the context's seeded RNG) ----------------------------------
 * Each returns a new float32 tensor with its own buffer (filled by the first realize that
 * uses it), in the current scope; the same seed (eng_manual_seed) and call sequence give the
 * same values. */
/* Uniform in [-b, b] with b = gain * sqrt(3 / fan_in) (Kaiming/He uniform; gain = 1/sqrt(3),
 * PyTorch's default for Linear/Conv (a = sqrt(5)), gives b = 1/sqrt(fan_in)). fan_in >= 1,
 * gain finite and >= 0. */
eng_tensor *eng_init_kaiming_uniform(eng_ctx *ctx, int ndim, const int64_t *shape, int64_t fan_in, double gain);
/* Uniform in [-b, b] with b = sqrt(6 / (fan_in + fan_out)) (Glorot/Xavier uniform). */
eng_tensor *eng_init_glorot_uniform(eng_ctx *ctx, int ndim, const int64_t *shape, int64_t fan_in, int64_t fan_out);

/* ---- layers ---------------------------------------------------------------------------
 * Each layer owns its parameter tensors (float32, lazily filled, in the context's root scope,
 * requiring grad when trainable); *_init registers them in params (if non-NULL) under prefix
 * (NULL or "" for none); *_free frees them and must come before eng_ctx_destroy (which would
 * otherwise free them itself). A failed *_init sets the context error, returns its code and
 * leaves the layer zeroed and params unchanged. Forward functions return a new tensor in the
 * current scope (NULL with the error set on bad input; a NULL input propagates). */
typedef struct eng_nn_linear {
	eng_tensor *weight; /* (out, in), PyTorch layout */
	eng_tensor *bias;   /* (out) or NULL */
} eng_nn_linear;
eng_status eng_nn_linear_init(eng_ctx *ctx, eng_nn_linear *l, int64_t in, int64_t out, bool bias,
			      eng_params *params, const char *prefix);
eng_tensor *eng_nn_linear_forward(const eng_nn_linear *l, const eng_tensor *x);
void eng_nn_linear_free(eng_nn_linear *l);

typedef struct eng_nn_conv2d {
	eng_tensor *weight; /* (out, in/groups, kh, kw) */
	eng_tensor *bias;   /* (out) or NULL */
	int stride[2], padding[2], dilation[2], groups;
} eng_nn_conv2d;
eng_status eng_nn_conv2d_init(eng_ctx *ctx, eng_nn_conv2d *c, int64_t in, int64_t out, int kh, int kw,
			      int stride, int padding, int dilation, int groups, bool bias, eng_params *params,
			      const char *prefix);
eng_tensor *eng_nn_conv2d_forward(const eng_nn_conv2d *c, const eng_tensor *x);
void eng_nn_conv2d_free(eng_nn_conv2d *c);

/* BatchNorm over (N, C, H, W) per channel. In training mode (the default after init) it
 * normalises with the batch's mean and biased variance and updates the running statistics
 * with eng_assign: running = (1-momentum)*running + momentum*batch_stat, using the unbiased
 * variance (as PyTorch), and num_batches_tracked += 1. The updates are lazy: they happen when
 * those tensors are realized (e.g. with the forward output in one eng_realize, or by realizing
 * the state dict after the optimizer step); until then each forward adds to the chain. Training
 * needs N*H*W > 1. In eval mode (training = false) it uses the running statistics.
 * eps >= 0, momentum in [0, 1]. */
typedef struct eng_nn_batchnorm2d {
	eng_tensor *weight, *bias;               /* (C), trainable; NULL if !affine */
	eng_tensor *running_mean, *running_var;  /* (C), not trainable */
	eng_tensor *num_batches_tracked;         /* () int64, not trainable */
	double eps, momentum;
	bool training;
} eng_nn_batchnorm2d;
eng_status eng_nn_batchnorm2d_init(eng_ctx *ctx, eng_nn_batchnorm2d *b, int64_t channels, double eps,
				   double momentum, bool affine, eng_params *params, const char *prefix);
eng_tensor *eng_nn_batchnorm2d_forward(eng_nn_batchnorm2d *b, const eng_tensor *x);
void eng_nn_batchnorm2d_free(eng_nn_batchnorm2d *b);

/* LayerNorm over the last axis, with an optional affine weight and bias. */
typedef struct eng_nn_layernorm {
	eng_tensor *weight, *bias;
	int64_t dim;
	double eps;
} eng_nn_layernorm;
eng_status eng_nn_layernorm_init(eng_ctx *ctx, eng_nn_layernorm *l, int64_t dim, double eps, bool affine,
				 eng_params *params, const char *prefix);
eng_tensor *eng_nn_layernorm_forward(const eng_nn_layernorm *l, const eng_tensor *x);
void eng_nn_layernorm_free(eng_nn_layernorm *l);

typedef struct eng_nn_embedding {
	eng_tensor *weight; /* (vocab, dim), initialised N(0, 1) */
} eng_nn_embedding;
eng_status eng_nn_embedding_init(eng_ctx *ctx, eng_nn_embedding *e, int64_t vocab, int64_t dim,
				 eng_params *params, const char *prefix);
eng_tensor *eng_nn_embedding_forward(const eng_nn_embedding *e, const eng_tensor *idx);
void eng_nn_embedding_free(eng_nn_embedding *e);

/* Inverted dropout on a float tensor: in training, zero each element with probability p
 * (mask from eng_rand, so reproducible per seed) and scale the rest by 1/(1-p); identity (a
 * new handle) when !training or p == 0. p outside [0, 1) is EINVAL. */
eng_tensor *eng_nn_dropout(const eng_tensor *x, double p, bool training);

/* ---- losses (scalar results, mean over the batch) ---------------------------------------- */
/* logits (N, C), labels (N) integer. Label smoothing ls in [0, 1): the row loss is
 * (1-ls)*nll + ls*mean over classes of -log_softmax, as PyTorch. Rows whose label equals
 * ignore_index (PyTorch uses -100; it may be outside [0, C); one the labels' dtype cannot hold
 * ignores nothing) are left out of the mean; if every row is ignored the loss is 0. Any other
 * label outside [0, C) is an error when the labels are realized (EINVAL naming the row, NULL
 * returned) and makes the loss NaN when they are lazy, as eng_sparse_cross_entropy (engine.h),
 * which is this loss with ls = 0 and no ignore index. Results are float32 (float16 for
 * float16 logits), as are the losses below. */
eng_tensor *eng_loss_sparse_cross_entropy(const eng_tensor *logits, const eng_tensor *labels,
					  double label_smoothing, int64_t ignore_index);
/* Cross-entropy against target probabilities (N, C), same shape as logits:
 * -mean over rows of sum(target * log_softmax(logits)). */
eng_tensor *eng_loss_cross_entropy(const eng_tensor *logits, const eng_tensor *target);
/* Mean of (pred - target)^2 over all elements; shapes must be equal. */
eng_tensor *eng_loss_mse(const eng_tensor *pred, const eng_tensor *target);
/* Binary cross-entropy on probabilities in [0, 1] (same shapes): -mean(t*log(p) +
 * (1-t)*log(1-p)) with each log clamped at -100 as PyTorch does, so p = 0 or 1 stays finite. */
eng_tensor *eng_loss_bce(const eng_tensor *prob, const eng_tensor *target);
/* The same from logits, computed stably: mean(max(x, 0) - x*t + log(1 + exp(-|x|))). */
eng_tensor *eng_loss_bce_with_logits(const eng_tensor *logits, const eng_tensor *target);

#endif
