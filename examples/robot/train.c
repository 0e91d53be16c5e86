/* train.c (robot_train): trains the robot brain through a running tensord: loads the
 * teacher-forced training spec with seeded initial weights (also written to
 * OUT/brain_init.safetensors), runs train.step on random batches, takes the weights back with
 * model.save (OUT/brain.safetensors, OUT/brain.json: a preloadable serving spec), loads the
 * serving spec "brain" (the whole greedy decode in one graph) and reports exact-plan accuracy on
 * the held-out unseen paraphrases through infer.
 * Usage: robot_train DATA_DIR [--url URL] [--out DIR (DATA_DIR)] [--steps N (1500)] [--batch B (128)]
 *                    [--lr X (0.01)] [--seed S] [--min-acc PCT] [--name NAME (brain)]
 *                    [--serve-max B (4096): the serving model's largest batch]
 * Exit status 3 when the held-out accuracy is below --min-acc. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "weights.h"

typedef struct rb_set {
	int n;
	int32_t *ids;    /* n x RB_L */
	int32_t *plan;   /* n x RB_T */
	rb_example *ex;
} rb_set;

static int load_set(const char *dir, const char *file, rb_set *s)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	memset(s, 0, sizeof(*s));
	if ((s->n = rb_read_examples(path, &s->ex)) <= 0) {
		fprintf(stderr, "%s: no examples\n", path);
		return -1;
	}
	s->ids = malloc(sizeof(int32_t) * (size_t)s->n * RB_L);
	s->plan = malloc(sizeof(int32_t) * (size_t)s->n * RB_T);
	if (!s->ids || !s->plan)
		return -1;
	for (int i = 0; i < s->n; i++) {
		rb_tokenize(s->ex[i].cmd, s->ids + (size_t)i * RB_L);
		if (!rb_plan_parse(s->ex[i].plan, s->plan + (size_t)i * RB_T)) {
			fprintf(stderr, "%s:%d: bad plan \"%s\"\n", path, i + 1, s->ex[i].plan);
			return -1;
		}
	}
	return 0;
}

static void free_set(rb_set *s)
{
	free(s->ids);
	free(s->plan);
	free(s->ex);
}

/* model.load of spec (taken) with weights w; 0 or -1 (printed). */
static int load(tsd_client *c, cJSON *spec, const rb_weights *w)
{
	tsd_tensor ts[RB_NPARAMS];
	rb_weights_tensors(w, ts);
	tsd_reply *r = NULL;
	tsd_status st = tsd_client_call(c, spec, ts, RB_NPARAMS, &r);
	if (st != TSD_OK)
		fprintf(stderr, "model.load %s: %s: %s\n", cJSON_GetStringValue(cJSON_GetObjectItem(spec, "name")),
			tsd_status_name(st), tsd_client_message(c, r));
	tsd_reply_free(r);
	cJSON_Delete(spec);
	return st == TSD_OK ? 0 : -1;
}

/* Exact-plan accuracy (percent) of model on s through infer, in calls of at most chunk rows;
 * the first `show` mistakes printed. -1 on failure. */
static double accuracy(tsd_client *c, const char *model, const rb_set *s, int chunk, int show)
{
	int32_t *out = malloc(sizeof(int32_t) * (size_t)s->n * RB_T);
	int right = 0;
	for (int at = 0; out && at < s->n; at += chunk) {
		int rows = s->n - at < chunk ? s->n - at : chunk;
		if (rb_infer(c, model, "bulk", s->ids + (size_t)at * RB_L, rows, out + (size_t)at * RB_T)) {
			free(out);
			return -1;
		}
	}
	for (int i = 0; out && i < s->n; i++) {
		bool ok = !memcmp(out + (size_t)i * RB_T, s->plan + (size_t)i * RB_T, sizeof(int32_t) * RB_T);
		right += ok;
		if (!ok && show-- > 0) {
			char got[96];
			rb_plan_format(out + (size_t)i * RB_T, got, sizeof(got));
			printf("  miss: \"%s\" -> %s (want %s)\n", s->ex[i].cmd, got, s->ex[i].plan);
		}
	}
	free(out);
	return out ? 100.0 * right / s->n : -1;
}

