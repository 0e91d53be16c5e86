/* inbox.c: the one hand-over between threads: a mutex-guarded list per lane and a uv_async
 * wake-up (which coalesces, so each drain takes every lane whole). What the loop thread posts
 * itself (a request its transports read, a connection they closed) goes on lists of its own,
 * drained by a check handle at the end of the same loop iteration: no lock, and no eventfd
 * write and read to wake a loop that is already awake (an idle handle keeps the poll from
 * blocking meanwhile). It knows nothing of what it carries: the handlers registered from above do. */
#include "inbox.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

struct dmn_inbox {
	uv_async_t wake;
	pthread_mutex_t mu;
	dmn_inbox_node *head[DMN_LANE_COUNT], *tail[DMN_LANE_COUNT]; /* under mu */
	pthread_t loop_thread;
	uv_check_t check; /* the loop's own posts, drained after this iteration's I/O */
	uv_idle_t idle;   /* while any wait: the poll does not block */
	dmn_inbox_node *lhead[DMN_LANE_COUNT], *ltail[DMN_LANE_COUNT]; /* loop thread only */
	bool local;       /* something is on the loop's own lists */
	bool closed;      /* dmn_inbox_close ran: what the loop posts waits for dmn_inbox_take */
	dmn_inbox_fn fn[DMN_LANE_COUNT];
	void *arg[DMN_LANE_COUNT];
	void (*after)(void *arg);
	void *after_arg;
};

static void run_call(void *arg, dmn_inbox_node *n)
{
	(void)arg;
	dmn_call *c = (dmn_call *)n;
	c->fn(c);
}

static void run_lanes(dmn_inbox *ib, dmn_inbox_node *const *take)
{
	for (int l = 0; l < DMN_LANE_COUNT; l++)
		for (dmn_inbox_node *n = take[l], *next; n; n = next) {
			next = n->next;
			ib->fn[l](ib->arg[l], n);
		}
}

static void on_wake(uv_async_t *h)
{
	dmn_inbox *ib = h->data;
	dmn_inbox_node *take[DMN_LANE_COUNT];
	pthread_mutex_lock(&ib->mu);
	for (int l = 0; l < DMN_LANE_COUNT; l++) {
		take[l] = ib->head[l];
		ib->head[l] = ib->tail[l] = NULL;
	}
	pthread_mutex_unlock(&ib->mu);
	run_lanes(ib, take);
	if (ib->after)
		ib->after(ib->after_arg);
}

/* The loop's own posts, lane by lane, until none is left (handlers may post more). */
static void on_check(uv_check_t *h)
{
	dmn_inbox *ib = h->data;
	while (ib->local) {
		dmn_inbox_node *take[DMN_LANE_COUNT];
		for (int l = 0; l < DMN_LANE_COUNT; l++) {
			take[l] = ib->lhead[l];
			ib->lhead[l] = ib->ltail[l] = NULL;
		}
		ib->local = false;
		run_lanes(ib, take);
	}
	uv_check_stop(&ib->check);
	uv_idle_stop(&ib->idle);
	if (ib->after)
		ib->after(ib->after_arg);
}

static void on_idle(uv_idle_t *h)
{
	(void)h; /* only there so that the poll does not block while the loop's own posts wait */
}

dmn_inbox *dmn_inbox_create(uv_loop_t *loop, char *err, size_t errlen)
{
	dmn_inbox *ib = calloc(1, sizeof(*ib));
	if (!ib) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	int rv = uv_async_init(loop, &ib->wake, on_wake);
	if (rv) {
		snprintf(err, errlen, "libuv: %s", uv_strerror(rv));
		free(ib);
		return NULL;
	}
	ib->wake.data = ib;
	uv_check_init(loop, &ib->check);
	uv_idle_init(loop, &ib->idle);
	ib->check.data = ib->idle.data = ib;
	ib->loop_thread = pthread_self();
	pthread_mutex_init(&ib->mu, NULL);
	ib->fn[DMN_LANE_CALL] = run_call;
	return ib;
}

void dmn_inbox_on(dmn_inbox *ib, dmn_lane lane, dmn_inbox_fn fn, void *arg)
{
	ib->fn[lane] = fn;
	ib->arg[lane] = arg;
}

void dmn_inbox_after(dmn_inbox *ib, void (*after)(void *arg), void *arg)
{
	ib->after = after;
	ib->after_arg = arg;
}

void dmn_inbox_post(dmn_inbox *ib, dmn_lane lane, dmn_inbox_node *n)
{
	n->next = NULL;
	if (pthread_equal(pthread_self(), ib->loop_thread)) {
		if (ib->ltail[lane])
			ib->ltail[lane]->next = n;
		else
			ib->lhead[lane] = n;
		ib->ltail[lane] = n;
		if (!ib->local && !ib->closed) {
			ib->local = true;
			uv_check_start(&ib->check, on_check);
			uv_idle_start(&ib->idle, on_idle);
		}
		return;
	}
	pthread_mutex_lock(&ib->mu);
	if (ib->tail[lane])
		ib->tail[lane]->next = n;
	else
		ib->head[lane] = n;
	ib->tail[lane] = n;
	pthread_mutex_unlock(&ib->mu);
	uv_async_send(&ib->wake);
}

void dmn_inbox_deliver(dmn_inbox *ib, dmn_lane lane, dmn_inbox_node *n)
{
	n->next = NULL;
	ib->fn[lane](ib->arg[lane], n);
}

dmn_inbox_node *dmn_inbox_take(dmn_inbox *ib, dmn_lane lane)
{
	pthread_mutex_lock(&ib->mu);
	dmn_inbox_node *n = ib->head[lane];
	ib->head[lane] = ib->tail[lane] = NULL;
	pthread_mutex_unlock(&ib->mu);
	if (ib->lhead[lane]) { /* the loop's own, after the others */
		dmn_inbox_node **end = &n;
		while (*end)
			end = &(*end)->next;
		*end = ib->lhead[lane];
		ib->lhead[lane] = ib->ltail[lane] = NULL;
	}
	return n;
}

void dmn_inbox_close(dmn_inbox *ib)
{
	ib->closed = true;
	uv_close((uv_handle_t *)&ib->wake, NULL);
	uv_close((uv_handle_t *)&ib->check, NULL);
	uv_close((uv_handle_t *)&ib->idle, NULL);
}

void dmn_inbox_destroy(dmn_inbox *ib)
{
	if (!ib)
		return;
	pthread_mutex_destroy(&ib->mu);
	free(ib);
}
