build-asan/tests/testutil.o: tests/testutil.c tests/testutil.h \
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
