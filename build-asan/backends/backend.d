build-asan/backends/backend.o: backends/backend.c backends/backend.h \
 backends/../engine/engine.h backends/../engine/dtype.h \
 backends/../engine/errors.def
backends/backend.h:
backends/../engine/engine.h:
backends/../engine/dtype.h:
backends/../engine/errors.def:
