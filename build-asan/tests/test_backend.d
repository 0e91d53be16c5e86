build-asan/tests/test_backend.o: tests/test_backend.c tests/testutil.h \
 tests/../engine/engine.h tests/../engine/dtype.h \
 tests/../engine/errors.def tests/ref_eval.h tests/../engine/internal.h \
 tests/../engine/../backends/backend.h \
 tests/../engine/../backends/../engine/engine.h tests/../engine/engine.h \
 tests/../engine/node.h tests/../engine/ops.def
tests/testutil.h:
tests/../engine/engine.h:
tests/../engine/dtype.h:
tests/../engine/errors.def:
tests/ref_eval.h:
tests/../engine/internal.h:
tests/../engine/../backends/backend.h:
tests/../engine/../backends/../engine/engine.h:
tests/../engine/engine.h:
tests/../engine/node.h:
tests/../engine/ops.def:
