/*
 * dnssec_kasp_state.c — see dnssec_kasp.h: the state-file text (the format is documented there),
 * written, parsed strictly into a fresh state (so a bad text never touches a live one), saved
 * atomically and loaded.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnssec_kasp_int.h"
#include "tern/common/buf.h"
#include "tern/common/err.h"
#include "tern/common/file.h"
#include "tern/dnssec/dnssec_key.h"

/* The format's version: a reader refuses any other (a newer tern's file is not guessed at). */
#define KASP_MAGIC "tern-kasp 1"
/* A state file is a few KiB (32 keys of ~400 bytes); more is not ours. */
#define KASP_FILE_MAX (1u << 20)

const char *kasp_id_problem(const char *id)
{
    size_t n = strlen(id);
    if (n == 0)
        return "empty";
    if (n > DNSSEC_KASP_ID_MAX)
        return "longer than 255 characters";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)id[i];
        if (c <= ' ' || c == 0x7f)
            return "has a blank or control character";
        if (c == '=')
            return "has '='";
    }
    return NULL;
}

/* The timestamps of a key, in file order. */
static const struct {
    const char *name;
    size_t off;
} TIMES[] = {
    {"created", offsetof(dnssec_kasp_key_t, created)},
    {"pre_active", offsetof(dnssec_kasp_key_t, pre_active)},
    {"publish", offsetof(dnssec_kasp_key_t, publish)},
    {"ready", offsetof(dnssec_kasp_key_t, ready)},
    {"active", offsetof(dnssec_kasp_key_t, active)},
    {"retire", offsetof(dnssec_kasp_key_t, retire)},
    {"post_active", offsetof(dnssec_kasp_key_t, post_active)},
    {"remove", offsetof(dnssec_kasp_key_t, remove)},
    {"ds_submitted", offsetof(dnssec_kasp_key_t, ds_submitted)},
    {"ds_seen", offsetof(dnssec_kasp_key_t, ds_seen)},
};
#define NTIMES TERN_ARRAY_SIZE(TIMES)

static int64_t *key_time(dnssec_kasp_key_t *k, size_t i)
{
    return (int64_t *)((char *)k + TIMES[i].off);
}

static const char *const ROLES[] = {
    [DNSSEC_KASP_KSK] = "ksk", [DNSSEC_KASP_ZSK] = "zsk", [DNSSEC_KASP_CSK] = "csk"};

char *dnssec_kasp_to_text(const dnssec_kasp_t *st)
{
    tern_buf_t b;
    tern_buf_init(&b, 0);
    tern_buf_printf(&b, "%s\nzone unsign=%lld ds_gone=%lld roll_ksk=%d roll_zsk=%d\n", KASP_MAGIC,
                    (long long)st->unsign, (long long)st->ds_gone, st->roll_ksk, st->roll_zsk);
    for (size_t i = 0; i < st->nkeys; i++) {
        dnssec_kasp_key_t k = st->keys[i];
        tern_buf_printf(&b, "key id=%s tag=%u alg=%u role=%s", k.id, k.tag, k.alg, ROLES[k.role]);
        for (size_t t = 0; t < NTIMES; t++)
            tern_buf_printf(&b, " %s=%lld", TIMES[t].name, (long long)*key_time(&k, t));
        tern_buf_printf(&b, "\n");
    }
    tern_buf_printf(&b, "end keys=%zu\n", st->nkeys);
    if (b.failed) {
        tern_buf_free(&b);
        return NULL;
    }
    return b.p;
}

/* ---- parsing -------------------------------------------------------------------------------- */

typedef struct parser {
    const char *where;
    size_t line;
    char *err;
    size_t errlen;
} parser_t;

static int bad(parser_t *p, const char *fmt, ...) TERN_PRINTF(2, 3);
static int bad(parser_t *p, const char *fmt, ...)
{
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    tern_set_err(p->err, p->errlen, "%s:%zu: %s", p->where, p->line, what);
    return TERN_ESYNTAX;
}

/* A decimal in [lo, hi], nothing else. */
static bool parse_num(const char *s, long long lo, long long hi, long long *v)
{
    if (*s == '\0' || (*s == '0' && s[1] != '\0'))
        return false;
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || *end != '\0' || x < lo || x > hi || *s == '+' || *s == ' ')
        return false;
    *v = x;
    return true;
}

/* Split a record's fields ("name=value" separated by single spaces) into names[] and vals[]
 * (in place), at most max of them. */
static int split_fields(parser_t *p, char *s, char **names, char **vals, size_t max, size_t *n)
{
    *n = 0;
    while (*s) {
        char *f = s;
        char *sp = strchr(s, ' ');
        if (sp) {
            *sp = '\0';
            s = sp + 1;
            if (*s == '\0')
                return bad(p, "a blank at the end of the line");
        } else {
            s += strlen(s);
        }
        char *eq = strchr(f, '=');
        if (!eq || eq == f)
            return bad(p, "field \"%.40s\" is not name=value", f);
        if (*n == max)
            return bad(p, "too many fields");
        *eq = '\0';
        for (size_t i = 0; i < *n; i++)
            if (strcmp(names[i], f) == 0)
                return bad(p, "field %s is given twice", f);
        names[*n] = f;
        vals[(*n)++] = eq + 1;
    }
    return 0;
}

static int parse_zone(parser_t *p, char *rest, dnssec_kasp_t *st)
{
    char *names[4], *vals[4];
    size_t n;
    int rc = split_fields(p, rest, names, vals, 4, &n);
    if (rc < 0)
        return rc;
    const char *want[4] = {"unsign", "ds_gone", "roll_ksk", "roll_zsk"};
    long long v[4];
    for (size_t w = 0; w < 4; w++) {
        size_t i = 0;
        while (i < n && strcmp(names[i], want[w]) != 0)
            i++;
        if (i == n)
            return bad(p, "zone: field %s is missing", want[w]);
        if (!parse_num(vals[i], 0, w < 2 ? KASP_TIME_MAX : 1, &v[w]))
            return bad(p, "zone: %s=%.40s is not a valid value", want[w], vals[i]);
    }
    if (n != 4)
        return bad(p, "zone: an unknown field");
    if (v[1] && !v[0])
        return bad(p, "zone: ds_gone is set but unsign is not");
    st->unsign = v[0];
    st->ds_gone = v[1];
    st->roll_ksk = v[2];
    st->roll_zsk = v[3];
    return 0;
}

/* The order of events a machine could have written: each needs the one before. */
static int check_key_order(parser_t *p, const dnssec_kasp_key_t *k)
{
    const char *id = k->id;
    if (k->created == 0)
        return bad(p, "key %s: created is 0", id);
    for (size_t t = 1; t < NTIMES; t++) {
        int64_t v = *key_time((dnssec_kasp_key_t *)k, t);
        if (v && v < k->created)
            return bad(p, "key %s: %s is before created", id, TIMES[t].name);
    }
    if (k->ready && (!k->publish || k->ready < k->publish))
        return bad(p, "key %s: ready without an earlier publish", id);
    if (k->active && (!k->ready || k->active < k->ready))
        return bad(p, "key %s: active without an earlier ready", id);
    if ((k->retire || k->post_active) && !k->publish)
        return bad(p, "key %s: retired or post-active but never published", id);
    if (k->role == DNSSEC_KASP_ZSK && (k->ds_seen || k->ds_submitted))
        return bad(p, "key %s: a ZSK has no DS", id);
    return 0;
}

static int parse_key(parser_t *p, char *rest, dnssec_kasp_key_t *k)
{
    enum { NF = 4 + NTIMES };
    /* One slot more than the fields: an extra one is reported by its name below. */
    char *names[NF + 1], *vals[NF + 1];
    size_t n;
    int rc = split_fields(p, rest, names, vals, NF + 1, &n);
    if (rc < 0)
        return rc;
    memset(k, 0, sizeof(*k));
    bool seen[NF] = {false};
    for (size_t i = 0; i < n; i++) {
        const char *f = names[i], *v = vals[i];
        long long x;
        size_t slot;
        if (strcmp(f, "id") == 0) {
            const char *why = kasp_id_problem(v);
            if (why)
                return bad(p, "key id: %s", why);
            snprintf(k->id, sizeof(k->id), "%s", v);
            slot = 0;
        } else if (strcmp(f, "tag") == 0) {
            if (!parse_num(v, 0, 65535, &x))
                return bad(p, "key: tag=%.40s is not 0..65535", v);
            k->tag = (uint16_t)x;
            slot = 1;
        } else if (strcmp(f, "alg") == 0) {
            if (!parse_num(v, 0, 255, &x) ||
                (x != DNSSEC_ALG_RSASHA256 && x != DNSSEC_ALG_ECDSAP256SHA256 &&
                 x != DNSSEC_ALG_ED25519))
                return bad(p, "key: alg=%.40s is not 8, 13 or 15", v);
            k->alg = (uint8_t)x;
            slot = 2;
        } else if (strcmp(f, "role") == 0) {
            size_t r = 0;
            while (r < TERN_ARRAY_SIZE(ROLES) && strcmp(v, ROLES[r]) != 0)
                r++;
            if (r == TERN_ARRAY_SIZE(ROLES))
                return bad(p, "key: role=%.40s is not ksk, zsk or csk", v);
            k->role = (dnssec_kasp_role_t)r;
            slot = 3;
        } else {
            size_t t = 0;
            while (t < NTIMES && strcmp(f, TIMES[t].name) != 0)
                t++;
            if (t == NTIMES)
                return bad(p, "key: unknown field %.40s", f);
            if (!parse_num(v, 0, KASP_TIME_MAX, &x))
                return bad(p, "key: %s=%.40s is not a time (Unix seconds)", f, v);
            *key_time(k, t) = x;
            slot = 4 + t;
        }
        seen[slot] = true;
    }
    static const char *const fixed[4] = {"id", "tag", "alg", "role"};
    for (size_t s = 0; s < NF; s++)
        if (!seen[s])
            return bad(p, "key: field %s is missing", s < 4 ? fixed[s] : TIMES[s - 4].name);
    return check_key_order(p, k);
}

/* Parse text's records into st; p->line tracks the line for messages. */
static int parse_lines(parser_t *p, char *text, dnssec_kasp_t *st)
{
    bool ended = false;
    char *s = text;
    while (*s) {
        p->line++;
        char *nl = strchr(s, '\n');
        if (!nl)
            return bad(p, "the last line has no newline: the file is truncated");
        *nl = '\0';
        char *line = s;
        s = nl + 1;
        if (p->line == 1) {
            if (strcmp(line, KASP_MAGIC) != 0)
                return bad(p, "not a tern key-state file of version 1 (first line \"%.40s\")",
                           line);
            continue;
        }
        if (ended)
            return bad(p, "a line after end");
        int rc;
        if (strncmp(line, "zone ", 5) == 0) {
            if (p->line != 2)
                return bad(p, "the zone line must be line 2");
            rc = parse_zone(p, line + 5, st);
        } else if (p->line == 2) {
            return bad(p, "line 2 must be the zone line");
        } else if (strncmp(line, "key ", 4) == 0) {
            if (st->nkeys == DNSSEC_KASP_KEYS_MAX) {
                bad(p, "more than %d keys", DNSSEC_KASP_KEYS_MAX);
                return TERN_ELIMIT;
            }
            dnssec_kasp_key_t *k = &st->keys[st->nkeys];
            rc = parse_key(p, line + 4, k);
            for (size_t i = 0; rc == 0 && i < st->nkeys; i++)
                if (strcmp(st->keys[i].id, k->id) == 0)
                    rc = bad(p, "key id %s is given twice", k->id);
            st->nkeys += rc == 0;
        } else if (strncmp(line, "end keys=", 9) == 0) {
            long long n;
            if (!parse_num(line + 9, 0, DNSSEC_KASP_KEYS_MAX, &n) || (size_t)n != st->nkeys)
                return bad(p, "end says %s keys, the file has a different count", line + 9);
            ended = true;
            rc = 0;
        } else {
            return bad(p, "unknown record \"%.40s\"", line);
        }
        if (rc < 0)
            return rc;
    }
    if (p->line == 0)
        return bad(p, "empty");
    if (!ended)
        return bad(p, "no end line: the file is truncated");
    return 0;
}

int dnssec_kasp_from_text(const char *text, const char *where, dnssec_kasp_t **out, char *err,
                          size_t errlen)
{
    *out = NULL;
    parser_t p = {where, 0, err, errlen};
    char *copy = strdup(text);
    dnssec_kasp_t *st = dnssec_kasp_new();
    int rc = TERN_ENOMEM;
    if (!copy || !st) {
        tern_set_err(err, errlen, "%s: out of memory", where);
        goto fail;
    }
    rc = parse_lines(&p, copy, st);
    if (rc < 0)
        goto fail;
    free(copy);
    *out = st;
    return 0;
fail:
    free(copy);
    dnssec_kasp_free(st);
    return rc;
}

int dnssec_kasp_save(const dnssec_kasp_t *st, const char *path, char *err, size_t errlen)
{
    char *text = dnssec_kasp_to_text(st);
    if (!text) {
        tern_set_err(err, errlen, "%s: out of memory", path);
        return TERN_ENOMEM;
    }
    /* 0600: the file names the zone's keys; nothing secret, but nobody else's business. */
    int rc = tern_file_replace(path, text, strlen(text), 0600, err, errlen);
    free(text);
    return rc;
}

int dnssec_kasp_load(const char *path, dnssec_kasp_t **out, char *err, size_t errlen)
{
    *out = NULL;
    char *text = NULL;
    int rc = tern_file_read_text(path, KASP_FILE_MAX, false, &text, err, errlen);
    if (rc < 0)
        return rc;
    rc = dnssec_kasp_from_text(text, path, out, err, errlen);
    free(text);
    return rc;
}
