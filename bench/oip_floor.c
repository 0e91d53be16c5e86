/* oip_floor.c: the floor of tensord's Open Inference Protocol over HTTP: the same HTTP library
 * (h2o's libuv flavour, set up as daemon/oip_http.c sets it up) answering every POST with one
 * fixed body, a binary infer answer (Inference-Header-Content-Length), without any model.
 * The body is a file (tensord's own answer, captured by bench/compare_oip.sh) with its JSON
 * header's length, or made here: a JSON header naming one UINT8 output "y" of the remaining
 * bytes, so that tritonclient parses it as an infer answer. GET answers 200 with no body (health).
 * Prints "port N" once listening (-p 0: a free port); runs until SIGTERM or SIGINT.
 * Usage: bench_oip_floor [-p PORT] [-s BYTES | -f FILE -H JSON_BYTES] */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <h2o.h>
#include <uv.h>

typedef struct floor_srv {
	h2o_globalconf_t gconf;
	h2o_context_t ctx;
	h2o_accept_ctx_t actx;
	uv_loop_t loop;
	uv_tcp_t listener;
	uv_signal_t sigterm, sigint;
	char *body;
	size_t body_len, json_len;
	char json_len_s[24];
	long requests;
} floor_srv;

static h2o_generator_t generator = {NULL, NULL};

static int on_req(h2o_handler_t *self, h2o_req_t *req)
{
	floor_srv *s = *(floor_srv **)(self + 1);
	s->requests++;
	req->res.status = 200;
	req->res.reason = "OK";
	if (!h2o_memis(req->method.base, req->method.len, H2O_STRLIT("POST"))) {
		req->res.content_length = 0;
		h2o_start_response(req, &generator);
		h2o_send(req, NULL, 0, H2O_SEND_STATE_FINAL);
		return 0;
	}
	/* the headers tensord's binary answer carries, in its order */
	h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("application/octet-stream"));
	h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("inference-header-content-length"), 1, NULL,
			      s->json_len_s, strlen(s->json_len_s));
	h2o_iovec_t b = h2o_iovec_init(s->body, s->body_len);
	req->res.content_length = s->body_len;
	h2o_start_response(req, &generator);
	h2o_send(req, &b, 1, H2O_SEND_STATE_FINAL);
	return 0;
}

static void on_accept(uv_stream_t *l, int status)
{
	floor_srv *s = l->data;
	if (status)
		return;
	uv_tcp_t *c = malloc(sizeof(*c));
	if (!c || uv_tcp_init(&s->loop, c)) {
		free(c);
		return;
	}
	if (uv_accept(l, (uv_stream_t *)c)) {
		uv_close((uv_handle_t *)c, (uv_close_cb)free);
		return;
	}
	uv_tcp_nodelay(c, 1);
	h2o_accept(&s->actx, h2o_uv_socket_create((uv_stream_t *)c, (uv_close_cb)free));
}

static void on_signal(uv_signal_t *h, int sig)
{
	floor_srv *s = h->data;
	(void)sig;
	uv_stop(&s->loop);
}

/* The body: FILE's bytes (json_len given), or a made answer of `size` bytes. 0 or -1. */
static int make_body(floor_srv *s, const char *file, long json_len, long size)
{
	if (file) {
		FILE *f = fopen(file, "rb");
		if (!f) {
			fprintf(stderr, "bench_oip_floor: %s: %s\n", file, strerror(errno));
			return -1;
		}
		fseek(f, 0, SEEK_END);
		long n = ftell(f);
		rewind(f);
		s->body = malloc(n > 0 ? (size_t)n : 1);
		if (n < 0 || !s->body || fread(s->body, 1, (size_t)n, f) != (size_t)n) {
			fclose(f);
			fprintf(stderr, "bench_oip_floor: %s: cannot read it\n", file);
			return -1;
		}
		fclose(f);
		if (json_len < 0 || json_len > n) {
			fprintf(stderr, "bench_oip_floor: -H %ld: the file has %ld bytes\n", json_len, n);
			return -1;
		}
		s->body_len = (size_t)n;
		s->json_len = (size_t)json_len;
	} else {
		char head[256];
		/* the header names the data's size, so its length depends on it: until they agree */
		long data = size, prev;
		int hl = 0, rounds = 0;
		do {
			prev = data;
			hl = snprintf(head, sizeof(head),
				      "{\"model_name\":\"floor\",\"model_version\":\"1\",\"outputs\":[{\"name\":\"y\",\"datatype\":"
				      "\"UINT8\",\"shape\":[1,%ld],\"parameters\":{\"binary_data_size\":%ld}}]}",
				      prev, prev);
			data = size - hl;
		} while (data != prev && data >= 0 && ++rounds < 8);
		if (data < 0) {
			fprintf(stderr, "bench_oip_floor: -s %ld: at least %d bytes (the JSON header)\n", size, hl);
			return -1;
		}
		s->body = calloc(1, (size_t)size + 1);
		if (!s->body)
			return -1;
		memcpy(s->body, head, (size_t)hl);
		s->body_len = (size_t)size;
		s->json_len = (size_t)hl;
	}
	snprintf(s->json_len_s, sizeof(s->json_len_s), "%zu", s->json_len);
	return 0;
}

