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
 *
 * Most entries never reach ldns: zone_file_fast.h reads the plain forms of the common types
 * straight into wire form (ldns's tokeniser and a dozen allocations per record were ~40 % of
 * loading a 1.9M-record zone); anything else is ldns's, which stays the judge of meaning.
 *
 * One parser serves a load and both passes of a patch: only where its records go differs (a
 * zf_sink_fn), so a patch accepts, refuses and warns about exactly what a load does.
 */
#include "tern/zone/zone_file.h"

#include <ldns/ldns.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tern/common/err.h"
#include "tern/common/file.h"
#include "tern/common/grow.h"
#include "tern/common/log.h"
#include "tern/wire/rr.h"
#include "tern/zone/zone_builder.h"
#include "tern/zone/zone_diff.h"
#include "tern/zone/zone_patch.h"

#include "zone_file_fast.h"

/* RFC 1035 sets no limit; 8 levels is far beyond real use (BIND and Knot files nest one or two)
 * and stops an include loop early. */
#define ZONE_FILE_INCLUDE_MAX 8

/* An entry joined across parentheses. 64 KiB fits the largest RDATA (65535 bytes) only in
 * binary; presentation text can be ~4x longer (hex, escapes), hence 256 KiB. */
#define ZONE_FILE_ENTRY_MAX (256u << 10)

/* ldns substitutes its own default (3600) when the default TTL passed is 0, so "$TTL 0" is
 * handed to it as this value and mapped back. An explicit TTL this large is out of range
 * (WIRE_TTL_MAX) anyway. */
#define TTL_ZERO_SENTINEL UINT32_MAX

#define DEFAULT_TTL 3600u

struct zf_parser;
struct src;

/* One parsed record, as zone_builder_add() takes it. */
struct zf_rec {
    const uint8_t *owner;
    uint16_t type, rclass;
    uint32_t ttl;
    const uint8_t *rdata;
    uint16_t rdlen;
};

/* Where the records go: the builder of a full load (sink_build), or one of the two passes of a
 * patch (sink_diff, sink_fresh). One parser for all three, so a patch reads a file exactly as a
 * load does. 0, or a negative code with L->err set. */
typedef int (*zf_sink_fn)(struct zf_parser *L, const struct src *s, const struct zf_rec *r);

/* What a patch's first pass saw of each file it opened, in order: the second pass must open
 * the same files, unchanged. ctime too, since mtime can be set back by hand. */
struct zf_stamp {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
};

struct zf_parser {
    zone_builder_t *b;
    zf_sink_fn sink;
    uint32_t default_ttl;
    ldns_rdf *prev; /* owner of the previous record, for entries with a blank owner */
    /* The fast path's record (zone_file_fast.h); its owner is the previous owner while
     * prev_fast: ldns's prev is brought up to date only when ldns reads an entry. */
    zone_file_fast_rec_t *fast;
    bool prev_fast;
    ldns_buffer *rdbuf; /* RDATA scratch */
    char *entry;        /* the joined entry */
    size_t entry_len, entry_cap;
    char *err;
    size_t errlen;
    zone_file_seen_fn seen; /* optional: told of every file opened */
    void *seen_ctx;
    /* a patch (zone_file_patch()): */
    zone_diff_t *diff;     /* the change against the base */
    zone_builder_t *probe; /* first pass: an empty builder that words (and refuses) the records
                              the diff does not take, as a load would: never given a record it
                              would keep */
    const uint8_t *apex;   /* second pass: the origin, whose records always go in */
    bool sink_failed;      /* second pass: the error is the builder's, not the parser's */
    bool skipped;          /* second pass: the last record's entry was skipped (fresh_skip()) */
    unsigned pass;         /* 1, 2: the patch's pass, which records (1) or checks (2) stamps */
    bool changed;          /* a file changed while or since the first pass read it */
    struct zf_stamp *files;
    size_t nfiles, files_cap, file_no; /* file_no: files the second pass opened so far */
};

/* Reads are this large: a 1,000,000-record file is ~50 MB, so about 800 reads. */
#define ZONE_FILE_READ_CHUNK (64u << 10)

/* One open file: read through a fixed buffer, a line at a time, never more than
 * ZONE_FILE_ENTRY_MAX bytes of one line in memory, whatever the file holds. */
struct src {
    const char *path;
    int fd;
    char *buf; /* ZONE_FILE_READ_CHUNK bytes */
    size_t pos, len;
    bool eof;
    char *line; /* the current line, without its end; ZONE_FILE_ENTRY_MAX + 1 bytes */
    size_t line_len;
    unsigned line_no; /* lines read so far */
    unsigned first;   /* first line of the current entry */
};

/* The next line of s into s->line (the newline dropped). 1, 0 at the end of the file, or a
 * negative code with the message set. A line too long or holding a NUL byte (a zone file is
 * text; binary data is written as \DDD) fails at once, before the rest of it is read. */
static int read_line(struct zf_parser *L, struct src *s)
{
    s->line_len = 0;
    bool any = false;
    for (;;) {
        if (s->pos == s->len) {
            if (s->eof)
                break;
            ssize_t n;
            do
                n = read(s->fd, s->buf, ZONE_FILE_READ_CHUNK);
            while (n < 0 && errno == EINTR);
            if (n < 0) {
                snprintf(L->err, L->errlen, "%s:%u: read error: %s", s->path, s->line_no + 1,
                         strerror(errno));
                return TERN_EINVAL;
            }
            s->pos = 0;
            s->len = (size_t)n;
            s->eof = n == 0;
            continue;
        }
        any = true;
        const char *start = s->buf + s->pos;
        size_t avail = s->len - s->pos;
        const char *nl = memchr(start, '\n', avail);
        size_t take = nl ? (size_t)(nl - start) : avail;
        if (s->line_len + take > ZONE_FILE_ENTRY_MAX) {
            snprintf(L->err, L->errlen, "%s:%u: line longer than %u bytes", s->path, s->line_no + 1,
                     ZONE_FILE_ENTRY_MAX);
            return TERN_ESYNTAX;
        }
        if (memchr(start, '\0', take)) {
            snprintf(L->err, L->errlen, "%s:%u: NUL byte in the text (write it as \\000)", s->path,
                     s->line_no + 1);
            return TERN_ESYNTAX;
        }
        memcpy(s->line + s->line_len, start, take);
        s->line_len += take;
        s->pos += take + (nl ? 1 : 0);
        if (nl)
            break;
    }
    if (!any)
        return 0;
    s->line[s->line_len] = '\0';
    s->line_no++;
    return 1;
}

/* Room in L->entry for n more bytes and the final NUL: grown once per line, not per byte. */
static int entry_room(struct zf_parser *L, size_t n)
{
    return tern_grow((void **)&L->entry, &L->entry_cap, L->entry_len + n + 1, 1);
}

static void entry_put(struct zf_parser *L, char c)
{
    L->entry[L->entry_len++] = c;
    L->entry[L->entry_len] = 0;
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
        int got = read_line(L, s);
        if (got < 0)
            return got;
        if (got == 0) {
            if (depth > 0) {
                snprintf(L->err, L->errlen, "%s:%u: unbalanced '(' at end of file", s->path,
                         s->first);
                return TERN_ESYNTAX;
            }
            return 0;
        }
        if (!content) {
            s->first = s->line_no;
            L->entry_len = 0;
        }
        bool quote = false;
        const char *line = s->line;
        size_t n = s->line_len;
        if (n && line[n - 1] == '\r')
            n--;
        if (entry_room(L, n + 1) < 0) /* the line and the blank after it */
            goto nomem;
        for (size_t i = 0; i < n; i++) {
            char c = line[i];
            if (c == ';' && !quote)
                break;
            if (c == '\\' && i + 1 < n) {
                entry_put(L, c);
                entry_put(L, line[++i]);
                continue;
            }
            if (c == '"')
                quote = !quote;
            if (!quote && (c == '(' || c == ')')) {
                if (c == '(') {
                    depth++;
                } else if (--depth < 0) {
                    snprintf(L->err, L->errlen, "%s:%u: unbalanced ')'", s->path, s->line_no);
                    return TERN_ESYNTAX;
                }
                c = ' ';
            }
            if (c != ' ' && c != '\t')
                content = true;
            entry_put(L, c);
        }
        if (quote) {
            snprintf(L->err, L->errlen, "%s:%u: unterminated quoted string", s->path, s->line_no);
            return TERN_ESYNTAX;
        }
        if (L->entry_len > ZONE_FILE_ENTRY_MAX) {
            snprintf(L->err, L->errlen, "%s:%u: entry longer than %u bytes", s->path, s->first,
                     ZONE_FILE_ENTRY_MAX);
            return TERN_ESYNTAX;
        }
        if (depth > 0) {
            entry_put(L, ' ');
            continue;
        }
        if (content)
            return 1;
    }
nomem:
    snprintf(L->err, L->errlen, "%s:%u: out of memory", s->path, s->line_no);
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
            snprintf(L->err, L->errlen, "%s:%u: bad origin in $INCLUDE (not a domain name)",
                     s->path, s->first);
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
        if (!tok || end == tok || *end || next_token(&p) || ttl > WIRE_TTL_MAX) {
            snprintf(L->err, L->errlen, "%s:%u: $TTL needs one TTL (0 to %u, units s/m/h/d/w)",
                     s->path, s->first, WIRE_TTL_MAX);
            return TERN_ESYNTAX;
        }
        L->default_ttl = ttl;
        return 0;
    }
    if (strcasecmp(name, "$INCLUDE") == 0)
        return do_include(L, s, p, *origin, depth);
    /* not its name: the text of a file that does not parse is never shown (see record()) */
    snprintf(L->err, L->errlen, "%s:%u: unknown directive (known: $ORIGIN, $TTL, $INCLUDE)",
             s->path, s->first);
    return TERN_ESYNTAX;
}

/* A TTL ("3600", "1h30m") or a class ("IN", "CH", "CLASS3") token: what may stand between the
 * owner and the type (RFC 1035 §5.1, in either order). */
static bool ttl_or_class(const char *tok)
{
    const char *end = NULL;
    (void)ldns_str2period(tok, &end);
    if (end && end != tok && *end == '\0')
        return true;
    return ldns_get_rr_class_by_name(tok) != 0;
}

/* Where the type token of the entry e starts, or NULL: after the owner (unless the entry starts
 * with a blank, which means "the previous owner"), then at most a TTL and a class. *n is its
 * length, *field its place among the entry's fields (1 = the first). */
static const char *type_pos(const char *e, size_t *n, unsigned *field)
{
    char buf[256];
    const char *p = e;
    bool owner = *p != ' ' && *p != '\t';
    for (int i = 0; i < 4; i++) {
        *field = (unsigned)i + 1;
        while (*p == ' ' || *p == '\t')
            p++;
        *n = strcspn(p, " \t");
        if (*n == 0 || *n >= sizeof(buf))
            return NULL;
        memcpy(buf, p, *n);
        buf[*n] = '\0';
        if (owner) {
            owner = false;
            p += *n;
            continue;
        }
        if (i < 3 && ttl_or_class(buf)) {
            p += *n;
            continue;
        }
        return p;
    }
    return NULL;
}

/* The type token of the entry e, or NULL; tok has room for it; *field as type_pos(). */
static const char *type_token(const char *e, char *tok, size_t len, unsigned *field)
{
    size_t n;
    const char *p = type_pos(e, &n, field);
    if (!p)
        return NULL;
    snprintf(tok, len, "%.*s", (int)n, p);
    return tok;
}

/* ANAME and ALIAS (PowerDNS) are not types ldns knows. Their RDATA is one name, written like a
 * CNAME's (relative names completed by $ORIGIN), so the entry is parsed as a CNAME and the type
 * set afterwards: where e's type token was one of them (now CNAME, the same length; saved holds
 * the token to put back for messages), or NULL. */
/* Whether e holds "aname" or "alias" in any case: one pass, a compare only at an 'a' (rather
 * than two strcasestr() scans of every line of the file). */
static bool mentions_aname(const char *e)
{
    for (const char *p = e; *p; p++)
        if ((*p | 0x20) == 'a' &&
            (strncasecmp(p + 1, "name", 4) == 0 || strncasecmp(p + 1, "lias", 4) == 0))
            return true;
    return false;
}

static char *aname_as_cname(char *e, char saved[5])
{
    if (!mentions_aname(e))
        return NULL;
    size_t n;
    unsigned field;
    char *p = (char *)(uintptr_t)type_pos(e, &n, &field);
    if (!p || n != 5 || (strncasecmp(p, "ANAME", 5) != 0 && strncasecmp(p, "ALIAS", 5) != 0))
        return NULL;
    memcpy(saved, p, 5);
    memcpy(p, "CNAME", 5);
    return p;
}

