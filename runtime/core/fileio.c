/* See fileio.h. */
#include "fileio.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

char *sw_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *s = NULL;
	long n;
	if (!f)
		return NULL;
	if (!fseek(f, 0, SEEK_END) && (n = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET) &&
	    (s = malloc((size_t)n + 1)) && fread(s, 1, (size_t)n, f) == (size_t)n) {
		s[n] = 0;
		if (len)
			*len = (size_t)n;
	} else {
		int e = errno ? errno : EIO;
		free(s);
		s = NULL;
		errno = e;
	}
	fclose(f);
	return s;
}
