build-asan/backends/cpu/cpu.o: backends/cpu/cpu.c backends/cpu/cpu.h \
 backends/cpu/../backend.h backends/cpu/../../engine/engine.h \
 backends/cpu/../../engine/dtype.h backends/cpu/../../engine/errors.def \
 backends/cpu/pool.h backends/cpu/../../engine/render_cstyle.h \
 backends/cpu/../../engine/kernel.h backends/cpu/../../engine/uop.h \
 backends/cpu/../../engine/node.h backends/cpu/../../engine/engine.h \
 backends/cpu/../../engine/ops.def backends/cpu/../../engine/strbuf.h
backends/cpu/cpu.h:
backends/cpu/../backend.h:
backends/cpu/../../engine/engine.h:
backends/cpu/../../engine/dtype.h:
backends/cpu/../../engine/errors.def:
backends/cpu/pool.h:
backends/cpu/../../engine/render_cstyle.h:
backends/cpu/../../engine/kernel.h:
backends/cpu/../../engine/uop.h:
backends/cpu/../../engine/node.h:
backends/cpu/../../engine/engine.h:
backends/cpu/../../engine/ops.def:
backends/cpu/../../engine/strbuf.h:
