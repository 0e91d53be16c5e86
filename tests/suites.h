/* suites.h: the list of check suites linked into run_tests, one X-macro entry per test file;
 * main.c runs them all (CK_RUN_SUITE=name selects one). */
#ifndef TEST_SUITES_H
#define TEST_SUITES_H

#include <check.h>

/* One entry per suite, X(name, part): part E for the engine's suites, which link the engine
 * library alone; S for the serving ones (the daemon, the client library, the protocol: nng, libuv,
 * libsystemd), whose files are the Makefile's TEST_SERVING_SRC. */
#define TEST_SUITES(X) X(ref, E) X(ops, E) X(api, E) X(nn, E) X(random, E) X(errors, E) X(kernels, E) X(backend, E) \
	X(nnlayers, E) X(io, E) X(optim, E) X(grad, E) X(jit, E) X(devices, E) X(diskcache, E) X(opencl, E) X(f16, E) \
	X(cancel, E) X(zerocopy, E) X(memory, E) X(threads, E) X(config, S) X(protocol, S) X(graphbatch, S) X(graphops, S) \
	X(metrics, S) X(client, S) X(clientlive, S) X(graphbuilder, S) X(daemon, S) X(daemonbad, S) X(onnx, E) \
	X(onnxops, E) X(rows, E) X(daemononnx, S) X(reduceacc, E) X(cudacompile, E) X(beam, E) \
	X(hostilefiles, S) X(hostilecompile, S) X(hostilemem, S) X(hostileconn, S) X(hostileauth, S) X(unixtransport, S) X(sptransport, S) X(clientunix, S) X(shm, S) X(sequence, S) X(health, S) X(failover, S)

/* TEST_PART_E(x) and TEST_PART_S(x) expand to x where that part is built: without
 * TSD_TESTS_ENGINE_ONLY (make TESTS=engine, the ARM64 build) both are. */
#define TEST_PART_E(x) x
#ifdef TSD_TESTS_ENGINE_ONLY
#define TEST_PART_S(x)
#else
#define TEST_PART_S(x) x
#endif

#define TEST_SUITE_DECL(name, part) TEST_PART_##part(Suite *name##_suite(void);)
TEST_SUITES(TEST_SUITE_DECL)
#undef TEST_SUITE_DECL

#endif
