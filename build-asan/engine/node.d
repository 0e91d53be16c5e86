build-asan/engine/node.o: engine/node.c engine/node.h engine/engine.h \
 engine/dtype.h engine/errors.def engine/ops.def engine/internal.h \
 engine/../backends/backend.h engine/../backends/../engine/engine.h
engine/node.h:
engine/engine.h:
engine/dtype.h:
engine/errors.def:
engine/ops.def:
engine/internal.h:
engine/../backends/backend.h:
engine/../backends/../engine/engine.h:
