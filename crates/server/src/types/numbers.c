/* Numbers as Redis 7.0 reads and prints them, with the C library it uses: `strtod` for
 * scores and weights (getDoubleFromObject, zslParseRange) and `long double` for timeouts,
 * INCRBYFLOAT and HINCRBYFLOAT (string2ld, ld2string with LD_STR_HUMAN), which Rust does not
 * have. So replies match Redis's on the same platform to the last digit, hex floats included. */

#include <ctype.h>
#include <limits.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Redis's MAX_LONG_DOUBLE_CHARS: longer texts are no long doubles. */
#define TEXT_LIMIT (5 * 1024)

static int parse_long_double(const char *text, size_t len, long double *out) {
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

/* 0 if `text` is not a long double Redis accepts, 1 if it is a finite one, 2 if infinite. */
int shale_ld_classify(const char *text, size_t len) {
    long double value;
    if (!parse_long_double(text, len, &value)) return 0;
    return isinf(value) ? 2 : 1;
}

/* A blocking command's timeout in seconds as Redis's getTimeoutFromObjectOrReply reads it,
 * in whole milliseconds rounded up: 1 and `ms` if it is one, 0 if it is no float, 2 if it is
 * out of range, 3 if it is negative. */
int shale_timeout_ms(const char *text, size_t len, long long *ms) {
    long double seconds;
    if (!parse_long_double(text, len, &seconds)) return 0;
    long double millis = ceill(seconds * 1000.0L);
    if (millis > (long double)LLONG_MAX) return 2;
    if (millis < 0) return 3;
    *ms = (long long)millis;
    return 1;
}

/* Writes `current + increment` (a NULL `current` is 0) to `out` as Redis prints it and
 * returns its length; -1 if `current` is no float, -2 if `increment` is none, -3 if the sum
 * is NaN or infinite, -4 if `out` is too short. */
long shale_ld_add(const char *current, size_t current_len, const char *increment,
                  size_t increment_len, char *out, size_t out_len) {
    long double value = 0, delta;
    if (current != NULL && !parse_long_double(current, current_len, &value)) return -1;
    if (!parse_long_double(increment, increment_len, &delta)) return -2;
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

/* strtod over `text` made NUL-terminated; `end` is set to where it stopped, as an offset. */
static int read_double(const char *text, size_t len, double *value, size_t *end, int *range) {
    char stack[128];
    char *buf = len < sizeof(stack) ? stack : malloc(len + 1);
    char *stop;
    if (buf == NULL) return 0;
    memcpy(buf, text, len);
    buf[len] = '\0';
    errno = 0;
    *value = strtod(buf, &stop);
    *range = errno == ERANGE;
    *end = (size_t)(stop - buf);
    if (buf != stack) free(buf);
    return 1;
}

/* getDoubleFromObject: 1 if all of `text` is a double in strtod's range (inf allowed, NaN
 * and a leading space not). */
int shale_double(const char *text, size_t len, double *out) {
    double value;
    size_t end;
    int range;
    if (len == 0 || isspace((unsigned char)text[0])) return 0;
    if (!read_double(text, len, &value, &end, &range)) return 0;
    if (end != len ||
        (range && (value == HUGE_VAL || value == -HUGE_VAL || fpclassify(value) == FP_ZERO)) ||
        isnan(value))
        return 0;
    *out = value;
    return 1;
}

/* strtod over `text` up to its first NUL, as C code reads a Redis string: 1 if that part is
 * all one number. An empty text reads as 0. */
static int read_to_nul(const char *text, size_t len, double *value, int *range) {
    size_t end;
    const char *nul = len == 0 ? NULL : memchr(text, '\0', len);
    size_t upto = nul != NULL ? (size_t)(nul - text) : len;
    if (upto == 0) {
        *value = 0;
        *range = 0;
        return 1;
    }
    return read_double(text, upto, value, &end, range) && end == upto;
}

/* zslParseRange's bound: strtod up to the first NUL, refusing only NaN and text after the
 * number, so leading spaces are skipped and an empty bound (which strtod reads as 0) is 0. */
int shale_range_double(const char *text, size_t len, double *out) {
    double value;
    int range;
    if (!read_to_nul(text, len, &value, &range) || isnan(value)) return 0;
    *out = value;
    return 1;
}

/* sortCommand's score: strtod up to the first NUL, refusing NaN, text after the number and a
 * number out of strtod's range; leading spaces are skipped and an empty text is 0. */
int shale_sort_double(const char *text, size_t len, double *out) {
    double value;
    int range;
    if (!read_to_nul(text, len, &value, &range) || range || isnan(value)) return 0;
    *out = value;
    return 1;
}

/* A double as Redis's DEBUG DIGEST prints a score: "%.17g". */
void shale_format_g17(double value, char *out, size_t cap) {
    snprintf(out, cap, "%.17g", value);
}

/* `value` as Redis's addReplyHumanLongDouble prints a double it is given (GEOPOS): promoted to
 * long double, `%.17Lf`, trailing zeros and point trimmed, and -0 as 0. */
void shale_format_human(double value, char *out, size_t cap) {
    int len = snprintf(out, cap, "%.17Lf", (long double)value);
    if (len < 0 || (size_t)len >= cap) {
        out[0] = '\0';
        return;
    }
    if (strchr(out, '.') != NULL) {
        while (out[len - 1] == '0') len--;
        if (out[len - 1] == '.') len--;
    }
    if (len == 2 && out[0] == '-' && out[1] == '0') {
        out[0] = '0';
        len = 1;
    }
    out[len] = '\0';
}

/* `value` as C's `%f` prints it, as Redis's error messages quote coordinates. */
void shale_format_f(double value, char *out, size_t cap) {
    snprintf(out, cap, "%f", value);
}
