/* tensorctl_oip.h: the Open Inference Protocol clients of `tensorctl bench --protocol http|grpc`:
 * one table of operations per protocol (tensorctl_oip_http.c on libcurl, tensorctl_oip_grpc.c on
 * gRPC's C core), each connection sending the same infer request again and again, and the
 * helpers they share (tensorctl_oip.c). */
#ifndef TCTL_OIP_H
#define TCTL_OIP_H

#include <stdbool.h>
#include <stddef.h>

#include "tensorctl.h"

/* What one infer came to. */
typedef enum tctl_oip_result {
	TCTL_OIP_OK,	/* answered, with every output's data */
	TCTL_OIP_ERROR, /* answered with an error (or an answer without its data) */
	TCTL_OIP_LOST,	/* no answer: cannot connect, the connection dropped, timed out */
	TCTL_OIP_RESULT_COUNT
} tctl_oip_result;

/* A protocol's client. A connection (the void * open returns) is used by one thread at a time;
 * several may be open at once, each its own connection to the server. */
typedef struct tctl_oip_ops {
	const char *name;	 /* --protocol's value: "http", "grpc" */
	const char *url_flag;	 /* the flag naming the server: "--http-url" */
	const char *default_url; /* the daemon's default listener of that frontend */
	/* Once per process, before any connection opens (the library's global setup); false with
	 * err. end: after the last connection closed. */
	bool (*global)(char *err, size_t errlen);
	void (*global_end)(void);
	/* A connection to url for the infer of model with in (in is copied; every output asked for
	 * as binary data), kept open between infers. NULL with err. */
	void *(*open)(const char *url, const char *model, const tctl_inputs *in, long timeout_ms,
		      char *err, size_t errlen);
	/* Send the request once and read the whole answer; anything but TCTL_OIP_OK with why. */
	tctl_oip_result (*infer)(void *conn, char *why, size_t whylen);
	void (*close)(void *conn); /* NULL allowed */
} tctl_oip_ops;

extern const tctl_oip_ops tctl_oip_http, tctl_oip_grpc;
/* Every protocol: http, grpc. */
#define TCTL_OIP_COUNT 2
extern const tctl_oip_ops *const tctl_oip_protocols[TCTL_OIP_COUNT];

/* The protocol called name ("http", "grpc"), or NULL (tsd is not one of these). */
const tctl_oip_ops *tctl_oip_find(const char *name);
/* The OIP datatype of dt ("INT32", "FP32", ...; "?" for an invalid one). */
const char *tctl_oip_dtype(tsd_dtype dt);
/* The bytes of t's data (its elements times their size). */
size_t tctl_oip_nbytes(const tsd_tensor *t);

#endif
