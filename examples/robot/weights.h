/* weights.h: the robot brain's params held in the client (robot_train, the bench): a seeded
 * init, the tensors of a model.load, the tensors of a model.save reply, a safetensors file. */
#ifndef ROBOT_WEIGHTS_H
#define ROBOT_WEIGHTS_H

#include "robot.h"

typedef struct rb_weights {
	float *data[RB_NPARAMS]; /* owned; in rb_param_names order */
	int ndim[RB_NPARAMS];
	int64_t shape[RB_NPARAMS][2];
	int64_t numel[RB_NPARAMS];
} rb_weights;

/* Random init from seed (w is the caller's; free with rb_weights_free). 0 or -1 (no memory). */
int rb_weights_init(rb_weights *w, uint64_t seed);
void rb_weights_free(rb_weights *w);
/* Views of w as ts[RB_NPARAMS] named by param id (valid while w lives). */
void rb_weights_tensors(const rb_weights *w, tsd_tensor *ts);
/* Copies of the params in a model.save reply (without path). 0 or -1 (printed). */
int rb_weights_from_reply(rb_weights *w, const tsd_reply *r);
/* A safetensors file at path. 0 or -1 (printed). */
int rb_weights_save(const rb_weights *w, const char *path);

#endif
