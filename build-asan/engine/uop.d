build-asan/engine/uop.o: engine/uop.c engine/uop.h engine/node.h \
 engine/engine.h engine/dtype.h engine/errors.def engine/ops.def
engine/uop.h:
engine/node.h:
engine/engine.h:
engine/dtype.h:
engine/errors.def:
engine/ops.def:
