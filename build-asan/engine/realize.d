build-asan/engine/realize.o: engine/realize.c engine/internal.h \
 engine/../backends/backend.h engine/../backends/../engine/engine.h \
 engine/../backends/../engine/dtype.h \
 engine/../backends/../engine/errors.def engine/engine.h engine/node.h \
 engine/ops.def engine/progcache.h engine/schedule.h engine/kernel.h \
 engine/uop.h engine/strbuf.h
engine/internal.h:
engine/../backends/backend.h:
engine/../backends/../engine/engine.h:
engine/../backends/../engine/dtype.h:
engine/../backends/../engine/errors.def:
engine/engine.h:
engine/node.h:
engine/ops.def:
engine/progcache.h:
engine/schedule.h:
engine/kernel.h:
engine/uop.h:
engine/strbuf.h:
