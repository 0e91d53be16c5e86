/* shm_guard.c: copies into and out of shared memory the daemon cannot seal (Triton's POSIX shm
 * objects, shm.h): the object's owner may shrink it under the mapping at any time, and a touch
 * past its end is SIGBUS. A copy runs with this thread's jump buffer armed; the SIGBUS handler
 * (installed once for the process) jumps back when it is, so only that copy fails. A SIGBUS
 * anywhere else keeps its default action (the process dies, as it would have). */
#include "shm.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

/* The process's one handler and each thread's armed copy: state the kernel's signal delivery
 * needs, the only such in the daemon. */
static pthread_once_t installed = PTHREAD_ONCE_INIT;
static _Thread_local sigjmp_buf *volatile armed;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	(void)si, (void)uc;
	if (armed)
		siglongjmp(*armed, 1);
	signal(sig, SIG_DFL); /* not ours: what it would have done */
	raise(sig);
}

static void install(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
}

bool dmn_copy_guarded(void *dst, const void *src, size_t n)
{
	pthread_once(&installed, install);
	sigjmp_buf jb;
	if (sigsetjmp(jb, 1)) {
		armed = NULL;
		return false;
	}
	/* the fences keep the compiler from moving the copy's accesses out of the armed span (it
	 * knows memcpy does not read armed, and would drop the first store) */
	armed = &jb;
	atomic_signal_fence(memory_order_seq_cst);
	memcpy(dst, src, n);
	atomic_signal_fence(memory_order_seq_cst);
	armed = NULL;
	return true;
}
