/*
 * asn_text.c — text inputs of the ASN compiler (see asn_collect.h): iptoasn.com TSV and
 * ip-location-db CSV, the format decided per line (a tab makes it TSV). Every bad line stops the
 * compile with "file:line: message", so a partial table is never written.
 */
#include "asn_collect.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/types.h>

#include "tern/common/err.h"
#include "tern/common/file.h"

static char *trim(char *s)
{
    while (*s == ' ')
        s++;
    size_t n = strlen(s);
    while (n && s[n - 1] == ' ')
        s[--n] = '\0';
    return s;
}

/* Split a CSV line in place. Quoted fields may contain commas and "" escapes. Returns the field
 * count (up to max; one more is reported as max + 1) or -1 on an unterminated quote. */
static int split_csv(char *line, char **f, int max)
{
    int n = 0;
    char *p = line;
    for (;;) {
        while (*p == ' ')
            p++;
        char *start = p, *w = p;
        if (*p == '"') {
            start = w = ++p;
            for (;;) {
                if (*p == '\0')
                    return -1;
                if (*p == '"') {
                    if (p[1] == '"') {
                        *w++ = '"';
                        p += 2;
                        continue;
                    }
                    p++;
                    break;
                }
                *w++ = *p++;
            }
            while (*p == ' ')
                p++;
            if (*p != ',' && *p != '\0')
                return -1;
        } else {
            while (*p != ',' && *p != '\0')
                p++;
            w = p;
            while (w > start && w[-1] == ' ')
                w--;
        }
        char sep = *p;
        *w = '\0';
        if (n < max)
            f[n] = start;
        n++;
        if (sep == '\0')
            break;
        p++;
    }
    if (n > max)
        return max + 1;
    return n;
}

static int split_tsv(char *line, char **f, int max)
{
    int n = 0;
    char *p = line;
    for (;;) {
        char *tab = strchr(p, '\t');
        if (n < max)
            f[n] = p;
        n++;
        if (!tab)
            break;
        *tab = '\0';
        p = tab + 1;
    }
    if (n > max)
        return max + 1;
    for (int i = 0; i < n; i++)
        f[i] = trim(f[i]);
    return n;
}

/* 0 = v4, 1 = v6, -1 invalid */
static int parse_addr(const char *s, u128 *out)
{
    if (strchr(s, ':')) {
        uint8_t b[16];
        if (inet_pton(AF_INET6, s, b) != 1)
            return -1;
        u128 v = 0;
        for (int i = 0; i < 16; i++)
            v = (v << 8) | b[i];
        *out = v;
        return 1;
    }
    struct in_addr a;
    if (inet_pton(AF_INET, s, &a) != 1)
        return -1;
    *out = ntohl(a.s_addr);
    return 0;
}

static bool parse_asn(const char *s, uint32_t *out)
{
    if ((s[0] == 'A' || s[0] == 'a') && (s[1] == 'S' || s[1] == 's'))
        s += 2;
    if (*s == '\0')
        return false;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
        if (v > UINT32_MAX)
            return false;
    }
    *out = (uint32_t)v;
    return true;
}

/* The fields of one line, split in place: start, end, asn, and country/name (NULL when absent). */
struct fields {
    char *f[5];
    const char *cc, *name;
};

/* Split a TSV (any tab) or CSV line; TERN_ESYNTAX with "file:line: ..." on a wrong field count. */
static int split_line(char *line, struct fields *fl, const char *file, size_t lineno, char *err,
                      size_t errlen)
{
    int nf;
    if (strchr(line, '\t')) {
        nf = split_tsv(line, fl->f, 5);
        if (nf < 3 || nf > 5) {
            tern_set_err(err, errlen, "%s:%zu: expected 3 to 5 tab-separated fields, got %s%d",
                         file, lineno, nf > 5 ? "more than " : "", nf > 5 ? 5 : nf);
            return TERN_ESYNTAX;
        }
        fl->cc = nf > 3 ? fl->f[3] : NULL;
        fl->name = nf > 4 ? fl->f[4] : NULL;
        return 0;
    }
    nf = split_csv(line, fl->f, 4);
    if (nf < 0) {
        tern_set_err(err, errlen, "%s:%zu: unterminated or misplaced quote", file, lineno);
        return TERN_ESYNTAX;
    }
    if (nf != 4) {
        tern_set_err(err, errlen, "%s:%zu: expected 4 comma-separated fields, got %s%d", file,
                     lineno, nf > 4 ? "more than " : "", nf > 4 ? 4 : nf);
        return TERN_ESYNTAX;
    }
    fl->cc = NULL;
    fl->name = fl->f[3];
    return 0;
}

static int read_line(asn_collect_t *c, char *line, const char *file, size_t lineno, char *err,
                     size_t errlen)
{
    struct fields fl = {.cc = NULL};
    int rc = split_line(line, &fl, file, lineno, err, errlen);
    if (rc)
        return rc;
    char **f = fl.f;
    const char *cc = fl.cc;
    u128 start, end;
    uint32_t asn;
    int fam = parse_addr(f[0], &start);
    if (fam < 0) {
        tern_set_err(err, errlen, "%s:%zu: invalid start address '%s'", file, lineno, f[0]);
        return TERN_ESYNTAX;
    }
    int fam2 = parse_addr(f[1], &end);
    if (fam2 < 0) {
        tern_set_err(err, errlen, "%s:%zu: invalid end address '%s'", file, lineno, f[1]);
        return TERN_ESYNTAX;
    }
    if (fam != fam2) {
        tern_set_err(err, errlen, "%s:%zu: start and end are of different address families", file,
                     lineno);
        return TERN_ESYNTAX;
    }
    if (start > end) {
        tern_set_err(err, errlen, "%s:%zu: start %s > end %s", file, lineno, f[0], f[1]);
        return TERN_ESYNTAX;
    }
    if (!parse_asn(f[2], &asn)) {
        tern_set_err(err, errlen, "%s:%zu: bad ASN '%s'", file, lineno, f[2]);
        return TERN_ESYNTAX;
    }
    if (cc && strcmp(cc, "None") == 0)
        cc = NULL; /* iptoasn writes "None" for unrouted space */
    rc = asn_collect_add(c, fam == 1, start, end, asn, cc, cc ? strlen(cc) : 0, fl.name,
                         fl.name ? strlen(fl.name) : 0);
    if (rc)
        tern_set_err(err, errlen, "%s:%zu: out of memory", file, lineno);
    return rc;
}

int asn_text_read(asn_collect_t *c, const char *path, asn_compile_stats_t *st, char *err,
                  size_t errlen)
{
    struct stat sb;
    int fd = tern_open_regular(path, 0, &sb, err, errlen);
    if (fd < 0)
        return fd;
    FILE *fp = fdopen(fd, "r");
    if (!fp) {
        int e = errno;
        close(fd);
        tern_set_err(err, errlen, "%s: %s", path, strerror(e));
        return -e;
    }
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    ssize_t len;
    int rc = 0;
    while ((len = getline(&line, &cap, fp)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if ((size_t)len != strlen(line)) {
            tern_set_err(err, errlen, "%s:%zu: NUL byte in line", path, lineno);
            rc = TERN_ESYNTAX;
            break;
        }
        char *p = line;
        while (*p == ' ')
            p++;
        if (*p == '\0' || *p == '#')
            continue;
        if ((rc = read_line(c, p, path, lineno, err, errlen)))
            break;
        st->lines++;
    }
    if (rc == 0 && ferror(fp)) {
        rc = TERN_EINVAL;
        tern_set_err(err, errlen, "%s: read error", path);
    }
    free(line);
    fclose(fp);
    return rc;
}
