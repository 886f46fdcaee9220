/*
 * api_utf8.c - see api_utf8.h.
 */
#include "api_utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t api_utf8_seq(const uint8_t *s, size_t n)
{
    if (n == 0)
        return 0;
    size_t len = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3
                               : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || len > n)
        return 0;
    uint32_t cp = len == 1 ? s[0] : s[0] & (0x7Fu >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    static const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

char *api_utf8_repair(const uint8_t *s, size_t n, bool hex, size_t *out_len)
{
    /* Either replacement is at most 4 bytes for 1 byte in. */
    if (n > (SIZE_MAX - 1) / 4)
        return NULL;
    char *out = malloc(4 * n + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t k = api_utf8_seq(s + i, n - i);
        if (k) {
            memcpy(out + o, s + i, k);
            o += k;
            i += k;
            continue;
        }
        if (hex)
            o += (size_t)snprintf(out + o, 5, "\\x%02X", s[i]);
        else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
        }
        i++;
    }
    out[o] = 0;
    *out_len = o;
    return out;
}
