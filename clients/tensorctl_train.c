/* tensorctl_train.c: `tensorctl train`: train.step requests over a dataset read here (IDX files,
 * .npy files or a safetensors file), shuffled minibatches, loss on a progress bar. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tensorctl.h"

const char tctl_train_help[] =
	"usage: tensorctl train MODEL --data [NAME=]FILE... --steps N --batch B [--lr X]\n"
	"                       [--target NAME] [--target-dtype DT] [--scale S] [--seed N]\n"
	"                       [--log-every K] [--progress|--no-progress]\n"
	"\n"
	"Send N train.step requests (default 100) of B samples each (default 32; at most the\n"
	"model's batch_max) drawn shuffled, epoch after epoch, to a model\n"
	"loaded with \"train\" (docs/PROTOCOL.md). The dataset: one tensor per model input and\n"
	"one for the training target, the first dimension counting samples:\n"
	"  --data FILE.safetensors   tensors named by the inputs and the target\n"
	"  --data NAME=FILE          one tensor (IDX, gzip'd or raw, or .npy)\n"
	"  --data FILE               IDX or .npy, named in order: the inputs, then the target\n"
	"A sample is reshaped to the input's row (28x28 images feed a [-1, 784] input) and\n"
	"converted to its dtype; uint8 data into a float input is scaled by 1/255 unless --scale.\n"
	"  --target NAME       the target's tensor name (default: the model's train.target,\n"
	"                      as model.list says it)\n"
	"  --target-dtype DT   the target's dtype (default: int32 for integer data, else float32)\n"
	"  --lr X              set the learning rate from the first step on\n"
	"  --log-every K       print \"step S loss L\" every K steps (default steps/10)\n"
	"Fashion-MNIST: --data /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz\n"
	"  --data /usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz --target label\n"
	"Exit: 0 done, 1 a step failed, 5 interrupted (SIGINT/SIGTERM, after the current step).\n";

typedef struct train_opts {
	const char *model, *target, *target_dtype;
	const char *data[TCTL_MAX_TENSORS];
	int ndata;
	long steps, batch, log_every, seed;
	double lr, scale;
	int progress;
} train_opts;

static int parse_opts(int argc, char **argv, train_opts *o)
{
	*o = (train_opts){.target = NULL,
			  .steps = 100,
			  .batch = 32,
			  .log_every = -1,
			  .seed = 1,
			  .scale = NAN,
			  .progress = -1};
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		bool has = i + 1 < argc;
		char *end;
		if (!strcmp(a, "--data") && has) {
			if (o->ndata == TCTL_MAX_TENSORS)
				return tctl_usage("train", "too many --data");
			o->data[o->ndata++] = argv[++i];
		} else if (!strcmp(a, "--target") && has) {
			o->target = argv[++i];
		} else if (!strcmp(a, "--target-dtype") && has) {
			o->target_dtype = argv[++i];
		} else if (!strcmp(a, "--steps") && has) {
			if (!tctl_parse_long(argv[++i], 1, 1000000000, &o->steps))
				return tctl_usage("train", "--steps %s: not a count", argv[i]);
		} else if (!strcmp(a, "--batch") && has) {
			if (!tctl_parse_long(argv[++i], 1, 1 << 20, &o->batch))
				return tctl_usage("train", "--batch %s: not a count", argv[i]);
		} else if (!strcmp(a, "--log-every") && has) {
			if (!tctl_parse_long(argv[++i], 0, 1000000000, &o->log_every))
				return tctl_usage("train", "--log-every %s: not a count", argv[i]);
		} else if (!strcmp(a, "--seed") && has) {
			if (!tctl_parse_long(argv[++i], 0, __LONG_MAX__, &o->seed))
				return tctl_usage("train", "--seed %s: not a number", argv[i]);
		} else if ((!strcmp(a, "--lr") || !strcmp(a, "--scale")) && has) {
			double v = strtod(argv[++i], &end);
			if (*end || end == argv[i] || !isfinite(v) || (a[2] == 'l' && v <= 0))
				return tctl_usage("train", "%s %s: not a number", a, argv[i]);
			*(a[2] == 'l' ? &o->lr : &o->scale) = v;
		} else if (!strcmp(a, "--progress")) {
			o->progress = 1;
		} else if (!strcmp(a, "--no-progress")) {
			o->progress = 0;
		} else if (!o->model && a[0] != '-') {
			o->model = a;
		} else {
			return tctl_usage("train", "unexpected argument %s", a);
		}
	}
	if (!o->model || !o->ndata)
		return tctl_usage("train", "needs MODEL and --data");
	return 0;
}

static bool ends_with(const char *s, const char *suf)
{
	size_t n = strlen(s), k = strlen(suf);
	return n >= k && !strcmp(s + n - k, suf);
}

/* The dataset: every --data into ds, unnamed files named by names[] in order. */
static bool load_data(const train_opts *o, const tctl_model *m, tctl_inputs *ds, char *err,
		      size_t errlen)
{
	int unnamed = 0;
	for (int k = 0; k < o->ndata; k++) {
		const char *arg = o->data[k], *eq = strchr(arg, '=');
		const char *path = eq ? eq + 1 : arg;
		char name[TCTL_NAME_MAX + 1];
		if (!eq && ends_with(path, ".safetensors")) {
			if (!tctl_safetensors_read(path, ds, err, errlen))
				return false;
			continue;
		}
		if (eq)
			snprintf(name, sizeof(name), "%.*s", (int)(eq - arg), arg);
		else if (unnamed < m->nin)
			snprintf(name, sizeof(name), "%s", m->in[unnamed++].name);
		else if (unnamed++ == m->nin)
			snprintf(name, sizeof(name), "%s", o->target);
		else {
			snprintf(err, errlen,
				 "--data %s: the model has %d inputs and a target; name "
				 "the tensor (NAME=FILE)",
				 arg, m->nin);
			return false;
		}
		tsd_tensor t;
		if (ends_with(path, ".npy") ? !tctl_npy_read(path, &t, err, errlen)
					    : !tctl_idx_read(path, &t, err, errlen))
			return false;
		char shape[160] = "";
		for (int d = 0, n = 0; d < t.ndim; d++)
			n += snprintf(shape + n, sizeof(shape) - (size_t)n, "%s%lld", d ? "," : "",
				      (long long)t.shape[d]);
		if (!tctl_inputs_raw(ds, name, tsd_dtype_name(t.dtype), shape, (void *)t.data,
				     t.nbytes, err, errlen))
			return false;
	}
	return true;
}

