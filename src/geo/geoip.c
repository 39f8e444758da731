/*
 * geoip.c — MaxMind DB lookups: libmaxminddb walks the search tree, a small decoder of our own
 * reads the record.
 *
 * Why our own decoder: MMDB_aget_value() walks the record's top-level map from the start for
 * every path, so country + latitude + longitude cost three walks, each decoding every key and
 * skipping every value before the one it wants. decode_record() makes one pass over the
 * top-level map, compares each key by length then bytes, picks up the wanted values and stops as
 * soon as it has them; it reads the data section in place and allocates nothing. On
 * ip-location-db's GeoLite2 city IPv4 file (bench/geoip.sh, random addresses, one core) the tree
 * walk alone costs ~325 ns, with three MMDB_aget_value() ~645 ns, geoip_lookup() ~515 ns: what
 * is left above the walk is mostly the cache miss on the record itself (a cached flat record
 * decodes in ~60 ns). A fully inline GeoIP2-City record decodes ~4x faster than with aget.
 *
 * The decoder trusts nothing in the data section: every offset is checked against the data
 * section's end (which we take from the metadata marker, so the metadata is never decoded as
 * data), a pointer may not point to a pointer, and each lookup has an item budget so a corrupt
 * record with huge map sizes costs at most ~20 µs, not a scan of the file. Any decoding
 * error answers "unknown". geoip_open() checks the search tree once (every record is a node, the
 * empty marker, or inside the data section) and decodes the probed records, so a garbled file
 * is refused on the loader thread instead.
 */
#include "tern/geo/geoip.h"

#include <errno.h>
#include <maxminddb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

#include "tern/common/err.h"

/* MaxMind DB data types (spec: "MaxMind DB File Format Specification", data section). */
enum {
    T_EXTENDED = 0,
    T_POINTER = 1,
    T_UTF8 = 2,
    T_DOUBLE = 3,
    T_MAP = 7,
    T_ARRAY = 11,
    T_CONTAINER = 12,
    T_END_MARKER = 13,
    T_BOOLEAN = 14,
    T_FLOAT = 15,
};

/* Upper bound on items (keys, values, nested items) one lookup may decode. A GeoIP2-City record
 * written in full (no sub-map deduplicated into a pointer yet, all name languages) holds a few
 * hundred; 4096 leaves room for richer commercial records and bounds a lookup on a corrupt
 * record to ~20 µs (~5 ns an item). */
#define DECODE_BUDGET 4096u

/* Distinct data records decoded at open to decide the key layout, and the search-tree nodes the
 * probe may visit to find them. The first records in tree order are the first networks of the
 * file (1.0.0.0/24 and neighbours for the GeoLite2 files); 32 of them see both common and
 * sparse records, and a tree reaches 32 records within a few thousand nodes. */
#define PROBE_RECORDS 32u
#define PROBE_NODES   65536u

/* Metadata marker "\xAB\xCD\xEFMaxMind.com": the data section ends where it begins. */
#define METADATA_MARKER_LEN 14u
#define DATA_SEPARATOR_LEN  16u

enum layout { LAYOUT_NONE = 0, LAYOUT_NESTED, LAYOUT_FLAT };

struct geoip_db {
    MMDB_s mmdb;
    const uint8_t *data; /* data section, without the metadata */
    uint32_t data_len;
    enum layout layout;
    unsigned ip_version;
    char desc[192];
};

/* ---------------------------------------------------------------------------------------------
 * helpers
 */

static inline uint32_t be32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}

static inline uint64_t be64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

/* ---------------------------------------------------------------------------------------------
 * data section decoder
 */

struct span {
    const uint8_t *p;
    uint32_t len;
};

/* One decoded control byte (plus its extended type and size bytes). For a pointer, data is the
 * target offset; for a map or array, size is the entry count and data the first entry; for
 * everything else data/size are the payload. next is where the following item starts in the
 * stream: past the pointer, past the payload, or (containers) at the first entry. */
struct item {
    uint32_t type, size, data, next;
};

static bool dec_item(const struct span *d, uint32_t off, struct item *it)
{
    if (off >= d->len)
        return false;
    const uint8_t *p = d->p;
    uint32_t left = d->len - off - 1;
    uint8_t ctrl = p[off++];
    uint32_t type = ctrl >> 5;
    if (type == T_POINTER) {
        uint32_t ss = (ctrl >> 3) & 3, v = ctrl & 7u;
        if (ss + 1 > left)
            return false;
        switch (ss) {
        case 0:
            v = v << 8 | p[off];
            break;
        case 1:
            v = (v << 16 | (uint32_t)p[off] << 8 | p[off + 1]) + 2048u;
            break;
        case 2:
            v = (v << 24 | (uint32_t)p[off] << 16 | (uint32_t)p[off + 1] << 8 | p[off + 2]) +
                526336u;
            break;
        default:
            v = be32(p + off);
            break;
        }
        it->type = T_POINTER;
        it->size = 0;
        it->data = v;
        it->next = off + ss + 1;
        return true;
    }
    if (type == T_EXTENDED) {
        if (left < 1)
            return false;
        type = 7u + p[off++];
        left--;
        if (type < 8 || type > 15)
            return false;
    }
    uint32_t size = ctrl & 31u;
    if (size >= 29) {
        uint32_t n = size - 28;
        if (n > left)
            return false;
        if (size == 29)
            size = 29u + p[off];
        else if (size == 30)
            size = 285u + ((uint32_t)p[off] << 8 | p[off + 1]);
        else
            size = 65821u + ((uint32_t)p[off] << 16 | (uint32_t)p[off + 1] << 8 | p[off + 2]);
        off += n;
        left -= n;
    }
    it->type = type;
    it->size = size;
    it->data = off;
    switch (type) {
    case T_MAP:
    case T_ARRAY:
        it->next = off;
        break;
    case T_BOOLEAN: /* the value is the size; no payload */
        if (size > 1)
            return false;
        it->next = off;
        break;
    case T_CONTAINER:
    case T_END_MARKER: /* reserved for the format's internals, never in a record */
        return false;
    default:
        if (size > left)
            return false;
        it->next = off + size;
        break;
    }
    return true;
}

/* The item at off with one pointer followed (a pointer to a pointer is invalid by the spec);
 * *next is the stream position after the item as written (past the pointer when it was one). */
static bool dec_resolved(const struct span *d, uint32_t off, struct item *it, uint32_t *next)
{
    if (!dec_item(d, off, it))
        return false;
    *next = it->next;
    if (it->type != T_POINTER)
        return true;
    return dec_item(d, it->data, it) && it->type != T_POINTER;
}

/* Advance *off past one value as written, nested maps and arrays included. Iterative: pending
 * counts the items still to skip, so depth costs no stack. A pointer is skipped, not followed. */
static bool dec_skip(const struct span *d, uint32_t *off, unsigned *budget)
{
    uint64_t pending = 1;
    uint32_t o = *off;
    while (pending) {
        struct item it;
        if (*budget == 0 || !dec_item(d, o, &it))
            return false;
        (*budget)--;
        pending--;
        if (it.type == T_MAP)
            pending += 2ull * it.size;
        else if (it.type == T_ARRAY)
            pending += it.size;
        o = it.next;
    }
    *off = o;
    return true;
}

struct key {
    const char *name;
    uint32_t len;
};
/* clang-format off */
#define KEY(s) {s, sizeof(s) - 1}
/* clang-format on */

/* Scan the map item m for keys[0..n): vals[j] gets the (resolved) value of keys[j] and bit j of
 * the returned mask is set. Stops once every key in stop is found. -1 on corrupt data. */
static int map_find(const struct span *d, const struct item *m, const struct key *keys, unsigned n,
                    unsigned stop, struct item *vals, unsigned *budget)
{
    unsigned found = 0;
    uint32_t off = m->data;
    for (uint32_t i = 0; i < m->size; i++) {
        struct item k;
        uint32_t next;
        if (*budget == 0 || !dec_resolved(d, off, &k, &next) || k.type != T_UTF8)
            return -1;
        (*budget)--;
        off = next;
        for (unsigned j = 0; j < n; j++) {
            if (k.size != keys[j].len || (found & 1u << j) ||
                memcmp(d->p + k.data, keys[j].name, k.size) != 0)
                continue;
            if (!dec_resolved(d, off, &vals[j], &next))
                return -1;
            found |= 1u << j;
            if ((found & stop) == stop)
                return (int)found;
            break;
        }
        if (!dec_skip(d, &off, budget))
            return -1;
    }
    return (int)found;
}

static uint16_t country_of(const struct span *d, const struct item *v)
{
    if (v->type != T_UTF8 || v->size != 2)
        return 0;
    uint8_t a = d->p[v->data], b = d->p[v->data + 1];
    if (a >= 'a' && a <= 'z')
        a = (uint8_t)(a - 32);
    if (b >= 'a' && b <= 'z')
        b = (uint8_t)(b - 32);
    if (a < 'A' || a > 'Z' || b < 'A' || b > 'Z')
        return 0;
    return GEOIP_CC(a, b);
}

/* A decimal number as some publishers store coordinates: [+-]digits[.digits][(e|E)[+-]digits],
 * the whole string. Locale-independent (strtod follows LC_NUMERIC) and allocation-free. Up to 15
 * significant digits are kept, so mantissa / 10^k is the correctly rounded double for the usual
 * 4-6 decimals. */
static bool parse_decimal(const uint8_t *s, uint32_t n, double *out)
{
    static const double p10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    if (n == 0 || n > 64)
        return false;
    uint32_t i = 0;
    bool neg = false;
    if (s[i] == '+' || s[i] == '-')
        neg = s[i++] == '-';
    uint64_t mant = 0;
    int scale = 0, ndig = 0;
    bool frac = false;
    for (; i < n; i++) {
        if (s[i] == '.' && !frac) {
            frac = true;
            continue;
        }
        if (s[i] < '0' || s[i] > '9')
            break;
        ndig++;
        if (mant < 100000000000000ull) {
            mant = mant * 10 + (uint64_t)(s[i] - '0');
            scale -= frac;
        } else if (!frac) {
            scale++;
        }
    }
    if (ndig == 0)
        return false;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        bool eneg = false;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            eneg = s[i++] == '-';
        int e = 0, edig = 0;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, edig++)
            if (e < 1000)
                e = e * 10 + (s[i] - '0');
        if (edig == 0)
            return false;
        scale += eneg ? -e : e;
    }
    if (i != n)
        return false;
    double v = (double)mant;
    for (; scale > 22; scale -= 22)
        v *= 1e22;
    for (; scale < -22; scale += 22)
        v /= 1e22;
    v = scale >= 0 ? v * p10[scale] : v / p10[-scale];
    *out = neg ? -v : v;
    return true;
}

static bool coord_of(const struct span *d, const struct item *v, double *out)
{
    switch (v->type) {
    case T_DOUBLE: {
        if (v->size != 8)
            return false;
        uint64_t u = be64(d->p + v->data);
        memcpy(out, &u, sizeof(*out));
        return true;
    }
    case T_FLOAT: {
        if (v->size != 4)
            return false;
        uint32_t u = be32(d->p + v->data);
        float f;
        memcpy(&f, &u, sizeof(f));
        *out = f;
        return true;
    }
    case T_UTF8:
        return parse_decimal(d->p + v->data, v->size, out);
    default:
        return false;
    }
}

static void set_location(const struct span *d, const struct item *lat, const struct item *lon,
                         geoip_result_t *out)
{
    double a, o;
    /* NaN fails every comparison, so the range checks also reject it. */
    if (coord_of(d, lat, &a) && coord_of(d, lon, &o) && a >= -90.0 && a <= 90.0 && o >= -180.0 &&
        o <= 180.0) {
        out->has_location = true;
        out->lat = a;
        out->lon = o;
    }
}

static const struct key k_nested_top[] = {KEY("country"), KEY("location"),
                                          KEY("registered_country")};
static const struct key k_registered[] = {KEY("registered_country")};
static const struct key k_iso_code[] = {KEY("iso_code")};
static const struct key k_latlon[] = {KEY("latitude"), KEY("longitude")};
static const struct key k_flat[] = {KEY("country_code"), KEY("latitude"), KEY("longitude")};

/* iso_code of the country-like map v, 0 when v is not a map or has none. -1 on corrupt data. */
static int nested_cc(const struct span *d, const struct item *v, unsigned *budget)
{
    struct item iso;
    if (v->type != T_MAP)
        return 0;
    int f = map_find(d, v, k_iso_code, 1, 1, &iso, budget);
    if (f < 0)
        return -1;
    return f ? country_of(d, &iso) : 0;
}

/* Decode the record at data offset off under layout into out (country and location only).
 * Returns the mask of the layout's top-level keys present (0 for a record that is not a map), or
 * -1 on corrupt data. */
static int decode_record(const struct span *d, enum layout layout, uint32_t off,
                         geoip_result_t *out)
{
    unsigned budget = DECODE_BUDGET;
    struct item rec, v[3];
    uint32_t next;
    if (!dec_resolved(d, off, &rec, &next))
        return -1;
    if (rec.type != T_MAP)
        return 0;
    if (layout == LAYOUT_FLAT) {
        int f = map_find(d, &rec, k_flat, 3, 7, v, &budget);
        if (f < 0)
            return -1;
        if (f & 1)
            out->country = country_of(d, &v[0]);
        if ((f & 6) == 6)
            set_location(d, &v[1], &v[2], out);
        return f;
    }
    /* Nested: stop at country + location. registered_country only matters when the record has
     * no usable country (rare: anonymous proxies, satellite providers), so that case pays a
     * second pass rather than every lookup scanning past location to the end of the map. */
    int f = map_find(d, &rec, k_nested_top, 3, 3, v, &budget);
    if (f < 0)
        return -1;
    int cc = 0;
    if (f & 1) {
        if ((cc = nested_cc(d, &v[0], &budget)) < 0)
            return -1;
    }
    if (cc == 0) {
        if ((f & 3) == 3) { /* stopped early: look for registered_country now */
            int g = map_find(d, &rec, k_registered, 1, 1, &v[2], &budget);
            if (g < 0)
                return -1;
            f |= g ? 4 : 0;
        }
        if ((f & 4) && (cc = nested_cc(d, &v[2], &budget)) < 0)
            return -1;
    }
    out->country = (uint16_t)cc;
    if ((f & 2) && v[1].type == T_MAP) {
        struct item ll[2];
        int g = map_find(d, &v[1], k_latlon, 2, 3, ll, &budget);
        if (g < 0)
            return -1;
        if (g == 3)
            set_location(d, &ll[0], &ll[1], out);
    }
    return f;
}

/* ---------------------------------------------------------------------------------------------
 * search tree
 */

/* The two records of node (bits = record size, a constant after inlining), from one 8-byte
 * big-endian load: a node is 6, 7 or 8 bytes, and the last node is followed by the 16-byte data
 * section separator, so the load never leaves the file. */
static inline __attribute__((always_inline)) void node_records(const uint8_t *tree, unsigned bits,
                                                               uint32_t node, uint32_t rec[2])
{
    uint64_t x = be64(tree + (size_t)node * (bits / 4));
    switch (bits) {
    case 24:
        rec[0] = (uint32_t)(x >> 40);
        rec[1] = (uint32_t)(x >> 16) & 0xFFFFFFu;
        break;
    case 28: /* byte 3 holds the top nibbles: left's high, right's low */
        rec[0] = (uint32_t)(x >> 40) | ((uint32_t)(x >> 12) & 0xF000000u);
        rec[1] = (uint32_t)(x >> 8) & 0xFFFFFFFu;
        break;
    default: /* 32; MMDB_open accepts no other size */
        rec[0] = (uint32_t)(x >> 32);
        rec[1] = (uint32_t)x;
        break;
    }
}

static void read_node(const MMDB_s *m, uint32_t node, uint32_t rec[2])
{
    node_records(m->file_content, m->metadata.record_size, node, rec);
}

/* A record is a node (< n), the empty marker (n), or data: n + 16 + an offset inside the data
 * section. The unsigned wrap makes n < r < n + 16 (inside the separator) fail too. */
static inline bool record_ok(uint32_t r, uint32_t n, uint32_t data_len)
{
    return r <= n || r - n - DATA_SEPARATOR_LEN < data_len;
}

/* The first node with a bad record, or n. */
static inline __attribute__((always_inline)) uint32_t
first_bad_node(const uint8_t *tree, unsigned bits, uint32_t n, uint32_t data_len)
{
    for (uint32_t i = 0; i < n; i++) {
        uint32_t rec[2];
        node_records(tree, bits, i, rec);
        if (unlikely(!record_ok(rec[0], n, data_len) || !record_ok(rec[1], n, data_len)))
            return i;
    }
    return n;
}

/* Every record checked in one sequential pass, specialised per record size: ~1 ns a node, a few
 * ms for the 3.7M nodes of a GeoLite2 city file. */
static int check_tree(const geoip_db_t *db, char *err, size_t errlen, const char *path)
{
    const MMDB_s *m = &db->mmdb;
    uint32_t n = m->metadata.node_count, bad;
    const uint8_t *sep = m->file_content + (size_t)n * m->full_record_byte_size;
    for (unsigned i = 0; i < DATA_SEPARATOR_LEN; i++) {
        if (sep[i] != 0) {
            tern_set_err(err, errlen, "%s: corrupt file: data section separator is not zero", path);
            return -1;
        }
    }
    switch (m->metadata.record_size) {
    case 24:
        bad = first_bad_node(m->file_content, 24, n, db->data_len);
        break;
    case 28:
        bad = first_bad_node(m->file_content, 28, n, db->data_len);
        break;
    default:
        bad = first_bad_node(m->file_content, 32, n, db->data_len);
        break;
    }
    if (bad < n) {
        tern_set_err(
            err, errlen,
            "%s: corrupt search tree: node %u points outside the data section (truncated or "
            "damaged file?)",
            path, bad);
        return -1;
    }
    return 0;
}

/* Up to max distinct data offsets in tree order (depth-first, left first). */
static unsigned probe_records(const geoip_db_t *db, uint32_t *offs, unsigned max)
{
    const MMDB_s *m = &db->mmdb;
    uint32_t n = m->metadata.node_count;
    /* Depth-first with both children pushed: at most one pending sibling per level. */
    struct probe_frame {
        uint32_t node;
        uint16_t depth;
    } stack[2 * 128 + 2];
    unsigned sp = 0, found = 0, visited = 0;
    stack[sp].node = 0;
    stack[sp++].depth = 0;
    while (sp && found < max && visited++ < PROBE_NODES) {
        uint32_t node = stack[--sp].node, rec[2];
        uint16_t depth = stack[sp].depth;
        read_node(m, node, rec);
        for (int s = 1; s >= 0; s--) { /* right pushed first, so left pops first */
            uint32_t r = rec[s];
            if (r < n) {
                /* Aliases (::ffff:0:0/96 → ::/96) point back up the tree; the depth bound keeps
                 * the walk finite. */
                if (depth + 1u < m->depth && sp < TERN_ARRAY_SIZE(stack))
                    stack[sp++] = (struct probe_frame){r, (uint16_t)(depth + 1)};
            } else if (r > n) {
                uint32_t off = r - n - DATA_SEPARATOR_LEN, k;
                for (k = 0; k < found && offs[k] != off; k++)
                    ;
                if (k == found && found < max)
                    offs[found++] = off;
            }
        }
    }
    return found;
}

static int detect_layout(geoip_db_t *db, char *err, size_t errlen, const char *path)
{
    const struct span d = {db->data, db->data_len};
    uint32_t offs[PROBE_RECORDS];
    unsigned n = probe_records(db, offs, PROBE_RECORDS), nested = 0, flat = 0;
    if (n == 0) {
        tern_set_err(err, errlen, "%s: no data records (empty database)", path);
        return -1;
    }
    /* A layout scores a record only when it yields a country or a location from it: keys of the
     * right name but the wrong shape (a "country" string rather than a map, say) count for
     * nothing, so such a file is refused rather than answering "unknown" for everyone. */
    for (unsigned i = 0; i < n; i++) {
        geoip_result_t a = {0}, b = {0};
        if (decode_record(&d, LAYOUT_NESTED, offs[i], &a) < 0 ||
            decode_record(&d, LAYOUT_FLAT, offs[i], &b) < 0) {
            tern_set_err(err, errlen, "%s: corrupt data record at data section offset %u", path,
                         offs[i]);
            return -1;
        }
        nested += a.country || a.has_location;
        flat += b.country || b.has_location;
    }
    if (nested == 0 && flat == 0) {
        tern_set_err(
            err, errlen,
            "%s: database type '%s' has neither GeoIP2 keys (country.iso_code, location) nor "
            "flat keys (country_code, latitude/longitude) in its first %u records; not a "
            "location database",
            path, db->mmdb.metadata.database_type, n);
        return -1;
    }
    db->layout = nested >= flat ? LAYOUT_NESTED : LAYOUT_FLAT;
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * public
 */

geoip_db_t *geoip_open(const char *path, char *err, size_t errlen)
{
    /* MMDB_open would map a directory or a FIFO and fail with ENODEV: say what is wrong. */
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        tern_set_err(err, errlen, "%s: not a regular file", path);
        return NULL;
    }
    geoip_db_t *db = calloc(1, sizeof(*db));
    if (!db) {
        tern_set_err(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    int rc = MMDB_open(path, MMDB_MODE_MMAP, &db->mmdb);
    if (rc != MMDB_SUCCESS) {
        int e = errno;
        if (rc == MMDB_FILE_OPEN_ERROR || rc == MMDB_IO_ERROR)
            tern_set_err(err, errlen, "%s: %s", path, strerror(e));
        else if (rc == MMDB_OUT_OF_MEMORY_ERROR)
            tern_set_err(err, errlen, "%s: out of memory", path);
        else
            tern_set_err(err, errlen, "%s: not a valid MaxMind DB file (truncated or corrupt?): %s",
                         path, MMDB_strerror(rc));
        free(db);
        return NULL;
    }
    MMDB_s *m = &db->mmdb;
    const uint8_t *data_end = m->metadata_section - METADATA_MARKER_LEN;
    size_t tree = (size_t)m->metadata.node_count * m->full_record_byte_size;
    if (m->metadata_section < m->file_content + METADATA_MARKER_LEN ||
        m->file_content + tree + DATA_SEPARATOR_LEN > data_end) {
        tern_set_err(err, errlen,
                     "%s: corrupt file: search tree runs into the metadata (truncated?)", path);
        goto fail;
    }
    db->data = m->file_content + tree + DATA_SEPARATOR_LEN;
    db->data_len = (uint32_t)(data_end - db->data);
    db->ip_version = m->metadata.ip_version;
    if (db->ip_version != 4 && db->ip_version != 6) {
        tern_set_err(err, errlen, "%s: unsupported ip_version %u", path, db->ip_version);
        goto fail;
    }
    if (check_tree(db, err, errlen, path) < 0 || detect_layout(db, err, errlen, path) < 0)
        goto fail;

    char date[16] = "?";
    time_t t = (time_t)m->metadata.build_epoch;
    struct tm tm;
    if (gmtime_r(&t, &tm))
        strftime(date, sizeof(date), "%Y-%m-%d", &tm);
    snprintf(db->desc, sizeof(db->desc), "%s, IPv%u, %s keys, %s",
             m->metadata.database_type ? m->metadata.database_type : "?", db->ip_version,
             db->layout == LAYOUT_NESTED ? "nested" : "flat", date);
    return db;
fail:
    MMDB_close(m);
    free(db);
    return NULL;
}

void geoip_close(geoip_db_t *db)
{
    if (!db)
        return;
    MMDB_close(&db->mmdb);
    free(db);
}

unsigned geoip_ip_version(const geoip_db_t *db)
{
    return db->ip_version;
}

const char *geoip_describe(const geoip_db_t *db)
{
    return db->desc;
}

static const uint8_t v4_mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

void geoip_lookup(const geoip_db_t *db, int family, const uint8_t *addr, geoip_result_t *out)
{
    *out = (geoip_result_t){0};
    if (!db || !addr)
        return;
    if (family == AF_INET6 && memcmp(addr, v4_mapped_prefix, sizeof(v4_mapped_prefix)) == 0) {
        family = AF_INET;
        addr += sizeof(v4_mapped_prefix);
    }
    MMDB_lookup_result_s r;
    int merr;
    if (family == AF_INET) {
        struct sockaddr_in sin = {.sin_family = AF_INET};
        memcpy(&sin.sin_addr, addr, 4);
        r = MMDB_lookup_sockaddr(&db->mmdb, (const struct sockaddr *)&sin, &merr);
    } else if (family == AF_INET6 && db->ip_version == 6) {
        struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6};
        memcpy(&sin6.sin6_addr, addr, 16);
        r = MMDB_lookup_sockaddr(&db->mmdb, (const struct sockaddr *)&sin6, &merr);
    } else {
        return; /* unknown family, or IPv6 in an IPv4-only database */
    }
    if (merr != MMDB_SUCCESS)
        return;
    unsigned nm = r.netmask;
    /* An IPv4 address in an IPv6 tree is ::a.b.c.d: libmaxminddb counts the 96 leading bits.
     * A tree without an IPv4 subtree ends above ::/96, i.e. the whole IPv4 space: prefix 0. */
    if (family == AF_INET && db->ip_version == 6)
        nm = nm >= 96 ? nm - 96 : 0;
    out->prefix = (uint8_t)nm;
    if (!r.found_entry)
        return;
    const struct span d = {db->data, db->data_len};
    geoip_result_t res = {.prefix = out->prefix};
    if (decode_record(&d, db->layout, r.entry.offset, &res) >= 0)
        *out = res;
}

void geoip_set_lookup(const geoip_set_t *set, int family, const uint8_t *addr, geoip_result_t *out)
{
    const geoip_db_t *db = NULL;
    if (set && addr) {
        bool v4 =
            family == AF_INET ||
            (family == AF_INET6 && memcmp(addr, v4_mapped_prefix, sizeof(v4_mapped_prefix)) == 0);
        if (v4)
            db = set->v4 ? set->v4 : set->v6;
        else if (family == AF_INET6)
            db = set->v6;
    }
    geoip_lookup(db, family, addr, out);
}
