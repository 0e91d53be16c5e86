/* tensorctl_oip_grpc.c: `tensorctl bench --protocol grpc`'s client: the Open Inference Protocol's
 * GRPCInferenceService/ModelInfer (protocol/grpc_service.proto, packed by the protobuf-c code the
 * build generates from it) as unary calls on gRPC's C core: a ModelInferRequest with every input
 * in raw_input_contents, packed once; one channel (its own HTTP/2 connection) and one completion
 * queue per connection, kept open between calls as a gRPC client keeps its channel. */
#include "tensorctl_oip.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include <grpc_service.pb-c.h>

#define INFER_METHOD "/inference.GRPCInferenceService/ModelInfer"

typedef struct oip_grpc {
	grpc_channel *ch;
	grpc_completion_queue *cq; /* pluck: this connection's calls only, on its thread */
	grpc_slice method;
	grpc_slice request; /* the packed ModelInferRequest, sent again and again */
	long timeout_ms;    /* 0: none */
} oip_grpc;

/* grpc_status_code's names (grpc/status.h), for a message. */
static const char *status_name(grpc_status_code s)
{
	/* clang-format off */
	static const char *const names[] = {
		"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
		"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
		"OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
	};
	/* clang-format on */
	return s >= 0 && (size_t)s < sizeof(names) / sizeof(names[0]) ? names[s] : "status?";
}

static bool rpc_global(char *err, size_t errlen)
{
	(void)err, (void)errlen;
	grpc_init();
	return true;
}

static void rpc_global_end(void)
{
	grpc_shutdown();
}

static void rpc_close(void *conn);

/* The ModelInferRequest of model with in (raw_input_contents, no outputs named: all of them, as
 * raw_output_contents) packed into *out. False when out of memory. */
static bool pack_request(const char *model, const tctl_inputs *in, grpc_slice *out)
{
	Inference__ModelInferRequest req = INFERENCE__MODEL_INFER_REQUEST__INIT;
	Inference__ModelInferRequest__InferInputTensor ts[TCTL_MAX_TENSORS], *tp[TCTL_MAX_TENSORS];
	ProtobufCBinaryData raw[TCTL_MAX_TENSORS];
	/* protobuf-c's fields are not const; packing only reads them */
	req.model_name = (char *)model;
	for (int i = 0; i < in->n; i++) {
		const tsd_tensor *t = &in->t[i];
		Inference__ModelInferRequest__InferInputTensor init =
			INFERENCE__MODEL_INFER_REQUEST__INFER_INPUT_TENSOR__INIT;
		ts[i] = init;
		ts[i].name = (char *)t->name;
		ts[i].datatype = (char *)tctl_oip_dtype(t->dtype);
		ts[i].n_shape = (size_t)t->ndim;
		ts[i].shape = (int64_t *)t->shape;
		tp[i] = &ts[i];
		raw[i] = (ProtobufCBinaryData){tctl_oip_nbytes(t), (uint8_t *)t->data};
	}
	req.n_inputs = req.n_raw_input_contents = (size_t)in->n;
	req.inputs = tp;
	req.raw_input_contents = raw;
	size_t len = inference__model_infer_request__get_packed_size(&req);
	uint8_t *buf = malloc(len ? len : 1);
	if (!buf)
		return false;
	inference__model_infer_request__pack(&req, buf);
	*out = grpc_slice_new(buf, len, free); /* the slice owns buf */
	return true;
}

static void *rpc_open(const char *url, const char *model, const tctl_inputs *in, long timeout_ms,
		      char *err, size_t errlen)
{
	oip_grpc *o = calloc(1, sizeof(*o));
	if (!o || !pack_request(model, in, &o->request)) {
		snprintf(err, errlen, "out of memory");
		free(o);
		return NULL;
	}
	o->timeout_ms = timeout_ms;
	o->method = grpc_slice_from_static_string(INFER_METHOD);
	/* a channel of its own (no subchannel shared with the other workers' channels, as gRPC
	 * does by default for channels with the same target and arguments), answers of any size */
	grpc_arg args[2] = {
		{.type = GRPC_ARG_INTEGER,
		 .key = GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL,
		 .value.integer = 1},
		{.type = GRPC_ARG_INTEGER,
		 .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
		 .value.integer = -1},
	};
	grpc_channel_args ca = {2, args};
	const char *target = !strncmp(url, "grpc://", 7) ? url + 7 : url;
	grpc_channel_credentials *creds = grpc_insecure_credentials_create();
	o->ch = creds ? grpc_channel_create(target, creds, &ca) : NULL;
	if (creds)
		grpc_channel_credentials_release(creds);
	o->cq = grpc_completion_queue_create_for_pluck(NULL);
	if (!o->ch || !o->cq) {
		snprintf(err, errlen, "%s: cannot make a gRPC channel", url);
		rpc_close(o);
		return NULL;
	}
	return o;
}

/* The answer's bytes: a ModelInferResponse with as many raw_output_contents as outputs. */
static tctl_oip_result check_answer(grpc_byte_buffer *bb, char *why, size_t whylen)
{
	grpc_byte_buffer_reader rd;
	if (!bb || !grpc_byte_buffer_reader_init(&rd, bb)) {
		snprintf(why, whylen, "grpc: OK without a response message");
		return TCTL_OIP_ERROR;
	}
	grpc_slice s = grpc_byte_buffer_reader_readall(&rd);
	grpc_byte_buffer_reader_destroy(&rd);
	Inference__ModelInferResponse *r = inference__model_infer_response__unpack(
		NULL, GRPC_SLICE_LENGTH(s), GRPC_SLICE_START_PTR(s));
	grpc_slice_unref(s);
	tctl_oip_result res = TCTL_OIP_OK;
	if (!r) {
		snprintf(why, whylen, "grpc: the response is not a ModelInferResponse");
		res = TCTL_OIP_ERROR;
	} else if (!r->n_outputs || r->n_raw_output_contents != r->n_outputs) {
		snprintf(why, whylen, "grpc: %zu outputs with %zu raw_output_contents",
			 r->n_outputs, r->n_raw_output_contents);
		res = TCTL_OIP_ERROR;
	}
	if (r)
		inference__model_infer_response__free_unpacked(r, NULL);
	return res;
}

static tctl_oip_result rpc_infer(void *conn, char *why, size_t whylen)
{
	oip_grpc *o = conn;
	gpr_timespec deadline =
		o->timeout_ms > 0 ? gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
						 gpr_time_from_millis(o->timeout_ms, GPR_TIMESPAN))
				  : gpr_inf_future(GPR_CLOCK_MONOTONIC);
	grpc_call *call = grpc_channel_create_call(o->ch, NULL, GRPC_PROPAGATE_DEFAULTS, o->cq,
						   o->method, NULL, deadline, NULL);
	grpc_byte_buffer *send = grpc_raw_byte_buffer_create(&o->request, 1), *recv = NULL;
	grpc_metadata_array md, trailing;
	grpc_metadata_array_init(&md);
	grpc_metadata_array_init(&trailing);
	grpc_status_code status = GRPC_STATUS_UNKNOWN;
	grpc_slice details = grpc_empty_slice();
	grpc_op ops[6];
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = send;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &md;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &recv;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &trailing;
	ops[5].data.recv_status_on_client.status = &status;
	ops[5].data.recv_status_on_client.status_details = &details;
	tctl_oip_result res;
	grpc_call_error ce =
		call && send ? grpc_call_start_batch(call, ops, 6, o, NULL) : GRPC_CALL_ERROR;
	if (ce != GRPC_CALL_OK) {
		snprintf(why, whylen, "grpc: cannot start the call (%d)", (int)ce);
		res = TCTL_OIP_LOST;
		goto out;
	}
	grpc_event ev =
		grpc_completion_queue_pluck(o->cq, o, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
	if (ev.type != GRPC_OP_COMPLETE || !ev.success) {
		snprintf(why, whylen, "grpc: the call did not complete");
		res = TCTL_OIP_LOST;
	} else if (status != GRPC_STATUS_OK) {
		/* UNAVAILABLE and DEADLINE_EXCEEDED: gRPC's own for no connection, no answer in time */
		snprintf(why, whylen, "grpc %s: %.*s", status_name(status),
			 (int)GRPC_SLICE_LENGTH(details),
			 (const char *)GRPC_SLICE_START_PTR(details));
		res = status == GRPC_STATUS_UNAVAILABLE || status == GRPC_STATUS_DEADLINE_EXCEEDED
			      ? TCTL_OIP_LOST
			      : TCTL_OIP_ERROR;
	} else {
		res = check_answer(recv, why, whylen);
	}
out:
	if (recv)
		grpc_byte_buffer_destroy(recv);
	if (send)
		grpc_byte_buffer_destroy(send);
	grpc_slice_unref(details);
	grpc_metadata_array_destroy(&md);
	grpc_metadata_array_destroy(&trailing);
	if (call)
		grpc_call_unref(call);
	return res;
}

static void rpc_close(void *conn)
{
	oip_grpc *o = conn;
	if (!o)
		return;
	if (o->ch)
		grpc_channel_destroy(o->ch);
	if (o->cq) {
		/* every call is over: the queue drains at once */
		grpc_completion_queue_shutdown(o->cq);
		grpc_event ev;
		do
			ev = grpc_completion_queue_pluck(o->cq, NULL,
							 gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
		while (ev.type != GRPC_QUEUE_SHUTDOWN);
		grpc_completion_queue_destroy(o->cq);
	}
	grpc_slice_unref(o->request);
	free(o);
}

const tctl_oip_ops tctl_oip_grpc = {
	.name = "grpc",
	.url_flag = "--grpc-url",
	.default_url = "grpc://127.0.0.1:8001",
	.global = rpc_global,
	.global_end = rpc_global_end,
	.open = rpc_open,
	.infer = rpc_infer,
	.close = rpc_close,
};
