/* suites.h: the list of check suites linked into run_tests, one X-macro entry per test file;
 * main.c runs them all (CK_RUN_SUITE=name selects one). */
#ifndef TEST_SUITES_H
#define TEST_SUITES_H

#include <check.h>

#define TEST_SUITES(X) X(ref) X(ops) X(api) X(nn) X(random) X(errors) X(kernels) X(backend) X(nnlayers) X(io) X(optim) X(grad) X(jit) X(devices) \
	X(diskcache) X(opencl) X(f16) X(cancel) X(zerocopy) X(memory) X(threads) X(config) X(protocol) \
	X(graphbatch) X(graphops) X(metrics) X(client) X(clientlive) X(graphbuilder) X(daemon) X(daemonbad) X(onnx) X(onnxops) X(rows) X(daemononnx) X(reduceacc) X(cudacompile) X(beam)

#define TEST_SUITE_DECL(name) Suite *name##_suite(void);
TEST_SUITES(TEST_SUITE_DECL)
#undef TEST_SUITE_DECL

#endif
