/* fashion_mnist: tinygrad's beautiful_mnist conv net trained on Fashion-MNIST (Debian's
 * dataset-fashion-mnist files): batch 512, Adam, progress bar, then test accuracy. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tensord/engine.h>
#include <tensord/io.h>
#include <tensord/nn.h>
#include <tensord/optim.h>
#include "model.h"

#define DATA_DIR "/usr/share/datasets/fashion-mnist"

typedef struct opts {
	int steps, batch, eval_batch, bn_recal;
	bool raw, cosine;
	uint64_t seed;
	double lr, min_acc, smoothing;
	const char *data, *save;
} opts;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Images as float32 (N, 1, 28, 28): raw 0..255 values (as the tinygrad example uses) until
 * standardise() scales them. */
typedef struct dataset {
	float *x;
	int32_t *y;
	int64_t n;
} dataset;

static int load_split(eng_ctx *ctx, const char *dir, const char *images, const char *labels, dataset *d)
{
	char pi[512], pl[512];
	snprintf(pi, sizeof(pi), "%s/%s", dir, images);
	snprintf(pl, sizeof(pl), "%s/%s", dir, labels);
	eng_scope_begin(ctx);
	eng_tensor *xi = eng_idx_load(ctx, pi), *yi = eng_idx_load(ctx, pl);
	int rc = 1;
	if (!xi || !yi)
		goto out;
	if (eng_ndim(xi) != 3 || eng_shape(xi)[1] != 28 || eng_shape(xi)[2] != 28 || eng_ndim(yi) != 1 ||
	    eng_shape(yi)[0] != eng_shape(xi)[0]) {
		fprintf(stderr, "fashion_mnist: %s / %s: unexpected shapes\n", pi, pl);
		goto out;
	}
	d->n = eng_shape(xi)[0];
	d->x = malloc((size_t)d->n * 784 * sizeof(float));
	d->y = malloc((size_t)d->n * sizeof(int32_t));
	uint8_t *raw = malloc((size_t)d->n * 784);
	if (!d->x || !d->y || !raw || eng_tensor_read(xi, raw, (size_t)d->n * 784)) {
		free(raw);
		goto out;
	}
	for (int64_t i = 0; i < d->n * 784; i++)
		d->x[i] = raw[i];
	if (eng_tensor_read(yi, raw, (size_t)d->n)) {
		free(raw);
		goto out;
	}
	for (int64_t i = 0; i < d->n; i++)
		d->y[i] = raw[i];
	free(raw);
	rc = 0;
out:
	eng_scope_end(ctx);
	return rc;
}

/* Scale both splits to zero mean and unit variance, with the training set's statistics. */
static void standardise(dataset *train, dataset *test)
{
	double sum = 0, sq = 0, n = (double)train->n * 784;
	for (int64_t i = 0; i < train->n * 784; i++) {
		sum += train->x[i];
		sq += (double)train->x[i] * train->x[i];
	}
	double mean = sum / n, sd = sqrt(sq / n - mean * mean);
	float a = (float)(1 / (sd > 0 ? sd : 1)), b = (float)(-mean / (sd > 0 ? sd : 1));
	for (int64_t i = 0; i < train->n * 784; i++)
		train->x[i] = train->x[i] * a + b;
	for (int64_t i = 0; i < test->n * 784; i++)
		test->x[i] = test->x[i] * a + b;
}

