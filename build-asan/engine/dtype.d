build-asan/engine/dtype.o: engine/dtype.c engine/dtype.h
engine/dtype.h:
