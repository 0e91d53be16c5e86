/* fuzz_util.h: what the loader fuzz targets share: one small engine context per process, the
 * input bytes as a file (the loaders take paths), and checks that a load left nothing behind. */
#ifndef TSD_FUZZ_UTIL_H
#define TSD_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <tensord/engine.h>
#include "core/context.h"
#include "graph/node.h"

/* inline: each target uses only some of these (clang warns about unused static functions).
 * libFuzzer calls the target once per input with no handle to pass, so the context and the
 * memfd live in statics: made on the first input, kept for the process (harness only; the
 * engine itself has no mutable globals). */
static inline eng_ctx *fuzz_ctx(void)
{
	static eng_ctx *ctx;
	if (!ctx) {
		eng_ctx_opts o;
		eng_ctx_opts_default(&o);
		o.debug = 0;
		o.device = "CPU";
		o.backend_opts = "CPU.threads=1";
		o.no_disk_cache = true;
		char err[256];
		if (!(ctx = eng_ctx_create(&o, err, sizeof(err)))) {
			fprintf(stderr, "fuzz: eng_ctx_create: %s\n", err);
			abort();
		}
	}
	return ctx;
}

/* The bytes as the contents of a memfd, named by a /proc/self/fd path (a regular file). */
static inline const char *fuzz_file(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];
	if (fd < 0) {
		fd = memfd_create("tensord-fuzz", MFD_CLOEXEC);
		if (fd < 0) {
			perror("fuzz: memfd_create");
			abort();
		}
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) < 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size)) {
		perror("fuzz: writing the input");
		abort();
	}
	return path;
}

/* Abort (a finding) unless the load failed with a message or succeeded without one. */
static inline void fuzz_check_status(eng_ctx *ctx, bool ok)
{
	if (ok != (eng_error(ctx) == ENG_OK) || (!ok && !*eng_errmsg(ctx))) {
		fprintf(stderr, "fuzz: load %s but the context error is %s (%s)\n",
			ok ? "succeeded" : "failed", eng_strerror(eng_error(ctx)), eng_errmsg(ctx));
		abort();
	}
}

/* Read t back whole: its buffer must hold numel elements. Also take numel of t with its axes
 * reversed: the products then run in another order (a [0, 2^40, 2^40] shape overflowed int64
 * as [2^40, 2^40, 0]: UBSan reports it). */
static inline void fuzz_read_back(eng_tensor *t)
{
	int perm[ENG_MAX_DIMS];
	for (int i = 0; i < eng_ndim(t); i++)
		perm[i] = eng_ndim(t) - 1 - i;
	eng_tensor *rev = eng_permute(t, perm);
	if (!rev || eng_numel(rev) != eng_numel(t)) {
		fprintf(stderr, "fuzz: the reversed tensor has another size\n");
		abort();
	}
	eng_tensor_free(rev);
	size_t n = (size_t)eng_numel(t) * eng_dtype_size(eng_tensor_dtype(t));
	void *buf = malloc(n ? n : 1);
	if (!buf || eng_tensor_read(t, buf, n)) {
		fprintf(stderr, "fuzz: a loaded tensor cannot be read: %s\n",
			eng_errmsg(eng_tensor_ctx(t)));
		abort();
	}
	free(buf);
}

/* After the scope of one input has ended, no node may be left over. */
static inline void fuzz_check_nodes(eng_ctx *ctx, size_t before)
{
	if (eng_graph_live_nodes(ctx->graph) != before) {
		fprintf(stderr, "fuzz: %zu nodes before the load, %zu after\n", before,
			eng_graph_live_nodes(ctx->graph));
		abort();
	}
	eng_clear_error(ctx);
}

#endif
