/* oip_grpc_floor.c: the floor of tensord's Open Inference Protocol over gRPC: the same library
 * (gRPC's C core, a completion queue served by one thread, as daemon/oip_grpc.c serves its own)
 * answering every unary call with one fixed message, without any model: the bytes of a
 * ModelInferResponse (tensord's own answer, captured by bench/compare_oip.sh), so that
 * tritonclient.grpc parses it as an infer answer. Prints "port N" once listening (-p 0: a free
 * port); runs until SIGTERM or SIGINT.
 * Usage: bench_oip_grpc_floor [-p PORT] -f ANSWER_FILE */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/time.h>

typedef enum { CALL_NEW, CALL_READ, CALL_DONE } call_state;

typedef struct floor_call {
	call_state state;
	grpc_call *call;
	grpc_call_details details;
	grpc_metadata_array md;
	grpc_byte_buffer *in, *out;
	int cancelled;
} floor_call;

typedef struct floor_srv {
	grpc_server *server;
	grpc_completion_queue *cq;
	grpc_slice answer;
	long calls;
} floor_srv;

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

/* Ask for the next call (a fresh floor_call; 0, or -1 when out of memory). */
static int request_call(floor_srv *s)
{
	floor_call *c = calloc(1, sizeof(*c));
	if (!c)
		return -1;
	grpc_call_details_init(&c->details);
	grpc_metadata_array_init(&c->md);
	return grpc_server_request_call(s->server, &c->call, &c->details, &c->md, s->cq, s->cq, c) == GRPC_CALL_OK ? 0 : -1;
}

static void call_free(floor_call *c)
{
	if (c->call)
		grpc_call_unref(c->call);
	if (c->in)
		grpc_byte_buffer_destroy(c->in);
	if (c->out)
		grpc_byte_buffer_destroy(c->out);
	grpc_call_details_destroy(&c->details);
	grpc_metadata_array_destroy(&c->md);
	free(c);
}

/* One event of call c: a new call (read its message), its message read (answer), or done. */
static void step(floor_srv *s, floor_call *c, bool ok)
{
	grpc_op ops[4];
	memset(ops, 0, sizeof(ops));
	switch (c->state) {
	case CALL_NEW:
		request_call(s);
		if (!ok) {
			call_free(c);
			return;
		}
		ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
		ops[1].op = GRPC_OP_RECV_MESSAGE;
		ops[1].data.recv_message.recv_message = &c->in;
		c->state = CALL_READ;
		if (grpc_call_start_batch(c->call, ops, 2, c, NULL) != GRPC_CALL_OK)
			call_free(c);
		return;
	case CALL_READ:
		s->calls++;
		c->out = grpc_raw_byte_buffer_create(&s->answer, 1);
		ops[0].op = GRPC_OP_SEND_MESSAGE;
		ops[0].data.send_message.send_message = c->out;
		ops[1].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
		ops[1].data.send_status_from_server.status = GRPC_STATUS_OK;
		ops[2].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
		ops[2].data.recv_close_on_server.cancelled = &c->cancelled;
		c->state = CALL_DONE;
		if (grpc_call_start_batch(c->call, ops, 3, c, NULL) != GRPC_CALL_OK)
			call_free(c);
		return;
	case CALL_DONE:
		call_free(c);
		return;
	}
}

static int read_file(const char *path, grpc_slice *out)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	rewind(f);
	char *b = malloc(n > 0 ? (size_t)n : 1);
	int rc = n < 0 || !b || fread(b, 1, (size_t)n, f) != (size_t)n ? -1 : 0;
	fclose(f);
	if (!rc)
		*out = grpc_slice_from_copied_buffer(b, (size_t)n);
	free(b);
	return rc;
}

int main(int argc, char **argv)
{
	floor_srv s = {0};
	int port = 0, opt;
	const char *file = NULL;
	while ((opt = getopt(argc, argv, "p:f:")) != -1) {
		if (opt == 'p')
			port = atoi(optarg);
		else if (opt == 'f')
			file = optarg;
		else
			file = NULL, optind = argc + 1;
	}
	if (!file || optind > argc) {
		fprintf(stderr, "usage: bench_oip_grpc_floor [-p PORT] -f ANSWER_FILE\n");
		return 2;
	}
	grpc_init();
	if (read_file(file, &s.answer)) {
		fprintf(stderr, "bench_oip_grpc_floor: cannot read %s\n", file);
		return 1;
	}
	s.cq = grpc_completion_queue_create_for_next(NULL);
	grpc_arg args[] = {{.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_ALLOW_REUSEPORT, .value.integer = 0}};
	grpc_channel_args ca = {.num_args = 1, .args = args};
	s.server = grpc_server_create(&ca, NULL);
	grpc_server_register_completion_queue(s.server, s.cq, NULL);
	char addr[64];
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	grpc_server_credentials *cr = grpc_insecure_server_credentials_create();
	int bound = grpc_server_add_http2_port(s.server, addr, cr);
	grpc_server_credentials_release(cr);
	if (bound <= 0) {
		fprintf(stderr, "bench_oip_grpc_floor: cannot listen on %s\n", addr);
		return 1;
	}
	grpc_server_start(s.server);
	for (int i = 0; i < 8; i++) /* calls asked for ahead, as a server with several clients needs */
		request_call(&s);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	printf("port %d\n", bound);
	fflush(stdout);
	static int shutdown_tag;
	bool shutting = false;
	for (;;) {
		if (stop_flag && !shutting) {
			shutting = true;
			grpc_server_shutdown_and_notify(s.server, s.cq, &shutdown_tag);
			grpc_server_cancel_all_calls(s.server);
		}
		grpc_event ev = grpc_completion_queue_next(s.cq, gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
									gpr_time_from_millis(100, GPR_TIMESPAN)), NULL);
		if (ev.type == GRPC_QUEUE_TIMEOUT)
			continue;
		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			break;
		if (ev.tag == &shutdown_tag) {
			grpc_server_destroy(s.server);
			s.server = NULL;
			grpc_completion_queue_shutdown(s.cq);
			continue;
		}
		floor_call *c = ev.tag;
		if (shutting && c->state == CALL_NEW) { /* no new calls asked for any more */
			call_free(c);
			continue;
		}
		step(&s, c, ev.success);
	}
	grpc_completion_queue_destroy(s.cq);
	fprintf(stderr, "bench_oip_grpc_floor: %ld calls answered (%zu-byte message)\n", s.calls,
		GRPC_SLICE_LENGTH(s.answer));
	grpc_slice_unref(s.answer);
	grpc_shutdown();
	return 0;
}