/* One record into builder b: an out-of-zone one is skipped (with the builder's warning when
 * warn), anything else the builder refuses fails the load with its message. */
static int builder_add(struct zf_parser *L, zone_builder_t *b, const struct src *s,
                       const struct zf_rec *r, bool warn)
{
    int rc = zone_builder_add(b, r->owner, r->type, r->rclass, r->ttl, r->rdata, r->rdlen, s->path,
                              s->first);
    if (rc == TERN_EOUTZONE) {
        if (warn)
            log_warn("%s, skipped", zone_builder_error(b));
        return 0;
    }
    if (rc < 0)
        snprintf(L->err, L->errlen, "%s", zone_builder_error(b));
    return rc;
}

static int sink_build(struct zf_parser *L, const struct src *s, const struct zf_rec *r)
{
    return builder_add(L, L->b, s, r, true);
}

/* A patch's first pass: each record against the base. One of another class, or outside the
 * zone, goes to the probe, which refuses it with the error or the warning a load gives, at the
 * same place in the file (the class is checked before the owner, as the builder does). */
static int sink_diff(struct zf_parser *L, const struct src *s, const struct zf_rec *r)
{
    int rc = r->rclass != WIRE_CLASS_IN
                 ? TERN_EOUTZONE
                 : zone_diff_add(L->diff, r->owner, r->type, r->rclass, r->ttl, r->rdata, r->rdlen);
    if (rc == TERN_EOUTZONE)
        return builder_add(L, L->probe, s, r, true);
    if (rc < 0)
        snprintf(L->err, L->errlen, "%s:%u: out of memory", s->path, s->first);
    return rc;
}

/* A patch's second pass: the records of the changed names and of the apex (zone_patch() needs
 * the apex in every fresh zone), into the fresh builder. Silent about what it skips: the first
 * pass warned. An error here is the builder's about a changed name (the base's data was valid). */
static int sink_fresh(struct zf_parser *L, const struct src *s, const struct zf_rec *r)
{
    if (!dname_equal(r->owner, L->apex) && !zone_diff_changed(L->diff, r->owner))
        return 0;
    int rc = builder_add(L, L->b, s, r, false);
    if (rc < 0)
        L->sink_failed = true;
    return rc;
}

/* The wire form of owner token t (n bytes) as ldns reads it: "@" is the origin, a name ending
 * in a dot is absolute, any other is relative to origin (dname_from_str(): the same RFC 1035
 * escapes). false when it does not parse here: ldns alone judges it then. */
static bool owner_wire(const char *t, size_t n, const ldns_rdf *origin, uint8_t w[DNAME_MAXLEN])
{
    return zone_file_name(t, n, ldns_rdf_data(origin), w) > 0;
}

/* A patch's second pass keeps the changed names' records and the apex's only: an entry whose
 * owner is another name (owner_wire()), or that has a blank owner after such an
 * entry, is skipped before ldns parses it. That is most of the file and most of the cost of
 * reading it: the first pass parsed every entry and the stamps say the file is the same. */
static bool fresh_skip(struct zf_parser *L, const ldns_rdf *origin)
{
    const char *e = L->entry;
    if (*e == ' ' || *e == '\t')
        return L->skipped; /* the previous record's owner */
    uint8_t w[DNAME_MAXLEN];
    L->skipped = owner_wire(e, strcspn(e, " \t"), origin, w) && !dname_equal(w, L->apex) &&
                 !zone_diff_changed(L->diff, w);
    return L->skipped;
}

static struct zf_stamp stamp_of(const struct stat *st)
{
    return (struct zf_stamp){.dev = st->st_dev,
                             .ino = st->st_ino,
                             .size = st->st_size,
                             .mtime = st->st_mtim,
                             .ctime = st->st_ctim};
}

static bool stamp_equal(const struct zf_stamp *a, const struct zf_stamp *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
           a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}

/* A patch opened path (fstat st): the first pass notes it, the second checks it is the file
 * the first pass read, unchanged. 0, or a negative code with L->changed (or out of memory). */
static int stamp_open(struct zf_parser *L, const char *path, const struct stat *st)
{
    struct zf_stamp now = stamp_of(st);
    if (L->pass == 1) {
        if (tern_grow((void **)&L->files, &L->files_cap, L->nfiles + 1, sizeof(*L->files)) < 0) {
            snprintf(L->err, L->errlen, "%s: out of memory", path);
            return TERN_ENOMEM;
        }
        L->files[L->nfiles++] = now;
        return 0;
    }
    if (L->file_no >= L->nfiles || !stamp_equal(&L->files[L->file_no], &now)) {
        L->changed = true;
        snprintf(L->err, L->errlen, "%s: changed since the first pass read it", path);
        return TERN_EINVAL;
    }
    L->file_no++;
    return 0;
}

/* A patch read all of s (opened with fstat st): it must not have changed meanwhile, or what was
 * read may be half old, half new. */
static int stamp_close(struct zf_parser *L, const struct src *s, const struct stat *st)
{
    struct stat end;
    struct zf_stamp a = stamp_of(st), b;
    if (fstat(s->fd, &end) == 0 && (b = stamp_of(&end), stamp_equal(&a, &b)))
        return 0;
    L->changed = true;
    snprintf(L->err, L->errlen, "%s: changed while it was read", s->path);
    return TERN_EINVAL;
}

/* Entry L->entry by the fast path (zone_file_fast.h): 1 read and handed to the sink, 0 when
 * ldns must read it, or the sink's negative code. */
static int record_fast(struct zf_parser *L, struct src *s, const ldns_rdf *origin)
{
    const uint8_t *prev = L->prev_fast ? L->fast->owner : L->prev ? ldns_rdf_data(L->prev) : NULL;
    if (!zone_file_fast(L->entry, ldns_rdf_data(origin), prev, L->default_ttl, L->fast) ||
        L->fast->ttl > WIRE_TTL_MAX) /* ldns's reading, then record()'s message */
        return 0;
    /* ldns's rule: a record with an owner of its own (even "@") becomes the previous owner */
    if (L->fast->owner_given)
        L->prev_fast = true;
    const struct zf_rec r = {.owner = L->fast->owner,
                             .type = L->fast->type,
                             .rclass = WIRE_CLASS_IN,
                             .ttl = L->fast->ttl,
                             .rdata = L->fast->rdata,
                             .rdlen = L->fast->rdlen};
    int rc = L->sink(L, s, &r);
    return rc < 0 ? rc : 1;
}

/* Before ldns reads an entry: its prev is the owner the fast path saw last. */
static int prev_sync(struct zf_parser *L, struct src *s)
{
    if (!L->prev_fast)
        return 0;
    const uint8_t *w = L->fast->owner;
    ldns_rdf *p = ldns_rdf_new_frm_data(LDNS_RDF_TYPE_DNAME, dname_len(w), w);
    if (!p) {
        snprintf(L->err, L->errlen, "%s:%u: out of memory", s->path, s->first);
        return TERN_ENOMEM;
    }
    ldns_rdf_deep_free(L->prev);
    L->prev = p;
    L->prev_fast = false;
    return 0;
}

static int record(struct zf_parser *L, struct src *s, const ldns_rdf *origin)
{
    if (L->sink == sink_fresh && fresh_skip(L, origin))
        return 0;
    int fr = record_fast(L, s, origin);
    if (fr != 0)
        return fr < 0 ? fr : 0;
    if (prev_sync(L, s) < 0)
        return TERN_ENOMEM;
    ldns_rr *rr = NULL;
    uint32_t def = L->default_ttl ? L->default_ttl : TTL_ZERO_SENTINEL;
    int rc;
    char saved[5];
    char *aname = aname_as_cname(L->entry, saved);
    ldns_status st = ldns_rr_new_frm_str(&rr, L->entry, def, (ldns_rdf *)origin, &L->prev);
    if (aname)
        memcpy(aname, saved, 5);
    if (st != LDNS_STATUS_OK) {
        /* Never the entry's text: a file that does not parse may be one only root may read
         * ($INCLUDE /etc/shadow, read by --check-config or `ternctl check-zone` as root). What
         * parses is published anyway; what does not is described by where it is and what it
         * was taken for: the field, and the type when it is one ldns knows. */
        char tok[256];
        unsigned field = 0;
        const char *type = type_token(L->entry, tok, sizeof(tok), &field);
        ldns_rr_type t = type ? ldns_get_rr_type_by_name(type) : 0;
        if (type && t == 0) {
            /* ldns calls this "could not parse the RR's rdata": say what is wrong */
            snprintf(L->err, L->errlen,
                     "%s:%u: unknown type in field %u (write an unknown type as "
                     "TYPEnnn with \\# RDATA, RFC 3597)",
                     s->path, s->first, field);
            return TERN_ESYNTAX;
        }
        const ldns_rr_descriptor *d = t ? ldns_rr_descript(t) : NULL;
        if (d && d->_name)
            snprintf(L->err, L->errlen, "%s:%u: %s (a %s record; its text is not shown)", s->path,
                     s->first, ldns_get_errorstr_by_id(st), d->_name);
        else
            snprintf(L->err, L->errlen, "%s:%u: %s (no record type found; the text is not shown)",
                     s->path, s->first, ldns_get_errorstr_by_id(st));
        return TERN_ESYNTAX;
    }
    uint32_t ttl = ldns_rr_ttl(rr);
    if (ttl == TTL_ZERO_SENTINEL)
        ttl = 0;
    if (ttl > WIRE_TTL_MAX) {
        snprintf(L->err, L->errlen, "%s:%u: TTL %u out of range (at most %u, RFC 2181 section 8)",
                 s->path, s->first, ttl, WIRE_TTL_MAX);
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
    const struct zf_rec r = {.owner = ldns_rdf_data(ldns_rr_owner(rr)),
                             .type = aname ? WIRE_T_ANAME : (uint16_t)ldns_rr_get_type(rr),
                             .rclass = (uint16_t)ldns_rr_get_class(rr),
                             .ttl = ttl,
                             .rdata = ldns_buffer_begin(L->rdbuf),
                             .rdlen = (uint16_t)ldns_buffer_position(L->rdbuf)};
    rc = L->sink(L, s, &r);
out:
    ldns_rr_free(rr);
    return rc;
}

static int load_file(struct zf_parser *L, const char *path, const ldns_rdf *origin_in,
                     unsigned depth, const char *from, unsigned from_line)
{
    struct src s = {.path = path, .fd = -1};
    ldns_rdf *origin = ldns_rdf_clone(origin_in);
    int rc = TERN_ENOMEM;
    if (!origin || !(s.buf = malloc(ZONE_FILE_READ_CHUNK)) ||
        !(s.line = malloc(ZONE_FILE_ENTRY_MAX + 1))) {
        snprintf(L->err, L->errlen, "%s: out of memory", path);
        goto fail;
    }
    /* a regular file only: a FIFO must not hang the loader, a directory says so */
    struct stat st;
    char oerr[512];
    s.fd = tern_open_regular(path, 0, &st, oerr, sizeof(oerr));
    if (s.fd < 0) {
        rc = s.fd;
        if (from)
            snprintf(L->err, L->errlen, "%s:%u: $INCLUDE %s", from, from_line, oerr);
        else
            snprintf(L->err, L->errlen, "%s", oerr);
        goto fail;
    }
    if (L->seen && (rc = L->seen(L->seen_ctx, path, &st)) < 0) {
        snprintf(L->err, L->errlen, "%s: %s", path, tern_strerror(rc));
        goto fail;
    }
    if (L->pass && (rc = stamp_open(L, path, &st)) < 0)
        goto fail;
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
    if (rc == 0 && L->pass)
        rc = stamp_close(L, &s, &st);
fail:
    if (s.fd >= 0)
        close(s.fd);
    free(s.buf);
    free(s.line);
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
    return zone_file_load_health(origin, path, seen, ctx, NULL, NULL, out, err, errlen);
}

int zone_file_load_health(const char *origin, const char *path, zone_file_seen_fn seen, void *ctx,
                          zone_builder_health_fn health, void *health_ctx, zone_t **out, char *err,
                          size_t errlen)
{
    const zone_file_opts_t o = {
        .seen = seen, .seen_ctx = ctx, .health = health, .health_ctx = health_ctx};
    return zone_file_load_opts(origin, path, &o, out, err, errlen);
}

/* The zone origin as an ldns name in *org: always absolute, with or without its final dot.
 * 0 or TERN_EINVAL with the message. */
static int parse_origin(const char *origin, const char *path, ldns_rdf **org, char *err,
                        size_t errlen)
{
    *org = ldns_dname_new_frm_str(origin);
    if (!*org || ldns_rdf_size(*org) > DNAME_MAXLEN) {
        snprintf(err, errlen, "%s: bad zone origin '%s'", path, origin);
        return TERN_EINVAL;
    }
    return 0;
}

/* A parser about to read a file for sink (a load, or pass 1 of a patch), told of the files it
 * opens as opts says. */
static struct zf_parser parser_start(zf_sink_fn sink, unsigned pass, const zone_file_opts_t *opts,
                                     char *err, size_t errlen)
{
    return (struct zf_parser){.sink = sink,
                              .pass = pass,
                              .default_ttl = DEFAULT_TTL,
                              .err = err,
                              .errlen = errlen,
                              .seen = opts->seen,
                              .seen_ctx = opts->seen_ctx};
}

/* What a parser holds besides its builder, freed. */
static void parser_fini(struct zf_parser *L)
{
    zone_builder_free(L->b);
    zone_builder_free(L->probe);
    zone_diff_free(L->diff);
    ldns_buffer_free(L->rdbuf);
    ldns_rdf_deep_free(L->prev);
    free(L->fast);
    free(L->entry);
    free(L->files);
}

int zone_file_load_opts(const char *origin, const char *path, const zone_file_opts_t *opts,
                        zone_t **out, char *err, size_t errlen)
{
    static const zone_file_opts_t none;
    if (!opts)
        opts = &none;
    struct zf_parser L = parser_start(sink_build, 0, opts, err, errlen);
    ldns_rdf *org = NULL;
    int rc = TERN_ENOMEM;
    *out = NULL;
    if (errlen)
        err[0] = 0;

    if ((rc = parse_origin(origin, path, &org, err, errlen)) < 0)
        goto fail;
    rc = TERN_ENOMEM;
    L.rdbuf = ldns_buffer_new(512);
    L.fast = malloc(sizeof(*L.fast));
    L.b = zone_builder_new(ldns_rdf_data(org), path);
    if (!L.rdbuf || !L.fast || !L.b) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    struct stat st;
    if (stat(path, &st) == 0 && st.st_size > 0)
        zone_builder_expect(L.b, (size_t)st.st_size / 32); /* a record line is some 35 bytes */
    if (opts->health)
        zone_builder_set_health(L.b, opts->health, opts->health_ctx);
    if (opts->dnskeys && zone_builder_set_dnssec(L.b, opts->dnskeys, opts->dnskeys_len, 0) < 0) {
        snprintf(err, errlen, "%s: out of memory", path);
        rc = TERN_ENOMEM;
        goto fail;
    }
    rc = load_file(&L, path, org, 0, NULL, 0);
    if (rc < 0)
        goto fail;
    zone_builder_t *b = L.b;
    L.b = NULL;
    size_t dropped = zone_builder_dnssec_dropped(b);
    if (dropped)
        log_warn("%s: %zu RRSIG/NSEC/NSEC3/NSEC3PARAM records skipped: tern signs the zone itself",
                 path, dropped);
    rc = zone_builder_finish(b, out, err, errlen);
fail:
    parser_fini(&L);
    ldns_rdf_deep_free(org);
    return rc;
}

/* A patch's answer that the caller should build in full, why in err. */
static int want_build(char *err, size_t errlen, const char *path, const char *why)
{
    snprintf(err, errlen, "%s: %s", path, why);
    return ZONE_FILE_BUILD;
}

/* The second pass of zone_file_patch(): the fresh zone of the changed names and the apex in
 * *fresh. 0, ZONE_FILE_BUILD (a file changed since the first pass) or a negative code. */
static int patch_fresh(struct zf_parser *L, const char *path, const ldns_rdf *org,
                       const zone_file_opts_t *opts, zone_t **fresh)
{
    /* the parser starts over as it did for the first pass, told of no file this time */
    L->pass = 2;
    L->sink = sink_fresh;
    L->default_ttl = DEFAULT_TTL;
    ldns_rdf_deep_free(L->prev);
    L->prev = NULL;
    L->prev_fast = false;
    L->skipped = false;
    L->seen = NULL;
    L->apex = ldns_rdf_data(org);
    L->b = zone_builder_new(ldns_rdf_data(org), path);
    if (!L->b) {
        snprintf(L->err, L->errlen, "%s: out of memory", path);
        return TERN_ENOMEM;
    }
    if (opts->health)
        zone_builder_set_health(L->b, opts->health, opts->health_ctx);
    int rc = load_file(L, path, org, 0, NULL, 0);
    /* a parse error now, where the first pass had none, is a file that changed between them */
    if (L->changed || (rc < 0 && rc != TERN_ENOMEM && !L->sink_failed) ||
        (rc == 0 && L->file_no != L->nfiles))
        return want_build(L->err, L->errlen, path, "changed while it was read twice");
    if (rc < 0)
        return rc;
    zone_builder_t *b = L->b;
    L->b = NULL;
    return zone_builder_finish(b, fresh, L->err, L->errlen);
}

/* The second pass and the patch: the fresh zone of the changed names, the change as a delta,
 * the new version. 0, ZONE_FILE_BUILD (err: zone_patch()'s reason) or a negative code. */
static int patch_apply(struct zf_parser *L, const char *path, ldns_rdf *org,
                       const zone_file_opts_t *opts, const zone_t *base, zone_t **out)
{
    zone_t *fresh = NULL;
    int rc = patch_fresh(L, path, org, opts, &fresh);
    if (rc != 0) {
        zone_free(fresh);
        return rc;
    }
    zone_delta_t *delta = zone_diff_delta(L->diff, fresh);
    zone_free(fresh); /* the delta holds it */
    if (!delta) {
        snprintf(L->err, L->errlen, "%s: out of memory", path);
        return TERN_ENOMEM;
    }
    rc = zone_patch(base, delta, out, L->err, L->errlen);
    zone_delta_release(delta);
    return rc == 1 ? ZONE_FILE_BUILD : rc;
}

int zone_file_patch(const char *origin, const char *path, const zone_file_opts_t *opts,
                    const zone_t *base, zone_t **out, char *err, size_t errlen)
{
    static const zone_file_opts_t none;
    if (!opts)
        opts = &none;
    struct zf_parser L = parser_start(sink_diff, 1, opts, err, errlen);
    ldns_rdf *org = NULL;
    int rc;
    *out = NULL;
    if (errlen)
        err[0] = 0;
    /* signatures are made per RRset at build time: a signed zone is never patched */
    if (opts->dnskeys || base->dnssec)
        return want_build(err, errlen, path, "a signed zone is built in full");
    /* a zone that answers SERVFAIL holds no data of any file: nothing to patch */
    if (base->unavailable)
        return want_build(err, errlen, path, "the zone has no data yet");
    if ((rc = parse_origin(origin, path, &org, err, errlen)) < 0)
        goto fail;
    uint8_t apex[DNAME_MAXLEN];
    size_t apex_len = dname_lower(apex, ldns_rdf_data(org));
    if (apex_len != base->apex_len || memcmp(apex, base->apex, apex_len) != 0) {
        rc = want_build(err, errlen, path, "the zone's origin is not the base's");
        goto fail;
    }
    L.rdbuf = ldns_buffer_new(512);
    L.fast = malloc(sizeof(*L.fast));
    L.diff = zone_diff_new(base);
    L.probe = zone_builder_new(ldns_rdf_data(org), path);
    if (!L.rdbuf || !L.fast || !L.diff || !L.probe) {
        snprintf(err, errlen, "%s: out of memory", path);
        rc = TERN_ENOMEM;
        goto fail;
    }

    /* pass 1: every record against the base, the files' stamps noted */
    rc = load_file(&L, path, org, 0, NULL, 0);
    if (L.changed) {
        rc = want_build(err, errlen, path, "changed while it was read");
        goto fail;
    }
    if (rc < 0)
        goto fail;
    const uint8_t *const *names;
    size_t n;
    if ((rc = zone_diff_finish(L.diff, &names, &n)) < 0) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    if (n == 0) {
        snprintf(err, errlen, "%s: no change", path);
        rc = ZONE_FILE_SAME;
        goto fail;
    }
    /* past this, the second pass would read the file again to copy most of the zone anyway */
    if (n > base->node_count / 8 + ZONE_PATCH_NAMES) {
        char why[96];
        snprintf(why, sizeof(why), "%zu names changed", n);
        rc = want_build(err, errlen, path, why);
        goto fail;
    }

    /* pass 2: only what changed, then the new version from the base and it */
    zone_builder_free(L.probe);
    L.probe = NULL;
    rc = patch_apply(&L, path, org, opts, base, out);
fail:
    parser_fini(&L);
    ldns_rdf_deep_free(org);
    return rc;
}
