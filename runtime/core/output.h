/* The one way this program writes to a user's disk: an output file or an
 * output directory goes to a fresh temporary beside its target, made with
 * an exclusive create (a random name no one else holds), filled with
 * checked writes, fsynced and renamed into place. Nothing outside the
 * temporary is removed, but for a directory being replaced, and only when
 * every entry in it is this program's own by its manifest (the caller's
 * `owned` check, asked again after the swap). Not for caches (gen/jit). */
#ifndef SW_OUTPUT_H
#define SW_OUTPUT_H

#include <stdbool.h>
#include <stdio.h>

#include "err.h"

#define SW_OUT_PATH 1024

/* ---- one file -------------------------------------------------------------- */

typedef struct sw_outfile {
	char target[SW_OUT_PATH - 16]; /* where it lands (a symlink's target resolved) */
	char tmp[SW_OUT_PATH];    /* the exclusive temporary beside it */
	FILE *f;                  /* write here (fwrite/fprintf), then commit */
	int werr;                 /* the first write error seen by sw_outfile_write */
} sw_outfile;

/* Opens a temporary for `target`: a target that exists must be a regular
 * file (a device, FIFO, directory or socket is refused, so /dev/full or
 * /dev/null is never renamed over); what = "--dump" / "-o", for messages.
 * Returns 0 or SW_EINVAL / SW_EIO naming the target. */
int sw_outfile_open(sw_outfile *o, const char *target, const char *what, sw_err *err);
/* The same checks of the place alone, before a command does its work. */
int sw_outfile_check(const char *target, const char *what, sw_err *err);
/* fwrite with the error kept (sw_outfile_commit reports it). */
int sw_outfile_write(sw_outfile *o, const void *p, size_t n);
/* Flushes, fsyncs and closes (each checked), renames into place and fsyncs
 * the directory. On any failure the temporary is removed and the target is
 * as it was: SW_EIO naming the target and the cause. */
int sw_outfile_commit(sw_outfile *o, sw_err *err);
/* Removes the temporary (an error path); the target is untouched. */
void sw_outfile_abort(sw_outfile *o);
/* Writes n bytes to target in one go through the above. */
int sw_outfile_save(const char *target, const char *what, const void *p, size_t n, sw_err *err);

/* Whether a and b name the same existing file (an output that would
 * overwrite an input is refused by the caller). */
bool sw_same_file(const char *a, const char *b);

/* ---- one directory ------------------------------------------------------------ */

/* Whether dir's every entry is this program's own (by its manifest): 0, or
 * an error whose message names the first entry that is not. */
typedef int (*sw_owned_fn)(const char *dir, void *ctx, sw_err *err);

typedef struct sw_outdir {
	char target[SW_OUT_PATH - 16];
	char tmp[SW_OUT_PATH]; /* fill this directory, then commit */
	const char *what;      /* "an engine directory", "a bundle": for messages */
	sw_owned_fn owned;
	void *ctx;
	bool replace;          /* the target exists (empty, or owned) */
} sw_outdir;

/* Checks the target (absent; an empty directory; or a directory `owned`
 * accepts: anything else is refused naming the first foreign entry) and
 * makes the temporary TARGET.tmp-XXXXXX beside it. */
int sw_outdir_begin(sw_outdir *o, const char *target, const char *what, sw_owned_fn owned, void *ctx,
                    sw_err *err);
/* fsyncs the temporary's files and directories, then puts it in place:
 * a plain rename when the target is absent; an atomic exchange when it is
 * there, after which the old tree (now at the temporary's name) is checked
 * by `owned` again and removed, or left where it is, named on stderr, when
 * something foreign appeared in it meanwhile. On failure the temporary is
 * removed and the target is as it was. */
int sw_outdir_commit(sw_outdir *o, sw_err *err);
/* Removes the temporary (an error path). */
void sw_outdir_abort(sw_outdir *o);

#endif
