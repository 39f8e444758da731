/*
 * test_source_journal.c — the journal of a master-file zone's changes, on real files in a
 * scratch directory: append (the header, the chain, a torn tail dropped with a warning), apply
 * (from any entry's from serial, nothing at the last serial, a serial outside the chain, a
 * removal of a record the zone does not hold, corruption in the middle, a torn tail ignored),
 * the position cache (used after an append, not trusted once the file is replaced or
 * truncated), a one-name change of a 10,000-name zone patched rather than rebuilt, the audit
 * listing (who, when, counts), and the write-back: a flushed file loads back to the very RRsets
 * served, odd names and unknown types included, and leaves nothing to replay.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tern/common/byteorder.h"
#include "tern/common/err.h"
#include "tern/source/source_journal.h"
#include "tern/wire/dname.h"
#include "tern/wire/rr.h"
#include "tern/zone/zone_delta.h"
#include "tern/zone/zone_file.h"
#include "tern/zone/zone_patch.h"
#include "test_util.h"
#include "zone/zone_test_util.h"

#define ORIGIN "example.test."

static char dir[64];
static char zpath[128], jpath[160];

static int setup(void **state)
{
    (void)state;
    tu_mkdtemp(dir, sizeof(dir), "tern-jnl");
    snprintf(zpath, sizeof(zpath), "%s/example.test.zone", dir);
    snprintf(jpath, sizeof(jpath), "%s.jnl", zpath);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(dir);
    return 0;
}

/* ---- building entries ---- */

typedef struct tentry {
    source_journal_entry_t e;
    source_journal_rr_t rem[8], add[8];
    uint8_t bytes[8192];
    size_t used;
    uint8_t soa[512];
} tentry_t;

static uint8_t origin_wire[DNAME_MAXLEN];
static size_t origin_len;

static void te_init(tentry_t *t, uint32_t from, uint32_t to, const char *who, int64_t when)
{
    memset(t, 0, sizeof(*t));
    t->e.from = from;
    t->e.to = to;
    t->e.who = who;
    t->e.when = when;
    t->e.soa_ttl = 3600;
    t->e.soa_len = (uint16_t)rdata_soa(t->soa, "ns1." ORIGIN, "hostmaster." ORIGIN, to, 300);
    t->e.soa = t->soa;
    t->e.removed = t->rem;
    t->e.added = t->add;
    origin_len = wire_name(origin_wire, ORIGIN);
}

/* One RR (owner in presentation form, escapes allowed) removed or added. */
static void te_rr(tentry_t *t, bool add, const char *owner, uint16_t type, uint32_t ttl,
                  const void *rd, size_t rdlen)
{
    const char *why = NULL;
    uint8_t *o = t->bytes + t->used;
    int n = dname_from_str(owner, strlen(owner), false, o, &why);
    assert_true(n > 0);
    t->used += (size_t)n;
    memcpy(t->bytes + t->used, rd, rdlen);
    source_journal_rr_t r = {o, (uint8_t)n, type, ttl, (uint16_t)rdlen, t->bytes + t->used};
    t->used += rdlen;
    if (add)
        t->add[t->e.nadded++] = r;
    else
        t->rem[t->e.nremoved++] = r;
}

static void te_a(tentry_t *t, bool add, const char *owner, uint8_t last)
{
    const uint8_t a[4] = {192, 0, 2, last};
    te_rr(t, add, owner, WIRE_T_A, 300, a, 4);
}

static int append(const tentry_t *t, char *err, size_t errlen)
{
    return source_journal_append(jpath, origin_wire, origin_len, &t->e, err, errlen);
}

static void append_at(const char *path, const tentry_t *t)
{
    char err[512] = "";
    if (source_journal_append(path, origin_wire, origin_len, &t->e, err, sizeof(err)) != 0)
        fail_msg("append %u -> %u: %s", t->e.from, t->e.to, err);
}

static void append_ok(const tentry_t *t)
{
    append_at(jpath, t);
}

/* ---- zones ---- */

static const char *const BASE_TEXT =
    "$ORIGIN example.test.\n"
    "$TTL 300\n"
    "@ 3600 IN SOA ns1 hostmaster %u 7200 900 1209600 300\n"
    "@ 3600 IN NS ns1\n"
    "ns1 IN A 192.0.2.53\n"
    "www IN A 192.0.2.1\n"
    "txt IN TXT \"hello world\" \"x;y\"\n"
    "@ IN MX 10 mail\n"
    "mail IN A 192.0.2.25\n"
    "a\\.b IN A 192.0.2.7\n"
    "sp\\032ace IN TXT \"with \\\"quotes\\\" and spaces\"\n"
    "odd IN TYPE65534 \\# 3 abcdef\n"
    "@ IN DNSKEY 257 3 13 "
    "mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+KkxLbxILfDLUT0rAK9iUzy1L53eKGQ==\n";

static void write_zone(uint32_t serial, const char *extra)
{
    char text[4096];
    int n = snprintf(text, sizeof(text), BASE_TEXT, serial);
    snprintf(text + n, sizeof(text) - (size_t)n, "%s", extra ? extra : "");
    tu_write_file(dir, "example.test.zone", text);
}

static zone_t *load(const char *path)
{
    zone_t *z = NULL;
    char err[512];
    if (zone_file_load(ORIGIN, path, &z, err, sizeof(err)) != 0)
        fail_msg("load %s: %s", path, err);
    return z;
}

/* The base zone of serial with 10,000 more names (h0 .. h9999, an A each), loaded. */
static zone_t *big_zone(uint32_t serial)
{
    size_t cap = 10000 * 40 + 4096, n = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    n += (size_t)snprintf(text + n, cap - n, BASE_TEXT, serial);
    for (int i = 0; i < 10000; i++)
        n += (size_t)snprintf(text + n, cap - n, "h%d IN A 10.0.%d.%d\n", i, i / 256, i % 256);
    tu_write_file(dir, "example.test.zone", text);
    free(text);
    return load(zpath);
}

static const zone_rrset_t *rrset(const zone_t *z, const char *owner, uint16_t type)
{
    uint8_t w[DNAME_MAXLEN], lc[DNAME_MAXLEN];
    const char *why;
    assert_true(dname_from_str(owner, strlen(owner), false, w, &why) > 0);
    size_t n = dname_lower(lc, w);
    const zone_node_t *node = zone_find_node(z, lc, n, dname_hash(lc));
    return node ? zone_node_rrset(node, type) : NULL;
}

static zone_t *apply_ok(const zone_t *base, size_t want_applied)
{
    zone_t *out = NULL;
    size_t applied = 99;
    char err[1024] = "";
    if (source_journal_apply(jpath, base, "test", &out, &applied, err, sizeof(err)) != 0)
        fail_msg("apply from %u: %s", base->serial, err);
    assert_int_equal(applied, want_applied);
    if (want_applied)
        assert_non_null(out);
    else
        assert_null(out);
    return out;
}

/* apply() from base fails with want (any failure when want is 0): err says why. */
static void apply_err(const char *path, const zone_t *base, int want, char *err, size_t errlen)
{
    zone_t *out = NULL;
    size_t applied = 0;
    int rc = source_journal_apply(path, base, "t", &out, &applied, err, errlen);
    if (want)
        assert_int_equal(rc, want);
    else
        assert_true(rc < 0);
    assert_null(out);
    assert_int_equal(applied, 0);
}

/* The three changes of the round trip, from serial s (100): s -> s+1 adds new A, then the TXT
 * goes, then the MX changes; to the journal at path. */
static void three_changes_at(const char *path, uint32_t s)
{
    tentry_t t;
    te_init(&t, s, s + 1, "key update. from 127.0.0.1", 1765000000);
    te_a(&t, true, "new." ORIGIN, 9);
    append_at(path, &t);
    te_init(&t, s + 1, s + 2, "api key ops from ::1", 1765000100);
    const uint8_t txt[] = {11,  'h', 'e', 'l', 'l', 'o', ' ', 'w',
                           'o', 'r', 'l', 'd', 3,   'x', ';', 'y'};
    te_rr(&t, false, "txt." ORIGIN, WIRE_T_TXT, 300, txt, sizeof(txt));
    append_at(path, &t);
    te_init(&t, s + 2, s + 3, "key update. from 127.0.0.1", 1765000200);
    uint8_t mx[64];
    size_t n = rdata_name(mx, "\0\12", 2, "mail." ORIGIN);
    te_rr(&t, false, ORIGIN, WIRE_T_MX, 300, mx, n);
    n = rdata_name(mx, "\0\24", 2, "mail2." ORIGIN);
    te_rr(&t, true, ORIGIN, WIRE_T_MX, 600, mx, n);
    te_a(&t, true, "mail2." ORIGIN, 26);
    append_at(path, &t);
}

static void three_changes(void)
{
    three_changes_at(jpath, 100);
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (uint64_t)st.st_size;
}

/* Flip one byte of path at off, in place (same inode, same size). */
static void flip(const char *path, uint64_t off)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, (off_t)off), 1);
    b ^= 0x5a;
    assert_int_equal(pwrite(fd, &b, 1, (off_t)off), 1);
    close(fd);
}

/* Offsets of the entries, through the listing. */
typedef struct listed {
    size_t n;
    uint64_t off[16];
    uint32_t from[16], to[16];
    int64_t when[16];
    char who[16][64];
    size_t nrem[16], nadd[16];
} listed_t;

static int list_one(void *ctx, const source_journal_entry_t *e, uint64_t off)
{
    listed_t *l = ctx;
    assert_true(l->n < 16);
    l->off[l->n] = off;
    l->from[l->n] = e->from;
    l->to[l->n] = e->to;
    l->when[l->n] = e->when;
    snprintf(l->who[l->n], sizeof(l->who[0]), "%s", e->who);
    l->nrem[l->n] = e->nremoved;
    l->nadd[l->n] = e->nadded;
    l->n++;
    return 0;
}

static void list_ok(listed_t *l)
{
    char err[512] = "";
    memset(l, 0, sizeof(*l));
    if (source_journal_list(jpath, list_one, l, err, sizeof(err)) != 0)
        fail_msg("list: %s", err);
}

/* The base zone (serial 100) and the journal of three_changes(), its entries listed into l. */
static zone_t *base_and_changes(listed_t *l)
{
    write_zone(100, NULL);
    zone_t *base = load(zpath);
    three_changes();
    list_ok(l);
    return base;
}

/* ---- tests ---- */

static void test_path(void **state)
{
    (void)state;
    char *p = source_journal_path("/var/lib/tern/example.test.zone");
    assert_string_equal(p, "/var/lib/tern/example.test.zone.jnl");
    free(p);
}

/* The first append makes the file with its header; entries must chain. */
static void test_append_chain(void **state)
{
    (void)state;
    tentry_t t;
    char err[512] = "";
    source_journal_info_t in;
    assert_int_equal(source_journal_info(jpath, &in, err, sizeof(err)), 0);
    assert_int_equal(in.entries, 0);
    assert_int_equal(in.bytes, 0);

    te_init(&t, 100, 101, "who", 1);
    te_a(&t, true, "new." ORIGIN, 9);
    append_ok(&t);
    char head[32];
    int fd = open(jpath, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(read(fd, head, sizeof(head)), sizeof(head));
    close(fd);
    assert_memory_equal(head,
                        "TERNJNL1\x0e\x07"
                        "example\x04test\x00",
                        23);

    te_init(&t, 100, 102, "who", 2); /* does not chain: the last entry ends at 101 */
    te_a(&t, true, "x." ORIGIN, 1);
    assert_int_equal(append(&t, err, sizeof(err)), TERN_EINVAL);
    assert_non_null(strstr(err, "100 -> 102"));
    assert_non_null(strstr(err, "101"));
    assert_non_null(strstr(err, jpath));

    te_init(&t, 101, 102, "who", 2);
    te_a(&t, true, "x." ORIGIN, 1);
    te_rr(&t, true, ORIGIN, WIRE_T_SOA, 3600, t.soa, t.e.soa_len);
    assert_int_equal(append(&t, err, sizeof(err)), TERN_EINVAL); /* the apex SOA is e->soa */
    te_init(&t, 101, 102, "who", 2);
    te_a(&t, true, "x.other.test.", 1);
    assert_int_equal(append(&t, err, sizeof(err)), TERN_EINVAL);
    assert_non_null(strstr(err, "outside the zone"));
    te_init(&t, 101, 102, "who", 2);
    t.e.soa_len = (uint16_t)rdata_soa(t.soa, "ns1." ORIGIN, "h." ORIGIN, 777, 300);
    assert_int_equal(append(&t, err, sizeof(err)), TERN_EINVAL); /* SOA serial is not `to` */

    te_init(&t, 101, 101, "who", 2); /* no new serial: "at the last serial" would be ambiguous */
    assert_int_equal(append(&t, err, sizeof(err)), TERN_EINVAL);
    assert_non_null(strstr(err, "101 -> 101"));

    te_init(&t, 101, 102, "who", 2);
    te_a(&t, true, "x." ORIGIN, 1);
    append_ok(&t);
    assert_int_equal(source_journal_info(jpath, &in, err, sizeof(err)), 0);
    assert_int_equal(in.entries, 2);
    assert_int_equal(in.first, 100);
    assert_int_equal(in.last, 101 + 1);
    assert_int_equal(in.bytes, file_size(jpath));

    /* another zone's journal is refused, not appended to */
    uint8_t other[DNAME_MAXLEN];
    size_t olen = wire_name(other, "other.test.");
    te_init(&t, 102, 103, "who", 3);
    assert_int_equal(source_journal_append(jpath, other, olen, &t.e, err, sizeof(err)),
                     TERN_EINVAL);
    assert_non_null(strstr(err, "example.test."));
}

/* Replays from any entry's from serial; nothing at the last; a serial outside the chain names
 * both. */
static void test_apply_serials(void **state)
{
    (void)state;
    write_zone(100, NULL);
    zone_t *base = load(zpath);
    char err[1024] = "";

    apply_ok(base, 0); /* no journal */
    tentry_t t;
    te_init(&t, 100, 101, "w", 1);
    te_a(&t, true, "new." ORIGIN, 9);
    append_ok(&t);
    assert_int_equal(truncate(jpath, 23), 0); /* header only: an empty journal */
    apply_ok(base, 0);
    assert_int_equal(unlink(jpath), 0);

    three_changes();
    zone_t *v103 = apply_ok(base, 3);
    assert_int_equal(v103->serial, 103);
    const zone_rrset_t *s = rrset(v103, ORIGIN, WIRE_T_SOA);
    assert_non_null(s);
    assert_int_equal(tern_rd32(s->rdata + s->rdata_len - 20), 103);
    assert_non_null(rrset(v103, "new." ORIGIN, WIRE_T_A));
    assert_null(rrset(v103, "txt." ORIGIN, WIRE_T_TXT));
    s = rrset(v103, ORIGIN, WIRE_T_MX);
    assert_non_null(s);
    assert_int_equal(s->count, 1);
    assert_int_equal(s->ttl, 600);
    assert_int_equal(tern_rd16(s->rdata + 2), 20);
    assert_non_null(rrset(base, "txt." ORIGIN, WIRE_T_TXT)); /* the base is untouched */

    apply_ok(v103, 0); /* at the last serial */

    write_zone(101, "new IN A 192.0.2.9\n");
    zone_t *b101 = load(zpath);
    zone_t *o = apply_ok(b101, 2);
    assert_int_equal(o->serial, 103);
    assert_null(rrset(o, "txt." ORIGIN, WIRE_T_TXT));
    zone_free(o);

    write_zone(99, NULL);
    zone_t *b99 = load(zpath);
    apply_err(jpath, b99, TERN_EINVAL, err, sizeof(err));
    assert_non_null(strstr(err, "serial 99"));
    assert_non_null(strstr(err, "100 to 103"));
    assert_non_null(strstr(err, jpath));
    zone_free(b99);
    zone_free(b101);
    zone_free(v103);
    zone_free(base);
}

/* An entry that removes a record the zone does not hold fails, naming the entry and the RR. */
static void test_apply_missing_rr(void **state)
{
    (void)state;
    write_zone(100, NULL);
    zone_t *base = load(zpath);
    tentry_t t;
    te_init(&t, 100, 101, "w", 1);
    te_a(&t, false, "www." ORIGIN, 77);
    append_ok(&t);
    char err[1024] = "";
    apply_err(jpath, base, 0, err, sizeof(err));
    assert_non_null(strstr(err, "100 -> 101"));
    assert_non_null(strstr(err, "www.example.test."));
    assert_non_null(strstr(err, "192.0.2.77"));
    zone_free(base);
}

/* A torn tail (cut short, or a bad CRC at the end) is not an error: the entries before it apply;
 * the next append drops it with one warning naming the path, the offset and the bytes. */
static void test_torn_tail(void **state)
{
    (void)state;
    listed_t l;
    zone_t *base = base_and_changes(&l);
    assert_int_equal(l.n, 3);
    uint64_t full = file_size(jpath);

    assert_int_equal(truncate(jpath, (off_t)(full - 5)), 0); /* the third entry cut short */
    zone_t *o = apply_ok(base, 2);
    assert_int_equal(o->serial, 102);
    zone_free(o);
    source_journal_info_t in;
    char err[512] = "";
    assert_int_equal(source_journal_info(jpath, &in, err, sizeof(err)), 0);
    assert_int_equal(in.entries, 2);
    assert_int_equal(in.last, 102);

    assert_int_equal(truncate(jpath, (off_t)full), 0); /* whole length back, CRC now wrong */
    o = apply_ok(base, 2);
    zone_free(o);

    tentry_t t;
    te_init(&t, 102, 103, "again", 5);
    te_a(&t, true, "late." ORIGIN, 5);
    char cap[2048];
    ztu_capture_begin();
    append_ok(&t);
    ztu_capture_end(cap, sizeof(cap));
    char want[256];
    snprintf(want, sizeof(want), "dropping %" PRIu64 " bytes at offset %" PRIu64, full - l.off[2],
             l.off[2]);
    assert_non_null(strstr(cap, jpath));
    assert_non_null(strstr(cap, want));
    list_ok(&l);
    assert_int_equal(l.n, 3);
    assert_string_equal(l.who[2], "again");
    o = apply_ok(base, 3);
    assert_non_null(rrset(o, "late." ORIGIN, WIRE_T_A));
    assert_null(rrset(o, "txt." ORIGIN, WIRE_T_TXT));
    zone_free(o);

    /* zeros where the data of an interrupted write should be: a tail too */
    int fd = open(jpath, O_WRONLY | O_APPEND);
    assert_true(fd >= 0);
    uint8_t zeros[100] = {0};
    assert_int_equal(write(fd, zeros, sizeof(zeros)), sizeof(zeros));
    close(fd);
    o = apply_ok(base, 3);
    zone_free(o);
    zone_free(base);
}

/* A bad entry in the middle is corruption: an error naming the journal and the offset. */
static void test_corrupt_middle(void **state)
{
    (void)state;
    listed_t l;
    zone_t *base = base_and_changes(&l);
    flip(jpath, l.off[1] + 20); /* inside entry 2's payload */
    char err[1024] = "", want[64];
    apply_err(jpath, base, TERN_EMALF, err, sizeof(err));
    snprintf(want, sizeof(want), "offset %" PRIu64, l.off[1]);
    assert_non_null(strstr(err, want));
    assert_non_null(strstr(err, jpath));
    source_journal_info_t in;
    assert_int_equal(source_journal_info(jpath, &in, err, sizeof(err)), TERN_EMALF);
    tentry_t t;
    te_init(&t, 103, 104, "w", 1);
    assert_int_equal(append(&t, err, sizeof(err)), TERN_EMALF); /* never appended to */

    /* a length damaged in the middle that runs past the end is no torn tail either */
    assert_int_equal(unlink(jpath), 0);
    three_changes();
    list_ok(&l);
    uint8_t big[4] = {0x00, 0x10, 0x00, 0x00};
    int fd = open(jpath, O_RDWR);
    assert_int_equal(pwrite(fd, big, 4, (off_t)(l.off[1] + 4)), 4);
    close(fd);
    apply_err(jpath, base, TERN_EMALF, err, sizeof(err));
    zone_free(base);
}

/* After an append, apply seeks to the entry it remembers: a corrupt first entry is never read
 * (proof that it is not scanned), while a base it does not remember scans and finds it. */
static void test_cache_seeks(void **state)
{
    (void)state;
    write_zone(102, "new IN A 192.0.2.9\n");
    zone_t *b102 = load(zpath);
    /* b102 lacks the TXT removal of 101 -> 102: fine for the entry 102 -> 103 */
    three_changes();
    listed_t l;
    list_ok(&l);
    flip(jpath, l.off[0] + 20);
    zone_t *o = apply_ok(b102, 1); /* seeks straight to 102 -> 103 */
    assert_int_equal(o->serial, 103);
    apply_ok(o, 0); /* and knows 103 is the end */
    write_zone(100, NULL);
    zone_t *b100 = load(zpath);
    char err[1024] = "";
    apply_err(jpath, b100, TERN_EMALF, err, sizeof(err));
    zone_free(o);
    zone_free(b100);
    zone_free(b102);
}

/* The cache is not trusted for a journal replaced (another inode) or truncated behind it. */
static void test_cache_fallback(void **state)
{
    (void)state;
    write_zone(100, NULL);
    zone_t *base = load(zpath);
    three_changes();
    zone_t *o = apply_ok(base, 3); /* the cache now knows 102 -> 103 at its end */
    listed_t l;
    list_ok(&l);

    /* truncated behind its back to its first entry: 103 is no longer in the chain */
    assert_int_equal(truncate(jpath, (off_t)l.off[1]), 0);
    char err[1024] = "";
    apply_err(jpath, o, TERN_EINVAL, err, sizeof(err));
    assert_non_null(strstr(err, "100 to 101"));
    zone_t *o1 = apply_ok(base, 1);
    assert_int_equal(o1->serial, 101);
    zone_free(o1);

    /* replaced by another file (a new inode) holding other changes of the same serials */
    assert_int_equal(unlink(jpath), 0);
    three_changes(); /* the cache now remembers this one's 102 -> 103 */
    char other[200];
    snprintf(other, sizeof(other), "%s.other", jpath);
    const char *names[3] = {"first." ORIGIN, "second." ORIGIN, "third." ORIGIN};
    for (uint32_t i = 0; i < 3; i++) {
        tentry_t t;
        te_init(&t, 100 + i, 101 + i, "w", 1);
        te_a(&t, true, names[i], (uint8_t)i);
        assert_int_equal(
            source_journal_append(other, origin_wire, origin_len, &t.e, err, sizeof(err)), 0);
    }
    assert_int_equal(rename(other, jpath), 0);
    o1 = apply_ok(base, 3);
    assert_non_null(rrset(o1, "second." ORIGIN, WIRE_T_A));
    assert_null(rrset(o1, "new." ORIGIN, WIRE_T_A));
    zone_free(o1);
    write_zone(102, NULL);
    zone_t *b102 = load(zpath);
    o1 = apply_ok(b102, 1); /* from the remembered 102: the new file's entry, found by a scan */
    assert_non_null(rrset(o1, "third." ORIGIN, WIRE_T_A));
    assert_null(rrset(o1, "mail2." ORIGIN, WIRE_T_A));
    zone_free(b102);

    /* replaced by a file of the same size and mtime whose chain goes one serial further: the
     * cache's "103 is the end" is of the old inode */
    assert_int_equal(unlink(jpath), 0);
    three_changes();
    zone_free(o1);
    o1 = apply_ok(base, 3); /* remembered: 102 -> 103, the end */
    three_changes_at(other, 101);
    struct stat st;
    assert_int_equal(stat(jpath, &st), 0);
    assert_int_equal(file_size(other), (uint64_t)st.st_size);
    const struct timespec times[2] = {st.st_atim, st.st_mtim};
    assert_int_equal(utimensat(AT_FDCWD, other, times, 0), 0);
    assert_int_equal(rename(other, jpath), 0);
    write_zone(103, NULL);
    zone_t *b103 = load(zpath);
    zone_t *o4 = apply_ok(b103, 1);
    assert_int_equal(o4->serial, 104);
    zone_free(o4);
    zone_free(b103);
    zone_free(o1);
    zone_free(o);
    zone_free(base);
}

/* One entry over a 10,000-name zone touches one name: the new version is a patch of the base
 * (its delta names the changed owner and the apex only); several entries chain. */
static void test_large_zone_patch(void **state)
{
    (void)state;
    zone_t *base = big_zone(100);
    assert_true(base->node_count > 10000);

    tentry_t t;
    te_init(&t, 100, 101, "w", 1);
    const uint8_t a[4] = {10, 0, 19, 136}, b[4] = {10, 9, 9, 9};
    te_rr(&t, false, "h5000." ORIGIN, WIRE_T_A, 300, a, 4);
    te_rr(&t, true, "h5000." ORIGIN, WIRE_T_A, 300, b, 4);
    append_ok(&t);
    zone_t *o = apply_ok(base, 1);
    const zone_delta_t *d = zone_patch_delta(base, o);
    assert_non_null(d);
    size_t nn = 0;
    zone_delta_names(d, &nn);
    assert_true(nn <= 2);
    uint8_t w[DNAME_MAXLEN];
    wire_name(w, "h5000." ORIGIN);
    assert_true(zone_delta_has(d, w));
    assert_int_equal(o->node_count, base->node_count);
    const zone_rrset_t *s = rrset(o, "h5000." ORIGIN, WIRE_T_A);
    assert_memory_equal(s->rdata + 2, b, 4);
    /* every other name's data is the base's, shared */
    assert_ptr_equal(rrset(o, "h4999." ORIGIN, WIRE_T_A)->rdata,
                     rrset(base, "h4999." ORIGIN, WIRE_T_A)->rdata);

    te_init(&t, 101, 102, "w", 2);
    te_a(&t, true, "h1." ORIGIN, 1);
    append_ok(&t);
    te_init(&t, 102, 103, "w", 3);
    te_a(&t, true, "brand-new." ORIGIN, 3);
    append_ok(&t);
    zone_t *o3 = apply_ok(base, 3);
    assert_int_equal(o3->serial, 103);
    assert_int_equal(o3->node_count, base->node_count + 1);
    assert_int_equal(rrset(o3, "h1." ORIGIN, WIRE_T_A)->count, 2);
    assert_non_null(zone_patch_delta(base, o3));
    zone_delta_names(zone_patch_delta(base, o3), &nn);
    assert_true(nn <= 4);
    zone_t *o3b = apply_ok(o, 2); /* from 101, the version the first entry made */
    assert_int_equal(o3b->node_count, o3->node_count);
    zone_free(o3b);
    zone_free(o3);
    zone_free(o);
    zone_free(base);
}

/* Every RRset of a, the same in b (owner, type, TTL, RDATA) and no more in b; skip: a type a has
 * and b must not. */
static void assert_same_zone(const zone_t *a, const zone_t *b, uint16_t skip)
{
    size_t sets_a = 0, sets_b = 0;
    for (uint32_t i = 0; i < a->node_count; i++) {
        const zone_node_t *n = zone_node_at(a, i);
        const zone_node_t *m = zone_find_node(b, n->name, n->name_len, dname_hash(n->name));
        for (unsigned k = 0; k < n->nrrsets; k++) {
            const zone_rrset_t *s = &n->rrsets[k];
            char nb[1024];
            (void)dname_to_str(n->name, nb, sizeof(nb));
            const zone_rrset_t *r = m ? zone_node_rrset(m, s->type) : NULL;
            if (s->type == skip) {
                if (r)
                    fail_msg("%s type %u was to be left out", nb, s->type);
                continue;
            }
            sets_a++;
            if (!r)
                fail_msg("%s type %u missing after the round trip", nb, s->type);
            if (r->ttl != s->ttl || r->count != s->count || r->rdata_len != s->rdata_len ||
                memcmp(r->rdata, s->rdata, s->rdata_len) != 0)
                fail_msg("%s type %u differs after the round trip", nb, s->type);
        }
    }
    for (uint32_t i = 0; i < b->node_count; i++)
        sets_b += zone_node_at(b, i)->nrrsets;
    assert_int_equal(sets_a, sets_b);
}

/* A journal of 1,000 entries over the 10,000-name zone: replaying the entry just appended after
 * an apply seeks to it and gives what a scan of the whole journal gives (a copy the cache has
 * never seen). Prints the times: an append (fsync'd), a full replay, a seek, a scan, a flush. */
static void test_many_entries(void **state)
{
    (void)state;
    zone_t *base = big_zone(1);
    enum { N = 1000 };
    tentry_t t;
    int64_t t0 = tu_now_ms();
    for (uint32_t i = 1; i < N; i++) {
        char owner[64];
        snprintf(owner, sizeof(owner), "bulk%u." ORIGIN, i);
        te_init(&t, i, i + 1, "key bulk. from 127.0.0.1", i);
        te_a(&t, true, owner, (uint8_t)i);
        append_ok(&t);
    }
    int64_t t1 = tu_now_ms();
    zone_t *prev = apply_ok(base, N - 1);
    int64_t t2 = tu_now_ms();
    assert_int_equal(prev->serial, N);
    te_init(&t, N, N + 1, "key bulk. from 127.0.0.1", N);
    te_a(&t, true, "last." ORIGIN, 1);
    append_ok(&t);
    int64_t t3 = tu_now_ms();
    zone_t *seek = apply_ok(prev, 1);
    int64_t t4 = tu_now_ms();
    char copy[200], cmd[512];
    snprintf(copy, sizeof(copy), "%s/copy.jnl", dir);
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", jpath, copy);
    assert_int_equal(system(cmd), 0);
    zone_t *scan = NULL;
    size_t applied = 0;
    char err[1024] = "";
    int64_t t5 = tu_now_ms();
    assert_int_equal(source_journal_apply(copy, prev, "t", &scan, &applied, err, sizeof(err)), 0);
    int64_t t6 = tu_now_ms();
    assert_int_equal(applied, 1);
    assert_same_zone(seek, scan, 0);
    assert_int_equal(seek->serial, N + 1);
    int64_t t7 = tu_now_ms();
    assert_int_equal(source_journal_flush(jpath, zpath, seek, false, err, sizeof(err)), 0);
    int64_t t8 = tu_now_ms();
    print_message("journal of %d entries over %zu names: append %.2f ms each (fsync'd), replay of "
                  "all %" PRId64 " ms, the one appended: %" PRId64 " ms seeking, %" PRId64
                  " ms scanning; flush %" PRId64 " ms\n",
                  N, base->node_count, (double)(t1 - t0) / (N - 1), t2 - t1, t4 - t3, t6 - t5,
                  t8 - t7);
    zone_free(scan);
    zone_free(seek);
    zone_free(prev);
    zone_free(base);
}

/* The audit listing: who, when, the counts and where each entry starts. */
static void test_list_who_when(void **state)
{
    (void)state;
    three_changes();
    listed_t l;
    list_ok(&l);
    assert_int_equal(l.n, 3);
    assert_int_equal(l.off[0], 23);
    assert_true(l.off[1] > l.off[0] && l.off[2] > l.off[1]);
    assert_int_equal(l.from[0], 100);
    assert_int_equal(l.to[2], 103);
    assert_string_equal(l.who[0], "key update. from 127.0.0.1");
    assert_string_equal(l.who[1], "api key ops from ::1");
    assert_int_equal(l.when[0], 1765000000);
    assert_int_equal(l.when[2], 1765000200);
    assert_int_equal(l.nrem[1], 1);
    assert_int_equal(l.nadd[1], 0);
    assert_int_equal(l.nrem[2], 1);
    assert_int_equal(l.nadd[2], 2);
    tentry_t t;
    te_init(&t, 103, 104, NULL, -5); /* no who; a time before 1970 */
    append_ok(&t);
    list_ok(&l);
    assert_int_equal(l.n, 4);
    assert_string_equal(l.who[3], "");
    assert_int_equal(l.when[3], -5);
}

/* The write-back: the flushed file loads to the RRsets served, odd names and unknown types
 * included, the SOA first; the journal is emptied, and nothing is left to replay. */
static void test_flush_roundtrip(void **state)
{
    (void)state;
    write_zone(100, NULL);
    zone_t *base = load(zpath);
    three_changes();
    zone_t *v = apply_ok(base, 3);
    char err[1024] = "";

    assert_int_equal(source_journal_flush(jpath, zpath, v, false, err, sizeof(err)), 0);
    zone_t *whole = load(zpath);
    assert_same_zone(v, whole, 0);
    assert_non_null(rrset(whole, ORIGIN, WIRE_T_DNSKEY));
    zone_free(whole);
    assert_int_equal(source_journal_flush(jpath, zpath, v, true, err, sizeof(err)), 0);
    zone_t *back = load(zpath);
    assert_int_equal(back->serial, 103);
    assert_same_zone(v, back, WIRE_T_DNSKEY);
    assert_non_null(rrset(back, "a\\.b." ORIGIN, WIRE_T_A));
    assert_non_null(rrset(back, "sp\\032ace." ORIGIN, WIRE_T_TXT));
    assert_non_null(rrset(back, "odd." ORIGIN, 65534));

    /* the text: the SOA first, every owner absolute */
    FILE *f = fopen(zpath, "r");
    assert_non_null(f);
    char line[2048];
    bool first = true;
    while (fgets(line, sizeof(line), f)) {
        if (line[0] == ';')
            continue;
        char *sp = strpbrk(line, " \t");
        assert_non_null(sp);
        assert_int_equal(sp[-1], '.');
        if (first)
            assert_non_null(strstr(line, "SOA"));
        first = false;
    }
    fclose(f);

    source_journal_info_t in;
    assert_int_equal(source_journal_info(jpath, &in, err, sizeof(err)), 0);
    assert_int_equal(in.entries, 0);
    assert_int_equal(in.bytes, 23); /* its header */
    apply_ok(back, 0);

    /* the journal goes on from the flushed serial */
    tentry_t t;
    te_init(&t, 103, 104, "w", 1);
    te_a(&t, true, "after." ORIGIN, 4);
    append_ok(&t);
    zone_t *v104 = apply_ok(back, 1);
    assert_int_equal(source_journal_flush(jpath, zpath, v104, false, err, sizeof(err)), 0);
    zone_t *back2 = load(zpath);
    assert_same_zone(v104, back2, 0);
    apply_ok(back2, 0);

    /* a file that cannot be written: an error naming it, the journal untouched */
    te_init(&t, 104, 105, "w", 1);
    te_a(&t, true, "later." ORIGIN, 5);
    append_ok(&t);
    char bad[256];
    snprintf(bad, sizeof(bad), "%s/no-such-dir/example.test.zone", dir);
    assert_true(source_journal_flush(jpath, bad, v104, false, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, bad));
    assert_int_equal(source_journal_info(jpath, &in, err, sizeof(err)), 0);
    assert_int_equal(in.entries, 1);

    /* a journal of another zone at that path is not emptied (nor removed) */
    uint8_t other[DNAME_MAXLEN];
    size_t olen = wire_name(other, "other.test.");
    assert_int_equal(unlink(jpath), 0);
    t.e.nadded = 0;
    t.e.soa_len = (uint16_t)rdata_soa(t.soa, "ns1.other.test.", "h.other.test.", 105, 300);
    assert_int_equal(source_journal_append(jpath, other, olen, &t.e, err, sizeof(err)), 0);
    uint64_t size = file_size(jpath);
    assert_int_equal(source_journal_flush(jpath, zpath, v104, false, err, sizeof(err)), TERN_EIO);
    assert_non_null(strstr(err, "other.test."));
    assert_int_equal(file_size(jpath), size);
    zone_free(back2);
    zone_free(v104);
    zone_free(back);
    zone_free(v);
    zone_free(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append_chain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_apply_serials, setup, teardown),
        cmocka_unit_test_setup_teardown(test_apply_missing_rr, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torn_tail, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_middle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cache_seeks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cache_fallback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_large_zone_patch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_entries, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_who_when, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flush_roundtrip, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
