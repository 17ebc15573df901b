/* Stop signals through a self-pipe (stopsig.h): the handler is
 * async-signal-safe (one write, errno kept), the pipe's write end never
 * blocks (a signal storm drops numbers, not the process), and the waiter
 * takes signals pending on the process with sigtimedwait and the ones that
 * arrive while it waits with ppoll's mask. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "stopsig.h"

static int g_pipe[2] = {-1, -1};
static sigset_t g_set;

static void on_stop_signal(int sig)
{
	const int saved = errno;
	const unsigned char b = (unsigned char)sig;
	ssize_t w = write(g_pipe[1], &b, 1);
	(void)w; /* a full pipe already holds a stop */
	errno = saved;
}

int sw_stopsig_setup(sw_err *err)
{
	if (g_pipe[0] >= 0)
		return 0;
	sigemptyset(&g_set);
	sigaddset(&g_set, SIGTERM);
	sigaddset(&g_set, SIGINT);
	sigaddset(&g_set, SIGHUP);
	int rc = pthread_sigmask(SIG_BLOCK, &g_set, NULL);
	if (rc)
		return sw_errf(err, SW_EIO, "cannot block the stop signals: %s", strerror(rc));
	if (pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK))
		return sw_errf(err, SW_EIO, "cannot make the signal pipe: %s", strerror(errno));
	struct sigaction sa = {.sa_handler = SIG_IGN};
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGPIPE, &sa, NULL))
		return sw_errf(err, SW_EIO, "cannot ignore SIGPIPE: %s", strerror(errno));
	sa.sa_handler = on_stop_signal;
	sa.sa_mask = g_set;        /* one handler at a time per thread */
	sa.sa_flags = SA_RESTART;  /* a foreign thread's calls resume */
	const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (sigaction(sigs[i], &sa, NULL))
			return sw_errf(err, SW_EIO, "cannot install the handler of signal %d: %s", sigs[i],
			               strerror(errno));
	return 0;
}

static int take_pipe(void)
{
	unsigned char b;
	return read(g_pipe[0], &b, 1) == 1 ? b : 0;
}

static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int sw_stopsig_wait(double wait_s)
{
	if (g_pipe[0] < 0)
		return 0;
	const double t_end = mono_s() + wait_s;
	for (;;) {
		int sig = take_pipe();
		if (sig)
			return sig;
		/* pending on the process (every thread blocks it): take it here */
		const struct timespec zero = {0, 0};
		sig = sigtimedwait(&g_set, NULL, &zero);
		if (sig > 0)
			return sig;
		double left = wait_s < 0 ? 1.0 : t_end - mono_s();
		if (left <= 0)
			return 0;
		sigset_t open;
		pthread_sigmask(SIG_SETMASK, NULL, &open);
		sigdelset(&open, SIGTERM);
		sigdelset(&open, SIGINT);
		sigdelset(&open, SIGHUP);
		struct pollfd p = {.fd = g_pipe[0], .events = POLLIN};
		struct timespec ts = {.tv_sec = (time_t)left, .tv_nsec = (long)((left - (double)(time_t)left) * 1e9)};
		ppoll(&p, 1, &ts, &open); /* a signal taken here runs the handler: the pipe has it */
	}
}
