build-asan/engine/lower.o: engine/lower.c engine/lower.h engine/kernel.h \
 engine/uop.h engine/node.h engine/engine.h engine/dtype.h \
 engine/errors.def engine/ops.def engine/linearize.h
engine/lower.h:
engine/kernel.h:
engine/uop.h:
engine/node.h:
engine/engine.h:
engine/dtype.h:
engine/errors.def:
engine/ops.def:
engine/linearize.h:
