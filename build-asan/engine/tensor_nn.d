build-asan/engine/tensor_nn.o: engine/tensor_nn.c engine/composite.h \
 engine/internal.h engine/../backends/backend.h \
 engine/../backends/../engine/engine.h \
 engine/../backends/../engine/dtype.h \
 engine/../backends/../engine/errors.def engine/engine.h engine/node.h \
 engine/ops.def
engine/composite.h:
engine/internal.h:
engine/../backends/backend.h:
engine/../backends/../engine/engine.h:
engine/../backends/../engine/dtype.h:
engine/../backends/../engine/errors.def:
engine/engine.h:
engine/node.h:
engine/ops.def:
