build-asan/engine/tensor_move.o: engine/tensor_move.c engine/internal.h \
 engine/../backends/backend.h engine/../backends/../engine/engine.h \
 engine/../backends/../engine/dtype.h \
 engine/../backends/../engine/errors.def engine/engine.h engine/node.h \
 engine/ops.def
engine/internal.h:
engine/../backends/backend.h:
engine/../backends/../engine/engine.h:
engine/../backends/../engine/dtype.h:
engine/../backends/../engine/errors.def:
engine/engine.h:
engine/node.h:
engine/ops.def:
