/* live_fuzz.c: the live protocol fuzzer (make live-fuzz; make check runs it on the ASan build).
 * Starts the tensord of its own build directory (bench/daemon_bench.h) with a models_dir, then
 * from LIVE_FUZZ_CONNS connections (one thread each; even ones on unix://, each message one
 * frame, reconnecting after the daemon closes a connection that sent an undecodable message; odd ones
 * on nng's ipc://) sends mutations of valid requests of every
 * verb: the header's values replaced (huge, negative, fractional, wrong types, long strings,
 * paths out of models_dir), members dropped or added, the verb swapped, bits flipped, the
 * message truncated or extended, the JSON length wrong, deep nesting, garbage; a quarter are
 * sent intact, so models are loaded, trained, saved and unloaded as the run goes.
 * Checks: every message gets a reply within LIVE_FUZZ_REPLY_S (lost otherwise) that decodes as a
 * reply; "internal" replies are counted and fail the run (a bad request must be named as one);
 * health, on a connection of its own, answers every second within 5 s (a hang otherwise); the
 * daemon is alive at the end, exits 0 on SIGTERM and its log has no sanitizer report; its VmRSS
 * is sampled every second and, with LIVE_FUZZ_PLATEAU_PCT > 0, may grow at most that much
 * between a third of the run and its end. Environment: LIVE_FUZZ_SECONDS (60), LIVE_FUZZ_SEED
 * (the time), LIVE_FUZZ_CONNS (4), LIVE_FUZZ_REPLY_S (60), LIVE_FUZZ_PLATEAU_PCT (0: off). */
#include "../../bench/daemon_bench.h"

#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>

#include "protocol/message.h"

#define MAX_CONNS 32
#define MAX_NODES 512

/* ---- the seeds: one valid request of each verb (and a few variants) ---- */

#define GRAPH_LIN                                                                                    \
	"{\"nodes\":[{\"id\":\"x\",\"op\":\"input\",\"dtype\":\"float32\",\"shape\":[-1,4]},"       \
	"{\"id\":\"W\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[3,4]},"                      \
	"{\"id\":\"b\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[3]},"                        \
	"{\"id\":\"y\",\"op\":\"linear\",\"in\":[\"x\",\"W\",\"b\"]}],\"outputs\":[\"y\"]}"
#define TRAIN_LIN "{\"loss\":\"mse\",\"output\":\"y\",\"target\":\"t\",\"optimizer\":{\"kind\":\"sgd\",\"lr\":0.1}}"

enum { S_HELLO, S_HEALTH, S_STATS, S_LIST, S_LOAD, S_INFER, S_INFER_RT, S_REALIZE, S_REALIZE_CONV,
       S_TRAIN, S_SAVE, S_LOAD_FILE, S_UNLOAD, S_UNLOAD_FILE, S_COUNT };

/* The header of seed k (id added by the sender) and its tensors. */
static const char *seed_json(int k)
{
	switch (k) {
	case S_HELLO: return "{\"verb\":\"hello\",\"version\":1}";
	case S_HEALTH: return "{\"verb\":\"health\"}";
	case S_STATS: return "{\"verb\":\"stats\"}";
	case S_LIST: return "{\"verb\":\"model.list\"}";
	case S_LOAD:
		return "{\"verb\":\"model.load\",\"name\":\"fz\",\"graph\":" GRAPH_LIN
		       ",\"batching\":{\"max\":8,\"delay_us\":500,\"buckets\":[1,2,4,8]},\"train\":" TRAIN_LIN "}";
	case S_INFER: return "{\"verb\":\"infer\",\"model\":\"fz\"}";
	case S_INFER_RT: return "{\"verb\":\"infer\",\"model\":\"fz\",\"priority\":\"realtime\",\"timeout_ms\":500,\"latest_only\":true}";
	case S_REALIZE: return "{\"verb\":\"realize\",\"graph\":" GRAPH_LIN "}";
	case S_REALIZE_CONV:
		return "{\"verb\":\"realize\",\"graph\":{\"nodes\":[{\"id\":\"x\",\"op\":\"input\",\"dtype\":\"float32\","
		       "\"shape\":[1,1,6,6]},{\"id\":\"k\",\"op\":\"param\",\"dtype\":\"float32\",\"shape\":[2,1,3,3]},"
		       "{\"id\":\"c\",\"op\":\"conv2d\",\"in\":[\"x\",\"k\"],\"padding\":1},{\"id\":\"y\",\"op\":\"relu\","
		       "\"in\":[\"c\"]}],\"outputs\":[\"y\"]}}";
	case S_TRAIN: return "{\"verb\":\"train.step\",\"model\":\"fz\"}";
	case S_SAVE: return "{\"verb\":\"model.save\",\"name\":\"fz\",\"path\":\"fz.safetensors\"}";
	case S_LOAD_FILE:
		return "{\"verb\":\"model.load\",\"name\":\"fz2\",\"weights\":\"fz.safetensors\",\"graph\":" GRAPH_LIN "}";
	case S_UNLOAD: return "{\"verb\":\"model.unload\",\"name\":\"fz\"}";
	default: return "{\"verb\":\"model.unload\",\"name\":\"fz2\"}";
	}
}

typedef struct seed_data {
	float x[8 * 4], t[8 * 3], w[3 * 4], b[3], k[2 * 9], img[36];
} seed_data;

static int seed_tensors(int k, const seed_data *d, proto_out *o, int64_t shapes[][4])
{
	int n = 0;
#define T(nm, arr, nd, ...)                                                                        \
	do {                                                                                       \
		int64_t s_[] = {__VA_ARGS__};                                                      \
		memcpy(shapes[n], s_, sizeof(s_));                                                 \
		o[n] = (proto_out){nm, TSD_F32, nd, shapes[n], arr};                               \
		n++;                                                                               \
	} while (0)
	switch (k) {
	case S_LOAD: T("W", d->w, 2, 3, 4); T("b", d->b, 1, 3); break;
	case S_INFER: T("x", d->x, 2, 8, 4); break;
	case S_INFER_RT: T("x", d->x, 2, 1, 4); break;
	case S_REALIZE: T("x", d->x, 2, 2, 4); T("W", d->w, 2, 3, 4); T("b", d->b, 1, 3); break;
	case S_REALIZE_CONV: T("x", d->img, 4, 1, 1, 6, 6); T("k", d->k, 4, 2, 1, 3, 3); break;
	case S_TRAIN: T("x", d->x, 2, 8, 4); T("t", d->t, 2, 8, 3); break;
	default: break;
	}
#undef T
	return n;
}

/* ---- randomness (xorshift; one state per thread) ---- */

static uint64_t rnd(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}
#define RN(s, n) ((int)(rnd(s) % (uint64_t)(n)))

/* ---- mutations ---- */

typedef struct node_ref {
	cJSON *parent, *item;
} node_ref;

static int collect(cJSON *parent, node_ref *out, int n)
{
	for (cJSON *c = parent->child; c && n < MAX_NODES; c = c->next) {
		out[n++] = (node_ref){parent, c};
		if (cJSON_IsArray(c) || cJSON_IsObject(c))
			n = collect(c, out, n);
	}
	return n;
}

static cJSON *nested(int depth)
{
	cJSON *top = cJSON_CreateArray(), *cur = top;
	for (int i = 1; i < depth; i++) {
		cJSON *a = cJSON_CreateArray();
		cJSON_AddItemToArray(cur, a);
		cur = a;
	}
	return top;
}

/* A hostile value. */
static cJSON *hostile(uint64_t *s)
{
	static const double nums[] = {0, -1, 1, 2, 3, 64, 65, 255, 4096, 65536, 1e6, 2147483647.0, 2147483648.0,
				      4294967296.0, 9007199254740992.0, 9.3e18, 1.8e19, 1e308, -1e308, 0.5, -0.0, 1e-300};
	static const char *const strs[] = {"", "x", "../../../etc/passwd", "/etc/passwd", "fz", "float32", "int64",
					   "float16", "bool", "infer", "model.load", "\x01\x02", "a/b/../../c",
					   "realtime", "bulk", "sgd", "adam", "mse", "linear", "conv2d", "one_hot",
					   "fz.safetensors", "nope.onnx", "onnx"};
	char buf[8192];
	switch (RN(s, 10)) {
	case 0: case 1: case 2: return cJSON_CreateNumber(nums[RN(s, sizeof(nums) / sizeof(nums[0]))]);
	case 3: case 4: return cJSON_CreateString(strs[RN(s, sizeof(strs) / sizeof(strs[0]))]);
	case 5: {
		int n = 1 + RN(s, (int)sizeof(buf) - 1);
		memset(buf, 'a' + RN(s, 26), (size_t)n);
		buf[n] = 0;
		return cJSON_CreateString(buf);
	}
	case 6: return RN(s, 3) == 0 ? cJSON_CreateNull() : cJSON_CreateBool(RN(s, 2));
	case 7: {
		cJSON *a = cJSON_CreateArray();
		for (int i = 0, n = RN(s, 9); i < n; i++)
			cJSON_AddItemToArray(a, cJSON_CreateNumber(nums[RN(s, sizeof(nums) / sizeof(nums[0]))]));
		return a;
	}
	case 8: return RN(s, 2) ? cJSON_CreateObject() : cJSON_CreateArray();
	default: return nested(1 + RN(s, 200));
	}
}

static void mutate_json(cJSON *h, uint64_t *s)
{
	node_ref local[MAX_NODES];
	int n = collect(h, local, 0);
	int what = RN(s, 6);
	if (!n || what == 0) { /* an unknown or repeated member */
		static const char *const keys[] = {"verb", "model", "graph", "tensors", "id", "name", "file",
						   "weights", "priority", "timeout_ms", "extra", "batching", "train"};
		cJSON_AddItemToObject(h, keys[RN(s, sizeof(keys) / sizeof(keys[0]))], hostile(s));
		return;
	}
	node_ref *p = &local[RN(s, n)];
	if (what == 1) { /* drop it */
		cJSON_Delete(cJSON_DetachItemViaPointer(p->parent, p->item));
	} else if (what == 2 && cJSON_IsNumber(p->item)) { /* a nearby number */
		double v = p->item->valuedouble;
		static const double d[] = {-1, 1, -2, 2, 0.5};
		cJSON_SetNumberValue(p->item, RN(s, 3) ? v + d[RN(s, 5)] : -v);
	} else if (what == 3 && cJSON_IsArray(p->item)) { /* duplicate an element */
		cJSON *e = cJSON_GetArrayItem(p->item, RN(s, cJSON_GetArraySize(p->item) + 1));
		if (e && cJSON_GetArraySize(p->item) < 1000)
			cJSON_AddItemToArray(p->item, cJSON_Duplicate(e, true));
	} else { /* replace it */
		cJSON *v = hostile(s);
		if (!cJSON_ReplaceItemViaPointer(p->parent, p->item, v))
			cJSON_Delete(v);
	}
}

/* The message: prefix, header text, padding to 64, payload area. malloc'd. */
static uint8_t *frame(const char *text, size_t tl, const uint8_t *payload, size_t pl, size_t *len)
{
	size_t head = (8 + tl + 63) / 64 * 64;
	uint8_t *m = calloc(1, head + pl + 1);
	memcpy(m, PROTO_MAGIC, 4);
	for (int i = 0; i < 4; i++)
		m[4 + i] = (uint8_t)(tl >> (8 * i));
	memcpy(m + 8, text, tl);
	if (pl)
		memcpy(m + head, payload, pl);
	*len = head + pl;
	return m;
}

/* One request of seed k, mutated or not. */
static uint8_t *make_request(int k, uint64_t id, const seed_data *d, uint64_t *s, size_t *len, int *mutated)
{
	cJSON *h = cJSON_Parse(seed_json(k));
	cJSON_AddNumberToObject(h, "id", (double)id);
	proto_out o[8];
	int64_t shapes[8][4];
	int n = seed_tensors(k, d, o, shapes);
	void *buf = NULL;
	size_t bl = 0;
	proto_err e;
	if (proto_encode(h, o, n, 0, NULL, NULL, &buf, &bl, &e)) {
		fprintf(stderr, "live_fuzz: seed %d does not encode: %s\n", k, e.msg);
		exit(2);
	}
	cJSON_Delete(h);
	uint8_t *m = buf;
	int how = RN(s, 16);
	*mutated = how >= 4;
	if (how < 4) { /* intact */
		*len = bl;
		uint8_t *c = malloc(bl);
		memcpy(c, m, bl);
		free(buf);
		return c;
	}
	size_t jl = (size_t)m[4] | (size_t)m[5] << 8 | (size_t)m[6] << 16 | (size_t)m[7] << 24;
	size_t head = (8 + jl + 63) / 64 * 64;
	uint8_t *out = NULL;
	if (how < 11) { /* the header's JSON mutated (the tensors' descriptors too), framed right */
		char *text = strndup((const char *)m + 8, jl);
		cJSON *j = cJSON_Parse(text);
		free(text);
		for (int i = 0, times = 1 + RN(s, 3); j && i < times; i++) {
			if (how == 10) { /* another verb with this one's fields */
				static const char *const verbs[] = {"hello", "health", "stats", "model.list",
								    "model.load", "model.unload", "model.save",
								    "infer", "realize", "train.step", "bogus"};
				cJSON_ReplaceItemInObject(j, "verb", cJSON_CreateString(verbs[RN(s, 11)]));
			} else {
				mutate_json(j, s);
			}
		}
		char *t = j ? cJSON_PrintUnformatted(j) : strdup("{");
		cJSON_Delete(j);
		out = frame(t, strlen(t), m + head, bl > head ? bl - head : 0, len); /* no padding without tensors */
		free(t);
	} else if (how == 11) { /* bits flipped */
		out = malloc(bl);
		memcpy(out, m, bl);
		for (int i = 0, f = 1 + RN(s, 8); i < f; i++)
			out[RN(s, bl)] ^= (uint8_t)(1u << RN(s, 8));
		*len = bl;
	} else if (how == 12) { /* truncated, or extended with garbage */
		size_t nl = RN(s, 2) ? (size_t)RN(s, bl) : bl + 1 + (size_t)RN(s, 4096);
		out = calloc(1, nl + 1);
		memcpy(out, m, nl < bl ? nl : bl);
		for (size_t i = bl; i < nl; i++)
			out[i] = (uint8_t)rnd(s);
		*len = nl;
	} else if (how == 13) { /* the JSON length wrong */
		out = malloc(bl);
		memcpy(out, m, bl);
		uint32_t v = RN(s, 2) ? (uint32_t)rnd(s) : (uint32_t)(jl + (size_t)RN(s, 130) - 65);
		for (int i = 0; i < 4; i++)
			out[4 + i] = (uint8_t)(v >> (8 * i));
		*len = bl;
	} else if (how == 14) { /* deep nesting or a long string in the header */
		int depth = 1000 + RN(s, 200000);
		char *t = malloc((size_t)depth * 2 + 64);
		size_t p = (size_t)sprintf(t, "{\"verb\":\"infer\",\"id\":%llu,\"x\":", (unsigned long long)id);
		memset(t + p, '[', (size_t)depth);
		memset(t + p + depth, ']', (size_t)depth);
		p += 2 * (size_t)depth;
		t[p++] = '}';
		out = frame(t, p, NULL, 0, len);
		free(t);
	} else { /* garbage, sometimes behind a right magic */
		size_t nl = (size_t)RN(s, 4096);
		out = calloc(1, nl + 8);
		for (size_t i = 0; i < nl; i++)
			out[i] = (uint8_t)rnd(s);
		if (nl >= 4 && RN(s, 2))
			memcpy(out, PROTO_MAGIC, 4);
		*len = nl;
	}
	free(buf);
	return out;
}

/* ---- the run ---- */

typedef struct fuzz {
	db_daemon d;
	char url[320];      /* nng's ipc:// (odd connections, health) */
	char unix_url[320]; /* unix:// (even connections) */
	uint64_t seed;
	double seconds, reply_s;
	atomic_bool stop, failed;
	atomic_ullong sent, mutated, lost, undecodable, internal, reconnects;
	atomic_ullong by_status[TSD_STATUS_COUNT];
	atomic_ullong intact_ok[S_COUNT]; /* intact seeds answered ok, per seed */
	atomic_bool intact_told[S_COUNT];
	bool verbose;
	pthread_mutex_t print;
} fuzz;

static void fail(fuzz *f, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	pthread_mutex_lock(&f->print);
	fprintf(stderr, "live_fuzz: FAIL: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	pthread_mutex_unlock(&f->print);
	va_end(ap);
	atomic_store(&f->failed, true);
}

static int open_req(const char *url, double timeout_s, nng_socket *s)
{
	int rv;
	if ((rv = nng_req0_open(s)))
		return rv;
	nng_socket_set_ms(*s, NNG_OPT_RECVTIMEO, (nng_duration)(timeout_s * 1000));
	nng_socket_set_ms(*s, NNG_OPT_SENDTIMEO, (nng_duration)(timeout_s * 1000));
	nng_socket_set_ms(*s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE); /* never a second copy */
	if ((rv = nng_dial(*s, url, NULL, 0))) {
		nng_close(*s);
		return rv;
	}
	return 0;
}

typedef struct worker {
	fuzz *f;
	int idx;
} worker;

/* ---- unix:// (frames: u32 length + the message) ---- */

static int ux_open(const char *url)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t n = strlen(url + 7);
	if (n >= sizeof(sa.sun_path))
		return -1;
	memcpy(sa.sun_path, url + 7, n + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* n bytes in or out within timeout_s: 0, -2 closed by the peer, -1 an error or the timeout. */
static int ux_io(int fd, void *buf, size_t n, bool rd, double timeout_s)
{
	uint64_t until = db_now_ns() + (uint64_t)(timeout_s * 1e9);
	for (uint8_t *b = buf; n;) {
		ssize_t k = rd ? recv(fd, b, n, MSG_DONTWAIT) : send(fd, b, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (k > 0) {
			b += k;
			n -= (size_t)k;
			continue;
		}
		if (k == 0)
			return -2; /* closed */
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -1;
		uint64_t now = db_now_ns();
		if (now >= until)
			return -1;
		struct pollfd p = {.fd = fd, .events = rd ? POLLIN : POLLOUT};
		poll(&p, 1, (int)((until - now) / 1000000 + 1));
	}
	return 0;
}

/* One request out and its reply in (malloc'd into *rep): 0, or ux_io's failure. */
static int ux_call(int fd, const uint8_t *m, size_t len, double timeout_s, void **rep, size_t *rl)
{
	uint32_t n = (uint32_t)len;
	*rep = NULL;
	uint8_t *fr = malloc(len + 4);
	if (!fr)
		return -1;
	memcpy(fr, &n, 4);
	memcpy(fr + 4, m, len);
	/* one write; a frame the daemon refuses from its first bytes is answered, then closed, maybe
	 * before the rest is written (EPIPE here): its answer is still read */
	ux_io(fd, fr, len + 4, false, timeout_s);
	free(fr);
	int rc = ux_io(fd, &n, 4, true, timeout_s);
	if (rc)
		return rc;
	if (!(*rep = malloc(n ? n : 1)) || (rc = ux_io(fd, *rep, n, true, timeout_s))) {
		free(*rep);
		*rep = NULL;
		return rc ? rc : -1;
	}
	*rl = n;
	return 0;
}

static void *worker_main(void *arg)
{
	worker *w = arg;
	fuzz *f = w->f;
	uint64_t s = f->seed * 0x9e3779b97f4a7c15ull + (uint64_t)w->idx * 7919 + 1;
	seed_data d;
	for (size_t i = 0; i < sizeof(d) / sizeof(float); i++)
		((float *)&d)[i] = (float)((int)(rnd(&s) % 200) - 100) / 50.0f;
	bool ux = w->idx % 2 == 0;
	nng_socket sock = NNG_SOCKET_INITIALIZER;
	int fd = -1, rv = ux ? ((fd = ux_open(f->unix_url)) < 0 ? NNG_ECONNREFUSED : 0) : open_req(f->url, f->reply_s, &sock);
	if (rv) {
		fail(f, "connection %d: %s", w->idx, nng_strerror(rv));
		return NULL;
	}
	proto_msg *pm = malloc(sizeof(*pm));
	char last_st[32] = "none", last_id[PROTO_MAX_ID + 1] = "";
	bool will_close = false;
	for (uint64_t n = 0; !atomic_load(&f->stop); n++) {
		size_t len;
		int mutated, k = RN(&s, S_COUNT);
		uint64_t id = ((uint64_t)w->idx << 40) | n;
		uint8_t *m = make_request(k, id, &d, &s, &len, &mutated);
		void *rep = NULL;
		size_t rl = 0;
		if (ux) {
			/* a message the daemon cannot decode is answered, then its connection closed:
			 * decoded here the same way (the daemon's default limits) to know which */
			proto_err pe;
			will_close = proto_decode(m, len, (size_t)1 << 28, PROTO_REQUEST, pm, &pe) != TSD_OK;
			if (!will_close) {
				will_close = !pm->id[0]; /* no id: answered as undecodable */
				proto_msg_free(pm);
			}
			atomic_fetch_add(&f->sent, 1);
			atomic_fetch_add(&f->mutated, (unsigned)mutated);
			rv = ux_call(fd, m, len, f->reply_s, &rep, &rl);
			if (rv) {
				atomic_fetch_add(&f->lost, 1);
				fail(f, "connection %d (unix): no reply to a request of seed %d (%s, %s; %zu bytes, %.8s) within "
				     "%g s: %s (the previous reply: %s, id \"%s\")", w->idx, k, mutated ? "mutated" : "intact",
				     will_close ? "undecodable" : "decodable", len, (const char *)m, f->reply_s,
				     rv == -2 ? "the daemon closed the connection" : "timed out or failed", last_st, last_id);
				free(m);
				break;
			}
			free(m);
		} else {
			rv = nng_send(sock, m, len, 0);
			free(m);
			if (rv) {
				fail(f, "connection %d: send: %s", w->idx, nng_strerror(rv));
				break;
			}
			atomic_fetch_add(&f->sent, 1);
			atomic_fetch_add(&f->mutated, (unsigned)mutated);
			if ((rv = nng_recv(sock, &rep, &rl, NNG_FLAG_ALLOC))) {
				atomic_fetch_add(&f->lost, 1);
				fail(f, "connection %d: no reply to a request of seed %d within %g s: %s", w->idx, k,
				     f->reply_s, nng_strerror(rv));
				break;
			}
		}
		proto_err e;
		tsd_status st = proto_decode(rep, rl, rl, PROTO_REPLY, pm, &e);
		if (st != TSD_OK) {
			atomic_fetch_add(&f->undecodable, 1);
			fail(f, "connection %d: a reply does not decode: %s", w->idx, e.msg);
		} else {
			atomic_fetch_add(&f->by_status[pm->status], 1);
			if (!mutated && pm->status == TSD_OK)
				atomic_fetch_add(&f->intact_ok[k], 1);
			else if (!mutated && f->verbose && !atomic_exchange(&f->intact_told[k], true))
				fprintf(stderr, "live_fuzz: seed %d intact: %s: %s\n", k, tsd_status_name(pm->status),
					pm->error ? pm->error : "");
			if (pm->status == TSD_INTERNAL) {
				atomic_fetch_add(&f->internal, 1);
				fail(f, "seed %d (%s): internal: %s", k, mutated ? "mutated" : "intact",
				     pm->error ? pm->error : "");
			}
			/* unix://: a reply with a null id (the message did not decode) closes the connection */
			bool reopen = ux && will_close;
			snprintf(last_st, sizeof(last_st), "%s", tsd_status_name(pm->status));
			snprintf(last_id, sizeof(last_id), "%s", pm->id);
			proto_msg_free(pm);
			if (reopen) {
				close(fd);
				if ((fd = ux_open(f->unix_url)) < 0) {
					fail(f, "connection %d (unix): cannot connect again", w->idx);
					if (ux)
						free(rep);
					break;
				}
				atomic_fetch_add(&f->reconnects, 1);
			}
		}
		if (ux)
			free(rep);
		else
			nng_free(rep, rl);
	}
	free(pm);
	if (ux && fd >= 0)
		close(fd);
	else if (!ux)
		nng_close(sock);
	return NULL;
}

static double env_num(const char *k, double def)
{
	const char *v = getenv(k);
	return v && *v ? atof(v) : def;
}

/* health on a connection of its own within 5 s: 0, or -1 */
static int health(const char *url)
{
	nng_socket s;
	if (open_req(url, 5, &s))
		return -1;
	char buf[128];
	size_t tl = (size_t)snprintf(buf, sizeof(buf), "{\"id\":\"h\",\"verb\":\"health\"}"), len;
	uint8_t *m = frame(buf, tl, NULL, 0, &len);
	int rc = nng_send(s, m, len, 0);
	free(m);
	void *rep;
	size_t rl;
	if (!rc && !(rc = nng_recv(s, &rep, &rl, NNG_FLAG_ALLOC)))
		nng_free(rep, rl);
	nng_close(s);
	return rc ? -1 : 0;
}

static bool log_has_report(const char *path)
{
	FILE *fp = fopen(path, "re");
	char line[1024];
	bool bad = false;
	while (fp && fgets(line, sizeof(line), fp))
		if (strstr(line, "Sanitizer") || strstr(line, "runtime error:")) {
			if (!bad)
				fprintf(stderr, "live_fuzz: the daemon's log (%s) has a sanitizer report:\n", path);
			bad = true;
			fputs(line, stderr);
		}
	if (fp)
		fclose(fp);
	return bad;
}

int main(void)
{
	static fuzz f;
	f.seconds = env_num("LIVE_FUZZ_SECONDS", 60);
	f.reply_s = env_num("LIVE_FUZZ_REPLY_S", 60);
	f.seed = (uint64_t)env_num("LIVE_FUZZ_SEED", (double)time(NULL));
	double plateau = env_num("LIVE_FUZZ_PLATEAU_PCT", 0);
	f.verbose = env_num("LIVE_FUZZ_VERBOSE", 0) > 0;
	int conns = (int)env_num("LIVE_FUZZ_CONNS", 4);
	conns = conns < 1 ? 1 : conns > MAX_CONNS ? MAX_CONNS : conns;
	pthread_mutex_init(&f.print, NULL);
	char models[300], extra[512];
	snprintf(models, sizeof(models), "/tmp/tsd-livefuzz-models-XXXXXX");
	if (!mkdtemp(models)) {
		perror("mkdtemp");
		return 2;
	}
	snprintf(extra, sizeof(extra), "\"models_dir\": \"%s\", \"drain_seconds\": 5", models);
	if (db_daemon_start(&f.d, extra))
		return 2;
	snprintf(f.url, sizeof(f.url), "%s", f.d.nng_url);
	snprintf(f.unix_url, sizeof(f.unix_url), "unix://%s/tensord.sock", f.d.dir);
	printf("live_fuzz: seed %llu, %g s, %d connections, daemon pid %d (log %s)\n", (unsigned long long)f.seed,
	       f.seconds, conns, (int)f.d.pid, f.d.log);
	pthread_t th[MAX_CONNS];
	worker w[MAX_CONNS];
	for (int i = 0; i < conns; i++) {
		w[i] = (worker){&f, i};
		pthread_create(&th[i], NULL, worker_main, &w[i]);
	}
	uint64_t t0 = db_now_ns();
	long rss0 = db_rss_kb(f.d.pid), rss_third = -1, rss_peak = rss0, rss = rss0;
	int healths = 0, sec = 0;
	while (!atomic_load(&f.failed) && (double)(db_now_ns() - t0) / 1e9 < f.seconds) {
		sleep(1);
		sec++;
		int wst;
		if (waitpid(f.d.pid, &wst, WNOHANG) == f.d.pid) {
			fail(&f, "the daemon died (status %d)", wst);
			f.d.pid = 0;
			break;
		}
		if (health(f.url)) {
			fail(&f, "health unanswered within 5 s after %d s (a hang)", sec);
			break;
		}
		healths++;
		rss = db_rss_kb(f.d.pid);
		rss_peak = rss > rss_peak ? rss : rss_peak;
		if (rss_third < 0 && (double)(db_now_ns() - t0) / 1e9 >= f.seconds / 3)
			rss_third = rss;
		if (sec % 10 == 0)
			printf("live_fuzz: %d s: %llu requests, RSS %ld KiB\n", sec, (unsigned long long)atomic_load(&f.sent),
			       rss);
	}
	atomic_store(&f.stop, true);
	for (int i = 0; i < conns; i++)
		pthread_join(th[i], NULL);
	printf("live_fuzz: %llu requests (%llu mutated), %d health checks, %llu lost, %llu undecodable, %llu "
	       "internal; RSS %ld KiB at start, %ld at a third, %ld peak, %ld at the end\n",
	       (unsigned long long)f.sent, (unsigned long long)f.mutated, healths, (unsigned long long)f.lost,
	       (unsigned long long)f.undecodable, (unsigned long long)f.internal, rss0, rss_third, rss_peak, rss);
	printf("live_fuzz: unix:// connections closed by the daemon after answering an undecodable message, and opened again: %llu\n",
	       (unsigned long long)f.reconnects);
	printf("live_fuzz: replies by status:");
	for (int st = 0; st < TSD_STATUS_COUNT; st++)
		if (f.by_status[st])
			printf(" %s %llu", tsd_status_name((tsd_status)st), (unsigned long long)f.by_status[st]);
	printf("\nlive_fuzz: intact requests answered ok, per seed:");
	for (int k = 0; k < S_COUNT; k++)
		printf(" %llu", (unsigned long long)f.intact_ok[k]);
	printf("\n");
	if (plateau > 0 && rss_third > 0 && rss > rss_third * (1 + plateau / 100))
		fail(&f, "RSS grew from %ld KiB at a third of the run to %ld at the end (more than %g%%)", rss_third, rss,
		     plateau);
	if (f.d.pid) { /* SIGTERM: it must drain and exit 0 within drain_seconds and a margin */
		kill(f.d.pid, SIGTERM);
		int wst = 0;
		pid_t got = 0;
		for (int i = 0; i < 200 && !(got = waitpid(f.d.pid, &wst, WNOHANG)); i++)
			usleep(100000);
		if (!got) {
			fail(&f, "the daemon did not exit within 20 s of SIGTERM");
			kill(f.d.pid, SIGKILL);
			waitpid(f.d.pid, &wst, 0);
		} else if (!WIFEXITED(wst) || WEXITSTATUS(wst)) {
			fail(&f, "the daemon ended with status %d on SIGTERM", wst);
		}
		f.d.pid = 0;
	}
	if (log_has_report(f.d.log))
		atomic_store(&f.failed, true);
	if (atomic_load(&f.failed)) {
		char cmd[400];
		snprintf(cmd, sizeof(cmd), "tail -20 '%s' >&2", f.d.log);
		if (system(cmd)) {
		}
	}
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", models, f.d.dir);
	if (system(cmd)) {
	}
	if (atomic_load(&f.failed)) {
		fprintf(stderr, "live_fuzz: FAILED (seed %llu; rerun with LIVE_FUZZ_SEED=%llu)\n",
			(unsigned long long)f.seed, (unsigned long long)f.seed);
		return 1;
	}
	printf("live_fuzz: ok\n");
	return 0;
}
