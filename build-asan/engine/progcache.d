build-asan/engine/progcache.o: engine/progcache.c engine/progcache.h \
 engine/../backends/backend.h engine/../backends/../engine/engine.h \
 engine/../backends/../engine/dtype.h \
 engine/../backends/../engine/errors.def
engine/progcache.h:
engine/../backends/backend.h:
engine/../backends/../engine/engine.h:
engine/../backends/../engine/dtype.h:
engine/../backends/../engine/errors.def:
