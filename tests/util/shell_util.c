#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "shell_util.h"

int tu_sh(char *out, size_t cap, const char *fmt, ...)
{
	char cmd[16384];
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (k < 0 || (size_t)k >= sizeof(cmd))
		fail_msg("tu_sh: a command of %d bytes (at most %zu)", k, sizeof(cmd) - 1);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t n = fread(out, 1, cap - 1, p);
	out[n] = 0;
	int st = pclose(p);
	if (!WIFEXITED(st))
		fail_msg("`%s` ended by signal %d:\n%s", cmd, WIFSIGNALED(st) ? WTERMSIG(st) : -1, out);
	return WEXITSTATUS(st);
}

int tu_json_tokens(const char *text, int32_t *out, int cap)
{
	const char *p = strstr(text, "\"tokens\": [");
	if (!p)
		fail_msg("no \"tokens\" in:\n%s", text);
	p += strlen("\"tokens\": [");
	int n = 0;
	while (n < cap && *p && *p != ']') {
		char *end;
		out[n++] = (int32_t)strtol(p, &end, 10);
		if (end == p)
			fail_msg("\"tokens\": not a list of integers at '%.20s'", p);
		p = end;
		while (*p == ',' || *p == ' ')
			p++;
	}
	return n;
}

void tu_find_emu_module(const char *dir, char *out, size_t n)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	out[0] = 0;
	while (d && (de = readdir(d)))
		if (!strncmp(de->d_name, "engine-kernels-", 15) && strstr(de->d_name, ".so"))
			snprintf(out, n, "%s/%s", dir, de->d_name);
	if (d)
		closedir(d);
	if (!out[0])
		fail_msg("no engine-kernels-*.so in %s", dir);
}
