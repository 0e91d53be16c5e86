/* shm_frame.c: a camera frame through the daemon (issue 26's shared-memory goal). A float32
 * frame [1, 720, 1280, 3] (11 MB) and a small result (its mean per channel, [1, 3]) three ways,
 * alternating call by call so that each sees the same machine:
 *   in-process: the frame already in this process's engine (eng_from_host over the buffer, the
 *     mean realized and read): the floor, no transport;
 *   shm: the frame in a shared-memory region registered with tensord over unix://, the request
 *     naming it (tsd_shm_input), the result in the reply;
 *   message: the frame inside the request message (the same daemon, the same model).
 * The result is checked against a host mean each time. Prints medians and p90, the ratios
 * shm / in-process (goal <= 1.2) and message / in-process.
 * Usage: bench_shm_frame [calls (100)] */
#include <math.h>

#include <tensord/engine.h>

#include "daemon_bench.h"

#define H 720
#define W 1280
#define C 3

static const int64_t shape[4] = {1, H, W, C};

static int load_frame_model(tsd_client *c)
{
	const char *spec = "{\"verb\":\"model.load\",\"name\":\"frame\",\"graph\":{\"nodes\":["
			   "{\"id\":\"x\",\"op\":\"input\",\"dtype\":\"float32\",\"shape\":[1,720,1280,3]},"
			   "{\"id\":\"y\",\"op\":\"mean\",\"in\":[\"x\"],\"axes\":[1,2]}],\"outputs\":[\"y\"]}}";
	tsd_reply *r = NULL;
	tsd_status st = tsd_client_call_text(c, spec, NULL, 0, &r);
	if (st != TSD_OK)
		fprintf(stderr, "model.load: %s: %s\n", tsd_status_name(st), tsd_client_message(c, r));
	tsd_reply_free(r);
	return st == TSD_OK ? 0 : -1;
}

static bool close_to(const float *y, const double *want)
{
	for (int k = 0; k < C; k++)
		if (fabs(y[k] - want[k]) > 1e-3 * (1 + fabs(want[k])))
			return false;
	return true;
}

/* One in-process call: a mean over the frame already in host memory. */
static int in_process(eng_ctx *ctx, float *frame, float *y)
{
	eng_scope_begin(ctx);
	eng_tensor *x = eng_from_host(ctx, ENG_F32, 4, shape, frame, sizeof(float) * H * W * C, NULL, NULL);
	eng_tensor *m = x ? eng_mean(x, (const int[]){1, 2}, 2, false) : NULL;
	int rc = m && eng_tensor_read(m, y, sizeof(float) * C) == ENG_OK ? 0 : -1;
	eng_scope_end(ctx);
	return rc;
}

/* One daemon call: h with the frame either named in shared memory (h has the reference) or in
 * the message (msg non-NULL). */
static int daemon_call(tsd_client *c, const cJSON *h, const tsd_tensor *msg, float *y)
{
	tsd_reply *r = NULL;
	tsd_status st = tsd_client_call(c, h, msg, msg ? 1 : 0, &r);
	const tsd_tensor *t = st == TSD_OK ? tsd_reply_find(r, "y") : NULL;
	if (!t || t->nbytes != sizeof(float) * C) {
		fprintf(stderr, "infer: %s: %s\n", tsd_status_name(st), tsd_client_message(c, r));
		tsd_reply_free(r);
		return -1;
	}
	memcpy(y, t->data, sizeof(float) * C);
	tsd_reply_free(r);
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 100;
	if (n < 5) {
		fprintf(stderr, "usage: %s [calls >= 5]\n", argv[0]);
		return 2;
	}
	db_daemon d;
	if (db_daemon_start(&d, "") || strncmp(d.url, "unix://", 7)) {
		fprintf(stderr, "shm_frame: needs the daemon on unix:// (TSD_BENCH_TRANSPORT unset)\n");
		db_daemon_stop(&d);
		return 1;
	}
	int rc = 1;
	size_t bytes = sizeof(float) * H * W * C;
	tsd_client *c = tsd_client_open(d.url, 60000, NULL, 0);
	tsd_region *g = c ? tsd_region_create(c, "cam", bytes, false) : NULL;
	float *own = aligned_alloc(64, bytes);
	eng_ctx *ctx = eng_ctx_create(NULL, NULL, 0);
	uint64_t *t = malloc(sizeof(uint64_t) * 3 * (size_t)n);
	cJSON *hs = cJSON_CreateObject(), *hm = cJSON_CreateObject();
	if (!g || !own || !ctx || !t || !hs || !hm || load_frame_model(c)) {
		fprintf(stderr, "shm_frame: set-up failed: %s\n", c ? tsd_client_error(c) : "no client");
		goto out;
	}
	float *shared = tsd_region_data(g);
	for (cJSON *h = hs; h; h = h == hs ? hm : NULL) {
		cJSON_AddStringToObject(h, "verb", "infer");
		cJSON_AddStringToObject(h, "model", "frame");
		cJSON_AddStringToObject(h, "priority", "realtime");
	}
	tsd_shm_input(hs, "x", TSD_F32, 4, shape, g, 0);
	tsd_tensor msg = {.name = "x", .dtype = TSD_F32, .ndim = 4, .shape = {1, H, W, C}, .data = own, .nbytes = bytes};
	int bad = 0;
	for (int i = -3; i < n && !bad; i++) { /* 3 warm-up rounds */
		/* a new frame each round, in both buffers, and its host mean */
		double want[C] = {0};
		for (size_t k = 0; k < (size_t)H * W * C; k++) {
			float v = (float)((k * 2654435761u + (size_t)i * 40503u) % 1000) / 1000.0f;
			own[k] = shared[k] = v;
			want[k % C] += v;
		}
		for (int k = 0; k < C; k++)
			want[k] /= (double)H * W;
		float y[3][C];
		uint64_t t0 = db_now_ns();
		bad |= in_process(ctx, own, y[0]);
		uint64_t t1 = db_now_ns();
		bad |= daemon_call(c, hs, NULL, y[1]);
		uint64_t t2 = db_now_ns();
		bad |= daemon_call(c, hm, &msg, y[2]);
		uint64_t t3 = db_now_ns();
		for (int w = 0; w < 3 && !bad; w++)
			if (!close_to(y[w], want)) {
				fprintf(stderr, "shm_frame: way %d: mean %g %g %g, want %g %g %g\n", w, y[w][0], y[w][1],
					y[w][2], want[0], want[1], want[2]);
				bad = 1;
			}
		if (i >= 0) {
			t[i] = t1 - t0;
			t[n + i] = t2 - t1;
			t[2 * n + i] = t3 - t2;
		}
	}
	if (bad)
		goto out;
	const char *what[3] = {"in-process (input already in the engine)", "tensord, frame in shared memory",
			       "tensord, frame in the message"};
	double med[3];
	printf("shm_frame: float32 frame [1,%d,%d,%d] (%.1f MB) -> mean per channel, %d calls each, alternating, %s\n", H,
	       W, C, bytes / 1e6, n, d.url);
	for (int w = 0; w < 3; w++) {
		qsort(t + (size_t)w * n, (size_t)n, sizeof(uint64_t), cmp_u64);
		med[w] = t[(size_t)w * n + n / 2] / 1e6;
		printf("%-44s median %8.3f ms  p90 %8.3f ms\n", what[w], med[w], t[(size_t)w * n + n * 9 / 10] / 1e6);
	}
	printf("ratio shm / in-process %.2f (goal <= 1.2); message / in-process %.2f\n", med[1] / med[0], med[2] / med[0]);
	printf("RESULT shm_frame inproc_ms %.3f shm_ms %.3f msg_ms %.3f ratio_shm %.2f ratio_msg %.2f\n", med[0], med[1],
	       med[2], med[1] / med[0], med[2] / med[0]);
	rc = 0;
out:
	cJSON_Delete(hs);
	cJSON_Delete(hm);
	free(t);
	free(own);
	eng_ctx_destroy(ctx);
	tsd_region_destroy(g);
	tsd_client_close(c);
	if (db_daemon_stop(&d))
		rc = 1;
	return rc;
}
