/* fleet.c (robot_fleet): a fleet of robots sharing one brain: first one robot calling serially
 * for the duration (the baseline), then N robot processes (fork, each its own connection) calling
 * concurrently for the same duration. Prints decisions/s, latency p50/p95/p99 of both, the
 * speedup, and the batch sizes the daemon formed meanwhile (stats: histograms.batch_size and
 * the model's rows/batches counters, before and after).
 * The lone robot calls at realtime priority (no batching delay); the fleet at --prio.
 * Then the transport's own ceiling on this machine: N processes doing plain nng REQ/REP round
 * trips of the same message sizes against an echo process, and how busy the CPUs were during
 * the fleet (CPU per decision, client and daemon together).
 * --stateful: the brain is the recurrent policy of policy.h, loaded here as "policy", its state
 * kept by the daemon: each robot is one sequence (id: a random base + its index; started by its
 * first step, ended by its last) sending only its observation each cycle, and checks every
 * answer (q, action; the state at the end) against the same steps computed here: bit for bit.
 * Prints each robot's decisions/s and p99 too; no echo ceiling. --steps N: each robot takes N
 * steps instead of calling for --seconds (the checks see the same work on any machine).
 * Usage: robot_fleet [--url URL] [--model brain] [-n 32] [--seconds 5] [--prio normal]
 *                    [--stateful [--steps N]] */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tensord/verbs.h>

#include "../../bench/daemon_bench.h"
#include "policy.h"
#include "robot.h"

#define CAP 400000 /* latencies kept per robot */

static const char *const cmds[] = {
	"chuck the red block in the trash", "please pick up the blue ball", "go to the shelf", "stop",
	"could you bring me the green cube", "toss the yellow can onto the table", "head back home",
	"place the orange brick in the crate", "grab the navy toy", "drive over to the desk",
};
#define NCMD ((int)(sizeof(cmds) / sizeof(*cmds)))

typedef struct robot_log {
	uint32_t n;          /* decisions */
	uint32_t failed;
	uint32_t mismatched; /* --stateful: answers unlike the step computed here */
	uint64_t seq_id;     /* --stateful: its sequence */
	uint64_t elapsed_ns; /* from its first call to its last answer */
	uint32_t lat[CAP];   /* ns (a decision over 4 s is counted as 4 s) */
} robot_log;

/* One robot: calls until `seconds` pass; its latencies into lg. */
static int run_robot(const char *url, const char *model, const char *prio, double seconds, int who, robot_log *lg)
{
	char err[256];
	tsd_client *c = tsd_client_open(url, 10000, err, sizeof(err));
	if (!c) {
		fprintf(stderr, "robot %d: %s\n", who, err);
		return -1;
	}
	int32_t ids[NCMD][RB_L], plan[RB_T];
	for (int k = 0; k < NCMD; k++)
		rb_tokenize(cmds[k], ids[k]);
	uint64_t end = rb_now_ns() + (uint64_t)(seconds * 1e9);
	for (uint32_t i = 0; rb_now_ns() < end; i++) {
		uint64_t t0 = rb_now_ns();
		if (rb_infer(c, model, prio, ids[(i + (uint32_t)who) % NCMD], 1, plan)) {
			lg->failed++;
			continue;
		}
		uint64_t dt = rb_now_ns() - t0;
		if (lg->n < CAP)
			lg->lat[lg->n++] = dt > UINT32_MAX ? UINT32_MAX : (uint32_t)dt;
	}
	tsd_client_close(c);
	return 0;
}

/* --stateful: one robot as one sequence of the policy: its observations only, the daemon
 * holding its state; each answer checked against the step computed here (on the last step, the
 * state too). Calls until `seconds` pass (or steps > 0 of them were taken), then one last step
 * ends the sequence. */
