/* oip_grpc_msg.h: the Open Inference Protocol's gRPC messages (protocol/grpc_service.proto,
 * protobuf-c) turned into TSD1 requests (oip_grpc_req.c) and TSD1 replies turned into them
 * (oip_grpc_resp.c), for the gRPC frontend (oip_grpc.c). Knows nothing of gRPC's calls: bytes
 * in, bytes out, and gRPC status codes (grpc_status_code's numbers). */
#ifndef DMN_OIP_GRPC_MSG_H
#define DMN_OIP_GRPC_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "oip.h"

/* gRPC's status codes that tensord answers with (grpc/status.h's numbers). */
enum {
	DMN_GRPC_OK = 0,
	DMN_GRPC_INVALID_ARGUMENT = 3,
	DMN_GRPC_NOT_FOUND = 5,
	DMN_GRPC_RESOURCE_EXHAUSTED = 8,
	DMN_GRPC_UNIMPLEMENTED = 12,
	DMN_GRPC_INTERNAL = 13,
	DMN_GRPC_UNAVAILABLE = 14,
	DMN_GRPC_UNAUTHENTICATED = 16,
};

/* The service's RPCs: X(enum suffix, method name under /inference.GRPCInferenceService/). */
#define DMN_GRPC_RPCS(X)                                                                              \
	X(SERVER_LIVE, "ServerLive") X(SERVER_READY, "ServerReady") X(MODEL_READY, "ModelReady")       \
	X(SERVER_META, "ServerMetadata") X(MODEL_META, "ModelMetadata") X(INFER, "ModelInfer")         \
	X(STREAM_INFER, "ModelStreamInfer") X(MODEL_CONFIG, "ModelConfig")                             \
	X(MODEL_STATS, "ModelStatistics") X(REPO_INDEX, "RepositoryIndex")                             \
	X(REPO_LOAD, "RepositoryModelLoad") X(REPO_UNLOAD, "RepositoryModelUnload")                    \
	X(SHM_STATUS, "SystemSharedMemoryStatus") X(SHM_REGISTER, "SystemSharedMemoryRegister")        \
	X(SHM_UNREGISTER, "SystemSharedMemoryUnregister")
typedef enum dmn_grpc_rpc {
#define DMN_GRPC_ENUM(e, name) DMN_GRPC_##e,
	DMN_GRPC_RPCS(DMN_GRPC_ENUM)
#undef DMN_GRPC_ENUM
	DMN_GRPC_RPC_COUNT
} dmn_grpc_rpc;

/* The RPC of a method path ("/inference.GRPCInferenceService/ModelInfer", path[0..len)), or
 * DMN_GRPC_RPC_COUNT: not one of the service's. */
dmn_grpc_rpc dmn_grpc_rpc_find(const char *path, size_t len);

/* ---- oip_grpc_req.c: any thread (cJSON is only built, never parsed) ---- */
/* The TSD1 request for one message of rpc (body[0..len), a serialized request; for
 * STREAM_INFER a ModelInferRequest). ask is filled for the answer. Returns DMN_GRPC_OK with
 * *out (the caller owns it), or DMN_GRPC_OK with *out NULL for ServerLive (answered at once with
 * dmn_grpc_answer and no reply), else a status code with err naming what was wrong. token: the
 * bearer token, or NULL. */
int dmn_grpc_request(dmn_grpc_rpc rpc, const dmn_oip_limits *lim, const void *body, size_t len, uint64_t id,
		     const char *token, dmn_oip_ask *ask, nng_msg **out, char *err, size_t errlen);

/* ---- oip_grpc_resp.c: the loop thread (the reply is decoded, cJSON parses) ---- */
/* The serialized response of rpc to ask from the TSD1 reply[0..len) (NULL for ServerLive) into
 * out (dmn_buf_free'd by the caller). Returns DMN_GRPC_OK, or a status code with err. For
 * STREAM_INFER the answer is a ModelStreamInferResponse, an error one (error_message) when the
 * request failed: DMN_GRPC_OK unless out of memory. */
int dmn_grpc_answer(dmn_grpc_rpc rpc, const dmn_oip_ask *ask, const void *reply, size_t len, dmn_buf *out, char *err,
		    size_t errlen);
/* A ModelStreamInferResponse with error_message msg into out (any thread). */
void dmn_grpc_stream_error(dmn_buf *out, const char *msg);

#endif
