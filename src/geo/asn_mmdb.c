/*
 * asn_mmdb.c — MaxMind DB input of the ASN compiler (see asn_collect.h): every network of the
 * search tree becomes one range, with the autonomous_system_number and
 * autonomous_system_organization of its record. libmaxminddb does all the reading —
 * MMDB_read_node() for the tree, MMDB_aget_value() for the records — and the walk favours
 * clarity over speed: it runs offline, or on the loader thread once per database release.
 *
 * The walk is depth-first, left before right, so networks are added in address order (the
 * "first name seen" of an ASN is that of its lowest network, and the IPv4 subtree at ::/96 is
 * met before ::ffff:0:0/96). Every node is expanded at most once: a node reached twice (a cycle,
 * or a subtree shared other than as an IPv4 alias) fails the compile, so a crafted file cannot
 * make the walk exponential.
 */
#include "asn_collect.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "tern/common/err.h"
#include "tern/common/file.h"

/* libmaxminddb looks for the metadata marker in a file's last 128 KiB: the format's own bound
 * on the metadata size, so a MaxMind DB is recognised by the same test it opens with. The marker
 * starts with bytes no UTF-8 text holds (0xAB cannot start a character), so no CSV is taken for
 * a database. */
#define METADATA_WINDOW (128u * 1024u)
static const char METADATA_MARKER[] = "\xab\xcd\xefMaxMind.com";

/* A text input is judged binary by a NUL in its first 4 KiB: the header line and a few dozen
 * ranges, enough to see a database, small enough to read once per input. */
#define SNIFF_HEAD 4096u

/* IPv4 in an IPv6 tree: the IPv4 subtree at ::/96 (where libmaxminddb looks IPv4 addresses up)
 * and the IPv4-mapped addresses at ::ffff:0:0/96. */
#define V4_COMPAT ((u128)0)
#define V4_MAPPED ((u128)0xffff << 32)
#define V4_LOW    ((u128)UINT32_MAX)

/* ---------------------------------------------------------------------------------------------
 * what a file is, and opening it
 */

/* Read up to len bytes at off into buf; the count read, or a negated errno. */
static ssize_t read_at(int fd, void *buf, size_t len, off_t off)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, (char *)buf + got, len - got, off + (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

int asn_mmdb_sniff(const char *path, bool *is_mmdb, char *err, size_t errlen)
{
    *is_mmdb = false;
    struct stat st;
    int fd = tern_open_regular(path, 0, &st, err, errlen); /* a FIFO or directory: say so */
    if (fd < 0)
        return fd;
    int rc = 0;
    char *buf = NULL;
    size_t size = (size_t)st.st_size, tail = size < METADATA_WINDOW ? size : METADATA_WINDOW;
    if (!(buf = malloc(tail ? tail : 1))) {
        tern_set_err(err, errlen, "%s: out of memory", path);
        rc = TERN_ENOMEM;
        goto done;
    }
    ssize_t n = read_at(fd, buf, tail, (off_t)(size - tail));
    if (n >= 0 && memmem(buf, (size_t)n, METADATA_MARKER, sizeof(METADATA_MARKER) - 1)) {
        *is_mmdb = true;
        goto done;
    }
    if (n >= 0)
        n = read_at(fd, buf, tail < SNIFF_HEAD ? tail : SNIFF_HEAD, 0);
    if (n < 0) {
        rc = (int)n;
        tern_set_err(err, errlen, "%s: %s", path, strerror(-rc));
    } else if (memchr(buf, '\0', (size_t)n)) {
        rc = TERN_EMALF;
        tern_set_err(err, errlen,
                     "%s: binary data without a MaxMind DB metadata marker in its last 128 KiB "
                     "(a truncated .mmdb?), and not a text input",
                     path);
    }
done:
    free(buf);
    close(fd);
    return rc;
}

int asn_mmdb_open(const char *path, MMDB_s *db, char *err, size_t errlen)
{
    /* MMDB_open would map a directory or a FIFO and fail with ENODEV: say what is wrong. */
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        tern_set_err(err, errlen, "%s: not a regular file", path);
        return TERN_EINVAL;
    }
    int rc = MMDB_open(path, MMDB_MODE_MMAP, db);
    if (rc != MMDB_SUCCESS) {
        int e = errno ? errno : EIO;
        if (rc == MMDB_FILE_OPEN_ERROR || rc == MMDB_IO_ERROR) {
            tern_set_err(err, errlen, "%s: %s", path, strerror(e));
            return -e;
        }
        if (rc == MMDB_OUT_OF_MEMORY_ERROR) {
            tern_set_err(err, errlen, "%s: out of memory", path);
            return TERN_ENOMEM;
        }
        tern_set_err(err, errlen, "%s: not a valid MaxMind DB file (truncated or corrupt?): %s",
                     path, MMDB_strerror(rc));
        return TERN_EMALF;
    }
    if (db->metadata.ip_version != 4 && db->metadata.ip_version != 6) {
        tern_set_err(err, errlen, "%s: unsupported ip_version %u", path, db->metadata.ip_version);
        MMDB_close(db);
        return TERN_EMALF;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * records
 */

/* A record to visit: what it points to and the network it stands for. */
struct frame {
    uint64_t record;
    uint8_t type;       /* MMDB_RECORD_TYPE_* */
    MMDB_entry_s entry; /* for data records */
    u128 prefix;        /* the network's first address, in the tree's width (32 or 128 bits) */
    unsigned len;       /* its prefix length */
};

struct walk {
    const MMDB_s *db;
    const char *path;
    asn_collect_t *c;
    asn_compile_stats_t *st;
    unsigned bits;          /* 32 or 128 */
    uint32_t v4_node;       /* the IPv4 subtree's node (at ::/96), UINT32_MAX if none */
    uint8_t *seen;          /* one bit per node: expanded already */
    size_t from_v4_subtree; /* IPv4 ranges taken from ::/96 so far */
    char *err;
    size_t errlen;
};

/* The network of f as text: "1.2.3.0/24" in an IPv4 tree and in an IPv6 tree's IPv4 subtree
 * (::/96, how its networks are read), "2001:db8::/32" otherwise. */
static void net_text(const struct walk *w, const struct frame *f, char *buf, size_t len)
{
    char a[INET6_ADDRSTRLEN];
    bool in_v4 = w->bits == 32 || (f->len >= 96 && f->prefix >> 32 == 0);
    if (in_v4) {
        struct in_addr v4 = {.s_addr = htonl((uint32_t)f->prefix)};
        inet_ntop(AF_INET, &v4, a, sizeof(a));
    } else {
        uint8_t b[16];
        for (int i = 0; i < 16; i++)
            b[i] = (uint8_t)(f->prefix >> (8 * (15 - i)));
        inet_ntop(AF_INET6, b, a, sizeof(a));
    }
    snprintf(buf, len, "%s/%u", a, in_v4 ? f->len - (w->bits - 32) : f->len);
}

/* "path: network N/L: <why>" in err; TERN_EMALF. */
TERN_PRINTF(3, 4)
static int bad_record(const struct walk *w, const struct frame *f, const char *fmt, ...)
{
    char net[64], why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    net_text(w, f, net, sizeof(net));
    tern_set_err(w->err, w->errlen, "%s: network %s: %s", w->path, net, why);
    return TERN_EMALF;
}

static const char *type_name(uint32_t type)
{
    static const char *const names[] = {
        [MMDB_DATA_TYPE_EXTENDED] = "extended",   [MMDB_DATA_TYPE_POINTER] = "pointer",
        [MMDB_DATA_TYPE_UTF8_STRING] = "string",  [MMDB_DATA_TYPE_DOUBLE] = "double",
        [MMDB_DATA_TYPE_BYTES] = "bytes",         [MMDB_DATA_TYPE_UINT16] = "uint16",
        [MMDB_DATA_TYPE_UINT32] = "uint32",       [MMDB_DATA_TYPE_MAP] = "map",
        [MMDB_DATA_TYPE_INT32] = "int32",         [MMDB_DATA_TYPE_UINT64] = "uint64",
        [MMDB_DATA_TYPE_UINT128] = "uint128",     [MMDB_DATA_TYPE_ARRAY] = "array",
        [MMDB_DATA_TYPE_CONTAINER] = "container", [MMDB_DATA_TYPE_END_MARKER] = "end marker",
        [MMDB_DATA_TYPE_BOOLEAN] = "boolean",     [MMDB_DATA_TYPE_FLOAT] = "float",
    };
    return type < TERN_ARRAY_SIZE(names) && names[type] ? names[type] : "unknown type";
}

/* The ASN of a decoded autonomous_system_number: any integer type in 0..2^32-1. */
static int asn_value(const struct walk *w, const struct frame *f, const MMDB_entry_data_s *d,
                     uint32_t *asn)
{
    uint64_t v;
    switch (d->type) {
    case MMDB_DATA_TYPE_UINT16:
        v = d->uint16;
        break;
    case MMDB_DATA_TYPE_UINT32:
        v = d->uint32;
        break;
    case MMDB_DATA_TYPE_UINT64:
        v = d->uint64;
        break;
    case MMDB_DATA_TYPE_INT32:
        if (d->int32 < 0)
            return bad_record(w, f, "autonomous_system_number %d is negative", (int)d->int32);
        v = (uint64_t)d->int32;
        break;
    default:
        return bad_record(w, f, "autonomous_system_number is a %s, not an unsigned integer",
                          type_name(d->type));
    }
    if (v > UINT32_MAX)
        return bad_record(w, f, "autonomous_system_number %llu does not fit 32 bits",
                          (unsigned long long)v);
    *asn = (uint32_t)v;
    return 0;
}

/* The ASN and organization name of f's data record (*org points into the mapping). */
static int decode(const struct walk *w, const struct frame *f, uint32_t *asn, const char **org,
                  size_t *org_len)
{
    static const char *const k_record[] = {NULL};
    static const char *const k_number[] = {"autonomous_system_number", NULL};
    static const char *const k_org[] = {"autonomous_system_organization", NULL};
    MMDB_entry_s e = f->entry;
    MMDB_entry_data_s d;
    int rc = MMDB_aget_value(&e, &d, k_record);
    if (rc != MMDB_SUCCESS)
        return bad_record(w, f, "undecodable record: %s", MMDB_strerror(rc));
    if (!d.has_data || d.type != MMDB_DATA_TYPE_MAP)
        return bad_record(w, f, "the record is a %s, not a map", type_name(d.type));
    /* in a map, a missing key is "the path does not match the data" */
    rc = MMDB_aget_value(&e, &d, k_number);
    if (rc == MMDB_LOOKUP_PATH_DOES_NOT_MATCH_DATA_ERROR || (rc == MMDB_SUCCESS && !d.has_data))
        return bad_record(w, f,
                          "no autonomous_system_number (database type '%s' is not an "
                          "ASN database?)",
                          w->db->metadata.database_type ? w->db->metadata.database_type : "?");
    if (rc != MMDB_SUCCESS)
        return bad_record(w, f, "undecodable autonomous_system_number: %s", MMDB_strerror(rc));
    if ((rc = asn_value(w, f, &d, asn)) < 0)
        return rc;
    *org = NULL;
    *org_len = 0;
    rc = MMDB_aget_value(&e, &d, k_org);
    if (rc == MMDB_LOOKUP_PATH_DOES_NOT_MATCH_DATA_ERROR)
        return 0; /* no name: the ASN alone */
    if (rc != MMDB_SUCCESS)
        return bad_record(w, f, "undecodable autonomous_system_organization: %s",
                          MMDB_strerror(rc));
    if (d.has_data && d.type != MMDB_DATA_TYPE_UTF8_STRING)
        return bad_record(w, f, "autonomous_system_organization is a %s, not a string",
                          type_name(d.type));
    if (d.has_data) {
        *org = d.utf8_string;
        *org_len = d.data_size;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * networks
 */

/* The IPv4 addresses of [first, last] inside the /96 at pfx (V4_COMPAT or V4_MAPPED), as the
 * IPv4 range [*a, *b]; false when they do not meet. */
static bool v4_part(u128 first, u128 last, u128 pfx, u128 *a, u128 *b)
{
    u128 lo = pfx, hi = pfx | V4_LOW;
    if (last < lo || first > hi)
        return false;
    *a = (first > lo ? first : lo) & V4_LOW;
    *b = (last < hi ? last : hi) & V4_LOW;
    return true;
}

static int add(struct walk *w, bool v6, u128 a, u128 b, uint32_t asn, const char *org,
               size_t org_len)
{
    if (asn_collect_add(w->c, v6, a, b, asn, NULL, 0, org, org_len) == 0)
        return 0;
    tern_set_err(w->err, w->errlen, "%s: out of memory", w->path);
    return TERN_ENOMEM;
}

/* One data record: its network as a range. In an IPv6 tree, the part inside ::/96 is IPv4 (the
 * subtree libmaxminddb answers IPv4 lookups from), and so is the part inside ::ffff:0:0/96 while
 * ::/96 has given nothing (a file storing IPv4 only as mapped addresses); a network entirely
 * inside either /96 is IPv4 only, so no IPv4 network is added twice. */
static int add_network(struct walk *w, const struct frame *f)
{
    uint32_t asn = 0; /* set by decode() on success; gcc -O2 cannot see it */
    const char *org = NULL;
    size_t org_len = 0;
    int rc = decode(w, f, &asn, &org, &org_len);
    if (rc < 0)
        return rc;
    w->st->networks++;
    u128 host = f->len == w->bits ? 0 : (((u128)1 << (w->bits - f->len)) - 1);
    u128 first = f->prefix, last = f->prefix | host, a, b;
    if (w->bits == 32)
        return add(w, false, first, last, asn, org, org_len);
    bool in_compat = v4_part(first, last, V4_COMPAT, &a, &b);
    if (in_compat) {
        if ((rc = add(w, false, a, b, asn, org, org_len)) < 0)
            return rc;
        w->from_v4_subtree++;
    }
    bool in_mapped = v4_part(first, last, V4_MAPPED, &a, &b);
    if (in_mapped && w->from_v4_subtree == 0 && (rc = add(w, false, a, b, asn, org, org_len)) < 0)
        return rc;
    if (in_mapped && w->from_v4_subtree > 0 && !in_compat)
        w->st->aliases++; /* the same IPv4 space again, already read from ::/96 */
    if (f->len >= 96 && (in_compat || in_mapped))
        return 0;
    return add(w, true, first, last, asn, org, org_len);
}

/* ---------------------------------------------------------------------------------------------
 * the tree
 */

/* "path: corrupt search tree at network N/L: <what> (record R)"; TERN_EMALF. */
static int corrupt(const struct walk *w, const struct frame *f, const char *what)
{
    char net[64];
    net_text(w, f, net, sizeof(net));
    tern_set_err(w->err, w->errlen, "%s: corrupt search tree at network %s: %s (record %llu)",
                 w->path, net, what, (unsigned long long)f->record);
    return TERN_EMALF;
}

/* The node at ::/96 where an IPv6 tree's IPv4 subtree starts (96 left turns from the root), or
 * UINT32_MAX when the tree has none there (IPv4 space covered by a shorter network, or empty) or
 * the path loops (the walk then reports the loop). */
static uint32_t find_v4_node(const MMDB_s *db)
{
    uint32_t path[97] = {0};
    for (int depth = 0; depth < 96; depth++) {
        MMDB_search_node_s n;
        if (MMDB_read_node(db, path[depth], &n) != MMDB_SUCCESS ||
            n.left_record_type != MMDB_RECORD_TYPE_SEARCH_NODE)
            return UINT32_MAX;
        path[depth + 1] = (uint32_t)n.left_record;
        for (int k = 0; k <= depth; k++)
            if (path[k] == path[depth + 1])
                return UINT32_MAX;
    }
    return path[96];
}

/* Expand the search node of f: push its right record, then its left one (visited first). An
 * alias of the IPv4 subtree is skipped (counted), a node seen before is an error. */
static int expand(struct walk *w, const struct frame *f, struct frame *stack, size_t *sp,
                  size_t cap)
{
    if (f->len >= w->bits || *sp + 2 > cap)
        return corrupt(w, f, "a node below the last address bit");
    if (f->record == w->v4_node && !(f->len == 96 && f->prefix == 0)) {
        w->st->aliases++; /* ::ffff:0:0/96, 2001::/32, 2002::/16 in MaxMind's files */
        return 0;
    }
    uint32_t node = (uint32_t)f->record;
    if (w->seen[node / 8] & (1u << (node % 8)))
        return corrupt(w, f, "a node reached twice");
    w->seen[node / 8] |= (uint8_t)(1u << (node % 8));
    MMDB_search_node_s n;
    int rc = MMDB_read_node(w->db, node, &n);
    if (rc != MMDB_SUCCESS)
        return corrupt(w, f, MMDB_strerror(rc));
    u128 right = f->prefix | (u128)1 << (w->bits - 1 - f->len);
    stack[(*sp)++] = (struct frame){n.right_record, n.right_record_type, n.right_record_entry,
                                    right, f->len + 1};
    stack[(*sp)++] = (struct frame){n.left_record, n.left_record_type, n.left_record_entry,
                                    f->prefix, f->len + 1};
    return 0;
}

int asn_mmdb_read(asn_collect_t *c, const MMDB_s *db, const char *path, asn_compile_stats_t *st,
                  char *err, size_t errlen)
{
    struct walk w = {.db = db,
                     .path = path,
                     .c = c,
                     .st = st,
                     .bits = db->metadata.ip_version == 6 ? 128 : 32,
                     .err = err,
                     .errlen = errlen};
    w.v4_node = w.bits == 128 ? find_v4_node(db) : UINT32_MAX;
    if (!(w.seen = calloc((size_t)db->metadata.node_count / 8 + 1, 1))) {
        tern_set_err(err, errlen, "%s: out of memory", path);
        return TERN_ENOMEM;
    }
    /* Depth-first: at most one pending right sibling per level, plus the two just pushed. */
    struct frame stack[128 + 2];
    size_t sp = 0;
    int rc = 0;
    stack[sp++] = (struct frame){.record = 0, .type = MMDB_RECORD_TYPE_SEARCH_NODE};
    while (sp && rc == 0) {
        struct frame f = stack[--sp];
        switch (f.type) {
        case MMDB_RECORD_TYPE_SEARCH_NODE:
            rc = expand(&w, &f, stack, &sp, TERN_ARRAY_SIZE(stack));
            break;
        case MMDB_RECORD_TYPE_DATA:
            rc = add_network(&w, &f);
            break;
        case MMDB_RECORD_TYPE_EMPTY:
            break;
        default:
            rc = corrupt(&w, &f, "the record points outside the data section");
            break;
        }
    }
    free(w.seen);
    return rc;
}
