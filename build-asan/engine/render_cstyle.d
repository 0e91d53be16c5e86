build-asan/engine/render_cstyle.o: engine/render_cstyle.c \
 engine/render_cstyle.h engine/kernel.h engine/uop.h engine/node.h \
 engine/engine.h engine/dtype.h engine/errors.def engine/ops.def \
 engine/strbuf.h
engine/render_cstyle.h:
engine/kernel.h:
engine/uop.h:
engine/node.h:
engine/engine.h:
engine/dtype.h:
engine/errors.def:
engine/ops.def:
engine/strbuf.h:
