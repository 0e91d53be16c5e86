build-asan/engine/linearize.o: engine/linearize.c engine/linearize.h \
 engine/kernel.h engine/uop.h engine/node.h engine/engine.h \
 engine/dtype.h engine/errors.def engine/ops.def
engine/linearize.h:
engine/kernel.h:
engine/uop.h:
engine/node.h:
engine/engine.h:
engine/dtype.h:
engine/errors.def:
engine/ops.def:
