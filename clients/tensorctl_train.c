/* tensorctl_train.c: `tensorctl train`: train.step requests over an IDX or safetensors dataset
 * with a progress bar and the loss. */
#include "tensorctl.h"

const char tctl_train_help[] = "usage: tensorctl train MODEL --data FILE... --steps N --batch B\n";

int tctl_cmd_train(tctl_ctx *ctx, int argc, char **argv)
{
	return tctl_usage("train", "not yet");
}
