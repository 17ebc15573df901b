/* Stop signals (SIGTERM, SIGINT, SIGHUP) taken the same way whatever threads
 * the process has: a library may start threads before main() (OpenBLAS
 * starts its pool in its constructor, with every signal unblocked), and a
 * process-directed signal goes to ANY thread that does not block it, so
 * blocking it in main() and sigwait-ing is not enough (the default action,
 * run in such a thread, kills the process). Here a handler is installed for
 * the whole process: whichever thread takes the signal only writes its
 * number to a pipe, which the waiting thread reads. Not for programs that
 * want the default action (run, build: Ctrl-C there ends them). */
#ifndef SW_CORE_STOPSIG_H
#define SW_CORE_STOPSIG_H

#include "err.h"

/* Blocks SIGTERM, SIGINT and SIGHUP in the calling thread (threads it starts
 * afterwards inherit that, so they never run the handler), ignores SIGPIPE
 * (a client that goes away is an EPIPE, not a death) and installs the
 * handler. Call it before starting any thread. Once per process. */
int sw_stopsig_setup(sw_err *err);

/* The next stop signal taken (its number), waiting up to wait_s seconds
 * (0: only what is pending, < 0: no limit); 0 when none came. While it
 * waits the calling thread accepts the signals itself, so they are taken
 * even when every other thread blocks them. */
int sw_stopsig_wait(double wait_s);

#endif
