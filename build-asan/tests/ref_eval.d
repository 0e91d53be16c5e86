build-asan/tests/ref_eval.o: tests/ref_eval.c tests/ref_eval.h \
 tests/../engine/internal.h tests/../engine/../backends/backend.h \
 tests/../engine/../backends/../engine/engine.h \
 tests/../engine/../backends/../engine/dtype.h \
 tests/../engine/../backends/../engine/errors.def \
 tests/../engine/engine.h tests/../engine/node.h tests/../engine/ops.def
tests/ref_eval.h:
tests/../engine/internal.h:
tests/../engine/../backends/backend.h:
tests/../engine/../backends/../engine/engine.h:
tests/../engine/../backends/../engine/dtype.h:
tests/../engine/../backends/../engine/errors.def:
tests/../engine/engine.h:
tests/../engine/node.h:
tests/../engine/ops.def:
