/* See fileio.h. */
#include "fileio.h"

#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t m)
{
	return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket"
	       : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device" : "not a regular file";
}

int sw_open_regular(const char *path, sw_err *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	struct stat st;
	if (fd < 0)
		return sw_errf(err, SW_EIO, "%s: cannot open: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return sw_errf(err, SW_EIO, "%s: cannot stat: %s", path, strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
		return sw_errf(err, SW_EINVAL, "%s: is %s, not a regular file", path, kind_of(st.st_mode));
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
}

/* Reads fd to its end (works for pipes too), at most max bytes (more:
 * NULL with errno EFBIG). */
static char *read_all(int fd, size_t *len, size_t max)
{
	size_t cap = 4096, n = 0;
	char *s = malloc(cap);
	if (!s)
		return NULL;
	for (;;) {
		if (n + 1 == cap) {
			char *ns = realloc(s, cap *= 2);
			if (!ns) {
				free(s);
				errno = ENOMEM;
				return NULL;
			}
			s = ns;
		}
		ssize_t k = read(fd, s + n, cap - n - 1);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int e = errno;
			free(s);
			errno = e;
			return NULL;
		}
		if (k == 0)
			break;
		n += (size_t)k;
		if (n > max) {
			free(s);
			errno = EFBIG;
			return NULL;
		}
	}
	s[n] = 0;
	if (len)
		*len = n;
	return s;
}

char *sw_read_file(const char *path, size_t cap, size_t *len)
{
	sw_err err;
	int fd = sw_open_regular(path, &err);
	if (fd < 0)
		return NULL; /* errno set */
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_size < 0 || (uint64_t)st.st_size > cap) {
		close(fd);
		errno = EFBIG;
		return NULL;
	}
	char *s = read_all(fd, len, cap);
	int e = errno;
	close(fd);
	errno = e;
	return s;
}

char *sw_read_capped(const char *path, size_t cap, const char *what, size_t *len, sw_err *err)
{
	if (!strcmp(path, "-")) {
		char *s = read_all(STDIN_FILENO, len, cap);
		if (!s && errno == EFBIG)
			sw_errf(err, SW_EINVAL, "standard input: more than %zu bytes, the cap for %s", cap, what);
		else if (!s)
			sw_errf(err, SW_EIO, "standard input: cannot read: %s", strerror(errno));
		return s;
	}
	int fd = sw_open_regular(path, err);
	if (fd < 0)
		return NULL;
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_size < 0 || (uint64_t)st.st_size > cap) {
		sw_errf(err, SW_EINVAL, "%s: %lld bytes, more than the %zu-byte cap for %s", path, (long long)st.st_size, cap, what);
		close(fd);
		return NULL;
	}
	/* the file may grow between fstat and read: the cap holds either way */
	char *s = read_all(fd, len, cap);
	if (!s && errno == EFBIG)
		sw_errf(err, SW_EINVAL, "%s: grew past the %zu-byte cap for %s while read", path, cap, what);
	else if (!s)
		sw_errf(err, SW_EIO, "%s: cannot read: %s", path, strerror(errno));
	close(fd);
	return s;
}
