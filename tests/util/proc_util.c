/* See proc_util.h. */
#include "proc_util.h"

#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

const char *tu_proc_bin(void)
{
	static char b[300];
	snprintf(b, sizeof(b), "%s/specwright", getenv("BUILD") ? getenv("BUILD") : "build");
	return b;
}

double tu_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void tu_proc_spawn(tu_proc *p, char *const argv[], bool with_stdout, const char *env_set)
{
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	p->n = 0;
	p->log[0] = 0;
	p->pid = fork();
	assert_true(p->pid >= 0);
	if (p->pid == 0) {
		if (with_stdout)
			dup2(fds[1], 1);
		dup2(fds[1], 2);
		close(fds[0]);
		close(fds[1]);
		if (env_set)
			putenv((char *)env_set);
		execv(argv[0], argv);
		_exit(127);
	}
	close(fds[1]);
	p->err_fd = fds[0];
	fcntl(p->err_fd, F_SETFL, O_NONBLOCK);
}

bool tu_proc_log_has(tu_proc *p, const char *want, double wait_s)
{
	const double t_end = tu_now_s() + wait_s;
	for (;;) {
		if (want && strstr(p->log, want))
			return true;
		double left = t_end - tu_now_s();
		if (left <= 0)
			return false;
		struct pollfd pf = {.fd = p->err_fd, .events = POLLIN};
		if (poll(&pf, 1, (int)(left * 1000) + 1) <= 0)
			continue;
		ssize_t k = read(p->err_fd, p->log + p->n, sizeof(p->log) - 1 - p->n);
		if (k <= 0) {
			if (k == 0)
				return want && strstr(p->log, want);
			continue;
		}
		p->n += (size_t)k;
		p->log[p->n] = 0;
	}
}

int tu_proc_reap(tu_proc *p, double wait_s, const char *what)
{
	const double t_end = tu_now_s() + wait_s;
	int st = 0;
	while (waitpid(p->pid, &st, WNOHANG) == 0) {
		if (tu_now_s() > t_end) {
			kill(p->pid, SIGKILL);
			waitpid(p->pid, &st, 0);
			tu_proc_log_has(p, NULL, 0.1);
			fail_msg("%s did not exit within %g s; output:\n%s", what, wait_s, p->log);
		}
		tu_proc_log_has(p, NULL, 0.05);
	}
	tu_proc_log_has(p, NULL, 0.2);
	close(p->err_fd);
	if (WIFSIGNALED(st))
		fail_msg("%s was killed by signal %d (exit %d); output:\n%s", what, WTERMSIG(st), 128 + WTERMSIG(st),
		         p->log);
	return WEXITSTATUS(st);
}

int tu_proc_port(tu_proc *p)
{
	static const char *const say = "listening on http://127.0.0.1:";
	assert_true(tu_proc_log_has(p, say, 30));
	return atoi(strstr(p->log, say) + strlen(say));
}
