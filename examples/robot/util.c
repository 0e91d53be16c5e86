/* util.c: the robot programs' small helpers: reading the generator's example files, infer of
 * token ids through the client library, the daemon's address, clocks and percentiles. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "robot.h"

int rb_read_examples(const char *path, rb_example **out)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		perror(path);
		return -1;
	}
	int n = 0, cap = 0;
	rb_example *ex = NULL;
	char line[512];
	while (fgets(line, sizeof(line), f)) {
		char *tab = strchr(line, '\t');
		if (!tab)
			continue;
		*tab = 0;
		tab[strcspn(tab + 1, "\r\n") + 1] = 0;
		if (n == cap) {
			cap = cap ? 2 * cap : 1024;
			rb_example *g = realloc(ex, sizeof(*ex) * (size_t)cap);
			if (!g) {
				free(ex);
				fclose(f);
				return -1;
			}
			ex = g;
		}
		size_t lc = strlen(line), lp = strlen(tab + 1);
		if (lc >= sizeof(ex[n].cmd) || lp >= sizeof(ex[n].plan))
			continue; /* longer than any command the generator makes */
		memcpy(ex[n].cmd, line, lc + 1);
		memcpy(ex[n].plan, tab + 1, lp + 1);
		n++;
	}
	fclose(f);
	*out = ex;
	return n;
}

tsd_status rb_infer(tsd_client *c, const char *model, const char *prio, const int32_t *ids, int rows,
		    int32_t *plans)
{
	cJSON *h = cJSON_CreateObject();
	cJSON_AddStringToObject(h, "verb", "infer");
	cJSON_AddStringToObject(h, "model", model);
	cJSON_AddStringToObject(h, "priority", prio);
	tsd_tensor in = {.name = "ids", .dtype = TSD_I32, .ndim = 2, .shape = {rows, RB_L}, .data = ids,
			 .nbytes = sizeof(int32_t) * (size_t)rows * RB_L};
	tsd_reply *r = NULL;
	tsd_status st = tsd_client_call(c, h, &in, 1, &r);
	cJSON_Delete(h);
	const tsd_tensor *p = st == TSD_OK ? tsd_reply_find(r, "plan") : NULL;
	if (st == TSD_OK && (!p || p->dtype != TSD_I32 || p->nbytes != sizeof(int32_t) * (size_t)rows * RB_T))
		st = TSD_INTERNAL;
	if (st == TSD_OK)
		memcpy(plans, p->data, p->nbytes);
	else
		fprintf(stderr, "infer %s: %s: %s\n", model, tsd_status_name(st),
			r || !p ? tsd_client_message(c, r) : "no int32 plan output");
	tsd_reply_free(r);
	return st;
}

void rb_url(const char *arg, char *out, size_t cap)
{
	if (arg && *arg) {
		snprintf(out, cap, "%s", arg);
		return;
	}
	if (!tsd_client_default_url(getenv("TENSORD_URL"), getenv("XDG_RUNTIME_DIR"), out, cap))
		snprintf(out, cap, "unix:///run/tensord/tensord.sock");
}

uint64_t rb_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

uint64_t rb_pct(uint64_t *t, size_t n, double p)
{
	if (!n)
		return 0;
	qsort(t, n, sizeof(*t), cmp_u64);
	size_t i = (size_t)(p * (double)n);
	return t[i < n ? i : n - 1];
}