static uint64_t rng_next(uint64_t *s)
{
	*s += 0x9e3779b97f4a7c15ull;
	uint64_t z = *s;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double evaluate(eng_ctx *ctx, model *m, const dataset *test, int bs)
{
	int64_t correct = 0;
	set_training(m, false);
	int32_t *pred = malloc((size_t)bs * sizeof(int32_t));
	for (int64_t at = 0; at < test->n && pred; at += bs) {
		int64_t n = test->n - at < bs ? test->n - at : bs;
		int64_t shape[4] = {n, 1, 28, 28};
		eng_scope_begin(ctx);
		eng_tensor *x = eng_from_data(ctx, ENG_F32, 4, shape, test->x + at * 784);
		eng_tensor *p = eng_argmax(forward(m, x), 1, false);
		if (!eng_tensor_read(p, pred, (size_t)n * sizeof(int32_t)))
			for (int64_t i = 0; i < n; i++)
				correct += pred[i] == test->y[at + i];
		eng_scope_end(ctx);
	}
	free(pred);
	set_training(m, true);
	return (double)correct / (double)test->n;
}

/* BatchNorm re-estimation (as SWA's update_bn): the running statistics lag the weights while
 * they still move fast; one forward pass in training mode over n training images with momentum
 * 1 sets them to the final weights' statistics. */
static eng_status bn_recalibrate(eng_ctx *ctx, model *m, const dataset *train, int n)
{
	double m1 = m->bn1.momentum, m2 = m->bn2.momentum;
	m->bn1.momentum = m->bn2.momentum = 1.0;
	int64_t shape[4] = {n, 1, 28, 28};
	eng_scope_begin(ctx);
	eng_tensor *x = eng_from_data(ctx, ENG_F32, 4, shape, train->x); /* the first n images */
	eng_tensor *out = forward(m, x);
	eng_tensor *all[5] = {out, m->bn1.running_mean, m->bn1.running_var, m->bn2.running_mean,
			      m->bn2.running_var};
	eng_status s = eng_realize(all, 5);
	eng_scope_end(ctx);
	m->bn1.momentum = m1, m->bn2.momentum = m2;
	return s;
}

static void usage(void)
{
	fprintf(stderr, "usage: fashion_mnist [--steps N] [--batch N] [--seed N] [--lr X] [--schedule const|cosine]\n"
			"                     [--inputs raw|standard] [--label-smoothing X] [--bn-recal N]\n"
			"                     [--data DIR] [--min-accuracy X]\n"
			"                     [--save FILE.safetensors]\n"
			"defaults: 70 steps, batch 512, seed 42, Adam lr 0.001, schedule const, inputs raw\n"
			"(tinygrad's beautiful_mnist), --bn-recal 2048: before testing, the BatchNorm running\n"
			"statistics are re-estimated on 2048 training images (0: keep them as trained);\n"
			"--schedule cosine decays the lr to 0 over the run\n");
}

static int parse(int argc, char **argv, opts *o)
{
	*o = (opts){.steps = 70, .batch = 512, .eval_batch = 1000, .seed = 42, .lr = 0.001, .raw = true, .bn_recal = 2048,
		       .data = DATA_DIR};
	for (int i = 1; i < argc; i += 2) { /* --option value pairs */
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v) {
			usage();
			return 1;
		}
		if (!strcmp(a, "--steps"))
			o->steps = atoi(v);
		else if (!strcmp(a, "--batch"))
			o->batch = atoi(v);
		else if (!strcmp(a, "--seed"))
			o->seed = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--lr"))
			o->lr = atof(v);
		else if (!strcmp(a, "--schedule") && (!strcmp(v, "const") || !strcmp(v, "cosine")))
			o->cosine = !strcmp(v, "cosine");
		else if (!strcmp(a, "--inputs") && (!strcmp(v, "raw") || !strcmp(v, "standard")))
			o->raw = !strcmp(v, "raw");
		else if (!strcmp(a, "--data"))
			o->data = v;
		else if (!strcmp(a, "--bn-recal"))
			o->bn_recal = atoi(v);
		else if (!strcmp(a, "--label-smoothing"))
			o->smoothing = atof(v);
		else if (!strcmp(a, "--min-accuracy"))
			o->min_acc = atof(v);
		else if (!strcmp(a, "--save"))
			o->save = v;
		else {
			usage();
			return 1;
		}
	}
	if (o->steps < 0 || o->steps > 1000000 || o->batch < 1 || o->batch > 60000 || !(o->lr > 0) ||
	    !(o->smoothing >= 0 && o->smoothing < 1) || o->bn_recal < 0 || o->bn_recal > 60000) {
		usage();
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	opts o;
	if (parse(argc, argv, &o))
		return 2;
	char err[256];
	eng_ctx *ctx = eng_ctx_create(NULL, err, sizeof(err));
	if (!ctx) {
		fprintf(stderr, "fashion_mnist: %s\n", err);
		return 1;
	}
	dataset train = {0}, test = {0};
	model m;
	eng_optim *opt = NULL;
	int rc = 1;
	eng_manual_seed(ctx, o.seed);
	if (load_split(ctx, o.data, "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", &train) ||
	    load_split(ctx, o.data, "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz", &test)) {
		fprintf(stderr, "fashion_mnist: cannot load the dataset from %s (install dataset-fashion-mnist): %s\n",
			o.data, eng_errmsg(ctx));
		goto out;
	}
	if (!o.raw)
		standardise(&train, &test);
	if (model_init(ctx, &m))
		goto fail;
	int np;
	eng_tensor **ps = eng_params_trainable(&m.params, &np);
	eng_optim_opts oo;
	eng_optim_opts_default(&oo, ENG_OPTIM_ADAM);
	oo.lr = o.lr;
	opt = eng_optim_create(ctx, ps, np, &oo);
	free(ps);
	if (!opt)
		goto fail;
	/* BatchNorm running statistics are realized with each step */
	eng_tensor *stats[4] = {m.bn1.running_mean, m.bn1.running_var, m.bn2.running_mean, m.bn2.running_var};
	float *bx = malloc((size_t)o.batch * 784 * sizeof(float));
	int32_t *by = malloc((size_t)o.batch * sizeof(int32_t));
	if (!bx || !by) {
		free(bx);
		free(by);
		goto fail;
	}
	/* batches walk a shuffled order of the training set, reshuffled every epoch */
	int64_t *order = malloc((size_t)train.n * sizeof(int64_t)), pos = train.n;
	if (!order) {
		free(bx);
		free(by);
		goto fail;
	}
	for (int64_t i = 0; i < train.n; i++)
		order[i] = i;
	uint64_t rs = o.seed;
	double t0 = now_s(), first = 0, loss_v = 0;
	for (int step = 0; step < o.steps; step++) {
		double ts = now_s();
		eng_status s = o.cosine ? eng_optim_set_lr(opt, o.lr * 0.5 * (1 + cos(M_PI * step / o.steps))) : ENG_OK;
		for (int i = 0; i < o.batch; i++) {
			if (pos == train.n) {
				for (int64_t j = train.n - 1; j > 0; j--) {
					int64_t r = (int64_t)(rng_next(&rs) % (uint64_t)(j + 1)), t = order[j];
					order[j] = order[r];
					order[r] = t;
				}
				pos = 0;
			}
			int64_t k = order[pos++];
			memcpy(bx + (size_t)i * 784, train.x + k * 784, 784 * sizeof(float));
			by[i] = train.y[k];
		}
		int64_t xs[4] = {o.batch, 1, 28, 28}, ys[1] = {o.batch};
		eng_scope_begin(ctx);
		eng_tensor *x = eng_from_data(ctx, ENG_F32, 4, xs, bx), *y = eng_from_data(ctx, ENG_I32, 1, ys, by);
		eng_tensor *loss = eng_loss_sparse_cross_entropy(forward(&m, x), y, o.smoothing, -100);
		eng_tensor *extra[5] = {loss, stats[0], stats[1], stats[2], stats[3]};
		if (!s)
			s = eng_backward(loss);
		if (!s)
			s = eng_optim_step(opt, extra, 5);
		if (!s)
			loss_v = eng_item(loss);
		eng_scope_end(ctx);
		if (s || eng_error(ctx)) {
			free(bx);
			free(by);
			free(order);
			goto fail;
		}
		if (step == 0)
			first = now_s() - ts;
		double el = now_s() - t0;
		int done = (step + 1) * 30 / (o.steps ? o.steps : 1);
		fprintf(stderr, "\r[%-30.*s] step %d/%d loss %.3f %.2f steps/s", done, "##############################",
			step + 1, o.steps, loss_v, (step + 1) / el);
	}
	fprintf(stderr, "\n");
	free(bx);
	free(by);
	free(order);
	double train_s = now_s() - t0;
	if (o.bn_recal > 0) {
		printf("test accuracy with the running BatchNorm statistics: %.2f%%\n",
		       100 * evaluate(ctx, &m, &test, o.eval_batch));
		if (bn_recalibrate(ctx, &m, &train, o.bn_recal))
			goto fail;
	}
	double acc = evaluate(ctx, &m, &test, o.eval_batch);
	printf("steps %d batch %d: loss %.3f test_accuracy %.2f%% | first step %.2f s, then %.3f s/step, %.1f s in all\n",
	       o.steps, o.batch, loss_v, acc * 100, first, o.steps > 1 ? (train_s - first) / (o.steps - 1) : 0, train_s);
	if (o.save) {
		eng_named *named = eng_params_named(&m.params);
		eng_status s = named ? eng_safetensors_save(ctx, o.save, named, m.params.n) : ENG_ENOMEM;
		free(named);
		if (s)
			goto fail;
		printf("saved %d tensors to %s\n", m.params.n, o.save);
	}
	rc = acc >= o.min_acc ? 0 : 3;
	if (rc)
		fprintf(stderr, "fashion_mnist: accuracy %.2f%% is below the required %.2f%%\n", acc * 100, o.min_acc * 100);
	goto done;
fail:
	fprintf(stderr, "fashion_mnist: %s\n", eng_errmsg(ctx));
done:
	eng_optim_destroy(opt);
	model_free(&m);
out:
	free(train.x);
	free(train.y);
	free(test.x);
	free(test.y);
	eng_ctx_destroy(ctx);
	return rc;
}
