build-asan/backends/cpu/pool.o: backends/cpu/pool.c backends/cpu/pool.h
backends/cpu/pool.h:
