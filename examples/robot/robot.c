/* robot.c (robot): one robot asking the brain for one plan at a time: each command (the
 * arguments, else stdin lines) is tokenised and sent as a realtime infer of one row; the plan
 * and the decision's round trip are printed. --bench N times N decisions and, in the same run
 * and alternating with them call by call (so that both see the same machine), N round trips of
 * a plain nng REQ/REP echo in a process of its own, as the daemon is, with messages of the same
 * sizes (bench/daemon_bench.h), and prints both p50/p95 and their ratio.
 * Usage: robot [--url URL] [--model brain] [--bench N] [command ...] */
#include <stdlib.h>
#include <string.h>

#include "../../bench/daemon_bench.h"
#include "robot.h"

#define ROUNDS 10

static const char *const bench_cmds[] = {
	"chuck the red block in the trash", "please pick up the blue ball", "go to the shelf", "stop",
	"could you bring me the green cube", "toss the yellow can onto the table", "head back home",
	"place the orange brick in the crate",
};

static int decide(tsd_client *c, const char *model, const char *cmd)
{
	int32_t ids[RB_L], plan[RB_T];
	char text[96];
	if (!rb_tokenize(cmd, ids))
		fprintf(stderr, "robot: no known word in \"%s\"\n", cmd);
	uint64_t t0 = rb_now_ns();
	if (rb_infer(c, model, "realtime", ids, 1, plan))
		return -1;
	uint64_t dt = rb_now_ns() - t0;
	rb_plan_format(plan, text, sizeof(text));
	printf("%-44s -> %-20s (%.3f ms)\n", cmd, text, (double)dt / 1e6);
	fflush(stdout);
	return 0;
}

/* n echo round trips of req bytes into t. */
static int echo_times(nng_socket sk, size_t req, int n, uint64_t *t)
{
	for (int i = 0; i < n; i++) {
		nng_msg *m;
		uint64_t t0 = rb_now_ns();
		if (nng_msg_alloc(&m, req))
			return -1;
		memset(nng_msg_body(m), 0x5a, req);
		if (nng_sendmsg(sk, m, 0)) {
			nng_msg_free(m);
			return -1;
		}
		if (nng_recvmsg(sk, &m, 0))
			return -1;
		nng_msg_free(m);
		t[i] = rb_now_ns() - t0;
	}
	return 0;
}

static int bench(tsd_client *c, const char *url, const char *model, int n)
{
	int ncmd = (int)(sizeof(bench_cmds) / sizeof(*bench_cmds)), per = (n + ROUNDS - 1) / ROUNDS;
	int32_t ids[8][RB_L], plan[RB_T];
	for (int k = 0; k < ncmd; k++)
		rb_tokenize(bench_cmds[k], ids[k]);
	/* the real request and reply sizes, through a relay */
	char probe[128], echo_url[128];
	snprintf(probe, sizeof(probe), "ipc:///tmp/robot-probe-%d.sock", (int)getpid());
	snprintf(echo_url, sizeof(echo_url), "ipc:///tmp/robot-echo-%d.sock", (int)getpid());
	cJSON *h = cJSON_CreateObject();
	cJSON_AddStringToObject(h, "verb", "infer");
	cJSON_AddStringToObject(h, "model", model);
	cJSON_AddStringToObject(h, "priority", "realtime");
	tsd_tensor in = {.name = "ids", .dtype = TSD_I32, .ndim = 2, .shape = {1, RB_L}, .data = ids[0],
			 .nbytes = sizeof(ids[0])};
	size_t req = 0, rep = 0;
	int rc = db_probe_sizes(url, probe, h, &in, 1, &req, &rep);
	cJSON_Delete(h);
	db_echo_proc echo = {0};
	nng_socket sk;
	if (rc || db_echo_spawn(&echo, echo_url, rep) || nng_req0_open(&sk) || nng_dial(sk, echo_url, NULL, 0)) {
		fprintf(stderr, "robot: echo setup failed\n");
		return -1;
	}
	uint64_t *td = malloc(sizeof(uint64_t) * (size_t)per * ROUNDS), *te = malloc(sizeof(uint64_t) * (size_t)per * ROUNDS);
	for (int w = 0; w < 200 && !rc; w++) /* warm-up */
		rc = rb_infer(c, model, "realtime", ids[w % ncmd], 1, plan);
	rc = rc || !td || !te || echo_times(sk, req, 200, te);
	for (int i = 0; i < per * ROUNDS && !rc; i++) {
		uint64_t t0 = rb_now_ns();
		rc = rb_infer(c, model, "realtime", ids[i % ncmd], 1, plan);
		td[i] = rb_now_ns() - t0;
		rc = rc || echo_times(sk, req, 1, te + i);
	}
	if (!rc) {
		size_t m = (size_t)per * ROUNDS;
		double d50 = (double)rb_pct(td, m, 0.50) / 1e3, d95 = (double)rb_pct(td, m, 0.95) / 1e3;
		double e50 = (double)rb_pct(te, m, 0.50) / 1e3, e95 = (double)rb_pct(te, m, 0.95) / 1e3;
		printf("one decision through tensord (%s, realtime, batch 1, %zu calls): p50 %.1f us  p95 %.1f us\n", url, m,
		       d50, d95);
		printf("nng req/rep echo, same sizes (%zu B request, %zu B reply):        p50 %.1f us  p95 %.1f us\n", req,
		       rep, e50, e95);
		printf("ratio decision/echo: p50 %.2fx (goal <= 1.5x)  p95 %.2fx (goal <= 2x)\n", d50 / e50, d95 / e95);
	}
	nng_close(sk);
	db_echo_kill(&echo);
	free(td);
	free(te);
	return rc ? -1 : 0;
}

int main(int argc, char **argv)
{
	int ec = db_echo_child_main(argc, argv); /* --bench's echo process */
	if (ec >= 0)
		return ec;
	const char *url_arg = NULL, *model = "brain";
	int nbench = 0, first = argc;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--url") && i + 1 < argc)
			url_arg = argv[++i];
		else if (!strcmp(argv[i], "--model") && i + 1 < argc)
			model = argv[++i];
		else if (!strcmp(argv[i], "--bench") && i + 1 < argc)
			nbench = atoi(argv[++i]);
		else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "usage: robot [--url URL] [--model brain] [--bench N] [command ...]\n");
			return 2;
		} else {
			first = i;
			break;
		}
	}
	char url[512], err[256];
	rb_url(url_arg, url, sizeof(url));
	tsd_client *c = tsd_client_open(url, 10000, err, sizeof(err));
	if (!c) {
		fprintf(stderr, "robot: %s: %s (is tensord running with the brain loaded? make robot-demo)\n", url, err);
		return 1;
	}
	int rc = 0;
	if (nbench > 0) {
		rc = bench(c, url, model, nbench);
	} else if (first < argc) {
		for (int i = first; i < argc && !rc; i++)
			rc = decide(c, model, argv[i]);
	} else {
		char line[512];
		while (!rc && fgets(line, sizeof(line), stdin)) {
			line[strcspn(line, "\r\n")] = 0;
			if (line[0])
				rc = decide(c, model, line);
		}
	}
	tsd_client_close(c);
	return rc ? 1 : 0;
}
