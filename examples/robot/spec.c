/* spec.c: the robot brain as graph-format JSON (docs/PROTOCOL.md): the serving spec runs the
 * whole greedy decode in one graph; the training spec shares its params and is teacher-forced;
 * the fleet's recurrent policy (policy.h) keeps its state in the daemon, one sequence a robot. */
#include <stdarg.h>
#include <stdio.h>

#include "policy.h"
#include "robot.h"

int rb_emb_rows(void)
{
	return (rb_ncmd - 1 + 15) / 16 * 16;
}

const char *const rb_param_names[RB_NPARAMS] = {"emb", "b1", "prev_emb", "pos", "w_out", "b_out"};

void rb_param_shape(int k, int *ndim, int64_t shape[2])
{
	const int64_t v = rb_emb_rows(), p = rb_nplan;
	const int64_t s[RB_NPARAMS][2] = {{v, RB_H}, {RB_H, 0}, {p, RB_H}, {RB_T, RB_H}, {RB_H, p}, {p, 0}};
	*ndim = s[k][1] ? 2 : 1;
	shape[0] = s[k][0];
	shape[1] = s[k][1];
}

/* {"id": id, "op": op, "in": [in...]} appended to nodes; returns it for attributes. */
static cJSON *node(cJSON *nodes, const char *id, const char *op, int nin, ...)
{
	cJSON *n = cJSON_CreateObject();
	cJSON_AddStringToObject(n, "id", id);
	cJSON_AddStringToObject(n, "op", op);
	if (nin) {
		cJSON *in = cJSON_AddArrayToObject(n, "in");
		va_list ap;
		va_start(ap, nin);
		for (int k = 0; k < nin; k++)
			cJSON_AddItemToArray(in, cJSON_CreateString(va_arg(ap, const char *)));
		va_end(ap);
	}
	cJSON_AddItemToArray(nodes, n);
	return n;
}

static void leaf(cJSON *nodes, const char *id, const char *op, const char *dtype, int ndim, const int64_t *shape)
{
	cJSON *n = node(nodes, id, op, 0);
	cJSON_AddStringToObject(n, "dtype", dtype);
	cJSON *s = cJSON_AddArrayToObject(n, "shape");
	for (int d = 0; d < ndim; d++)
		cJSON_AddItemToArray(s, cJSON_CreateNumber((double)shape[d]));
}

/* The params, ids and the context vector "ctx" [B, H]: the bag of words (one_hot of ids - 1 over
 * the V - 1 real words, so padding 0 gives a zero row, summed over the tokens) times emb, + b1.
 * per_word: the same product as each token's one-hot row times emb, summed over the tokens
 * (the engine reads those as rows of emb: no compare over the V words, no matmul). */
static void encoder(cJSON *nodes, bool per_word)
{
	for (int k = 0; k < RB_NPARAMS; k++) {
		int nd;
		int64_t s[2];
		rb_param_shape(k, &nd, s);
		leaf(nodes, rb_param_names[k], "param", "float32", nd, s);
	}
	leaf(nodes, "ids", "input", "int32", 2, (int64_t[]){-1, RB_L});
	cJSON *one = node(nodes, "one", "const", 0);
	cJSON_AddNumberToObject(one, "value", 1);
	cJSON_AddStringToObject(one, "dtype", "int32");
	node(nodes, "ids1", "sub", 2, "ids", "one");
	cJSON_AddNumberToObject(node(nodes, "words", "one_hot", 1, "ids1"), "num_classes", rb_emb_rows());
	if (per_word) {
		node(nodes, "wordemb", "matmul", 2, "words", "emb"); /* [B, L, H] */
		cJSON_AddNumberToObject(node(nodes, "bagemb", "sum", 1, "wordemb"), "axes", 1);
	} else {
		cJSON_AddNumberToObject(node(nodes, "bag", "sum", 1, "words"), "axes", 1);
		node(nodes, "bagemb", "matmul", 2, "bag", "emb");
	}
	node(nodes, "ctx", "add", 2, "bagemb", "b1");
}

static cJSON *spec(const char *name, cJSON *nodes, const char *out)
{
	cJSON *s = cJSON_CreateObject();
	cJSON_AddStringToObject(s, "verb", "model.load");
	cJSON_AddStringToObject(s, "name", name);
	cJSON *g = cJSON_AddObjectToObject(s, "graph");
	cJSON_AddItemToObject(g, "nodes", nodes);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(g, "outputs"), cJSON_CreateString(out));
	return s;
}

static void batching(cJSON *s, int max, const int *buckets, int n, int delay_us)
{
	cJSON *b = cJSON_AddObjectToObject(s, "batching");
	cJSON_AddNumberToObject(b, "max", max);
	cJSON_AddNumberToObject(b, "delay_us", delay_us);
	cJSON *a = cJSON_AddArrayToObject(b, "buckets");
	for (int k = 0; k < n; k++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber(buckets[k]));
}

cJSON *rb_spec_serve(const char *name, int batch_max, int delay_us)
{
	cJSON *nodes = cJSON_CreateArray();
	encoder(nodes, true);
	char id[8][32], ys[RB_T][16], hot[32] = "";
	for (int t = 0; t < RB_T; t++) {
		snprintf(id[0], 32, "s%d_pe", t);
		if (t == 0) { /* the start token's row */
			cJSON *n = node(nodes, id[0], "slice", 1, "prev_emb");
			cJSON_AddNumberToObject(n, "axis", 0);
			cJSON_AddNumberToObject(n, "start", RB_START);
			cJSON_AddNumberToObject(n, "stop", RB_START + 1);
		} else { /* the previous word's row, by the one-hot of its argmax (below) */
			node(nodes, id[0], "matmul", 2, hot, "prev_emb");
		}
		snprintf(id[2], 32, "s%d_pos", t);
		cJSON *n = node(nodes, id[2], "slice", 1, "pos");
		cJSON_AddNumberToObject(n, "axis", 0);
		cJSON_AddNumberToObject(n, "start", t);
		cJSON_AddNumberToObject(n, "stop", t + 1);
		snprintf(id[3], 32, "s%d_a", t);
		node(nodes, id[3], "add", 2, "ctx", id[0]);
		snprintf(id[4], 32, "s%d_b", t);
		node(nodes, id[4], "add", 2, id[3], id[2]);
		snprintf(id[5], 32, "s%d_h", t);
		node(nodes, id[5], "relu", 1, id[4]);
		snprintf(id[6], 32, "s%d_l", t);
		node(nodes, id[6], "matmul", 2, id[5], "w_out");
		snprintf(id[7], 32, "s%d_z", t);
		node(nodes, id[7], "add", 2, id[6], "b_out");
		snprintf(ys[t], 16, "s%d_y", t);
		cJSON_AddNumberToObject(node(nodes, ys[t], "argmax", 1, id[7]), "axis", -1);
		if (t + 1 == RB_T)
			break;
		/* the next step's previous word: the one-hot row of this argmax (the engine reads
		 * prev_emb's row at the argmax: no matmul) */
		snprintf(hot, sizeof(hot), "s%d_hot", t);
		cJSON_AddNumberToObject(node(nodes, hot, "one_hot", 1, ys[t]), "num_classes", rb_nplan);
	}
	cJSON *st = node(nodes, "plan", "stack", 0);
	cJSON *in = cJSON_AddArrayToObject(st, "in");
	for (int t = 0; t < RB_T; t++)
		cJSON_AddItemToArray(in, cJSON_CreateString(ys[t]));
	cJSON_AddNumberToObject(st, "axis", 1);
	cJSON *s = spec(name, nodes, "plan");
	int b[16], nb = 0;
	for (int k = 1; k <= batch_max && k <= 64; k *= 2)
		b[nb++] = k;
	if (batch_max >= 512)
		b[nb++] = 512;
	if (b[nb - 1] != batch_max)
		b[nb++] = batch_max;
	batching(s, batch_max, b, nb, delay_us);
	return s;
}

cJSON *rb_spec_train(const char *name, int batch, double lr)
{
	cJSON *nodes = cJSON_CreateArray();
	encoder(nodes, false);
	leaf(nodes, "prev", "input", "int32", 2, (int64_t[]){-1, RB_T});
	cJSON_AddNumberToObject(node(nodes, "prev_oh", "one_hot", 1, "prev"), "num_classes", rb_nplan);
	node(nodes, "pe", "matmul", 2, "prev_oh", "prev_emb");           /* [B, T, H] */
	cJSON *r = node(nodes, "ctx3", "reshape", 1, "ctx");             /* [B, 1, H] */
	cJSON_AddItemToObject(r, "shape", cJSON_CreateIntArray((int[]){-1, 1, RB_H}, 3));
	node(nodes, "a", "add", 2, "ctx3", "pe");
	node(nodes, "b", "add", 2, "a", "pos");
	node(nodes, "h", "relu", 1, "b");
	node(nodes, "l", "matmul", 2, "h", "w_out");
	node(nodes, "z", "add", 2, "l", "b_out");                         /* [B, T, P] */
	cJSON_AddNumberToObject(node(nodes, "lp", "log_softmax", 1, "z"), "axis", -1);
	/* cross_entropy takes [N, C]: the steps side by side. Its log_softmax over all T*P of lp
	 * only subtracts log T (each step's probabilities sum to 1), so the loss is the sum of the
	 * steps' cross-entropies plus a constant and the gradients are theirs. */
	r = node(nodes, "flat", "reshape", 1, "lp");
	cJSON_AddItemToObject(r, "shape", cJSON_CreateIntArray((int[]){-1, RB_T * rb_nplan}, 2));
	cJSON *s = spec(name, nodes, "flat");
	batching(s, batch, &batch, 1, 0);
	cJSON *tr = cJSON_AddObjectToObject(s, "train");
	cJSON_AddStringToObject(tr, "loss", "cross_entropy");
	cJSON_AddStringToObject(tr, "output", "flat");
	cJSON_AddStringToObject(tr, "target", "target");
	cJSON *opt = cJSON_AddObjectToObject(tr, "optimizer");
	cJSON_AddStringToObject(opt, "kind", "adam");
	cJSON_AddNumberToObject(opt, "lr", lr);
	return s;
}

static void constant(cJSON *nodes, const char *id, double v)
{
	cJSON *n = node(nodes, id, "const", 0);
	cJSON_AddNumberToObject(n, "value", v);
	cJSON_AddStringToObject(n, "dtype", "float32");
}

cJSON *rb_spec_policy(const char *name, int batch_max, int delay_us, int max_sequences)
{
	cJSON *nodes = cJSON_CreateArray();
	leaf(nodes, "obs", "input", "float32", 2, (int64_t[]){-1, RB_OBS});
	leaf(nodes, "h", "input", "float32", 2, (int64_t[]){-1, RB_HID});
	leaf(nodes, "W", "param", "float32", 2, (int64_t[]){RB_HID, RB_OBS});
	leaf(nodes, "U", "param", "float32", 2, (int64_t[]){RB_HID, RB_HID});
	leaf(nodes, "V", "param", "float32", 2, (int64_t[]){RB_ACT, RB_HID});
	leaf(nodes, "c", "param", "float32", 1, (int64_t[]){RB_ACT});
	node(nodes, "a", "linear", 2, "obs", "W");
	node(nodes, "b", "linear", 2, "h", "U");
	node(nodes, "s", "add", 2, "a", "b");
	/* clip(s, -R, R) = R - relu(2R - relu(s + R)): integers stay integers */
	constant(nodes, "R", RB_CLIP);
	constant(nodes, "R2", 2 * RB_CLIP);
	node(nodes, "lo", "add", 2, "s", "R");
	node(nodes, "lo_r", "relu", 1, "lo");
	node(nodes, "hi", "sub", 2, "R2", "lo_r");
	node(nodes, "hi_r", "relu", 1, "hi");
	node(nodes, "hn", "sub", 2, "R", "hi_r");
	node(nodes, "q", "linear", 3, "hn", "V", "c");
	cJSON_AddNumberToObject(node(nodes, "act", "argmax", 1, "q"), "axis", -1);
	cJSON *s = spec(name, nodes, "act");
	cJSON *outs = cJSON_GetObjectItem(cJSON_GetObjectItem(s, "graph"), "outputs");
	cJSON_AddItemToArray(outs, cJSON_CreateString("q"));
	cJSON_AddItemToArray(outs, cJSON_CreateString("hn"));
	cJSON *in = cJSON_AddArrayToObject(s, "inputs");
	cJSON_AddItemToArray(in, cJSON_CreateString("obs"));
	cJSON_AddItemToArray(in, cJSON_CreateString("h"));
	int b[16], nb = 0;
	for (int k = 1; k < batch_max && nb < 15; k *= 2)
		b[nb++] = k;
	b[nb++] = batch_max;
	batching(s, batch_max, b, nb, delay_us);
	cJSON *q = cJSON_AddObjectToObject(s, "sequence");
	cJSON *pair = cJSON_CreateObject();
	cJSON_AddStringToObject(pair, "input", "h");
	cJSON_AddStringToObject(pair, "output", "hn");
	cJSON_AddNumberToObject(pair, "init", 0);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(q, "state"), pair);
	cJSON_AddNumberToObject(q, "max_sequences", max_sequences);
	return s;
}
