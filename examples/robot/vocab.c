/* vocab.c: the robot brain's two vocabularies (command words with their paraphrase synonyms,
 * plan words), the tokeniser of commands and the parsing and printing of plans. */
#include <ctype.h>
#include <string.h>

#include "robot.h"

/* id 0 is padding; the generator (gen.c) uses only these words besides the stop words. */
const char *const rb_cmd_words[] = {
	"<pad>",
	/* putting */ "put", "place", "move", "chuck", "toss", "drop", "stick", "throw", "set", "shove",
	"dump", "pop", "leave",
	/* picking */ "pick", "grab", "take", "get", "lift", "fetch", "bring", "collect", "snatch", "hold",
	/* going */ "go", "head", "drive", "return", "walk", "roll", "come", "travel",
	/* stopping */ "stop", "halt", "freeze", "wait", "pause", "still", "stay", "moving", "stand",
	/* colours */ "red", "blue", "green", "yellow", "orange", "scarlet", "navy", "lime",
	/* objects */ "block", "cube", "ball", "can", "brick", "thing", "toy", "piece",
	/* places */ "bin", "trash", "rubbish", "garbage", "waste", "shelf", "rack", "ledge", "box", "crate",
	"carton", "table", "desk", "counter", "bench", "home", "base", "dock", "charger",
	/* small words */ "in", "into", "on", "onto", "to", "inside", "up", "over", "at", "back", "me", "and",
};
const int rb_ncmd = (int)(sizeof(rb_cmd_words) / sizeof(rb_cmd_words[0]));

const char *const rb_plan_words[] = {
	"<end>", "<start>", "put", "pick", "go", "stop", "home", "red", "blue", "green", "yellow", "orange",
	"bin", "shelf", "box", "table",
};
const int rb_nplan = (int)(sizeof(rb_plan_words) / sizeof(rb_plan_words[0]));

/* words that carry nothing for the plan; dropped so that the rest fits in RB_L tokens */
static const char *const stop_words[] = {"the", "a", "an", "please", "could", "you", "would", "kindly",
					 "now", "it", "my", "your", "then"};

static int lookup(const char *const *words, int n, const char *w)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(words[i], w))
			return i;
	return -1;
}

int rb_tokenize(const char *text, int32_t ids[RB_L])
{
	int n = 0;
	memset(ids, 0, sizeof(int32_t) * RB_L);
	for (const char *p = text; *p;) {
		char w[32];
		size_t len = 0;
		while (*p && !isalpha((unsigned char)*p))
			p++;
		while (isalpha((unsigned char)*p)) {
			if (len + 1 < sizeof(w))
				w[len++] = (char)tolower((unsigned char)*p);
			p++;
		}
		w[len] = 0;
		if (!len || lookup(stop_words, (int)(sizeof(stop_words) / sizeof(*stop_words)), w) >= 0)
			continue;
		int id = lookup(rb_cmd_words, rb_ncmd, w);
		if (id > 0 && n < RB_L)
			ids[n++] = id;
	}
	return n;
}

bool rb_plan_parse(const char *text, int32_t ids[RB_T])
{
	char buf[128];
	int n = 0;
	snprintf(buf, sizeof(buf), "%s", text);
	for (int t = 0; t < RB_T; t++)
		ids[t] = RB_END;
	for (char *save = NULL, *w = strtok_r(buf, " \t\r\n", &save); w; w = strtok_r(NULL, " \t\r\n", &save)) {
		int id = lookup(rb_plan_words, rb_nplan, w);
		if (id <= RB_START || n >= RB_T - 1)
			return false;
		ids[n++] = id;
	}
	return n > 0;
}

void rb_plan_format(const int32_t ids[RB_T], char *out, size_t cap)
{
	size_t at = 0;
	out[0] = 0;
	for (int t = 0; t < RB_T && ids[t] != RB_END && at < cap; t++) {
		const char *w = ids[t] >= 0 && ids[t] < rb_nplan ? rb_plan_words[ids[t]] : "?";
		at += (size_t)snprintf(out + at, cap - at, "%s%s", at ? " " : "", w);
	}
}
