/* policy.c: the fleet's recurrent policy (policy.h): seeded integer weights, model.load with
 * them, a robot's observations, and the step computed here in float32 as the daemon does. */
#include <stdio.h>
#include <string.h>

#include <tensord/verbs.h>

#include "policy.h"

const char *const rb_action_names[RB_ACT] = {"forward", "left", "right", "stop"};

static uint64_t next(uint64_t *s)
{
	*s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
	return *s;
}

/* -1, 0 or 1: 0 half the time */
static float trit(uint64_t *s)
{
	uint64_t r = next(s) >> 40;
	return r % 4 == 0 ? -1.0f : r % 4 == 1 ? 1.0f : 0.0f;
}

void rb_policy_init(rb_policy *p, uint64_t seed)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 7;
	for (int o = 0; o < RB_HID; o++)
		for (int i = 0; i < RB_OBS; i++)
			p->W[o][i] = trit(&s);
	for (int o = 0; o < RB_HID; o++)
		for (int i = 0; i < RB_HID; i++)
			p->U[o][i] = trit(&s);
	for (int a = 0; a < RB_ACT; a++) {
		for (int i = 0; i < RB_HID; i++)
			p->V[a][i] = 4 * trit(&s);
		p->c[a] = (float)a;
	}
}

tsd_status rb_policy_load(tsd_client *c, const char *name, const rb_policy *p, int batch_max, int delay_us,
			  int max_sequences)
{
	tsd_tensor ts[4] = {
		{.name = "W", .dtype = TSD_F32, .ndim = 2, .shape = {RB_HID, RB_OBS}, .data = p->W, .nbytes = sizeof(p->W)},
		{.name = "U", .dtype = TSD_F32, .ndim = 2, .shape = {RB_HID, RB_HID}, .data = p->U, .nbytes = sizeof(p->U)},
		{.name = "V", .dtype = TSD_F32, .ndim = 2, .shape = {RB_ACT, RB_HID}, .data = p->V, .nbytes = sizeof(p->V)},
		{.name = "c", .dtype = TSD_F32, .ndim = 1, .shape = {RB_ACT}, .data = p->c, .nbytes = sizeof(p->c)},
	};
	cJSON *spec = rb_spec_policy(name, batch_max, delay_us, max_sequences);
	tsd_reply *r = NULL;
	tsd_status st = spec ? tsd_client_call(c, spec, ts, 4, &r) : TSD_OUT_OF_MEMORY;
	if (st != TSD_OK)
		fprintf(stderr, "model.load %s: %s: %s\n", name, tsd_status_name(st), tsd_client_message(c, r));
	tsd_reply_free(r);
	cJSON_Delete(spec);
	return st;
}

void rb_policy_obs(uint64_t who, uint64_t t, float obs[RB_OBS])
{
	uint64_t s = (who * 0x9e3779b97f4a7c15ull) ^ (t * 0xbf58476d1ce4e5b9ull) ^ 0x94d049bb133111ebull;
	next(&s);
	for (int i = 0; i < RB_OBS; i++)
		obs[i] = (float)((int)(next(&s) >> 40 & 0xffff) % 7 - 3);
}

int rb_policy_step(const rb_policy *p, const float obs[RB_OBS], float h[RB_HID], float q[RB_ACT])
{
	float hn[RB_HID];
	for (int o = 0; o < RB_HID; o++) {
		float a = 0, b = 0;
		for (int i = 0; i < RB_OBS; i++)
			a += p->W[o][i] * obs[i];
		for (int i = 0; i < RB_HID; i++)
			b += p->U[o][i] * h[i];
		float s = a + b;
		hn[o] = s < -RB_CLIP ? -RB_CLIP : s > RB_CLIP ? RB_CLIP : s;
	}
	memcpy(h, hn, sizeof(hn));
	int best = 0;
	for (int a = 0; a < RB_ACT; a++) {
		float v = 0;
		for (int i = 0; i < RB_HID; i++)
			v += p->V[a][i] * h[i];
		q[a] = v + p->c[a];
		if (q[a] > q[best])
			best = a;
	}
	return best;
}