/* steps train.step calls on random batches of b rows; 0 or -1. */
static int train(tsd_client *c, const char *model, const rb_set *s, int steps, int b, uint64_t seed)
{
	int32_t *ids = malloc(sizeof(int32_t) * (size_t)b * RB_L), *prev = malloc(sizeof(int32_t) * (size_t)b * RB_T);
	float *tgt = malloc(sizeof(float) * (size_t)b * RB_T * (size_t)rb_nplan);
	cJSON *h = cJSON_CreateObject();
	cJSON_AddStringToObject(h, "verb", "train.step");
	cJSON_AddStringToObject(h, "model", model);
	uint64_t r = seed * 0x9e3779b97f4a7c15ull + 5, t0 = rb_now_ns();
	int rc = ids && prev && tgt ? 0 : -1;
	double avg = 0;
	for (int step = 1; step <= steps && !rc; step++) {
		memset(tgt, 0, sizeof(float) * (size_t)b * RB_T * (size_t)rb_nplan);
		for (int i = 0; i < b; i++) {
			r ^= r << 13, r ^= r >> 7, r ^= r << 17;
			int k = (int)(r % (uint64_t)s->n);
			const int32_t *p = s->plan + (size_t)k * RB_T;
			memcpy(ids + (size_t)i * RB_L, s->ids + (size_t)k * RB_L, sizeof(int32_t) * RB_L);
			for (int t = 0; t < RB_T; t++) { /* teacher forcing: the previous word is the true one */
				prev[(size_t)i * RB_T + t] = t ? p[t - 1] : RB_START;
				tgt[((size_t)i * RB_T + t) * (size_t)rb_nplan + (size_t)p[t]] = 1.0f;
			}
		}
		tsd_tensor ts[3] = {
			{.name = "ids", .dtype = TSD_I32, .ndim = 2, .shape = {b, RB_L}, .data = ids,
			 .nbytes = sizeof(int32_t) * (size_t)b * RB_L},
			{.name = "prev", .dtype = TSD_I32, .ndim = 2, .shape = {b, RB_T}, .data = prev,
			 .nbytes = sizeof(int32_t) * (size_t)b * RB_T},
			{.name = "target", .dtype = TSD_F32, .ndim = 2, .shape = {b, RB_T * rb_nplan}, .data = tgt,
			 .nbytes = sizeof(float) * (size_t)b * RB_T * (size_t)rb_nplan},
		};
		tsd_reply *rep = NULL;
		tsd_status st = tsd_client_call(c, h, ts, 3, &rep);
		if (st != TSD_OK) {
			fprintf(stderr, "train.step %d: %s: %s\n", step, tsd_status_name(st), tsd_client_message(c, rep));
			rc = -1;
		} else {
			/* the loss includes T*log(T) from the joined steps (spec.c); show the steps' own */
			double loss = cJSON_GetNumberValue(cJSON_GetObjectItem(tsd_reply_json(rep), "loss"));
			loss = (loss - RB_T * log(RB_T)) / RB_T;
			avg = step == 1 ? loss : 0.95 * avg + 0.05 * loss;
			if (step % 250 == 0 || step == steps)
				printf("step %5d  loss per step %.4f  (%.1f s)\n", step, avg, (double)(rb_now_ns() - t0) / 1e9);
		}
		tsd_reply_free(rep);
	}
	cJSON_Delete(h);
	free(ids);
	free(prev);
	free(tgt);
	return rc;
}

static int verb_name(tsd_client *c, const char *verb, const char *name, tsd_reply **out)
{
	cJSON *h = cJSON_CreateObject();
	cJSON_AddStringToObject(h, "verb", verb);
	cJSON_AddStringToObject(h, "name", name);
	tsd_reply *r = NULL;
	tsd_status st = tsd_client_call(c, h, NULL, 0, &r);
	cJSON_Delete(h);
	if (st != TSD_OK)
		fprintf(stderr, "%s %s: %s: %s\n", verb, name, tsd_status_name(st), tsd_client_message(c, r));
	if (out && st == TSD_OK)
		*out = r;
	else
		tsd_reply_free(r);
	return st == TSD_OK ? 0 : -1;
}

/* OUT/NAME.json: the serving spec (without verb) with weights NAME.safetensors, for preload. */
static int write_spec(const char *out, const char *name, int batch_max)
{
	char path[512], wname[160];
	cJSON *s = rb_spec_serve(name, batch_max, 200);
	cJSON_DeleteItemFromObject(s, "verb");
	snprintf(wname, sizeof(wname), "%s.safetensors", name);
	cJSON_AddStringToObject(s, "weights", wname);
	snprintf(path, sizeof(path), "%s/%s.json", out, name);
	char *text = cJSON_Print(s);
	FILE *f = fopen(path, "w");
	int rc = f && text && fputs(text, f) >= 0 ? 0 : -1;
	if (f && fclose(f))
		rc = -1;
	if (rc)
		perror(path);
	free(text);
	cJSON_Delete(s);
	return rc;
}

int main(int argc, char **argv)
{
	const char *data = NULL, *url_arg = NULL, *out = NULL, *name = "brain";
	int steps = 1500, batch = 128, batch_max = 4096;
	double lr = 0.01, min_acc = -1;
	uint64_t seed = 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--url") && v)
			url_arg = argv[++i];
		else if (!strcmp(a, "--out") && v)
			out = argv[++i];
		else if (!strcmp(a, "--name") && v)
			name = argv[++i];
		else if (!strcmp(a, "--steps") && v)
			steps = atoi(argv[++i]);
		else if (!strcmp(a, "--batch") && v)
			batch = atoi(argv[++i]);
		else if (!strcmp(a, "--lr") && v)
			lr = atof(argv[++i]);
		else if (!strcmp(a, "--seed") && v)
			seed = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(a, "--serve-max") && v)
			batch_max = atoi(argv[++i]);
		else if (!strcmp(a, "--min-acc") && v)
			min_acc = atof(argv[++i]);
		else if (a[0] != '-' && !data)
			data = a;
		else {
			fprintf(stderr, "usage: robot_train DATA_DIR [--url URL] [--out DIR] [--steps N] [--batch B] "
					"[--lr X] [--seed S] [--min-acc PCT] [--name NAME] [--serve-max B]\n");
			return 2;
		}
	}
	if (!data || steps < 0 || batch < 1 || batch > 4096 || batch_max < 1 || batch_max > 4096 || !(lr > 0)) {
		fprintf(stderr, "robot_train: a data directory, steps >= 0, batch and serve-max in [1, 4096], lr > 0\n");
		return 2;
	}
	out = out ? out : data;
	char url[512], path[600], train_name[96];
	rb_url(url_arg, url, sizeof(url));
	snprintf(train_name, sizeof(train_name), "%s_train", name);
	rb_set tr, te;
	rb_weights w;
	if (load_set(data, "train.tsv", &tr) || load_set(data, "test.tsv", &te) || rb_weights_init(&w, seed))
		return 1;
	snprintf(path, sizeof(path), "%s/%s_init.safetensors", out, name);
	if (rb_weights_save(&w, path))
		return 1;
	char err[256];
	tsd_client *c = tsd_client_open(url, 600000, err, sizeof(err));
	if (!c) {
		fprintf(stderr, "robot_train: %s: %s (is tensord running? make run)\n", url, err);
		return 1;
	}
	printf("robot_train: %d training commands, %d held out; %d command words, %d plan words; %s\n", tr.n, te.n,
	       rb_ncmd, rb_nplan, url);
	int rc = 1;
	tsd_reply *saved = NULL;
	uint64_t t0 = rb_now_ns();
	if (load(c, rb_spec_train(train_name, batch, lr), &w) || train(c, train_name, &tr, steps, batch, seed) ||
	    verb_name(c, "model.save", train_name, &saved))
		goto done;
	printf("trained %d steps of %d in %.1f s through train.step\n", steps, batch, (double)(rb_now_ns() - t0) / 1e9);
	rb_weights_free(&w);
	if (rb_weights_from_reply(&w, saved))
		goto done;
	snprintf(path, sizeof(path), "%s/%s.safetensors", out, name);
	if (rb_weights_save(&w, path) || write_spec(out, name, batch_max))
		goto done;
	printf("saved %s and %s/%s.json\n", path, out, name);
	verb_name(c, "model.unload", train_name, NULL);
	t0 = rb_now_ns();
	if (load(c, rb_spec_serve(name, batch_max, 200), &w))
		goto done;
	printf("loaded \"%s\" for serving (buckets compiled in %.1f s)\n", name, (double)(rb_now_ns() - t0) / 1e9);
	double acc_tr = accuracy(c, name, &tr, batch_max, 0), acc = accuracy(c, name, &te, batch_max, 8);
	if (acc < 0 || acc_tr < 0)
		goto done;
	printf("exact-plan accuracy: held-out (unseen paraphrases) %.1f%% of %d, training %.1f%% of %d\n", acc, te.n,
	       acc_tr, tr.n);
	rc = min_acc >= 0 && acc < min_acc ? 3 : 0;
	if (rc)
		fprintf(stderr, "robot_train: held-out accuracy %.1f%% is below %.1f%%\n", acc, min_acc);
done:
	tsd_reply_free(saved);
	tsd_client_close(c);
	rb_weights_free(&w);
	free_set(&tr);
	free_set(&te);
	return rc;
}
