build-asan/backends/cpu/compile.o: backends/cpu/compile.c \
 backends/cpu/cpu.h backends/cpu/../backend.h \
 backends/cpu/../../engine/engine.h backends/cpu/../../engine/dtype.h \
 backends/cpu/../../engine/errors.def backends/cpu/pool.h
backends/cpu/cpu.h:
backends/cpu/../backend.h:
backends/cpu/../../engine/engine.h:
backends/cpu/../../engine/dtype.h:
backends/cpu/../../engine/errors.def:
backends/cpu/pool.h:
