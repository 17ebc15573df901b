/* See output.h. The rules it keeps: a temporary is only ever a name this
 * process created exclusively (mkostemp / mkdtemp), so removing it can
 * never take anyone else's file; the target is replaced by one rename (a
 * file) or one atomic exchange (a directory), so a kill at any point leaves
 * either the old target or the new one, plus at most a temporary. */
#include "output.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

static const char *kind_of(mode_t m)
{
	return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket"
	       : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
	       : S_ISLNK(m) ? "a symbolic link" : "not a regular file";
}

/* The mode a new file or directory gets from open()/mkdir() (the umask
 * applied): mkostemp and mkdtemp make 0600/0700, which a user's tools
 * would not expect of an engine or a dump. */
static mode_t umasked(mode_t m)
{
	mode_t u = umask(0);
	umask(u);
	return m & ~u;
}

static void parent_of(const char *path, char *out, size_t n)
{
	snprintf(out, n, "%s", path);
	char *s = strrchr(out, '/');
	if (!s)
		snprintf(out, n, ".");
	else if (s == out)
		out[1] = 0;
	else
		*s = 0;
}

/* fsync of a directory, so a rename in it survives a crash; best effort
 * (some file systems refuse fsync on a directory). */
static void fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

static int mkdirs(const char *path, sw_err *err)
{
	char p[SW_OUT_PATH];
	snprintf(p, sizeof(p), "%s", path);
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = 0;
			if (mkdir(p, 0777) && errno != EEXIST)
				return sw_errf(err, SW_EIO, "%s: cannot create: %s", p, strerror(errno));
			*s = '/';
		}
	if (mkdir(p, 0777) && errno != EEXIST)
		return sw_errf(err, SW_EIO, "%s: cannot create: %s", p, strerror(errno));
	return 0;
}

/* ---- one file -------------------------------------------------------------- */

/* The place checked: absent, or a regular file (through a link); *t the
 * path to write (a link resolved into real), *mode what the file gets. */
static int target_check(const char *target, const char *what, const char **t, char *real, mode_t *mode,
                        sw_err *err)
{
	struct stat st;
	*t = target;
	*mode = umasked(0666);
	if (!target || !*target)
		return sw_errf(err, SW_EINVAL, "%s: a file path expected, found an empty one", what);
	if (lstat(target, &st) == 0) {
		if (S_ISLNK(st.st_mode)) {
			/* write through the link: the user's link stays a link */
			if (!realpath(target, real) || stat(real, &st))
				return sw_errf(err, SW_EINVAL, "%s %s: a symbolic link to nothing that exists: "
				               "refusing to write through it", what, target);
			*t = real;
		}
		if (!S_ISREG(st.st_mode))
			return sw_errf(err, SW_EINVAL, "%s %s: exists and is %s, not a regular file: refusing "
			               "to write over it (give the path of a regular file)", what, target,
			               kind_of(st.st_mode));
		*mode = st.st_mode & 07777;
	} else if (errno != ENOENT) {
		return sw_errf(err, SW_EIO, "%s %s: %s", what, target, strerror(errno));
	}
	return 0;
}

int sw_outfile_check(const char *target, const char *what, sw_err *err)
{
	const char *t;
	char real[PATH_MAX];
	mode_t mode;
	return target_check(target, what, &t, real, &mode, err);
}

int sw_outfile_open(sw_outfile *o, const char *target, const char *what, sw_err *err)
{
	const char *t;
	char real[PATH_MAX];
	mode_t mode;
	memset(o, 0, sizeof(*o));
	int rc = target_check(target, what, &t, real, &mode, err);
	if (rc)
		return rc;
	if (strlen(t) >= sizeof(o->target))
		return sw_errf(err, SW_EINVAL, "%s %.80s...: the path is longer than %zu bytes", what, t,
		               sizeof(o->target) - 1);
	memcpy(o->target, t, strlen(t) + 1);
	snprintf(o->tmp, sizeof(o->tmp), "%s.tmp-XXXXXX", t);
	int fd = mkostemp(o->tmp, O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		o->tmp[0] = 0;
		return sw_errf(err, SW_EIO, "%s %s: cannot create a file beside it: %s", what, target, strerror(e));
	}
	fchmod(fd, mode);
	if (!(o->f = fdopen(fd, "wb"))) {
		int e = errno;
		close(fd);
		unlink(o->tmp);
		o->tmp[0] = 0;
		return sw_errf(err, SW_EIO, "%s %s: %s", what, target, strerror(e));
	}
	return 0;
}

int sw_outfile_write(sw_outfile *o, const void *p, size_t n)
{
	if (o->werr)
		return SW_EIO;
	if (n && fwrite(p, 1, n, o->f) != n) {
		o->werr = errno ? errno : EIO;
		return SW_EIO;
	}
	return 0;
}

int sw_outfile_commit(sw_outfile *o, sw_err *err)
{
	int e = o->werr;
	char dir[SW_OUT_PATH];
	if (!o->f)
		return sw_errf(err, SW_EIO, "%s: not open", o->target);
	errno = 0;
	if (fflush(o->f) || ferror(o->f))
		e = e ? e : errno ? errno : EIO;
	if (!e && fsync(fileno(o->f)))
		e = errno;
	if (fclose(o->f) && !e)
		e = errno ? errno : EIO;
	o->f = NULL;
	if (!e && rename(o->tmp, o->target))
		e = errno;
	if (e) {
		unlink(o->tmp);
		o->tmp[0] = 0;
		return sw_errf(err, SW_EIO, "%s: write failed: %s (nothing written there)", o->target, strerror(e));
	}
	o->tmp[0] = 0;
	parent_of(o->target, dir, sizeof(dir));
	fsync_dir(dir);
	return 0;
}

void sw_outfile_abort(sw_outfile *o)
{
	if (o->f)
		fclose(o->f);
	o->f = NULL;
	if (o->tmp[0])
		unlink(o->tmp);
	o->tmp[0] = 0;
}

int sw_outfile_save(const char *target, const char *what, const void *p, size_t n, sw_err *err)
{
	sw_outfile o;
	int rc = sw_outfile_open(&o, target, what, err);
	if (rc)
		return rc;
	sw_outfile_write(&o, p, n);
	return sw_outfile_commit(&o, err);
}

bool sw_same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	return !stat(a, &sa) && !stat(b, &sb) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* ---- one directory ------------------------------------------------------------ */

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)ftw;
	return flag == FTW_DP ? rmdir(p) : unlink(p);
}

/* Removes a tree: only ever one this process made (its temporary) or one
 * `owned` has just accepted. Never follows a symbolic link or crosses a
 * mount. */
static void rm_tree(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

static int fsync_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)ftw;
	if (flag == FTW_F && S_ISREG(st->st_mode)) {
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		int bad = fd < 0 || fsync(fd);
		if (fd >= 0)
			close(fd);
		return bad;
	}
	if (flag == FTW_DP)
		fsync_dir(p);
	return 0;
}

static bool dir_empty(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	bool empty = true;
	while (d && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			empty = false;
	if (d)
		closedir(d);
	return d && empty;
}

int sw_outdir_begin(sw_outdir *o, const char *target, const char *what, sw_owned_fn owned, void *ctx,
                    sw_err *err)
{
	struct stat st;
	char parent[SW_OUT_PATH];
	memset(o, 0, sizeof(*o));
	o->what = what;
	o->owned = owned;
	o->ctx = ctx;
	size_t l = target ? strlen(target) : 0;
	while (l > 1 && target[l - 1] == '/')
		l--;
	if (!l)
		return sw_errf(err, SW_EINVAL, "%s: a path expected, found an empty one", what);
	if (l >= sizeof(o->target))
		return sw_errf(err, SW_EINVAL, "%.80s...: the path of %s is longer than %zu bytes", target, what,
		               sizeof(o->target) - 1);
	memcpy(o->target, target, l);
	o->target[l] = 0;
	if (!strcmp(o->target, "/") || !strcmp(o->target, ".") || !strcmp(o->target, ".."))
		return sw_errf(err, SW_EINVAL, "%s: not a place for %s (give a new directory's path)",
		               o->target, what);
	if (lstat(o->target, &st) == 0) {
		if (!S_ISDIR(st.st_mode))
			return sw_errf(err, SW_EINVAL, "%s: exists and is %s, not %s: refusing to replace it; "
			               "give another path or remove it yourself", o->target, kind_of(st.st_mode), what);
		sw_err why = {0};
		if (!dir_empty(o->target) && (!owned || owned(o->target, ctx, &why)))
			return sw_errf(err, SW_EINVAL, "%s: exists and is not %s this program built and nothing "
			               "else (%s): refusing to replace it; give another path or remove it yourself",
			               o->target, what, owned ? why.msg : "it is not empty");
		o->replace = true;
	} else if (errno != ENOENT) {
		return sw_errf(err, SW_EIO, "%s: %s", o->target, strerror(errno));
	}
	parent_of(o->target, parent, sizeof(parent));
	int rc = mkdirs(parent, err);
	if (rc)
		return rc;
	snprintf(o->tmp, sizeof(o->tmp), "%s.tmp-XXXXXX", o->target);
	if (!mkdtemp(o->tmp)) {
		int e = errno;
		o->tmp[0] = 0;
		return sw_errf(err, SW_EIO, "%s: cannot create a directory beside it: %s", o->target, strerror(e));
	}
	chmod(o->tmp, umasked(0777));
	return 0;
}

int sw_outdir_commit(sw_outdir *o, sw_err *err)
{
	char parent[SW_OUT_PATH], old[SW_OUT_PATH];
	int rc;
	if (nftw(o->tmp, fsync_one, 16, FTW_DEPTH | FTW_PHYS)) {
		rc = sw_errf(err, SW_EIO, "%s: cannot sync %s to disk: %s", o->target, o->tmp, strerror(errno));
		goto out_abort;
	}
	parent_of(o->target, parent, sizeof(parent));
	if (!o->replace) {
		if (rename(o->tmp, o->target)) {
			int e = errno;
			rc = sw_errf(err, SW_EIO, "%s: cannot rename %s into place: %s%s", o->target, o->tmp,
			             strerror(e), e == ENOTEMPTY || e == EEXIST ? " (it appeared meanwhile)" : "");
			goto out_abort;
		}
		o->tmp[0] = 0;
		fsync_dir(parent);
		return 0;
	}
	/* the old tree and the new swap names in one step: the target is
	 * never missing, and the old tree lands at the temporary's name */
	if (syscall(SYS_renameat2, AT_FDCWD, o->tmp, AT_FDCWD, o->target, RENAME_EXCHANGE) == 0) {
		snprintf(old, sizeof(old), "%s", o->tmp);
	} else if (errno == EINVAL || errno == ENOSYS) {
		/* a file system without the exchange: the old tree onto an empty
		 * directory of our own making, then the new one into place */
		snprintf(old, sizeof(old), "%s.old-XXXXXX", o->target);
		if (!mkdtemp(old)) {
			rc = sw_errf(err, SW_EIO, "%s: cannot make room beside it: %s", o->target, strerror(errno));
			goto out_abort;
		}
		if (rename(o->target, old)) {
			rc = sw_errf(err, SW_EIO, "%s: cannot move the previous one aside: %s", o->target,
			             strerror(errno));
			rmdir(old);
			goto out_abort;
		}
		if (rename(o->tmp, o->target)) {
			rc = sw_errf(err, SW_EIO, "%s: cannot rename %s into place: %s", o->target, o->tmp,
			             strerror(errno));
			if (rename(old, o->target))
				fprintf(stderr, "%s: the previous one is at %s\n", o->target, old);
			goto out_abort;
		}
	} else {
		rc = sw_errf(err, SW_EIO, "%s: cannot rename %s into place: %s", o->target, o->tmp,
		             strerror(errno));
		goto out_abort;
	}
	o->tmp[0] = 0;
	fsync_dir(parent);
	/* asked again: a file a user put into the old tree after begin() is
	 * never removed with it */
	sw_err why = {0};
	if (dir_empty(old) || (o->owned && !o->owned(old, o->ctx, &why)))
		rm_tree(old);
	else
		fprintf(stderr, "%s: the previous one is kept at %s: %s\n", o->target, old,
		        o->owned ? why.msg : "it was not empty");
	return 0;
out_abort:
	sw_outdir_abort(o);
	return rc;
}

void sw_outdir_abort(sw_outdir *o)
{
	if (o->tmp[0])
		rm_tree(o->tmp);
	o->tmp[0] = 0;
}
