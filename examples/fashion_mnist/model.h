/* model.h: tinygrad's beautiful_mnist conv net (two 5x5 conv 32, BatchNorm, max-pool, two 3x3
 * conv 64, BatchNorm, max-pool, Linear 576 -> 10), shared by examples/fashion_mnist and
 * bench/first_call.c. Header-only: a handful of small static functions. */
#ifndef EXAMPLES_FASHION_MNIST_MODEL_H
#define EXAMPLES_FASHION_MNIST_MODEL_H

#include <string.h>

#include <tensord/engine.h>
#include <tensord/nn.h>

typedef struct model {
	eng_nn_conv2d c1, c2, c3, c4;
	eng_nn_batchnorm2d bn1, bn2;
	eng_nn_linear fc;
	eng_params params;
} model;

static inline eng_status model_init(eng_ctx *ctx, model *m)
{
	memset(m, 0, sizeof(*m));
	eng_params_init(&m->params);
	eng_params *p = &m->params;
	if (eng_nn_conv2d_init(ctx, &m->c1, 1, 32, 5, 5, 1, 0, 1, 1, true, p, "conv1") ||
	    eng_nn_conv2d_init(ctx, &m->c2, 32, 32, 5, 5, 1, 0, 1, 1, true, p, "conv2") ||
	    eng_nn_batchnorm2d_init(ctx, &m->bn1, 32, 1e-5, 0.1, true, p, "bn1") ||
	    eng_nn_conv2d_init(ctx, &m->c3, 32, 64, 3, 3, 1, 0, 1, 1, true, p, "conv3") ||
	    eng_nn_conv2d_init(ctx, &m->c4, 64, 64, 3, 3, 1, 0, 1, 1, true, p, "conv4") ||
	    eng_nn_batchnorm2d_init(ctx, &m->bn2, 64, 1e-5, 0.1, true, p, "bn2") ||
	    eng_nn_linear_init(ctx, &m->fc, 576, 10, true, p, "fc"))
		return eng_error(ctx) ? eng_error(ctx) : ENG_EINVAL;
	return ENG_OK;
}

static inline void model_free(model *m)
{
	eng_nn_conv2d_free(&m->c1);
	eng_nn_conv2d_free(&m->c2);
	eng_nn_conv2d_free(&m->c3);
	eng_nn_conv2d_free(&m->c4);
	eng_nn_batchnorm2d_free(&m->bn1);
	eng_nn_batchnorm2d_free(&m->bn2);
	eng_nn_linear_free(&m->fc);
	eng_params_free(&m->params);
}

static inline eng_tensor *forward(model *m, const eng_tensor *x)
{
	int k2[2] = {2, 2};
	eng_tensor *h = eng_relu(eng_nn_conv2d_forward(&m->c1, x));
	h = eng_relu(eng_nn_conv2d_forward(&m->c2, h));
	h = eng_max_pool2d(eng_nn_batchnorm2d_forward(&m->bn1, h), k2, NULL, NULL);
	h = eng_relu(eng_nn_conv2d_forward(&m->c3, h));
	h = eng_relu(eng_nn_conv2d_forward(&m->c4, h));
	h = eng_max_pool2d(eng_nn_batchnorm2d_forward(&m->bn2, h), k2, NULL, NULL);
	return eng_nn_linear_forward(&m->fc, eng_flatten(h, 1, -1));
}

static inline void set_training(model *m, bool on)
{
	m->bn1.training = on;
	m->bn2.training = on;
}

#endif