int main(int argc, char **argv)
{
	static floor_srv s;
	int port = 0, opt;
	long size = 256, json_len = -1;
	const char *file = NULL;
	while ((opt = getopt(argc, argv, "p:s:f:H:")) != -1) {
		switch (opt) {
		case 'p': port = atoi(optarg); break;
		case 's': size = atol(optarg); break;
		case 'f': file = optarg; break;
		case 'H': json_len = atol(optarg); break;
		default:
			fprintf(stderr, "usage: bench_oip_floor [-p PORT] [-s BYTES | -f FILE -H JSON_BYTES]\n");
			return 2;
		}
	}
	if ((file != NULL) != (json_len >= 0)) {
		fprintf(stderr, "bench_oip_floor: -f FILE and -H JSON_BYTES go together\n");
		return 2;
	}
	if (make_body(&s, file, json_len, size))
		return 1;
	signal(SIGPIPE, SIG_IGN);
	/* as daemon/oip_http.c: one host, one path, the compress filter registered (idle for a
	 * client that does not ask for it, and for bodies under 1024 bytes) */
	h2o_config_init(&s.gconf);
	s.gconf.server_name = h2o_iovec_init(H2O_STRLIT("tensord"));
	h2o_hostconf_t *host = h2o_config_register_host(&s.gconf, h2o_iovec_init(H2O_STRLIT("default")), 65535);
	h2o_pathconf_t *pc = h2o_config_register_path(host, "/", 0);
	h2o_handler_t *h = h2o_create_handler(pc, sizeof(*h) + sizeof(floor_srv *));
	h->on_req = on_req;
	*(floor_srv **)(h + 1) = &s;
	h2o_compress_args_t ca = {.min_size = 1024, .gzip = {.quality = 1}, .brotli = {.quality = -1}};
	h2o_compress_register(pc, &ca);
	uv_loop_init(&s.loop);
	h2o_context_init(&s.ctx, &s.loop, &s.gconf);
	s.actx.ctx = &s.ctx;
	s.actx.hosts = s.gconf.hosts;
	struct sockaddr_in a;
	uv_ip4_addr("127.0.0.1", port, &a);
	int rv;
	uv_tcp_init(&s.loop, &s.listener);
	s.listener.data = &s;
	if ((rv = uv_tcp_bind(&s.listener, (const struct sockaddr *)&a, 0)) ||
	    (rv = uv_listen((uv_stream_t *)&s.listener, SOMAXCONN, on_accept))) {
		fprintf(stderr, "bench_oip_floor: 127.0.0.1:%d: %s\n", port, uv_strerror(rv));
		return 1;
	}
	int n = (int)sizeof(a);
	uv_tcp_getsockname(&s.listener, (struct sockaddr *)&a, &n);
	uv_signal_init(&s.loop, &s.sigterm);
	uv_signal_init(&s.loop, &s.sigint);
	s.sigterm.data = s.sigint.data = &s;
	uv_signal_start(&s.sigterm, on_signal, SIGTERM);
	uv_signal_start(&s.sigint, on_signal, SIGINT);
	printf("port %d\n", ntohs(a.sin_port));
	fflush(stdout);
	uv_run(&s.loop, UV_RUN_DEFAULT);
	fprintf(stderr, "bench_oip_floor: %ld requests answered (%zu-byte body, %zu of JSON)\n", s.requests, s.body_len,
		s.json_len);
	free(s.body);
	return 0;
}
