/*
 * aname_state.c — see aname_state.h. The whole file is read into memory (it is bounded) and
 * parsed line by line in place; any error rejects it all, since a file that is wrong in one place
 * is not to be trusted in the others.
 */
#include "tern/source/aname_state.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tern/common/err.h"
#include "tern/common/file.h"
#include "tern/common/grow.h"
#include "tern/wire/rr.h"
#include "tern/zone/aname_results.h"

#define MAGIC   "tern-aname-state"
#define VERSION "1"
/* A confirmation time past this (the year 36812) is no clock's: a corrupt field. */
#define CONFIRMED_MAX (1LL << 40)

static const char *const state_names[] = {
    [ANAME_OK] = "ok", [ANAME_NODATA] = "nodata", [ANAME_NXDOMAIN] = "nxdomain"};

int aname_state_name_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    return c ? c : (alen > blen) - (alen < blen);
}

static int entry_cmp(const aname_state_entry_t *x, const aname_state_entry_t *y)
{
    int c = aname_state_name_cmp(x->name, x->len, y->name, y->len);
    return c ? c : (x->qtype > y->qtype) - (x->qtype < y->qtype);
}

static size_t addr_size(uint16_t qtype)
{
    return qtype == WIRE_T_A ? 4 : 16;
}

static int entry_qsort_cmp(const void *x, const void *y)
{
    return entry_cmp(x, y);
}

void aname_state_format(tern_buf_t *b, aname_state_entry_t *e, size_t n)
{
    qsort(e, n, sizeof(*e), entry_qsort_cmp);
    tern_buf_printf(b,
                    "# ANAME results of ternd's resolver: written by ternd, read at its start\n"
                    "%s %s\n",
                    MAGIC, VERSION);
    for (size_t i = 0; i < n; i++) {
        char name[DNAME_KEY_MAX], addr[INET6_ADDRSTRLEN];
        (void)dname_to_str(e[i].name, name, sizeof(name));
        tern_buf_printf(b, "%s %s %s %u %lld", name, e[i].qtype == WIRE_T_A ? "A" : "AAAA",
                        state_names[e[i].state], e[i].ttl, (long long)e[i].confirmed);
        size_t rl = addr_size(e[i].qtype);
        for (size_t off = 0; off + 2 + rl <= e[i].rdata_len; off += 2 + rl) {
            inet_ntop(rl == 4 ? AF_INET : AF_INET6, e[i].rdata + off + 2, addr, sizeof(addr));
            tern_buf_printf(b, " %s", addr);
        }
        tern_buf_append(b, "\n", 1);
    }
    tern_buf_printf(b, "end %zu\n", n);
}

void aname_state_free(aname_state_entry_t *e, size_t n)
{
    if (!e)
        return;
    for (size_t i = 0; i < n; i++)
        free(e[i].rdata);
    free(e);
}

/* A decimal number of digits only, at most max. */
static bool parse_num(const char *s, long long max, long long *out)
{
    if (!*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 18)
        return false;
    long long v = strtoll(s, NULL, 10);
    if (v > max)
        return false;
    *out = v;
    return true;
}

/* The space-separated fields of line (changed in place) into f, at most max; their count. */
static size_t split(char *line, char **f, size_t max)
{
    size_t n = 0;
    char *save = NULL;
    for (char *t = strtok_r(line, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
        if (n == max)
            return max + 1;
        f[n++] = t;
    }
    return n;
}

/* Fields beyond the five fixed ones: addresses, at most as many as an RRset holds. */
#define FIELDS_MAX (5 + UINT16_MAX)

/* One entry line's fields into *e (rdata malloc'd). 0, or a negative code with *why set. */
static int parse_entry(char **f, size_t nf, aname_state_entry_t *e, const char **why)
{
    memset(e, 0, sizeof(*e));
    if (nf < 5) {
        *why = "want: name type state ttl confirmed [address ...]";
        return TERN_ESYNTAX;
    }
    uint8_t wire[DNAME_MAXLEN];
    if (dname_from_str(f[0], strlen(f[0]), false, wire, why) < 0)
        return TERN_ESYNTAX;
    e->len = (uint8_t)dname_lower(e->name, wire);
    if (strcmp(f[1], "A") == 0)
        e->qtype = WIRE_T_A;
    else if (strcmp(f[1], "AAAA") == 0)
        e->qtype = WIRE_T_AAAA;
    else {
        *why = "the type is not A or AAAA";
        return TERN_ESYNTAX;
    }
    size_t st = 0;
    while (st < TERN_ARRAY_SIZE(state_names) && (!state_names[st] || strcmp(f[2], state_names[st])))
        st++;
    if (st == TERN_ARRAY_SIZE(state_names)) {
        *why = "the state is not ok, nodata or nxdomain";
        return TERN_ESYNTAX;
    }
    e->state = (uint8_t)st;
    long long ttl, confirmed;
    if (!parse_num(f[3], INT32_MAX, &ttl)) {
        *why = "the TTL is not a number of 0..2147483647";
        return TERN_ESYNTAX;
    }
    if (!parse_num(f[4], CONFIRMED_MAX, &confirmed) || confirmed == 0) {
        *why = "the confirmation time is not a Unix time";
        return TERN_ESYNTAX;
    }
    e->ttl = (uint32_t)ttl;
    e->confirmed = confirmed;
    size_t count = nf - 5, rl = addr_size(e->qtype);
    if ((e->state == ANAME_OK) != (count > 0)) {
        *why = e->state == ANAME_OK ? "ok without an address" : "addresses beside nodata/nxdomain";
        return TERN_ESYNTAX;
    }
    if (!count)
        return 0;
    if (!(e->rdata = malloc(count * (2 + rl)))) {
        *why = "out of memory";
        return TERN_ENOMEM;
    }
    for (size_t i = 0; i < count; i++) {
        uint8_t *w = e->rdata + i * (2 + rl);
        w[0] = 0;
        w[1] = (uint8_t)rl;
        if (inet_pton(rl == 4 ? AF_INET : AF_INET6, f[5 + i], w + 2) != 1) {
            *why = rl == 4 ? "not an IPv4 address" : "not an IPv6 address";
            free(e->rdata);
            e->rdata = NULL;
            return TERN_ESYNTAX;
        }
    }
    e->count = (uint16_t)count;
    e->rdata_len = (uint32_t)(count * (2 + rl));
    return 0;
}

/* Parse text (len bytes, NUL-terminated, changed in place). See aname_state_read(). */
static int parse(char *text, size_t len, const char *path, aname_state_entry_t **out, size_t *n,
                 char *err, size_t errlen)
{
    aname_state_entry_t *v = NULL;
    size_t nv = 0, cap = 0, lineno = 0;
    char **f = malloc(FIELDS_MAX * sizeof(*f));
    const char *why = NULL;
    int rc = TERN_ESYNTAX;
    enum { HEADER, ENTRIES, END } where = HEADER;
    if (!f) {
        why = "out of memory";
        rc = TERN_ENOMEM;
        goto fail;
    }
    if (memchr(text, 0, len)) {
        why = "a NUL byte: not a text file";
        goto fail;
    }
    for (char *line = text; line < text + len;) {
        char *nl = memchr(line, '\n', (size_t)(text + len - line));
        lineno++;
        if (!nl) {
            why = "the last line has no end: the file is truncated";
            goto fail;
        }
        *nl = 0;
        char *next = nl + 1;
        if (line[0] == '#' || line[0] == 0) {
            line = next;
            continue;
        }
        size_t nf = split(line, f, FIELDS_MAX);
        long long cnt;
        if (nf > FIELDS_MAX) {
            why = "more addresses than an RRset holds";
            goto fail;
        } else if (where == HEADER) {
            if (nf != 2 || strcmp(f[0], MAGIC) != 0) {
                why = "not a tern ANAME state file (want \"" MAGIC " " VERSION "\" first)";
                goto fail;
            }
            if (strcmp(f[1], VERSION) != 0) {
                why = "a version this ternd does not read (it reads " VERSION ")";
                goto fail;
            }
            where = ENTRIES;
        } else if (where == END) {
            why = "data after the end line";
            goto fail;
        } else if (strcmp(f[0], "end") == 0) {
            if (nf != 2 || !parse_num(f[1], INT32_MAX, &cnt) || (size_t)cnt != nv) {
                why = "the end line's count is not the number of entries: the file is damaged";
                goto fail;
            }
            where = END;
        } else {
            if (tern_grow((void **)&v, &cap, nv + 1, sizeof(*v)) < 0) {
                why = "out of memory";
                rc = TERN_ENOMEM;
                goto fail;
            }
            if ((rc = parse_entry(f, nf, &v[nv], &why)) < 0)
                goto fail;
            nv++;
            rc = TERN_ESYNTAX;
            if (nv > 1 && entry_cmp(&v[nv - 2], &v[nv - 1]) >= 0) {
                why = "out of order or given twice";
                goto fail;
            }
        }
        line = next;
    }
    if (where != END) {
        lineno++;
        why = where == HEADER ? "empty file" : "no end line: the file is truncated";
        goto fail;
    }
    free(f);
    *out = v;
    *n = nv;
    return 0;
fail:
    tern_set_err(err, errlen, "%s: line %zu: %s", path, lineno, why);
    free(f);
    aname_state_free(v, nv);
    return rc;
}

int aname_state_read(const char *path, aname_state_entry_t **out, size_t *n, char *err,
                     size_t errlen)
{
    struct stat st;
    *out = NULL;
    *n = 0;
    int fd = tern_open_regular(path, ANAME_STATE_MAX_BYTES, &st, err, errlen);
    if (fd == TERN_ENOENT) {
        tern_set_err(err, errlen, "%s: no such file", path);
        return TERN_ENOENT;
    }
    if (fd < 0)
        return fd;
    size_t len = (size_t)st.st_size, got = 0;
    char *text = malloc(len + 1);
    int rc = text ? 0 : TERN_ENOMEM;
    while (rc == 0 && got < len) {
        ssize_t r = read(fd, text + got, len - got);
        if (r > 0)
            got += (size_t)r;
        else if (r == 0)
            len = got; /* shrank meanwhile: what is there is parsed (and likely refused) */
        else if (errno != EINTR)
            rc = -errno;
    }
    close(fd);
    if (rc < 0) {
        tern_set_err(err, errlen, "%s: %s", path, tern_strerror(rc));
        free(text);
        return rc;
    }
    text[len] = 0;
    rc = parse(text, len, path, out, n, err, errlen);
    free(text);
    return rc;
}
