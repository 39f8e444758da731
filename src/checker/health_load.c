/*
 * health_load.c — an endpoint's load from a check's response (see health_load.h).
 *
 * Decisions, and why:
 *   - strtod() reads the number, but only after the text is checked to be decimal: strtod also
 *     takes hex, "nan", "inf" and a sign, none of which is a load an operator means.
 *   - The JSON path walks objects only: load documents put the figure under a key or two
 *     ("stats.load"); an index syntax would be a language to parse for no known use.
 */
#include "health_load.h"

#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tern/common/err.h"
#include "tern/health/health.h"

/* The longest number text taken: 64 characters hold any load with all its decimals. */
#define NUM_MAX 64

int health_load_from_double(double x, uint32_t *milli)
{
    if (!isfinite(x) || x < 0)
        return TERN_EINVAL;
    double m = round(x * 1000.0);
    *milli = m >= (double)(HEALTH_LOAD_UNKNOWN - 1) ? HEALTH_LOAD_UNKNOWN - 1 : (uint32_t)m;
    return 0;
}

int health_load_parse_text(const char *s, size_t len, uint32_t *milli)
{
    while (len && (s[0] == ' ' || s[0] == '\t'))
        s++, len--;
    while (len &&
           (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\r' || s[len - 1] == '\n'))
        len--;
    if (len == 0 || len >= NUM_MAX || !(isdigit((unsigned char)s[0]) || s[0] == '.'))
        return TERN_EINVAL;
    char buf[NUM_MAX];
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        bool ok = isdigit((unsigned char)ch) || ch == '.' || ch == 'e' || ch == 'E' ||
                  ((ch == '+' || ch == '-') && i > 0 && (s[i - 1] == 'e' || s[i - 1] == 'E'));
        if (!ok)
            return TERN_EINVAL;
        buf[i] = ch;
    }
    buf[len] = '\0';
    char *end;
    double x = strtod(buf, &end);
    if (end != buf + len)
        return TERN_EINVAL;
    return health_load_from_double(x, milli);
}

int health_load_parse_json(const char *body, size_t len, const char *path, uint32_t *milli)
{
    json_error_t err;
    json_t *root = json_loadb(body, len, 0, &err);
    if (!root)
        return TERN_EINVAL;
    json_t *x = root;
    const char *p = path;
    int rc = TERN_EINVAL;
    while (x && *p) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        x = json_is_object(x) ? json_object_getn(x, p, n) : NULL;
        p += n + (dot != NULL);
    }
    if (json_is_integer(x) || json_is_real(x))
        rc = health_load_from_double(json_number_value(x), milli);
    else if (json_is_string(x))
        rc = health_load_parse_text(json_string_value(x), json_string_length(x), milli);
    json_decref(root);
    return rc;
}

int health_load_header(const char *p, size_t len, const char *name, uint32_t *milli)
{
    size_t n = strlen(name);
    if (len <= n || p[n] != ':' || strncasecmp(p, name, n) != 0)
        return 0;
    return health_load_parse_text(p + n + 1, len - n - 1, milli) < 0 ? TERN_EINVAL : 1;
}