static const tsd_tensor *find(const tctl_inputs *ds, const char *name)
{
	for (int i = 0; i < ds->n; i++)
		if (!strcmp(ds->t[i].name, name))
			return &ds->t[i];
	return NULL;
}

/* One column of a step: dataset tensor src, sent as dtype with row shape from the port. */
typedef struct column {
	const tsd_tensor *src;
	tsd_tensor out;
	size_t row; /* elements per sample */
	double scale;
} column;

static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

int tctl_cmd_train(tctl_ctx *ctx, int argc, char **argv)
{
	train_opts o;
	int rc = parse_opts(argc, argv, &o);
	if (rc)
		return rc;
	tctl_model *ms;
	int nms;
	if ((rc = tctl_models_fetch(ctx->c, &ms, &nms)))
		return rc;
	const tctl_model *m = tctl_model_find(ms, nms, o.model, strlen(o.model));
	tctl_inputs ds = {0};
	column cols[TCTL_MAX_TENSORS + 1];
	int ncols = 0;
	char err[512];
	size_t *perm = NULL;
	int64_t n = -1;
	if (!m) {
		fprintf(stderr, "tensorctl train: unknown_model: no model %s\n", o.model);
		rc = TCTL_EXIT_DAEMON;
		goto out;
	}
	if (!m->trainable) {
		fprintf(stderr, "tensorctl train: model %s was loaded without \"train\"\n",
			o.model);
		rc = TCTL_EXIT_USAGE;
		goto out;
	}
	if (!o.target)
		o.target = m->target[0] ? m->target : "target";
	if (!load_data(&o, m, &ds, err, sizeof(err))) {
		fprintf(stderr, "tensorctl train: %s\n", err);
		rc = TCTL_EXIT_USAGE;
		goto out;
	}
	memset(cols, 0, sizeof(cols));
	for (int i = 0; i <= m->nin; i++) { /* the inputs, then the target */
		const char *name = i < m->nin ? m->in[i].name : o.target;
		const tsd_tensor *src = find(&ds, name);
		column *c = &cols[ncols++];
		if (!src || src->ndim < 1) {
			fprintf(stderr, "tensorctl train: no dataset tensor %s (%s)\n", name,
				i < m->nin ? "an input" : "the target");
			rc = TCTL_EXIT_USAGE;
			goto out;
		}
		if (n >= 0 && src->shape[0] != n) {
			fprintf(stderr, "tensorctl train: %s has %lld samples, %s %lld\n", name,
				(long long)src->shape[0], ds.t[0].name, (long long)n);
			rc = TCTL_EXIT_USAGE;
			goto out;
		}
		n = src->shape[0];
		c->src = src;
		c->row = 1;
		for (int d = 1; d < src->ndim; d++)
			c->row *= (size_t)src->shape[d];
		c->out.name = name;
		c->scale = 1;
		if (i < m->nin) {
			const tctl_port *p = &m->in[i];
			if (p->batch_axis != 0 || p->row_numel != c->row) {
				fprintf(stderr,
					"tensorctl train: %s: a sample has %zu elements, the "
					"input's "
					"row %zu (the batch axis must come first)\n",
					name, c->row, p->row_numel);
				rc = TCTL_EXIT_USAGE;
				goto out;
			}
			c->out.dtype = p->dtype;
			c->out.ndim = p->ndim;
			memcpy(c->out.shape, p->shape, sizeof(p->shape));
			if (tsd_dtype_is_float(p->dtype) && src->dtype == TSD_U8)
				c->scale = isnan(o.scale) ? 1.0 / 255 : o.scale;
			else if (!isnan(o.scale))
				c->scale = o.scale;
		} else {
			tsd_dtype dt = tsd_dtype_is_float(src->dtype) ? TSD_F32 : TSD_I32;
			if (o.target_dtype && !tsd_dtype_parse(o.target_dtype, &dt)) {
				rc = tctl_usage("train", "--target-dtype %s: not a dtype",
						o.target_dtype);
				goto out;
			}
			c->out.dtype = dt;
			c->out.ndim = src->ndim;
			memcpy(c->out.shape, src->shape, sizeof(src->shape));
		}
		c->out.shape[0] = o.batch;
		void *buf = malloc((size_t)o.batch * c->row * tsd_dtype_size(c->out.dtype) + 1);
		if (!(c->out.data = buf)) {
			rc = TCTL_EXIT_IO;
			goto out;
		}
	}
	if (n < 1 || !(perm = malloc((size_t)n * sizeof(*perm)))) {
		fprintf(stderr, "tensorctl train: an empty dataset\n");
		rc = TCTL_EXIT_USAGE;
		goto out;
	}
	for (int64_t k = 0; k < n; k++)
		perm[k] = (size_t)k;
	uint64_t rs = (uint64_t)o.seed * 2654435761u + 88172645463325252ull;
	size_t pos = (size_t)n;
	long log_every = o.log_every >= 0 ? o.log_every : (o.steps >= 10 ? o.steps / 10 : 1);
	tsd_tensor ts[TCTL_MAX_TENSORS + 1];
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	tctl_progress pg;
	tctl_progress_start(&pg, o.progress < 0 ? isatty(2) : o.progress, (size_t)o.steps, 0);
	double loss = NAN, sum = 0;
	long sum_n = 0, step = 0;
	for (; step < o.steps; step++) {
		struct timespec zero = {0, 0};
		if (sigtimedwait(&sigs, NULL, &zero) > 0) {
			rc = TCTL_EXIT_INTERRUPTED;
			break;
		}
		for (long b = 0; b < o.batch; b++) {
			if (pos == (size_t)n) { /* a new epoch: shuffle */
				for (size_t k = (size_t)n - 1; k > 0; k--) {
					size_t j = next_rand(&rs) % (k + 1), t = perm[k];
					perm[k] = perm[j], perm[j] = t;
				}
				pos = 0;
			}
			size_t s = perm[pos++];
			for (int c = 0; c < ncols; c++) {
				column *cl = &cols[c];
				size_t ies = tsd_dtype_size(cl->src->dtype),
				       oes = tsd_dtype_size(cl->out.dtype);
				const uint8_t *src =
					(const uint8_t *)cl->src->data + s * cl->row * ies;
				uint8_t *dst = (uint8_t *)cl->out.data + (size_t)b * cl->row * oes;
				if (cl->src->dtype == cl->out.dtype && cl->scale == 1)
					memcpy(dst, src, cl->row * oes);
				else
					for (size_t e = 0; e < cl->row; e++)
						tctl_value_store(
							cl->out.dtype,
							cl->scale * tctl_value_load(cl->src->dtype,
										    src + e * ies),
							dst + e * oes);
			}
		}
		cJSON *h = cJSON_CreateObject();
		cJSON_AddStringToObject(h, "verb", "train.step");
		cJSON_AddStringToObject(h, "model", o.model);
		if (o.lr > 0 && step == 0)
			cJSON_AddNumberToObject(h, "lr", o.lr);
		for (int c = 0; c < ncols; c++)
			ts[c] = cols[c].out;
		tsd_reply *r;
		tsd_status st = tsd_client_call(ctx->c, h, ts, ncols, &r);
		cJSON_Delete(h);
		if ((rc = tctl_outcome(ctx->c, st, r))) {
			tsd_reply_free(r);
			break;
		}
		const cJSON *l = cJSON_GetObjectItemCaseSensitive(tsd_reply_json(r), "loss");
		loss = cJSON_IsNumber(l) ? l->valuedouble : NAN;
		tsd_reply_free(r);
		sum += loss;
		sum_n++;
		char note[64];
		snprintf(note, sizeof(note), "loss %.5g", loss);
		tctl_progress_update(&pg, (size_t)step + 1, note, step + 1 == o.steps);
		if (log_every && (step + 1) % log_every == 0) {
			if (pg.on) /* the log line replaces the bar, which is redrawn below it */
				fputs("\r\033[K", stderr);
			printf("step %ld loss %.6g (mean of the last %ld: %.6g)\n", step + 1, loss,
			       sum_n, sum / (double)sum_n);
			fflush(stdout);
			sum = 0;
			sum_n = 0;
		}
	}
	tctl_progress_end(&pg);
	fprintf(stderr, "train: %ld steps of %ld samples (dataset %lld), last loss %.6g, %.3f s\n",
		step, o.batch, (long long)n, loss, tctl_now() - pg.t0);
	if (rc == TCTL_EXIT_INTERRUPTED)
		fprintf(stderr, "tensorctl train: interrupted after %ld steps\n", step);
out:
	for (int c = 0; c < ncols; c++)
		free((void *)cols[c].out.data);
	free(perm);
	tctl_inputs_free(&ds);
	free(ms);
	return rc;
}
