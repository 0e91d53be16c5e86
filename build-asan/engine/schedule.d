build-asan/engine/schedule.o: engine/schedule.c engine/schedule.h \
 engine/internal.h engine/../backends/backend.h \
 engine/../backends/../engine/engine.h \
 engine/../backends/../engine/dtype.h \
 engine/../backends/../engine/errors.def engine/engine.h engine/node.h \
 engine/ops.def engine/kernel.h engine/uop.h engine/lower.h
engine/schedule.h:
engine/internal.h:
engine/../backends/backend.h:
engine/../backends/../engine/engine.h:
engine/../backends/../engine/dtype.h:
engine/../backends/../engine/errors.def:
engine/engine.h:
engine/node.h:
engine/ops.def:
engine/kernel.h:
engine/uop.h:
engine/lower.h:
