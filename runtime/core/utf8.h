/* UTF-8 codec shared by the JSON reader and the tokenizer: one strict
 * decoder (Unicode 15 Table 3-7: no overlongs, no surrogates, nothing above
 * U+10FFFF) and one encoder. Not a Unicode library (classes and
 * normalisation live with the tokenizer). */
#ifndef SW_UTF8_H
#define SW_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Validity of UTF-8 at s[0..n), n >= 1: the length of the sequence starting
 * at s (1..4) with its code point in *cp; 0 if s holds a valid but
 * incomplete prefix; -k for an invalid maximal subpart of k bytes. */
int sw_utf8_next(const uint8_t *s, size_t n, uint32_t *cp);

/* Writes cp (at most U+10FFFF; not checked) to out[0..4) and returns the
 * number of bytes written (1..4). */
size_t sw_utf8_put(uint32_t cp, char *out);

#endif
