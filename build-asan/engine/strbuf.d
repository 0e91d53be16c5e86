build-asan/engine/strbuf.o: engine/strbuf.c engine/strbuf.h
engine/strbuf.h:
