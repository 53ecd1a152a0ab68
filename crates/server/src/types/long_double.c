/* Redis's INCRBYFLOAT and HINCRBYFLOAT arithmetic: `long double`, which Rust does not have.
 * `parse` is Redis 7.0's string2ld and `format` its ld2string(LD_STR_HUMAN), so sums are
 * Redis's to the last digit on the same platform (x87 extended precision on x86-64). */

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Redis's MAX_LONG_DOUBLE_CHARS: longer texts are not floats. */
#define TEXT_LIMIT (5 * 1024)

static int parse(const char *text, size_t len, long double *out) {
    char buf[TEXT_LIMIT];
    char *end;
    if (len == 0 || len >= sizeof(buf)) return 0;
    memcpy(buf, text, len);
    buf[len] = '\0';
    errno = 0;
    long double value = strtold(buf, &end);
    if (isspace((unsigned char)buf[0]) || (size_t)(end - buf) != len ||
        (errno == ERANGE && (value == HUGE_VALL || value == -HUGE_VALL ||
                             fpclassify(value) == FP_ZERO)) ||
        isnan(value))
        return 0;
    *out = value;
    return 1;
}

/* 0 if `text` is not a float Redis accepts, 1 if it is a finite one, 2 if infinite. */
int shale_ld_classify(const char *text, size_t len) {
    long double value;
    if (!parse(text, len, &value)) return 0;
    return isinf(value) ? 2 : 1;
}

/* Writes `current + increment` (a NULL `current` is 0) to `out` as Redis prints it and
 * returns its length; -1 if `current` is no float, -2 if `increment` is none, -3 if the sum
 * is NaN or infinite, -4 if `out` is too short. */
long shale_ld_add(const char *current, size_t current_len, const char *increment,
                  size_t increment_len, char *out, size_t out_len) {
    long double value = 0, delta;
    if (current != NULL && !parse(current, current_len, &value)) return -1;
    if (!parse(increment, increment_len, &delta)) return -2;
    value += delta;
    if (isnan(value) || isinf(value)) return -3;
    int len = snprintf(out, out_len, "%.17Lf", value);
    if (len < 0 || (size_t)len + 1 > out_len) return -4;
    if (memchr(out, '.', (size_t)len) != NULL) {
        while (out[len - 1] == '0') len--;
        if (out[len - 1] == '.') len--;
    }
    if (len == 2 && out[0] == '-' && out[1] == '0') {
        out[0] = '0';
        len = 1;
    }
    return len;
}
