/* policy.h: the fleet's stateful brain (robot_fleet --stateful): a small recurrent policy whose
 * state the daemon keeps per robot (one sequence each); its sizes, seeded weights, serving spec,
 * a robot's observations, and the same step computed here to check the daemon's answers. */
#ifndef ROBOT_POLICY_H
#define ROBOT_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include <tensord/client.h>

#define RB_OBS 8     /* an observation: 8 sensor readings, small integers in [-3, 3] */
#define RB_HID 16    /* the recurrent state */
#define RB_ACT 4     /* actions: forward, left, right, stop */
#define RB_CLIP 8    /* the state is clipped to [-8, 8] */

/* hn = clip(W obs + U h, -RB_CLIP, RB_CLIP); q = V hn + c; act = argmax q. Every weight is a
 * small integer (V's multiples of 4, c = 0 1 2 3: the q values of a row differ mod 4, so no
 * ties), so every value is an integer far below 2^24: exact in float32 in any summation order,
 * and the daemon's answers equal this program's bit for bit. */
typedef struct rb_policy {
	float W[RB_HID][RB_OBS], U[RB_HID][RB_HID], V[RB_ACT][RB_HID], c[RB_ACT];
} rb_policy;

extern const char *const rb_action_names[RB_ACT];

/* Seeded weights (the same seed, the same policy). */
void rb_policy_init(rb_policy *p, uint64_t seed);
/* The model.load request (with sequence: the state pair h <- hn, init 0; the caller owns it):
 * inputs obs float32 [-1, RB_OBS] and h float32 [-1, RB_HID]; outputs act int32 [-1], q float32
 * [-1, RB_ACT], hn float32 [-1, RB_HID]; buckets doubling from 1 to batch_max. */
cJSON *rb_spec_policy(const char *name, int batch_max, int delay_us, int max_sequences);
/* model.load of name with p's weights; the status (the message printed when not ok). */
tsd_status rb_policy_load(tsd_client *c, const char *name, const rb_policy *p, int batch_max, int delay_us,
			  int max_sequences);
/* The observation of robot `who` at step t (deterministic: the check recomputes nothing else). */
void rb_policy_obs(uint64_t who, uint64_t t, float obs[RB_OBS]);
/* One step here: h (RB_HID, the state, 0 at a start) becomes hn, q gets the action values;
 * returns the action. */
int rb_policy_step(const rb_policy *p, const float obs[RB_OBS], float h[RB_HID], float q[RB_ACT]);

#endif