static int run_seq_robot(const char *url, const char *model, const char *prio, double seconds, long steps,
			 uint64_t id, const rb_policy *pol, robot_log *lg)
{
	char err[256];
	tsd_client *c = tsd_client_open(url, 10000, err, sizeof(err));
	if (!c) {
		fprintf(stderr, "robot %llu: %s\n", (unsigned long long)id, err);
		return -1;
	}
	lg->seq_id = id;
	float obs[RB_OBS], h[RB_HID] = {0}, q[RB_ACT];
	tsd_tensor in = {.name = "obs", .dtype = TSD_F32, .ndim = 2, .shape = {1, RB_OBS}, .data = obs,
			 .nbytes = sizeof(obs)};
	tsd_priority pr = !strcmp(prio, "realtime") ? TSD_PRIORITY_REALTIME
			  : !strcmp(prio, "bulk")   ? TSD_PRIORITY_BULK
						    : TSD_PRIORITY_NORMAL;
	uint64_t start = rb_now_ns(), end = start + (uint64_t)(seconds * 1e9);
	int rc = 0;
	for (uint64_t t = 0;; t++) {
		bool last = steps > 0 ? t + 1 >= (uint64_t)steps : rb_now_ns() >= end;
		rb_policy_obs(id, t, obs);
		tsd_infer_opts o = {.priority = pr, .sequence_id = id, .sequence_start = t == 0, .sequence_end = last,
				    .sequence_state = last};
		tsd_reply *r = NULL;
		uint64_t t0 = rb_now_ns();
		tsd_status st = tsd_infer(c, model, &in, 1, &o, &r);
		uint64_t dt = rb_now_ns() - t0;
		if (st != TSD_OK) { /* the daemon's state and ours may part: this robot stops */
			fprintf(stderr, "robot %llu step %llu: %s: %s\n", (unsigned long long)id, (unsigned long long)t,
				tsd_status_name(st), tsd_client_message(c, r));
			tsd_reply_free(r);
			lg->failed++;
			rc = -1;
			break;
		}
		int act = rb_policy_step(pol, obs, h, q);
		const tsd_tensor *ta = tsd_reply_find(r, "act"), *tq = tsd_reply_find(r, "q"), *th = tsd_reply_find(r, "hn");
		bool same = ta && ta->dtype == TSD_I32 && ta->nbytes == 4 && *(const int32_t *)ta->data == act && tq &&
			    tq->nbytes == sizeof(q) && !memcmp(tq->data, q, sizeof(q)) && !th == !last &&
			    (!th || (th->nbytes == sizeof(h) && !memcmp(th->data, h, sizeof(h))));
		if (!same && !lg->mismatched++) {
			const float *g = tq && tq->nbytes == sizeof(q) ? tq->data : NULL;
			fprintf(stderr, "robot %llu step %llu: the daemon's answer differs from the step computed here: "
				"action %d q [%g %g %g %g], want %d (%s) q [%g %g %g %g]%s\n", (unsigned long long)id,
				(unsigned long long)t, ta && ta->nbytes == 4 ? *(const int32_t *)ta->data : -1,
				g ? g[0] : 0, g ? g[1] : 0, g ? g[2] : 0, g ? g[3] : 0, act, rb_action_names[act], q[0], q[1],
				q[2], q[3], last ? " (or the final state)" : "");
		}
		tsd_reply_free(r);
		if (lg->n < CAP)
			lg->lat[lg->n++] = dt > UINT32_MAX ? UINT32_MAX : (uint32_t)dt;
		if (last)
			break;
	}
	lg->elapsed_ns = rb_now_ns() - start;
	tsd_client_close(c);
	return rc || lg->mismatched ? -1 : 0;
}

/* --stateful: each robot's decisions/s and p99, and how many answers were checked. */
static void report_robots(robot_log *const *logs, int n)
{
	printf("%6s %18s %10s %12s %10s %s\n", "robot", "sequence_id", "decisions", "decisions/s", "p99 us",
	       "equal to the local steps");
	uint64_t *t = malloc(sizeof(uint64_t) * CAP);
	for (int i = 0; i < n && t; i++) {
		const robot_log *lg = logs[i];
		for (uint32_t j = 0; j < lg->n; j++)
			t[j] = lg->lat[j];
		double s = (double)lg->elapsed_ns / 1e9;
		printf("%6d %18llu %10u %12.0f %10.1f %u/%u%s\n", i, (unsigned long long)lg->seq_id, lg->n,
		       s > 0 ? lg->n / s : 0, (double)rb_pct(t, lg->n, 0.99) / 1e3, lg->n - lg->mismatched, lg->n,
		       lg->failed ? " (a call failed)" : "");
	}
	free(t);
}

/* A random sequence id base (the robots' ids follow it), below 2^52 so base + n fits 2^53. */
static uint64_t random_base(void)
{
	uint64_t b = 0;
	FILE *f = fopen("/dev/urandom", "rb");
	if (!f || fread(&b, sizeof(b), 1, f) != 1)
		b = rb_now_ns() ^ ((uint64_t)getpid() << 32);
	if (f)
		fclose(f);
	return (b & ((1ull << 52) - 1)) + 1;
}

/* What an echo client is told through its pipe once the sizes are known. */
typedef struct echo_job {
	char url[256];
	uint32_t req;
	int ok; /* 0: leave */
} echo_job;

/* One echo client: round trips of j->req bytes until `seconds` pass; latencies into lg. */
static int run_echo(const echo_job *j, double seconds, robot_log *lg)
{
	nng_socket s;
	if (nng_req0_open(&s) || nng_dial(s, j->url, NULL, 0))
		return -1;
	uint64_t end = rb_now_ns() + (uint64_t)(seconds * 1e9);
	while (rb_now_ns() < end) {
		nng_msg *m;
		uint64_t t0 = rb_now_ns();
		if (nng_msg_alloc(&m, j->req))
			break;
		memset(nng_msg_body(m), 0x5a, j->req);
		if (nng_sendmsg(s, m, 0)) {
			nng_msg_free(m);
			lg->failed++;
			continue;
		}
		if (nng_recvmsg(s, &m, 0)) {
			lg->failed++;
			continue;
		}
		nng_msg_free(m);
		uint64_t dt = rb_now_ns() - t0;
		if (lg->n < CAP)
			lg->lat[lg->n++] = dt > UINT32_MAX ? UINT32_MAX : (uint32_t)dt;
	}
	nng_close(s);
	return 0;
}

/* The machine's CPU time, busy and total, in clock ticks (/proc/stat). */
static void cpu_ticks(double *busy, double *total)
{
	unsigned long long v[8] = {0};
	FILE *f = fopen("/proc/stat", "r");
	*busy = *total = 0;
	if (!f)
		return;
	if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
		   &v[7]) == 8) {
		for (int k = 0; k < 8; k++)
			*total += (double)v[k];
		*busy = *total - (double)v[3] - (double)v[4]; /* less idle and iowait */
	}
	fclose(f);
}

/* The stats' batch_size histogram (cumulative counts by bound, up to 13 bounds) and the model's
 * rows and batches. */
typedef struct snap {
	int nb;
	double le[16], cum[16], count, rows, batches;
} snap;

static int take_snap(const char *url, const char *model, snap *s)
{
	tsd_client *c = tsd_client_open(url, 10000, NULL, 0);
	tsd_reply *r = NULL;
	memset(s, 0, sizeof(*s));
	if (!c || tsd_client_call_verb(c, "stats", &r) != TSD_OK) {
		tsd_reply_free(r);
		tsd_client_close(c);
		return -1;
	}
	const cJSON *j = tsd_reply_json(r);
	const cJSON *h = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "histograms"), "batch_size");
	const cJSON *m = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "models"), model);
	s->count = cJSON_GetNumberValue(cJSON_GetObjectItem(h, "count"));
	const cJSON *b;
	cJSON_ArrayForEach(b, cJSON_GetObjectItem(h, "buckets"))
	{
		if (s->nb < 16) {
			s->le[s->nb] = cJSON_GetNumberValue(cJSON_GetArrayItem(b, 0));
			s->cum[s->nb++] = cJSON_GetNumberValue(cJSON_GetArrayItem(b, 1));
		}
	}
	s->rows = cJSON_GetNumberValue(cJSON_GetObjectItem(m, "rows"));
	s->batches = cJSON_GetNumberValue(cJSON_GetObjectItem(m, "batches"));
	tsd_reply_free(r);
	tsd_client_close(c);
	return 0;
}

/* Percentiles of the logs' latencies, and the decisions per second (over `seconds`, or the
 * longest robot's time when the robots timed themselves). */
static void report(const char *what, robot_log *const *logs, int n, double seconds, double *rate, double *p99)
{
	size_t total = 0, k = 0, failed = 0;
	uint64_t el = 0;
	for (int i = 0; i < n; i++) {
		total += logs[i]->n, failed += logs[i]->failed;
		el = logs[i]->elapsed_ns > el ? logs[i]->elapsed_ns : el;
	}
	if (el)
		seconds = (double)el / 1e9;
	uint64_t *t = malloc(sizeof(uint64_t) * (total ? total : 1));
	for (int i = 0; i < n && t; i++)
		for (uint32_t j = 0; j < logs[i]->n; j++)
			t[k++] = logs[i]->lat[j];
	*rate = (double)total / seconds;
	*p99 = t ? (double)rb_pct(t, total, 0.99) / 1e3 : 0;
	printf("%-22s %9.0f decisions/s  p50 %7.1f us  p95 %7.1f us  p99 %7.1f us%s\n", what, *rate,
	       t ? (double)rb_pct(t, total, 0.50) / 1e3 : 0, t ? (double)rb_pct(t, total, 0.95) / 1e3 : 0, *p99,
	       failed ? "  (some calls failed)" : "");
	free(t);
}

int main(int argc, char **argv)
{
	int ec = db_echo_child_main(argc, argv); /* the ceiling's echo process */
	if (ec >= 0)
		return ec;
	const char *url_arg = NULL, *model = NULL, *prio = "normal";
	int n = 32;
	double seconds = 5;
	bool stateful = false;
	long steps = 0;
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(argv[i], "--url") && v)
			url_arg = argv[++i];
		else if (!strcmp(argv[i], "--model") && v)
			model = argv[++i];
		else if (!strcmp(argv[i], "-n") && v)
			n = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--seconds") && v)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--prio") && v)
			prio = argv[++i];
		else if (!strcmp(argv[i], "--stateful"))
			stateful = true;
		else if (!strcmp(argv[i], "--steps") && v)
			steps = atol(argv[++i]);
		else {
			fprintf(stderr, "usage: robot_fleet [--url URL] [--model brain|policy] [-n 32] [--seconds 5] "
				"[--prio normal] [--stateful [--steps N]]\n");
			return 2;
		}
	}
	if (!model)
		model = stateful ? "policy" : "brain";
	rb_policy pol;
	rb_policy_init(&pol, 1);
	uint64_t base = random_base();
	if (n < 1 || n > 1024 || !(seconds > 0) || steps < 0 || (steps && !stateful)) {
		fprintf(stderr, "robot_fleet: -n in [1, 1024], seconds > 0, --steps N > 0 with --stateful\n");
		return 2;
	}
	char url[512];
	rb_url(url_arg, url, sizeof(url));
	size_t bytes = sizeof(robot_log) * (size_t)(2 * n + 1); /* robots, the lone one, echo clients */
	robot_log *logs = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (logs == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	robot_log *ptr[2049];
	for (int i = 0; i <= 2 * n; i++)
		ptr[i] = &logs[i];
	/* nng may not be used across fork: the robots are forked before this process touches it,
	 * and wait on a pipe until the baseline is done */
	int go[2], go2[2];
	if (pipe(go) || pipe(go2)) {
		perror("pipe");
		return 1;
	}
	pid_t pids[1024], epids[1024];
	int up = 0, eup = 0;
	for (int i = 0; i < n; i++) {
		pid_t p = fork();
		if (p == 0) {
			char b;
			close(go[1]);
			close(go2[0]);
			close(go2[1]);
			_exit(read(go[0], &b, 1) == 1 &&
					      !(stateful ? run_seq_robot(url, model, prio, seconds, steps, base + (uint64_t)i, &pol, &logs[i])
							 : run_robot(url, model, prio, seconds, i, &logs[i]))
				      ? 0
				      : 1);
		}
		if (p < 0) {
			perror("fork");
			break;
		}
		pids[up++] = p;
	}
	for (int i = 0; i < n && up == n && !stateful; i++) { /* the echo clients */
		pid_t p = fork();
		if (p == 0) {
			echo_job j;
			close(go[0]);
			close(go[1]);
			close(go2[1]);
			_exit(read(go2[0], &j, sizeof(j)) == (ssize_t)sizeof(j) && j.ok && !run_echo(&j, seconds, &logs[n + 1 + i]) ? 0 : 1);
		}
		if (p < 0) {
			perror("fork");
			break;
		}
		epids[eup++] = p;
	}
	close(go[0]);
	close(go2[0]);
	double base_rate, base_p99, rate, p99;
	snap before, after;
	if (steps)
		printf("robot_fleet: model \"%s\" at %s, priority %s, %ld steps each", model, url, prio, steps);
	else
		printf("robot_fleet: model \"%s\" at %s, priority %s, %.1f s each", model, url, prio, seconds);
	printf("%s\n", stateful ? ", stateful: one sequence a robot, the daemon holding its recurrent state" : "");
	int bad = up < n;
	if (!bad && stateful) { /* the policy, loaded here (after the forks: nng) */
		tsd_client *c = tsd_client_open(url, 60000, NULL, 0);
		bad = !c || rb_policy_load(c, model, &pol, n < 64 ? 64 : n, 200, 2 * n + 64) != TSD_OK;
		tsd_client_close(c);
	}
	bad = bad ||
	      (stateful ? run_seq_robot(url, model, "realtime", seconds, steps, base + (uint64_t)n, &pol, &logs[n])
			: run_robot(url, model, "realtime", seconds, 0, &logs[n])) ||
	      take_snap(url, model, &before);
	if (bad)
		fprintf(stderr, "robot_fleet: the lone robot failed (above); the fleet does not run\n");
	if (!bad)
		report("1 robot, serially (realtime)", &ptr[n], 1, seconds, &base_rate, &base_p99);
	char b[1024] = {0};
	double busy0, total0, busy1, total1;
	cpu_ticks(&busy0, &total0);
	if (!bad && write(go[1], b, (size_t)up) != up)
		bad = 1;
	close(go[1]); /* on failure the robots read EOF and leave */
	for (int i = 0; i < up; i++) {
		int st;
		waitpid(pids[i], &st, 0);
		bad |= !WIFEXITED(st) || WEXITSTATUS(st);
	}
	cpu_ticks(&busy1, &total1);
	/* the ceiling: the same number of processes against a plain echo, same message sizes */
	echo_job ej = {.ok = 0};
	db_echo_proc ep = {0};
	size_t req = 0, rep = 0;
	char probe[128];
	snprintf(probe, sizeof(probe), "ipc:///tmp/robot-fleet-probe-%d.sock", (int)getpid());
	snprintf(ej.url, sizeof(ej.url), "ipc:///tmp/robot-fleet-echo-%d.sock", (int)getpid());
	if (!bad && !stateful) {
		cJSON *h = cJSON_CreateObject();
		int32_t ids[RB_L];
		rb_tokenize(cmds[0], ids);
		tsd_tensor in = {.name = "ids", .dtype = TSD_I32, .ndim = 2, .shape = {1, RB_L}, .data = ids,
				 .nbytes = sizeof(ids)};
		cJSON_AddStringToObject(h, "verb", "infer");
		cJSON_AddStringToObject(h, "model", model);
		cJSON_AddStringToObject(h, "priority", prio);
		ej.ok = !db_probe_sizes(url, probe, h, &in, 1, &req, &rep) && !db_echo_spawn(&ep, ej.url, rep);
		ej.req = (uint32_t)req;
		cJSON_Delete(h);
	}
	for (int i = 0; i < eup; i++)
		if (write(go2[1], &ej, sizeof(ej)) != (ssize_t)sizeof(ej))
			ej.ok = 0;
	close(go2[1]);
	bool echo_ok = ej.ok;
	for (int i = 0; i < eup; i++) {
		int st;
		waitpid(epids[i], &st, 0);
		echo_ok = echo_ok && WIFEXITED(st) && !WEXITSTATUS(st);
	}
	db_echo_kill(&ep);
	if (bad)
		return 1;
	if (take_snap(url, model, &after))
		return 1;
	char what[48];
	snprintf(what, sizeof(what), "%d robots, together", n);
	report(what, ptr, n, seconds, &rate, &p99);
	printf("fleet/serial throughput: %.1fx (goal >= 10x), fleet p99 %.2f ms (goal < 2 ms)\n", rate / base_rate,
	       p99 / 1e3);
	double busy = total1 > total0 ? (busy1 - busy0) / (total1 - total0) : 0;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	printf("CPUs busy during the fleet: %.0f%% of %ld; CPU per decision (robots and daemon together): %.0f us\n",
	       busy * 100, ncpu, rate > 0 ? busy * (double)ncpu / rate * 1e6 : 0);
	if (stateful) {
		report_robots(ptr, n);
		uint32_t steps = logs[n].n, off = logs[n].mismatched;
		for (int i = 0; i < n; i++)
			steps += logs[i].n, off += logs[i].mismatched;
		printf("every answer (action, q; the state at each robot's end) equal to the same steps computed here: "
		       "%u/%u\n", steps - off, steps);
	} else if (echo_ok) {
		double erate, ep99;
		snprintf(what, sizeof(what), "%d echo clients", n);
		report(what, ptr + n + 1, n, seconds, &erate, &ep99);
		printf("the transport's own ceiling here: %d processes doing plain nng round trips of the same sizes (%zu B, "
		       "%zu B) reach %.1fx the lone robot's rate\n", n, req, rep, erate / base_rate);
	} else {
		printf("(the echo ceiling could not be measured)\n");
	}
	double db = after.batches - before.batches, dr = after.rows - before.rows;
	printf("batches the daemon formed: %.0f for %.0f rows, %.1f rows a batch on average\n", db, dr, db > 0 ? dr / db : 0);
	printf("batch sizes (stats histograms.batch_size, all models):");
	for (int k = 0; k < after.nb && k < before.nb; k++) {
		double lo = k ? after.le[k - 1] : 0, cnt = (after.cum[k] - (k ? after.cum[k - 1] : 0)) -
							    (before.cum[k] - (k ? before.cum[k - 1] : 0));
		if (cnt > 0)
			printf("  (%g, %g]: %.0f", lo, after.le[k], cnt);
	}
	printf("\n");
	munmap(logs, bytes);
	return bad ? 1 : 0;
}
