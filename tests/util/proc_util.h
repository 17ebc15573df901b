/* A child process for the CLI and server tests: started with its stderr
 * (and stdout when asked) on a pipe, read with a deadline, reaped with one.
 * Every wait is bounded; a process that overstays is killed and the test
 * fails with what it wrote. */
#ifndef TU_PROC_UTIL_H
#define TU_PROC_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct tu_proc {
	pid_t pid;
	int err_fd;
	char log[1 << 16]; /* what it wrote so far */
	size_t n;
} tu_proc;

/* build/specwright (or $BUILD/specwright) */
const char *tu_proc_bin(void);
double tu_now_s(void);
/* Starts argv[0] with argv; stdout joins the log when with_stdout, and
 * env_set ("NAME=VALUE", or NULL) is set in the child first. */
void tu_proc_spawn(tu_proc *p, char *const argv[], bool with_stdout, const char *env_set);
/* Reads for up to wait_s seconds or until the log holds `want` (NULL:
 * just read for wait_s). */
bool tu_proc_log_has(tu_proc *p, const char *want, double wait_s);
/* The exit status within wait_s seconds; killed with SIGKILL after, and a
 * death by signal, both fail the test naming what: "serve", "specwright". */
int tu_proc_reap(tu_proc *p, double wait_s, const char *what);
/* The port of a `serve --port 0` once it says "listening on ..." (30 s). */
int tu_proc_port(tu_proc *p);

#endif
