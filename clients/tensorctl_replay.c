/* tensorctl_replay.c: `tensorctl replay LOG`: logged infer requests (JSON Lines) replayed in
 * batches at bulk priority by worker threads (one client each), sequence steps in log order per
 * sequence, results written in input order, resumable: an existing output's complete lines are
 * kept and that many input lines skipped. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tensorctl_replay.h"

const char tctl_replay_help[] =
	"usage: tensorctl replay LOG [-o OUT] [--batch N] [--jobs N] [--progress|--no-progress]\n"
	"                        [--priority P] [--stop-after N]\n"
	"\n"
	"Replay logged infer requests. LOG holds one JSON object a line:\n"
	"  {\"id\": ANY, \"model\": \"NAME\", \"inputs\": {\"INPUT\": ROW, ...}}\n"
	"ROW is one row of the input: a number or nested lists of the input's shape without the\n"
	"batch dimension (models with no batch dimension: the whole tensor). \"id\" is optional.\n"
	"Consecutive lines of one model go as one infer of up to N rows at priority bulk, many\n"
	"requests in flight. A line with \"sequence_id\" (a number or a string) is a step of that\n"
	"sequence, with \"sequence_start\", \"sequence_end\", \"sequence_state\": true as the\n"
	"infer fields: sent alone without the state inputs, after the steps of earlier lines of\n"
	"the same sequence were answered (sequences interleave freely).\n"
	"OUT gets one line per input line, in input order:\n"
	"  {\"id\": ANY, \"outputs\": {\"OUTPUT\": ROW, ...}}\n"
	"  {\"id\": ANY, \"error\": \"STATUS\", \"message\": \"...\"}   (a bad or failed line)\n"
	"\n"
	"  -o OUT          write there (default stdout). If OUT exists, its complete lines are\n"
	"                  kept (a partial last line is dropped), as many input lines skipped,\n"
	"                  and the rest appended: a resumed run's OUT equals an uninterrupted one\n"
	"  --batch N       rows per request at most (default and upper bound: each model's\n"
	"                  batch_max, its largest bucket)\n"
	"  --jobs N        requests in flight, one connection each (default 8)\n"
	"  --priority P    the requests' priority: bulk (default), normal, realtime\n"
	"  --progress      a progress bar on stderr (default: when stderr is a terminal)\n"
	"  --no-progress   none\n"
	"  --stop-after N  stop after writing N lines (as an interruption would; for tests)\n"
	"\n"
	"A summary (lines, errors, lines/s) goes to stderr. SIGINT or SIGTERM: the lines done are\n"
	"written, then exit 5; the same command resumes. Exit: 0 all lines ok, 4 some lines\n"
	"failed, 5 interrupted, 3 the daemon went away (OUT holds the lines before), 2 usage,\n"
	"6 OUT could not be written. Errors and the exit status count OUT's lines from earlier\n"
	"runs too.\n";

/* ---- files ---- */

/* The input file mapped (or read, for a pipe). */
static const char *map_input(const char *path, size_t *len, int *owned, char *err, size_t errlen)
{
	int fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : 0;
	struct stat st;
	if (fd < 0 || fstat(fd, &st)) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	*owned = 0;
	if (S_ISREG(st.st_mode)) {
		*len = (size_t)st.st_size;
		void *p = *len ? mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fd, 0) : (void *)NULL;
		if (fd)
			close(fd);
		if (p == MAP_FAILED) {
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
			return NULL;
		}
		*owned = *len > 0;
		if (*owned)
			madvise(p, *len, MADV_SEQUENTIAL);
		return p ? p : "";
	}
	tctl_buf b = {0};
	ssize_t n;
	while (tctl_buf_reserve(&b, 1 << 20) && (n = read(fd, b.p + b.n, b.cap - b.n)) > 0)
		b.n += (size_t)n;
	if (fd)
		close(fd);
	if (b.oom) {
		snprintf(err, errlen, "%s: out of memory", path);
		tctl_buf_free(&b);
		return NULL;
	}
	*len = b.n;
	*owned = b.p ? 2 : 0;
	return b.p ? b.p : "";
}

static size_t count_lines(const char *p, const char *end)
{
	size_t n = 0;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		n++;
		p = nl ? nl + 1 : end;
	}
	return n;
}

/* Open OUT for appending after its complete lines (a partial last line cut off); *done: how
 * many there are, *nerr how many are error lines (they end '"}': a message; output lines end
 * '}}'). -1 with the message in err. */
static int open_output(const char *path, size_t *done, size_t *nerr, char *err, size_t errlen)
{
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	char buf[1 << 16];
	off_t off = 0, keep = 0;
	ssize_t n;
	char tail[2] = {0, 0}; /* the previous block's last two bytes */
	*done = *nerr = 0;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		for (const char *p = buf; (p = memchr(p, '\n', (size_t)(buf + n - p))); p++) {
			++*done;
			keep = off + (p - buf) + 1;
			char q = p - buf >= 2 ? p[-2] : tail[p - buf];
			*nerr += q == '"';
		}
		tail[0] = n >= 2 ? buf[n - 2] : tail[1];
		tail[1] = buf[n - 1];
		off += n;
	}
	if (n < 0 || ftruncate(fd, keep) || lseek(fd, keep, SEEK_SET) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static bool write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return false;
		p += k;
		n -= (size_t)k;
	}
	return true;
}

/* ---- the command ---- */

typedef struct replay_opts {
	const char *log, *out, *priority;
	long batch, jobs, stop_after;
	int progress; /* -1 auto */
} replay_opts;

static int parse_opts(int argc, char **argv, replay_opts *o)
{
	*o = (replay_opts){.priority = "bulk", .jobs = 8, .stop_after = -1, .progress = -1};
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		bool has = i + 1 < argc;
		if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && has)
			o->out = argv[++i];
		else if (!strcmp(a, "--priority") && has) {
			o->priority = argv[++i];
			if (strcmp(o->priority, "bulk") && strcmp(o->priority, "normal") &&
			    strcmp(o->priority, "realtime"))
				return tctl_usage("replay",
						  "--priority %s: bulk, normal or realtime",
						  o->priority);
		} else if (!strcmp(a, "--batch") && has) {
			if (!tctl_parse_long(argv[++i], 1, 4096, &o->batch))
				return tctl_usage("replay", "--batch %s: not in 1..4096", argv[i]);
		} else if (!strcmp(a, "--jobs") && has) {
			if (!tctl_parse_long(argv[++i], 1, 256, &o->jobs))
				return tctl_usage("replay", "--jobs %s: not in 1..256", argv[i]);
		} else if (!strcmp(a, "--stop-after") && has) {
			if (!tctl_parse_long(argv[++i], 0, __LONG_MAX__, &o->stop_after))
				return tctl_usage("replay", "--stop-after %s: not a count",
						  argv[i]);
		} else if (!strcmp(a, "--progress"))
			o->progress = 1;
		else if (!strcmp(a, "--no-progress"))
			o->progress = 0;
		else if (!o->log && (a[0] != '-' || !strcmp(a, "-")))
			o->log = a;
		else
			return tctl_usage("replay", "unexpected argument %s", a);
	}
	return o->log ? 0 : tctl_usage("replay", "needs LOG");
}

/* Fill free slots with the next chunks of lines (lock held). */
static void fill(tctl_replay *rp, const char **cur, const char *end, size_t per_chunk)
{
	while (*cur < end && rp->next_fill - rp->next_write < rp->nslots) {
		tctl_chunk *ck = &rp->slots[rp->next_fill % rp->nslots];
		ck->p = *cur;
		ck->nlines = 0;
		const char *p = *cur;
		while (p < end && ck->nlines < per_chunk) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			p = nl ? nl + 1 : end;
			ck->nlines++;
		}
		ck->end = p;
		*cur = p;
		ck->index = rp->next_fill;
		ck->seq_done = false;
		ck->state = TCTL_SLOT_READY;
		rp->next_fill++;
		pthread_cond_signal(&rp->work);
	}
}

static bool signalled(const sigset_t *set)
{
	struct timespec zero = {0, 0};
	return sigtimedwait(set, NULL, &zero) > 0;
}

int tctl_cmd_replay(tctl_ctx *ctx, int argc, char **argv)
{
	replay_opts o;
	int rc = parse_opts(argc, argv, &o);
	if (rc)
		return rc;
	char err[512];
	size_t len, skip = 0, errors = 0;
	int owned; /* 1: mapped, 2: malloc'd */
	const char *in = map_input(o.log, &len, &owned, err, sizeof(err));
	if (!in) {
		fprintf(stderr, "tensorctl replay: %s\n", err);
		return TCTL_EXIT_USAGE;
	}
	int fd = 1;
	if (o.out && (fd = open_output(o.out, &skip, &errors, err, sizeof(err))) < 0) {
		fprintf(stderr, "tensorctl replay: %s\n", err);
		rc = TCTL_EXIT_IO;
		goto unmap;
	}
	const char *end = in + len, *cur = in;
	size_t total = count_lines(in, end);
	if (skip > total) {
		fprintf(stderr, "tensorctl replay: %s has %zu lines, more than %s (%zu)\n", o.out,
			skip, o.log, total);
		rc = TCTL_EXIT_USAGE;
		goto close_out;
	}
	for (size_t k = 0; k < skip; k++) {
		const char *nl = memchr(cur, '\n', (size_t)(end - cur));
		cur = nl ? nl + 1 : end;
	}
	tctl_model *ms;
	int nms;
	if ((rc = tctl_models_fetch(ctx->c, &ms, &nms)))
		goto close_out;
	size_t per_chunk = (size_t)o.batch;
	for (int i = 0; !o.batch && i < nms; i++)
		if ((size_t)ms[i].batch_max > per_chunk)
			per_chunk = (size_t)ms[i].batch_max;
	if (!per_chunk)
		per_chunk = 1;

	tctl_replay rp = {.ms = ms,
		     .nms = nms,
		     .batch = (int)o.batch,
		     .priority = o.priority,
		     .url = ctx->url,
		     .timeout_ms = ctx->timeout_ms,
		     .nslots = (size_t)o.jobs * 3};
	pthread_mutex_init(&rp.mu, NULL);
	pthread_cond_init(&rp.work, NULL);
	pthread_cond_init(&rp.done, NULL);
	pthread_cond_init(&rp.seq, NULL);
	rp.slots = calloc(rp.nslots, sizeof(tctl_chunk));
	tctl_worker *ws = calloc((size_t)o.jobs, sizeof(tctl_worker));
	size_t rowmax[TCTL_MAX_TENSORS] = {0};
	for (int i = 0; i < nms; i++)
		for (int k = 0; k < ms[i].nin; k++) {
			size_t b = ms[i].in[k].row_numel * tsd_dtype_size(ms[i].in[k].dtype);
			rowmax[k] = b > rowmax[k] ? b : rowmax[k];
		}
	/* SIGINT and SIGTERM are blocked in every thread (main, before the first client) and
	 * taken here between chunks */
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	long started = 0;
	for (long j = 0; rp.slots && ws && j < o.jobs; j++, started++) {
		tctl_worker *w = &ws[j];
		w->rp = &rp;
		w->cap = per_chunk;
		w->lines = malloc(per_chunk * sizeof(tctl_rline));
		for (size_t k = j; k < rp.nslots; k += (size_t)o.jobs)
			if (!(rp.slots[k].lerr = malloc(per_chunk)))
				w->lines = (free(w->lines), NULL);
		w->runs = malloc(per_chunk * sizeof(tctl_run));
		for (int k = 0; k < TCTL_MAX_TENSORS; k++)
			w->row[k] = malloc(rowmax[k] + 1);
		w->c = tsd_client_open(ctx->url, ctx->timeout_ms, err, sizeof(err));
		if (!w->lines || !w->runs || pthread_create(&w->th, NULL, tctl_replay_worker, w)) {
			tsd_client_close(w->c);
			break;
		}
	}
	tctl_progress pg;
	tctl_progress_start(&pg, o.progress < 0 ? isatty(2) : o.progress, total, skip);
	size_t written = 0;
	int fatal = started == o.jobs ? 0 : TCTL_EXIT_IO;
	bool stop = fatal != 0, interrupted = false;
	const char *why = fatal ? "out of memory" : NULL;
	pthread_mutex_lock(&rp.mu);
	for (;;) {
		if (!stop)
			fill(&rp, &cur, end, per_chunk);
		if (rp.next_write == rp.next_fill)
			break;
		tctl_chunk *ck = &rp.slots[rp.next_write % rp.nslots];
		while (ck->state != TCTL_SLOT_DONE) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 100000000;
			if (ts.tv_nsec >= 1000000000)
				ts.tv_sec++, ts.tv_nsec -= 1000000000;
			pthread_cond_timedwait(&rp.done, &rp.mu, &ts);
			if (!stop && ck->state != TCTL_SLOT_DONE && signalled(&sigs))
				interrupted = stop = rp.drop = true; /* this chunk on: dropped */
		}
		pthread_mutex_unlock(&rp.mu);
		if (!stop && ck->fatal) {
			fatal = ck->fatal;
			why = ck->why;
			stop = true;
		}
		if (!stop) {
			size_t n = ck->out.n, lines = ck->nlines;
			if (o.stop_after >= 0 && written + lines >= (size_t)o.stop_after) {
				lines = (size_t)o.stop_after - written;
				const char *q = ck->out.p;
				for (size_t k = 0; k < lines; k++)
					q = (const char *)memchr(
						    q, '\n', (size_t)(ck->out.p + ck->out.n - q)) +
					    1;
				n = lines ? (size_t)(q - ck->out.p) : 0;
				interrupted = stop = true;
				for (size_t k = 0; k < lines; k++)
					errors += ck->lerr[k];
			} else {
				errors += ck->nerr;
			}
			if (!write_all(fd, ck->out.p, n)) {
				fatal = TCTL_EXIT_IO;
				why = strerror(errno);
				stop = true;
			} else {
				written += lines;
			}
			char note[64];
			snprintf(note, sizeof(note), "errors %zu", errors);
			tctl_progress_update(&pg, skip + written, note, false);
		}
		if (!stop && signalled(&sigs))
			interrupted = stop = true;
		pthread_mutex_lock(&rp.mu);
		rp.drop = stop;
		ck->state = TCTL_SLOT_EMPTY;
		rp.next_write++;
	}
	rp.quit = true;
	pthread_cond_broadcast(&rp.work);
	pthread_mutex_unlock(&rp.mu);
	char note[64];
	snprintf(note, sizeof(note), "errors %zu", errors);
	tctl_progress_update(&pg, skip + written, note, true);
	tctl_progress_end(&pg);
	for (long j = 0; j < started; j++) {
		pthread_join(ws[j].th, NULL);
		tsd_client_close(ws[j].c);
	}
	double el = tctl_now() - pg.t0;
	fprintf(stderr,
		"replay: %zu lines (%zu before, %zu this run), %zu errors, %.0f lines/s over %.3f "
		"s\n",
		skip + written, skip, written, errors, el > 0 ? (double)written / el : 0, el);
	if (fatal) {
		fprintf(stderr, "tensorctl replay: %s; %s holds the first %zu lines\n", why,
			o.out ? o.out : "stdout", skip + written);
		rc = fatal;
	} else if (interrupted) {
		fprintf(stderr, "tensorctl replay: stopped after %zu lines; run again to resume\n",
			skip + written);
		rc = TCTL_EXIT_INTERRUPTED;
	} else {
		rc = errors ? TCTL_EXIT_PARTIAL : TCTL_EXIT_OK;
	}
	for (long j = 0; ws && j < o.jobs; j++) {
		free(ws[j].lines);
		free(ws[j].runs);
		free(ws[j].scratch);
		for (int k = 0; k < TCTL_MAX_TENSORS; k++)
			free(ws[j].row[k]);
	}
	for (size_t s = 0; rp.slots && s < rp.nslots; s++) {
		tctl_buf_free(&rp.slots[s].out);
		free(rp.slots[s].lerr);
	}
	free(rp.slots);
	free(ws);
	free(ms);
	pthread_mutex_destroy(&rp.mu);
	pthread_cond_destroy(&rp.work);
	pthread_cond_destroy(&rp.done);
	pthread_cond_destroy(&rp.seq);
close_out:
	if (fd > 1 && close(fd) && !rc) {
		fprintf(stderr, "tensorctl replay: %s: %s\n", o.out, strerror(errno));
		rc = TCTL_EXIT_IO;
	}
unmap:
	if (owned == 1)
		munmap((void *)in, len);
	else if (owned == 2)
		free((void *)in);
	return rc;
}
