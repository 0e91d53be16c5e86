/* tensorctl_replay.c: `tensorctl replay LOG`: logged infer requests (JSON Lines) replayed in
 * batches at bulk priority by worker threads (one client each), results written in input order,
 * resumable: an existing output's complete lines are kept and that many input lines skipped. */
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

#include "tensorctl_jsonl.h"

const char tctl_replay_help[] =
	"usage: tensorctl replay LOG [-o OUT] [--batch N] [--jobs N] [--progress|--no-progress]\n"
	"                        [--stop-after N]\n"
	"\n"
	"Replay logged infer requests. LOG holds one JSON object a line:\n"
	"  {\"id\": ANY, \"model\": \"NAME\", \"inputs\": {\"INPUT\": ROW, ...}}\n"
	"ROW is one row of the input: a number or nested lists of the input's shape without the\n"
	"batch dimension (models with no batch dimension: the whole tensor). \"id\" is optional.\n"
	"Consecutive lines of one model go as one infer of up to N rows at priority bulk, many\n"
	"requests in flight. OUT gets one line per input line, in input order:\n"
	"  {\"id\": ANY, \"outputs\": {\"OUTPUT\": ROW, ...}}\n"
	"  {\"id\": ANY, \"error\": \"STATUS\", \"message\": \"...\"}   (a bad or failed line)\n"
	"\n"
	"  -o OUT          write there (default stdout). If OUT exists, its complete lines are\n"
	"                  kept (a partial last line is dropped), as many input lines skipped,\n"
	"                  and the rest appended: a resumed run's OUT equals an uninterrupted one\n"
	"  --batch N       rows per request (default: each model's batch_max, its largest bucket)\n"
	"  --jobs N        requests in flight, one connection each (default 8)\n"
	"  --progress      a progress bar on stderr (default: when stderr is a terminal)\n"
	"  --no-progress   none\n"
	"  --stop-after N  stop after writing N lines (as an interruption would; for tests)\n"
	"\n"
	"A summary (lines, errors, lines/s) goes to stderr. SIGINT or SIGTERM: the lines done are\n"
	"written, then exit 5; the same command resumes. Exit: 0 all lines ok, 4 some lines\n"
	"failed, 5 interrupted, 3 the daemon went away (OUT holds the lines before), 2 usage,\n"
	"6 OUT could not be written. Errors and the exit status count OUT's lines from earlier\n"
	"runs too.\n";

enum { SLOT_EMPTY, SLOT_READY, SLOT_TAKEN, SLOT_DONE };

typedef struct chunk {
	const char *p, *end; /* the lines' text */
	size_t nlines;
	tctl_buf out; /* one line per input line */
	size_t nerr;
	uint8_t *lerr; /* per line: 1 when it is an error line */
	int state;
	int fatal;	/* an exit status when a request got no reply: nothing of it is written */
	char why[256];
} chunk;

typedef struct replay {
	const tctl_model *ms;
	int nms;
	int batch; /* --batch, 0: the model's */
	const char *url;
	int timeout_ms;
	chunk *slots;
	size_t nslots;
	size_t next_fill, next_take, next_write;
	pthread_mutex_t mu;
	pthread_cond_t work, done;
	bool quit;
} replay;

/* One request's rows: consecutive good lines of one model. */
typedef struct run {
	const tctl_model *m;
	size_t rows, cap;
	uint8_t *buf[TCTL_MAX_TENSORS]; /* [cap, row_numel] per input */
	tsd_reply *reply;
	const tsd_tensor *outs[TCTL_MAX_TENSORS];
	tsd_status st;
	char msg[256];
} run;

/* A line's fate: an error now (run < 0) or row `row` of run `run`. */
typedef struct rline {
	tctl_span id;
	int run;
	size_t row;
	tsd_status st;
	char msg[160];
} rline;

typedef struct worker {
	replay *rp;
	pthread_t th;
	tsd_client *c;
	rline *lines;
	run *runs;
	size_t cap; /* lines and runs */
	uint8_t *row[TCTL_MAX_TENSORS];
	uint8_t *scratch; /* a transposed input or a gathered output row */
	size_t scratch_cap;
} worker;

static bool scratch_fit(worker *w, size_t n)
{
	if (n <= w->scratch_cap)
		return true;
	uint8_t *p = realloc(w->scratch, n);
	if (!p)
		return false;
	w->scratch = p;
	w->scratch_cap = n;
	return true;
}

static size_t run_cap(const replay *rp, const tctl_model *m, size_t left)
{
	size_t cap = m->batched ? (size_t)(rp->batch ? rp->batch : m->batch_max) : 1;
	return cap < left ? cap : left;
}

/* The input tensors of run u (rows stacked at each input's batch axis). */
static bool run_tensors(worker *w, run *u, tsd_tensor *ts, uint8_t **tmp)
{
	const tctl_model *m = u->m;
	for (int i = 0; i < m->nin; i++) {
		const tctl_port *pt = &m->in[i];
		size_t es = eng_dtype_size(pt->dtype);
		ts[i] = (tsd_tensor){.name = pt->name, .dtype = pt->dtype, .ndim = pt->ndim};
		memcpy(ts[i].shape, pt->shape, sizeof(pt->shape));
		ts[i].data = u->buf[i];
		if (pt->batch_axis < 0)
			continue;
		ts[i].shape[pt->batch_axis] = (int64_t)u->rows;
		if (pt->outer == 1)
			continue;
		/* [rows, outer, inner] -> [outer, rows, inner] */
		uint8_t *t = malloc(u->rows * pt->row_numel * es + 1);
		if (!t)
			return false;
		for (size_t r = 0; r < u->rows; r++)
			for (size_t o = 0; o < pt->outer; o++)
				memcpy(t + (o * u->rows + r) * pt->inner * es,
				       u->buf[i] + (r * pt->row_numel + o * pt->inner) * es,
				       pt->inner * es);
		tmp[i] = t;
		ts[i].data = t;
	}
	return true;
}

/* Send run u; a missing reply makes the chunk fatal. Busy is retried (bulk yields). */
static void run_send(worker *w, run *u, chunk *ck)
{
	const tctl_model *m = u->m;
	tsd_tensor ts[TCTL_MAX_TENSORS];
	uint8_t *tmp[TCTL_MAX_TENSORS] = {0};
	cJSON *h = cJSON_CreateObject();
	tsd_status s = TSD_OUT_OF_MEMORY;
	if (h && cJSON_AddStringToObject(h, "verb", "infer") &&
	    cJSON_AddStringToObject(h, "model", m->name) &&
	    cJSON_AddStringToObject(h, "priority", "bulk") && run_tensors(w, u, ts, tmp)) {
		for (int attempt = 0;; attempt++) {
			s = tsd_client_call(w->c, h, ts, m->nin, &u->reply);
			if (s != TSD_BUSY || attempt == 2000)
				break;
			tsd_reply_free(u->reply);
			u->reply = NULL;
			struct timespec d = {0, (attempt < 10 ? 1 : 20) * 1000000L};
			nanosleep(&d, NULL);
		}
	}
	cJSON_Delete(h);
	for (int i = 0; i < m->nin; i++)
		free(tmp[i]);
	u->st = s;
	if (!u->reply && s != TSD_OUT_OF_MEMORY) {
		ck->fatal = tctl_exit_for(s, false);
		snprintf(ck->why, sizeof(ck->why), "%s: %s", tsd_status_name(s),
			 tsd_client_error(w->c));
		return;
	}
	if (s != TSD_OK) {
		snprintf(u->msg, sizeof(u->msg), "%s",
			 u->reply ? tsd_reply_error(u->reply) : "out of memory");
		return;
	}
	for (int o = 0; o < m->nout; o++) {
		const tctl_port *pt = &m->out[o];
		const tsd_tensor *t = tsd_reply_find(u->reply, pt->name);
		bool ok = t && t->dtype == pt->dtype && t->ndim == pt->ndim &&
			  (pt->batch_axis < 0 || t->shape[pt->batch_axis] == (int64_t)u->rows);
		for (int d = 0; ok && d < pt->ndim && pt->batch_axis >= 0; d++)
			ok = d == pt->batch_axis || t->shape[d] == pt->shape[d];
		if (!ok) {
			u->st = TSD_INTERNAL;
			snprintf(u->msg, sizeof(u->msg), "output %s: not as model.list describes it",
				 pt->name);
			return;
		}
		u->outs[o] = t;
	}
}

/* Line l's output line appended to ck->out. */
static void line_format(worker *w, chunk *ck, const rline *l)
{
	tctl_buf *b = &ck->out;
	const run *u = l->run >= 0 ? &w->runs[l->run] : NULL;
	tsd_status st = u ? u->st : l->st;
	tctl_buf_put(b, "{", 1);
	if (l->id.p) {
		tctl_buf_put(b, "\"id\":", 5);
		tctl_buf_put(b, l->id.p, l->id.n);
		tctl_buf_put(b, ",", 1);
	}
	if (st != TSD_OK) {
		ck->nerr++;
		ck->lerr[l - w->lines] = 1;
		tctl_buf_puts(b, "\"error\":\"");
		tctl_buf_puts(b, tsd_status_name(st));
		tctl_buf_puts(b, "\",\"message\":");
		tctl_jsonl_string(b, u ? u->msg : l->msg);
		tctl_buf_put(b, "}\n", 2);
		return;
	}
	tctl_buf_puts(b, "\"outputs\":{");
	for (int o = 0; o < u->m->nout; o++) {
		const tctl_port *pt = &u->m->out[o];
		const tsd_tensor *t = u->outs[o];
		size_t es = eng_dtype_size(t->dtype);
		int64_t dims[ENG_MAX_DIMS];
		int nd = 0;
		for (int d = 0; d < t->ndim; d++)
			if (d != pt->batch_axis)
				dims[nd++] = t->shape[d];
		const uint8_t *src = t->data;
		if (pt->batch_axis >= 0 && pt->outer == 1) {
			src += l->row * pt->inner * es;
		} else if (pt->batch_axis >= 0) {
			if (!scratch_fit(w, pt->row_numel * es)) {
				b->oom = true;
				return;
			}
			for (size_t x = 0; x < pt->outer; x++)
				memcpy(w->scratch + x * pt->inner * es,
				       src + (x * u->rows + l->row) * pt->inner * es, pt->inner * es);
			src = w->scratch;
		}
		if (o)
			tctl_buf_put(b, ",", 1);
		tctl_jsonl_string(b, pt->name);
		tctl_buf_put(b, ":", 1);
		tctl_jsonl_row(b, t->dtype, src, dims, nd);
	}
	tctl_buf_put(b, "}}\n", 3);
}

/* Parse, send and format one chunk. */
static void chunk_do(worker *w, chunk *ck)
{
	replay *rp = w->rp;
	int nruns = 0, cur = -1;
	const char *p = ck->p;
	char err[160];
	ck->out.n = 0;
	ck->out.oom = false;
	ck->nerr = 0;
	ck->fatal = 0;
	for (size_t k = 0; k < ck->nlines; k++) {
		const char *nl = memchr(p, '\n', (size_t)(ck->end - p));
		const char *e = nl ? nl : ck->end;
		rline *l = &w->lines[k];
		tctl_line ln;
		l->run = -1;
		l->id = (tctl_span){0};
		l->st = TSD_BAD_REQUEST;
		const tctl_model *m = NULL;
		if (!tctl_jsonl_scan(p, e, &ln, err, sizeof(err))) {
			snprintf(l->msg, sizeof(l->msg), "%s", err);
		} else if (l->id = ln.id, !(m = tctl_model_find(rp->ms, rp->nms, ln.model.p,
								 ln.model.n))) {
			l->st = TSD_UNKNOWN_MODEL;
			snprintf(l->msg, sizeof(l->msg), "model %.*s is not loaded",
				 (int)(ln.model.n < 64 ? ln.model.n : 64), ln.model.p);
		} else if (!tctl_jsonl_inputs(ln.inputs, m, (void *const *)w->row, err,
					      sizeof(err))) {
			l->st = TSD_SHAPE_MISMATCH;
			snprintf(l->msg, sizeof(l->msg), "%s", err);
			if (strstr(err, "malformed") || strstr(err, "not an input") ||
			    strstr(err, "not a number") || strstr(err, "missing") ||
			    strstr(err, "twice") || strstr(err, "not a value"))
				l->st = TSD_BAD_REQUEST;
		} else {
			if (cur < 0 || w->runs[cur].m != m || w->runs[cur].rows == w->runs[cur].cap) {
				if (cur >= 0)
					run_send(w, &w->runs[cur], ck);
				run *u = &w->runs[cur = nruns++];
				memset(u, 0, sizeof(*u));
				u->m = m;
				u->cap = run_cap(rp, m, ck->nlines - k);
				for (int i = 0; i < m->nin; i++)
					if (!(u->buf[i] = malloc(u->cap * m->in[i].row_numel *
									 eng_dtype_size(m->in[i].dtype) +
								 1)))
						ck->out.oom = true;
			}
			run *u = &w->runs[cur];
			for (int i = 0; i < m->nin && !ck->out.oom; i++) {
				size_t rb = m->in[i].row_numel * eng_dtype_size(m->in[i].dtype);
				memcpy(u->buf[i] + u->rows * rb, w->row[i], rb);
			}
			l->run = cur;
			l->row = u->rows++;
		}
		p = nl ? nl + 1 : ck->end;
		if (ck->fatal || ck->out.oom)
			break;
	}
	if (cur >= 0 && !ck->fatal && !ck->out.oom)
		run_send(w, &w->runs[cur], ck);
	memset(ck->lerr, 0, ck->nlines);
	for (size_t k = 0; k < ck->nlines && !ck->fatal && !ck->out.oom; k++)
		line_format(w, ck, &w->lines[k]);
	if (ck->out.oom && !ck->fatal) {
		ck->fatal = TCTL_EXIT_IO;
		snprintf(ck->why, sizeof(ck->why), "out of memory");
	}
	for (int r = 0; r < nruns; r++) {
		tsd_reply_free(w->runs[r].reply);
		for (int i = 0; i < w->runs[r].m->nin; i++)
			free(w->runs[r].buf[i]);
	}
}

static void *worker_main(void *arg)
{
	worker *w = arg;
	replay *rp = w->rp;
	pthread_mutex_lock(&rp->mu);
	for (;;) {
		while (!rp->quit && rp->next_take == rp->next_fill)
			pthread_cond_wait(&rp->work, &rp->mu);
		if (rp->quit)
			break;
		chunk *ck = &rp->slots[rp->next_take++ % rp->nslots];
		ck->state = SLOT_TAKEN;
		pthread_mutex_unlock(&rp->mu);
		if (w->c) {
			chunk_do(w, ck);
		} else {
			ck->fatal = TCTL_EXIT_TRANSPORT;
			snprintf(ck->why, sizeof(ck->why), "cannot connect to %s", rp->url);
		}
		pthread_mutex_lock(&rp->mu);
		ck->state = SLOT_DONE;
		pthread_cond_broadcast(&rp->done);
	}
	pthread_mutex_unlock(&rp->mu);
	return NULL;
}

/* ---- files ---- */

/* The input file mapped (or read, for a pipe). */
static const char *map_input(const char *path, size_t *len, int *owned, char *err,
			     size_t errlen)
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
	const char *log, *out;
	long batch, jobs, stop_after;
	int progress; /* -1 auto */
} replay_opts;

static int parse_opts(int argc, char **argv, replay_opts *o)
{
	*o = (replay_opts){.jobs = 8, .stop_after = -1, .progress = -1};
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		bool has = i + 1 < argc;
		if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && has)
			o->out = argv[++i];
		else if (!strcmp(a, "--batch") && has) {
			if (!tctl_parse_long(argv[++i], 1, 4096, &o->batch))
				return tctl_usage("replay", "--batch %s: not in 1..4096", argv[i]);
		} else if (!strcmp(a, "--jobs") && has) {
			if (!tctl_parse_long(argv[++i], 1, 256, &o->jobs))
				return tctl_usage("replay", "--jobs %s: not in 1..256", argv[i]);
		} else if (!strcmp(a, "--stop-after") && has) {
			if (!tctl_parse_long(argv[++i], 0, __LONG_MAX__, &o->stop_after))
				return tctl_usage("replay", "--stop-after %s: not a count", argv[i]);
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
static void fill(replay *rp, const char **cur, const char *end, size_t per_chunk)
{
	while (*cur < end && rp->next_fill - rp->next_write < rp->nslots) {
		chunk *ck = &rp->slots[rp->next_fill % rp->nslots];
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
		ck->state = SLOT_READY;
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

	replay rp = {.ms = ms, .nms = nms, .batch = (int)o.batch, .url = ctx->url,
		     .timeout_ms = ctx->timeout_ms, .nslots = (size_t)o.jobs * 3};
	pthread_mutex_init(&rp.mu, NULL);
	pthread_cond_init(&rp.work, NULL);
	pthread_cond_init(&rp.done, NULL);
	rp.slots = calloc(rp.nslots, sizeof(chunk));
	worker *ws = calloc((size_t)o.jobs, sizeof(worker));
	size_t rowmax[TCTL_MAX_TENSORS] = {0};
	for (int i = 0; i < nms; i++)
		for (int k = 0; k < ms[i].nin; k++) {
			size_t b = ms[i].in[k].row_numel * eng_dtype_size(ms[i].in[k].dtype);
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
		worker *w = &ws[j];
		w->rp = &rp;
		w->cap = per_chunk;
		w->lines = malloc(per_chunk * sizeof(rline));
		for (size_t k = j; k < rp.nslots; k += (size_t)o.jobs)
			if (!(rp.slots[k].lerr = malloc(per_chunk)))
				w->lines = (free(w->lines), NULL);
		w->runs = malloc(per_chunk * sizeof(run));
		for (int k = 0; k < TCTL_MAX_TENSORS; k++)
			w->row[k] = malloc(rowmax[k] + 1);
		w->c = tsd_client_open(ctx->url, ctx->timeout_ms, err, sizeof(err));
		if (!w->lines || !w->runs || pthread_create(&w->th, NULL, worker_main, w)) {
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
		chunk *ck = &rp.slots[rp.next_write % rp.nslots];
		while (ck->state != SLOT_DONE) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 100000000;
			if (ts.tv_nsec >= 1000000000)
				ts.tv_sec++, ts.tv_nsec -= 1000000000;
			pthread_cond_timedwait(&rp.done, &rp.mu, &ts);
			if (!stop && ck->state != SLOT_DONE && signalled(&sigs))
				interrupted = stop = true; /* this chunk and those after are dropped */
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
					q = (const char *)memchr(q, '\n', ck->out.n) + 1;
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
		ck->state = SLOT_EMPTY;
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
		"replay: %zu lines (%zu before, %zu this run), %zu errors, %.0f lines/s over %.3f s\n",
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
