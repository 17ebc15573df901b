/* UTF-8 decoder and encoder (utf8.h). */
#include "utf8.h"

int sw_utf8_next(const uint8_t *s, size_t n, uint32_t *cp)
{
	uint8_t c = s[0];
	int len;
	uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
	uint32_t v;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xC2 && c <= 0xDF) {
		len = 2; v = c & 0x1F;
	} else if (c >= 0xE0 && c <= 0xEF) {
		len = 3; v = c & 0x0F;
		if (c == 0xE0) lo = 0xA0;      /* overlong */
		if (c == 0xED) hi = 0x9F;      /* surrogates */
	} else if (c >= 0xF0 && c <= 0xF4) {
		len = 4; v = c & 0x07;
		if (c == 0xF0) lo = 0x90;      /* overlong */
		if (c == 0xF4) hi = 0x8F;      /* > U+10FFFF */
	} else {
		return -1;
	}
	for (int i = 1; i < len; i++) {
		if ((size_t)i >= n)
			return 0;
		uint8_t b = s[i];
		uint8_t l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
		if (b < l || b > h)
			return -i; /* the maximal subpart ends before b */
		v = (v << 6) | (b & 0x3F);
	}
	*cp = v;
	return len;
}

size_t sw_utf8_put(uint32_t cp, char *o)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xC0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xE0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		o[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	o[0] = (char)(0xF0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	o[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}
