/* tensorctl_bench.c: `tensorctl bench`: a load generator. */
#include "tensorctl.h"

const char tctl_bench_help[] = "usage: tensorctl bench MODEL\n";

int tctl_cmd_bench(tctl_ctx *ctx, int argc, char **argv)
{
	return tctl_usage("bench", "not yet");
}
