/* Gemma 3's chat template in C (chat_gemma.h), as the Jinja text in the
 * gemma-3 instruct files renders it:
 *   {{ bos_token }}, a leading system message folded into the first turn
 *   (first_user_prefix = content + '\n\n'), the roles checked to alternate
 *   ((role == 'user') != (index % 2 == 0) raises), 'assistant' -> 'model',
 *   '<start_of_turn>' + role + '\n' + prefix-if-first + content | trim +
 *   '<end_of_turn>\n' per turn, then '<start_of_turn>model\n'.
 * Jinja's trim is Python's str.strip(): the ASCII whitespace here (the
 * Unicode spaces beyond it are left; a chat message rarely starts with
 * one). */
#include <stdio.h>
#include <string.h>

#include "chat_gemma.h"

static int is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

int rt_chat_gemma(const char *bos, const char *const *roles, const char *const *contents, int n_msgs,
                  char *out, size_t cap, sw_err *err)
{
	const int sys = n_msgs > 0 && !strcmp(roles[0], "system");
	for (int i = sys; i < n_msgs; i++) {
		const int user = !strcmp(roles[i], "user");
		if (user != ((i - sys) % 2 == 0))
			return sw_errf(err, SW_EINVAL, "chat: message %d: role \"%.40s\": expected %s (Gemma's "
			               "template takes turns alternating user / assistant after an optional "
			               "first system message)", i, roles[i],
			               (i - sys) % 2 == 0 ? "\"user\"" : "a role other than \"user\"");
	}
	size_t n = 0;
	int w = snprintf(out, cap, "%s", bos ? bos : "");
	if (w < 0 || (size_t)w >= cap)
		goto too_long;
	n = (size_t)w;
	for (int i = sys; i < n_msgs; i++) {
		const char *c = contents[i], *e = c + strlen(c);
		while (c < e && is_ws(*c))
			c++;
		while (e > c && is_ws(e[-1]))
			e--;
		const char *role = !strcmp(roles[i], "assistant") ? "model" : roles[i];
		const int first = i == sys && sys;
		w = snprintf(out + n, cap - n, "<start_of_turn>%s\n%s%s%.*s<end_of_turn>\n", role,
		             first ? contents[0] : "", first ? "\n\n" : "", (int)(e - c), c);
		if (w < 0 || (size_t)w >= cap - n)
			goto too_long;
		n += (size_t)w;
	}
	w = snprintf(out + n, cap - n, "<start_of_turn>model\n");
	if (w < 0 || (size_t)w >= cap - n)
		goto too_long;
	return (int)(n + (size_t)w);
too_long:
	return sw_errf(err, SW_ERANGE, "chat: the formatted prompt does not fit %zu bytes", cap);
}
