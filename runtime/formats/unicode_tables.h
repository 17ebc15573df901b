/* Code point ranges (inclusive, sorted) for the Unicode classes the
 * tokenizer's pre-tokenizer needs: letters (\p{L}), numbers (\p{N}) and
 * White_Space (\s). Data only, generated into unicode_tables.c by
 * tests/tools/gen_unicode_tables.py; the lookup lives in tokenizer.c. */
#ifndef RT_UNICODE_TABLES_H
#define RT_UNICODE_TABLES_H

#include <stdint.h>

extern const uint32_t uni_letter_ranges[][2];
extern const int uni_letter_ranges_n;
extern const uint32_t uni_number_ranges[][2];
extern const int uni_number_ranges_n;
extern const uint32_t uni_space_ranges[][2];
extern const int uni_space_ranges_n;

#endif
