build-asan/engine/kernel_dump.o: engine/kernel_dump.c engine/kernel.h \
 engine/uop.h engine/node.h engine/engine.h engine/dtype.h \
 engine/errors.def engine/ops.def
engine/kernel.h:
engine/uop.h:
engine/node.h:
engine/engine.h:
engine/dtype.h:
engine/errors.def:
engine/ops.def:
