/* gen.c (robot_gen): a deterministic generator of labelled robot commands with paraphrases
 * ("chuck the red block in the trash" -> put red bin). Each command comes from a skeleton
 * (template, verb, object, place and preposition words, colour left free); a hash of the
 * skeleton sends it to the train or the held-out test set, so test commands are paraphrases
 * (word combinations) never seen in training, made of words that are.
 * Usage: robot_gen DIR [train (4000)] [test (600)] [seed (1)]   writes DIR/{train,test}.tsv and DIR/vocab.txt
 *        robot_gen --replay N FILE [seed]                       N JSON lines for tensorctl replay */
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "robot.h"

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const char *const put_verbs[] = {"put", "place", "move", "chuck", "toss", "drop", "stick", "throw",
					"set", "shove", "dump", "pop", "leave"};
static const char *const pick_verbs[] = {"pick up", "grab", "take", "get", "lift", "fetch", "collect",
					 "snatch", "hold", "lift up"};
static const char *const fetch_verbs[] = {"bring", "fetch", "get", "grab"};
static const char *const go_verbs[] = {"go", "head", "drive", "walk", "roll", "travel", "move", "return"};
static const char *const stops[] = {"stop", "halt", "freeze", "wait", "pause", "stop moving", "stay still",
				    "hold still", "stand still", "stay", "stop there", "halt there"};
/* colours: plan word and the words that say it */
static const struct { const char *plan, *word; } colours[] = {
	{"red", "red"}, {"blue", "blue"}, {"green", "green"}, {"yellow", "yellow"}, {"orange", "orange"},
	{"red", "scarlet"}, {"blue", "navy"}, {"green", "lime"},
};
static const char *const objects[] = {"block", "cube", "ball", "can", "brick", "thing", "toy", "piece"};
/* places: plan word, words, and whether one puts things in it (else on it) */
static const struct { const char *plan, *word; bool in; } places[] = {
	{"bin", "bin", 1}, {"bin", "trash", 1}, {"bin", "rubbish", 1}, {"bin", "garbage", 1}, {"bin", "waste bin", 1},
	{"shelf", "shelf", 0}, {"shelf", "rack", 0}, {"shelf", "ledge", 0},
	{"box", "box", 1}, {"box", "crate", 1}, {"box", "carton", 1},
	{"table", "table", 0}, {"table", "desk", 0}, {"table", "counter", 0}, {"table", "bench", 0},
};
static const char *const homes[] = {"home", "back home", "back to base", "to the dock", "to the charger",
				    "back to the base", "home now"};
static const char *const in_preps[] = {"in", "into", "inside", "in", "into", "to"};
static const char *const on_preps[] = {"on", "onto", "on", "onto", "over on", "to"};
static const char *const openers[] = {"", "please ", "could you ", "now ", "robot, "};

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}
static int pick(uint64_t *s, int n)
{
	return (int)(rng_next(s) % (uint64_t)n);
}

static uint32_t hash_str(const char *s)
{
	uint32_t h = 2166136261u;
	while (*s)
		h = (h ^ (uint8_t)*s++) * 16777619u;
	return h;
}

/* One random command into ex; its skeleton (all but the colour) into skel. */
static void make(uint64_t *s, rb_example *ex, char *skel, size_t cap)
{
	int kind = pick(s, 20), c = pick(s, N(colours)), o = pick(s, N(objects)), p = pick(s, N(places));
	int op = pick(s, N(openers)), tail = pick(s, 4);
	const char *open = openers[op], *end = tail == 0 ? " please" : "";
	const char *prep = places[p].in ? in_preps[pick(s, N(in_preps))] : on_preps[pick(s, N(on_preps))];
	if (kind < 8) { /* put */
		int v = pick(s, N(put_verbs)), form = pick(s, 3);
		const char *the = form == 1 ? "" : "the ";
		snprintf(ex->cmd, sizeof(ex->cmd), "%s%s %s%s %s %s the %s%s", open, put_verbs[v], the,
			 colours[c].word, objects[o], prep, places[p].word, end);
		snprintf(ex->plan, sizeof(ex->plan), "put %s %s", colours[c].plan, places[p].plan);
		snprintf(skel, cap, "put|%d|%s|%s|%s|%s|%d|%d", form, put_verbs[v], objects[o], prep, places[p].word, op, tail);
	} else if (kind < 12) { /* pick */
		int v = pick(s, N(pick_verbs));
		snprintf(ex->cmd, sizeof(ex->cmd), "%s%s the %s %s%s", open, pick_verbs[v], colours[c].word,
			 objects[o], end);
		snprintf(ex->plan, sizeof(ex->plan), "pick %s", colours[c].plan);
		snprintf(skel, cap, "pick|%s|%s|%d|%d", pick_verbs[v], objects[o], op, tail);
	} else if (kind < 14) { /* fetch for me: pick it and come home */
		int v = pick(s, N(fetch_verbs)), form = pick(s, 2);
		if (form)
			snprintf(ex->cmd, sizeof(ex->cmd), "%s%s me the %s %s%s", open, fetch_verbs[v], colours[c].word,
				 objects[o], end);
		else
			snprintf(ex->cmd, sizeof(ex->cmd), "%s%s the %s %s back to me%s", open, fetch_verbs[v],
				 colours[c].word, objects[o], end);
		snprintf(ex->plan, sizeof(ex->plan), "pick %s go home", colours[c].plan);
		snprintf(skel, cap, "fetch|%d|%s|%s|%d|%d", form, fetch_verbs[v], objects[o], op, tail);
	} else if (kind < 17) { /* go to a place */
		int v = pick(s, N(go_verbs)), over = pick(s, 2);
		snprintf(ex->cmd, sizeof(ex->cmd), "%s%s %sto the %s%s", open, go_verbs[v], over ? "over " : "",
			 places[p].word, end);
		snprintf(ex->plan, sizeof(ex->plan), "go %s", places[p].plan);
		snprintf(skel, cap, "go|%s|%d|%s|%d|%d", go_verbs[v], over, places[p].word, op, tail);
	} else if (kind < 18) { /* go home */
		int v = pick(s, N(go_verbs)), h = pick(s, N(homes));
		snprintf(ex->cmd, sizeof(ex->cmd), "%s%s %s%s", open, go_verbs[v], homes[h], end);
		snprintf(ex->plan, sizeof(ex->plan), "go home");
		snprintf(skel, cap, "home|%s|%s|%d|%d", go_verbs[v], homes[h], op, tail);
	} else { /* stop */
		int w = pick(s, N(stops));
		snprintf(ex->cmd, sizeof(ex->cmd), "%s%s%s", open, stops[w], end);
		snprintf(ex->plan, sizeof(ex->plan), "stop");
		snprintf(skel, cap, "stop|%s|%d|%d", stops[w], op, tail);
	}
}

static bool test_skeleton(const char *skel)
{
	return hash_str(skel) % 6 == 0;
}

static int write_sets(const char *dir, int ntrain, int ntest, uint64_t seed)
{
	rb_example *tr = calloc((size_t)ntrain, sizeof(*tr)), *te = calloc((size_t)ntest, sizeof(*te));
	bool seen[256] = {0}; /* command word ids seen in training */
	int a = 0, b = 0;
	char skel[256];
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
	for (long it = 0; tr && te && a < ntrain && it < 100L * ntrain; it++) {
		rb_example ex;
		make(&s, &ex, skel, sizeof(skel));
		if (test_skeleton(skel))
			continue;
		tr[a++] = ex;
		int32_t ids[RB_L];
		rb_tokenize(ex.cmd, ids);
		for (int k = 0; k < RB_L; k++)
			seen[ids[k]] = true;
	}
	/* held out: unseen skeletons whose words all occur in training, each command once */
	for (long it = 0; tr && te && b < ntest && it < 1000L * ntest; it++) {
		rb_example ex;
		make(&s, &ex, skel, sizeof(skel));
		if (!test_skeleton(skel))
			continue;
		int32_t ids[RB_L];
		bool ok = true;
		rb_tokenize(ex.cmd, ids);
		for (int k = 0; k < RB_L; k++)
			ok &= seen[ids[k]];
		for (int k = 0; k < b && ok; k++)
			ok = strcmp(te[k].cmd, ex.cmd) != 0;
		if (ok)
			te[b++] = ex;
	}
	int rc = !tr || !te || a < ntrain || b < ntest ? -1 : 0;
	const char *names[2] = {"train.tsv", "test.tsv"};
	rb_example *sets[2] = {tr, te};
	int counts[2] = {a, b};
	for (int k = 0; k < 2 && !rc; k++) {
		char path[512];
		snprintf(path, sizeof(path), "%s/%s", dir, names[k]);
		FILE *f = fopen(path, "w");
		if (!f) {
			perror(path);
			rc = -1;
			break;
		}
		for (int i = 0; i < counts[k]; i++)
			fprintf(f, "%s\t%s\n", sets[k][i].cmd, sets[k][i].plan);
		fclose(f);
	}
	char path[512];
	snprintf(path, sizeof(path), "%s/vocab.txt", dir);
	FILE *f = rc ? NULL : fopen(path, "w");
	if (f) {
		fprintf(f, "# command words (id: word; 0 is padding)\n");
		for (int i = 0; i < rb_ncmd; i++)
			fprintf(f, "%d %s\n", i, rb_cmd_words[i]);
		fprintf(f, "# plan words\n");
		for (int i = 0; i < rb_nplan; i++)
			fprintf(f, "%d %s\n", i, rb_plan_words[i]);
		fclose(f);
	} else if (!rc) {
		perror(path);
		rc = -1;
	}
	if (!rc)
		printf("robot_gen: %d training and %d held-out commands (unseen paraphrases) in %s\n", a, b, dir);
	else
		fprintf(stderr, "robot_gen: failed (%d of %d training, %d of %d held-out commands)\n", a, ntrain, b, ntest);
	free(tr);
	free(te);
	return rc;
}

static int write_replay(long n, const char *path, uint64_t seed)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		return -1;
	}
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 7;
	char skel[256];
	for (long i = 0; i < n; i++) {
		rb_example ex;
		int32_t ids[RB_L];
		make(&s, &ex, skel, sizeof(skel));
		rb_tokenize(ex.cmd, ids);
		fprintf(f, "{\"id\": %ld, \"model\": \"brain\", \"inputs\": {\"ids\": [", i);
		for (int k = 0; k < RB_L; k++)
			fprintf(f, "%s%d", k ? ", " : "", ids[k]);
		fprintf(f, "]}}\n");
	}
	if (fclose(f)) {
		perror(path);
		return -1;
	}
	printf("robot_gen: %ld commands in %s\n", n, path);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "--replay"))
		return write_replay(atol(argv[2]), argv[3], argc > 4 ? strtoull(argv[4], NULL, 10) : 1) ? 1 : 0;
	if (argc < 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: robot_gen DIR [train (4000)] [test (600)] [seed (1)]\n"
				"       robot_gen --replay N FILE [seed]\n");
		return 2;
	}
	int ntrain = argc > 2 ? atoi(argv[2]) : 4000, ntest = argc > 3 ? atoi(argv[3]) : 600;
	uint64_t seed = argc > 4 ? strtoull(argv[4], NULL, 10) : 1;
	if (ntrain < 1 || ntest < 1) {
		fprintf(stderr, "robot_gen: counts must be positive\n");
		return 2;
	}
	if (mkdir(argv[1], 0755) && errno != EEXIST) {
		fprintf(stderr, "robot_gen: cannot create %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	return write_sets(argv[1], ntrain, ntest, seed) ? 1 : 0;
}
