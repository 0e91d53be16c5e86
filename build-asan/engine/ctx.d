build-asan/engine/ctx.o: engine/ctx.c engine/internal.h \
 engine/../backends/backend.h engine/../backends/../engine/engine.h \
 engine/../backends/../engine/dtype.h \
 engine/../backends/../engine/errors.def engine/engine.h engine/node.h \
 engine/ops.def engine/progcache.h engine/errors.def
engine/internal.h:
engine/../backends/backend.h:
engine/../backends/../engine/engine.h:
engine/../backends/../engine/dtype.h:
engine/../backends/../engine/errors.def:
engine/engine.h:
engine/node.h:
engine/ops.def:
engine/progcache.h:
engine/errors.def:
