/* Gemma's chat turns (chat_gemma.c), for rt_chat_format_msgs (tokenizer.c):
 * not part of the tokenizer interface. */
#ifndef RT_CHAT_GEMMA_H
#define RT_CHAT_GEMMA_H

#include <stddef.h>

#include "core/err.h"

/* The prompt Gemma 3's chat template (tokenizer.chat_template of the
 * gemma-3 instruct files) renders with add_generation_prompt for the
 * conversation roles[i], contents[i]: bos (its text, "" when the model has
 * none); an optional first "system" message becomes the first turn's
 * prefix (its content + "\n\n"); then turns that alternate user (even
 * positions) and non-user (odd; "assistant" is written "model"), each
 * "<start_of_turn>ROLE\n" + content stripped of surrounding whitespace +
 * "<end_of_turn>\n"; then "<start_of_turn>model\n". NUL-terminated into
 * out; its length, SW_ERANGE when cap is too small, SW_EINVAL (naming the
 * message, its role and what was expected) when the roles do not alternate
 * as the template requires (it raises there). */
int rt_chat_gemma(const char *bos, const char *const *roles, const char *const *contents, int n_msgs,
                  char *out, size_t cap, sw_err *err);

#endif
