/*
 * zone_file.c — RFC 1035 §5 master files through ldns into a zone_builder.
 *
 * ldns parses each record (ldns_rr_new_frm_str: every type it knows, RFC 3597 for the rest), but
 * we split the file into entries ourselves instead of calling ldns_rr_new_frm_fp_l, because that
 * function (ldns 1.8) drops the text of a $INCLUDE line — so the file name is lost —, reports the
 * last line of a multi-line entry rather than its first, and accepts any garbage after $TTL.
 * The entry reader joins parenthesised lines, removes comments outside quotes and keeps the
 * leading blank that means "same owner as before".
 *
 * Default TTL: until a $TTL directive, a record without a TTL gets 3600 s, the ldns and NSD
 * default. We do not use the SOA MINIMUM (the pre-RFC 2308 meaning, which BIND falls back to)
 * because RFC 2308 §4 redefined that field as the negative-caching TTL, and the SOA need not
 * be the first record of the file.
 */
#include "tern/zone/zone_file.h"

#include <ldns/ldns.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tern/common/err.h"
#include "tern/common/log.h"
#include "tern/zone/zone_builder.h"

/* RFC 1035 sets no limit; 8 levels is far beyond real use (BIND and Knot files nest one or two)
 * and stops an include loop early. */
#define ZONE_FILE_INCLUDE_MAX 8

/* An entry joined across parentheses. 64 KiB fits the largest RDATA (65535 bytes) only in
 * binary; presentation text can be ~4x longer (hex, escapes), hence 256 KiB. */
#define ZONE_FILE_ENTRY_MAX (256u << 10)

/* RFC 1035 §3.2.1 / RFC 2181 §8: a TTL is a 31-bit value. */
#define TTL_MAX 0x7fffffffu

/* ldns substitutes its own default (3600) when the default TTL passed is 0, so "$TTL 0" is
 * handed to it as this value and mapped back. An explicit TTL this large is out of range
 * (TTL_MAX) anyway. */
#define TTL_ZERO_SENTINEL UINT32_MAX

#define DEFAULT_TTL 3600u

struct zf_parser {
    zone_builder_t *b;
    uint32_t default_ttl;
    ldns_rdf *prev;     /* owner of the previous record, for entries with a blank owner */
    ldns_buffer *rdbuf; /* RDATA scratch */
    char *line;         /* getline buffer */
    size_t line_cap;
    char *entry; /* the joined entry */
    size_t entry_len, entry_cap;
    char *err;
    size_t errlen;
    zone_file_seen_fn seen; /* optional: told of every file opened */
    void *seen_ctx;
};

struct src {
    const char *path;
    FILE *fp;
    unsigned line;  /* lines read so far */
    unsigned first; /* first line of the current entry */
};

static int entry_put(struct zf_parser *L, char c)
{
    if (L->entry_len + 2 > L->entry_cap) {
        size_t cap = L->entry_cap ? L->entry_cap * 2 : 256;
        char *n = realloc(L->entry, cap);
        if (!n)
            return TERN_ENOMEM;
        L->entry = n;
        L->entry_cap = cap;
    }
    L->entry[L->entry_len++] = c;
    L->entry[L->entry_len] = 0;
    return 0;
}

/*
 * Read the next entry into L->entry. Returns 1 (entry read, s->first is its first line), 0 at
 * the end of the file, or a negative code with L->err set.
 */
static int read_entry(struct zf_parser *L, struct src *s)
{
    int depth = 0;
    bool content = false;
    L->entry_len = 0;
    if (L->entry)
        L->entry[0] = 0;
    for (;;) {
        ssize_t got = getline(&L->line, &L->line_cap, s->fp);
        if (got < 0) {
            if (ferror(s->fp)) {
                snprintf(L->err, L->errlen, "%s:%u: read error", s->path, s->line);
                return TERN_EINVAL;
            }
            if (depth > 0) {
                snprintf(L->err, L->errlen, "%s:%u: unbalanced '(' at end of file", s->path,
                         s->first);
                return TERN_ESYNTAX;
            }
            return 0;
        }
        s->line++;
        if (!content) {
            s->first = s->line;
            L->entry_len = 0;
        }
        bool quote = false;
        for (ssize_t i = 0; i < got; i++) {
            char c = L->line[i];
            if (c == '\n' || (c == '\r' && i + 1 < got && L->line[i + 1] == '\n'))
                break;
            if (c == ';' && !quote)
                break;
            if (c == '\\' && i + 1 < got && L->line[i + 1] != '\n') {
                if (entry_put(L, c) < 0 || entry_put(L, L->line[++i]) < 0)
                    goto nomem;
                continue;
            }
            if (c == '"')
                quote = !quote;
            if (!quote && (c == '(' || c == ')')) {
                if (c == '(') {
                    depth++;
                } else if (--depth < 0) {
                    snprintf(L->err, L->errlen, "%s:%u: unbalanced ')'", s->path, s->line);
                    return TERN_ESYNTAX;
                }
                c = ' ';
            }
            if (c != ' ' && c != '\t')
                content = true;
            if (entry_put(L, c) < 0)
                goto nomem;
        }
        if (quote) {
            snprintf(L->err, L->errlen, "%s:%u: unterminated quoted string", s->path, s->line);
            return TERN_ESYNTAX;
        }
        if (L->entry_len > ZONE_FILE_ENTRY_MAX) {
            snprintf(L->err, L->errlen, "%s:%u: entry longer than %u bytes", s->path, s->first,
                     ZONE_FILE_ENTRY_MAX);
            return TERN_ESYNTAX;
        }
        if (depth > 0) {
            if (entry_put(L, ' ') < 0)
                goto nomem;
            continue;
        }
        if (content)
            return 1;
    }
nomem:
    snprintf(L->err, L->errlen, "%s:%u: out of memory", s->path, s->line);
    return TERN_ENOMEM;
}

/* Split the next whitespace-separated token off *p (in place). NULL if none. */
static char *next_token(char **p)
{
    char *t = *p;
    while (*t == ' ' || *t == '\t')
        t++;
    if (!*t)
        return NULL;
    char *e = t;
    if (*t == '"') {
        t++;
        e = strchr(t, '"');
        if (!e)
            return NULL;
    } else {
        while (*e && *e != ' ' && *e != '\t')
            e++;
    }
    if (*e)
        *e++ = 0;
    *p = e;
    return t;
}

/* A name argument of a directive: absolute, or relative to origin. NULL if unparsable. */
static ldns_rdf *directive_name(const char *tok, const ldns_rdf *origin)
{
    ldns_rdf *n = ldns_dname_new_frm_str(tok);
    if (n && !ldns_dname_str_absolute(tok) && ldns_dname_cat(n, origin) != LDNS_STATUS_OK) {
        ldns_rdf_deep_free(n);
        n = NULL;
    }
    return n;
}

static int load_file(struct zf_parser *L, const char *path, const ldns_rdf *origin_in,
                     unsigned depth, const char *from, unsigned from_line);

static int do_include(struct zf_parser *L, struct src *s, char *args, const ldns_rdf *origin,
                      unsigned depth)
{
    char *file = next_token(&args);
    char *oname = next_token(&args);
    if (!file || next_token(&args)) {
        snprintf(L->err, L->errlen, "%s:%u: $INCLUDE needs a file name and an optional origin",
                 s->path, s->first);
        return TERN_ESYNTAX;
    }
    if (depth + 1 > ZONE_FILE_INCLUDE_MAX) {
        snprintf(L->err, L->errlen, "%s:%u: $INCLUDE nested more than %d levels", s->path, s->first,
                 ZONE_FILE_INCLUDE_MAX);
        return TERN_ELIMIT;
    }
    /* relative to the directory of the including file */
    char *full = NULL;
    const char *slash = strrchr(s->path, '/');
    if (file[0] != '/' && slash) {
        int dirlen = (int)(slash - s->path);
        if (asprintf(&full, "%.*s/%s", dirlen, s->path, file) < 0)
            full = NULL;
    } else {
        full = strdup(file);
    }
    if (!full) {
        snprintf(L->err, L->errlen, "%s:%u: out of memory", s->path, s->first);
        return TERN_ENOMEM;
    }
    ldns_rdf *inc_origin = NULL;
    if (oname) {
        inc_origin = directive_name(oname, origin);
        if (!inc_origin) {
            snprintf(L->err, L->errlen, "%s:%u: bad origin '%s' in $INCLUDE", s->path, s->first,
                     oname);
            free(full);
            return TERN_ESYNTAX;
        }
    }
    /* RFC 1035 §5.1: whatever the included file does to the origin stays in it */
    int rc = load_file(L, full, inc_origin ? inc_origin : origin, depth + 1, s->path, s->first);
    ldns_rdf_deep_free(inc_origin);
    free(full);
    return rc;
}

/* One directive ($ORIGIN, $TTL, $INCLUDE) in L->entry. *origin may be replaced. */
static int directive(struct zf_parser *L, struct src *s, ldns_rdf **origin, unsigned depth)
{
    char *p = L->entry;
    char *name = next_token(&p);
    if (strcasecmp(name, "$ORIGIN") == 0) {
        char *tok = next_token(&p);
        ldns_rdf *n = tok && !next_token(&p) ? directive_name(tok, *origin) : NULL;
        if (!n) {
            snprintf(L->err, L->errlen, "%s:%u: $ORIGIN needs one domain name", s->path, s->first);
            return TERN_ESYNTAX;
        }
        ldns_rdf_deep_free(*origin);
        *origin = n;
        return 0;
    }
    if (strcasecmp(name, "$TTL") == 0) {
        char *tok = next_token(&p);
        const char *end = NULL;
        uint32_t ttl = tok ? ldns_str2period(tok, &end) : 0;
        if (!tok || end == tok || *end || next_token(&p) || ttl > TTL_MAX) {
            snprintf(L->err, L->errlen, "%s:%u: $TTL needs one TTL (0 to %u, units s/m/h/d/w)",
                     s->path, s->first, TTL_MAX);
            return TERN_ESYNTAX;
        }
        L->default_ttl = ttl;
        return 0;
    }
    if (strcasecmp(name, "$INCLUDE") == 0)
        return do_include(L, s, p, *origin, depth);
    snprintf(L->err, L->errlen, "%s:%u: unknown directive %s", s->path, s->first, name);
    return TERN_ESYNTAX;
}

static int record(struct zf_parser *L, struct src *s, const ldns_rdf *origin)
{
    ldns_rr *rr = NULL;
    uint32_t def = L->default_ttl ? L->default_ttl : TTL_ZERO_SENTINEL;
    int rc;
    ldns_status st = ldns_rr_new_frm_str(&rr, L->entry, def, (ldns_rdf *)origin, &L->prev);
    if (st != LDNS_STATUS_OK) {
        /* show the start of the entry: ldns's messages do not say which field was wrong */
        snprintf(L->err, L->errlen, "%s:%u: %s: '%.60s%s'", s->path, s->first,
                 ldns_get_errorstr_by_id(st), L->entry, strlen(L->entry) > 60 ? "..." : "");
        return TERN_ESYNTAX;
    }
    uint32_t ttl = ldns_rr_ttl(rr);
    if (ttl == TTL_ZERO_SENTINEL)
        ttl = 0;
    if (ttl > TTL_MAX) {
        snprintf(L->err, L->errlen, "%s:%u: TTL %u out of range (at most %u, RFC 2181 section 8)",
                 s->path, s->first, ttl, TTL_MAX);
        rc = TERN_ESYNTAX;
        goto out;
    }
    ldns_buffer_clear(L->rdbuf);
    if (ldns_rr_rdata2buffer_wire(L->rdbuf, rr) != LDNS_STATUS_OK ||
        ldns_buffer_position(L->rdbuf) > UINT16_MAX) {
        snprintf(L->err, L->errlen, "%s:%u: RDATA longer than 65535 bytes", s->path, s->first);
        rc = TERN_ESYNTAX;
        goto out;
    }
    rc = zone_builder_add(L->b, ldns_rdf_data(ldns_rr_owner(rr)), (uint16_t)ldns_rr_get_type(rr),
                          (uint16_t)ldns_rr_get_class(rr), ttl, ldns_buffer_begin(L->rdbuf),
                          (uint16_t)ldns_buffer_position(L->rdbuf), s->path, s->first);
    if (rc == TERN_EOUTZONE) {
        log_warn("%s, skipped", zone_builder_error(L->b));
        rc = 0;
    } else if (rc < 0) {
        snprintf(L->err, L->errlen, "%s", zone_builder_error(L->b));
    }
out:
    ldns_rr_free(rr);
    return rc;
}

static int load_file(struct zf_parser *L, const char *path, const ldns_rdf *origin_in,
                     unsigned depth, const char *from, unsigned from_line)
{
    struct src s = {.path = path};
    ldns_rdf *origin = ldns_rdf_clone(origin_in);
    int rc = TERN_ENOMEM;
    if (!origin) {
        snprintf(L->err, L->errlen, "%s: out of memory", path);
        goto fail;
    }
    s.fp = fopen(path, "r");
    if (!s.fp) {
        rc = -errno;
        if (from)
            snprintf(L->err, L->errlen, "%s:%u: $INCLUDE %s: %s", from, from_line, path,
                     tern_strerror(rc));
        else
            snprintf(L->err, L->errlen, "%s: %s", path, tern_strerror(rc));
        goto fail;
    }
    if (L->seen) {
        struct stat st;
        if (fstat(fileno(s.fp), &st) < 0) {
            rc = -errno;
            snprintf(L->err, L->errlen, "%s: %s", path, tern_strerror(rc));
            goto fail;
        }
        if ((rc = L->seen(L->seen_ctx, path, &st)) < 0) {
            snprintf(L->err, L->errlen, "%s: %s", path, tern_strerror(rc));
            goto fail;
        }
    }
    for (;;) {
        rc = read_entry(L, &s);
        if (rc <= 0)
            break;
        if (L->entry[0] == '$')
            rc = directive(L, &s, &origin, depth);
        else
            rc = record(L, &s, origin);
        if (rc < 0)
            break;
    }
fail:
    if (s.fp)
        fclose(s.fp);
    ldns_rdf_deep_free(origin);
    return rc;
}

int zone_file_load(const char *origin, const char *path, zone_t **out, char *err, size_t errlen)
{
    return zone_file_load_seen(origin, path, NULL, NULL, out, err, errlen);
}

int zone_file_load_seen(const char *origin, const char *path, zone_file_seen_fn seen, void *ctx,
                        zone_t **out, char *err, size_t errlen)
{
    struct zf_parser L = {
        .default_ttl = DEFAULT_TTL, .err = err, .errlen = errlen, .seen = seen, .seen_ctx = ctx};
    ldns_rdf *org = NULL;
    int rc = TERN_ENOMEM;
    *out = NULL;
    if (errlen)
        err[0] = 0;

    /* the zone origin is always absolute, with or without its final dot */
    org = ldns_dname_new_frm_str(origin);
    if (!org || ldns_rdf_size(org) > DNAME_MAXLEN) {
        snprintf(err, errlen, "%s: bad zone origin '%s'", path, origin);
        rc = TERN_EINVAL;
        goto fail;
    }
    L.rdbuf = ldns_buffer_new(512);
    L.b = zone_builder_new(ldns_rdf_data(org), path);
    if (!L.rdbuf || !L.b) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    rc = load_file(&L, path, org, 0, NULL, 0);
    if (rc < 0)
        goto fail;
    zone_builder_t *b = L.b;
    L.b = NULL;
    rc = zone_builder_finish(b, out, err, errlen);
fail:
    zone_builder_free(L.b);
    ldns_buffer_free(L.rdbuf);
    ldns_rdf_deep_free(L.prev);
    ldns_rdf_deep_free(org);
    free(L.line);
    free(L.entry);
    return rc;
}
