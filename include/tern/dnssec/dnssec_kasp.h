/*
 * dnssec_kasp.h — key and signing policy (KASP): when each DNSSEC key of a zone is made,
 * published, used, retired and removed, as Knot's KASP and BIND's dnssec-policy do it.
 *
 * Owns: one zone's key-state machine, a pure function of (state, policy, now). It reads no clock
 * (now is a parameter, Unix seconds), starts no thread and opens no socket; its only I/O is its
 * state file. It never touches key material: it says which keys to generate (the caller makes
 * them and registers them with dnssec_kasp_add_key()), which keys sit in the DNSKEY RRset, which
 * sign it and which sign the rest of the zone, whose CDS/CDNSKEY are published and whose DS the
 * caller should look for at the parent. The caller (the loader) turns that plan into a zone.
 *
 * Timing terms are RFC 7583's: Tpub (publish), Trdy (ready), Tact (active), Tret (retire), Trem
 * (remove), and its intervals: propagation delay (Dprp: every secondary has a change), DNSKEY
 * TTL, the zone's largest TTL (how long a cached signature can outlive its key's use) and the
 * parent's DS TTL. Each key records the time each event HAPPENED (0: not yet); the time the next
 * one is due is computed from those and the policy, so a changed policy takes effect at once and
 * a restart (load + step) resumes exactly where the zone was.
 *
 * Rollovers (RFC 6781 §4.1; RFC 7344 CDS/CDNSKEY; RFC 8078 CDS DELETE):
 *   - initial signing: a KSK and a ZSK (or one CSK) are published and sign at once (a zone
 *     without a DS at its parent is validated by nobody, so signing before the DS exists is
 *     harmless and lets the operator check the signed zone); the KSK is ready, its CDS published
 *     and its DS wanted, once every unsigned answer cached before signing has expired:
 *     max(DNSKEY TTL, zone max TTL) + Dprp. It is active once its DS is seen.
 *   - ZSK pre-publish (§4.1.1.1): the new ZSK is published; DNSKEY TTL + Dprp later it becomes
 *     active and the old one retires (stops signing); zone max TTL + Dprp later the old one is
 *     removed from DNSKEY.
 *   - KSK double-signature (§4.1.2): the new KSK is published and signs DNSKEY at once; DNSKEY
 *     TTL + Dprp later it is ready: its CDS/CDNSKEY replace the old one's and its DS is wanted;
 *     when its DS is seen it becomes active and the old KSK retires; parent DS TTL + Dprp later
 *     the old KSK (which signs DNSKEY until then) is removed.
 *   - CSK: like the KSK, the new CSK signing the zone from its publication too (double
 *     signatures during the rollover: no ZSK-style swap to time), the old one removed at
 *     retire + max(parent DS TTL, zone max TTL) + Dprp.
 *   - algorithm rollover (§4.1.4), started by a policy whose algorithm differs from the keys':
 *     the new keys sign every RRset first (pre-active); zone max TTL + Dprp later they are
 *     published; DNSKEY TTL + Dprp later they are ready (CDS of the new KSK, DS wanted) and the
 *     new ZSK active; when the new DS is seen the old KSK retires; parent DS TTL + Dprp later every
 *     old key leaves DNSKEY but the old ZSK keeps signing (post-active); DNSKEY TTL + Dprp later
 *     the old keys are removed (their signatures stop).
 *   - unsigning (RFC 8078 §4): dnssec_kasp_unsign() publishes CDS/CDNSKEY DELETE; once the
 *     caller reports the parent's DS gone (dnssec_kasp_ds_gone()), parent DS TTL + Dprp later
 *     every key is removed at once and the zone is served unsigned.
 * Lifetimes: a key's successor is made at active + lifetime - (DNSKEY TTL + Dprp), so the new
 * ZSK becomes active exactly when the old one's lifetime ends and the new KSK is ready (its DS
 * wanted) at that moment (the swap itself waits for the parent). A rollover of a role never
 * starts while one of that role (or an algorithm rollover, or the initial DS) is in progress.
 *
 * State file (dnssec_kasp_save/load, dnssec_kasp_to_text/from_text), UTF-8 text, one record per
 * line, fields `name=value` separated by single spaces, every field present, in any order:
 *     tern-kasp 1
 *     zone unsign=0 ds_gone=0 roll_ksk=0 roll_zsk=0
 *     key id=Kexample.com.+013+12345 tag=12345 alg=13 role=zsk created=T pre_active=T
 *         publish=T ready=T active=T retire=T post_active=T remove=T ds_submitted=T ds_seen=T
 *     end keys=N
 * (one `key` line per key, on one line; T: Unix seconds, 0 = not yet; role zsk|ksk|csk; an id is
 * 1..255 printable characters without blanks or '='). The `end` line with the key count proves
 * the file whole: a truncated or corrupt file is refused, never half loaded.
 *
 * Policy changes: timings apply at once (waits are computed, not stored); a new algorithm starts
 * an algorithm rollover; csk (KSK+ZSK or CSK) applies to new key sets (the first signing, an
 * algorithm rollover): a rollover replaces a key by one of its own role. An unsigned zone stays
 * unsigned: to sign it again the caller starts from dnssec_kasp_new().
 *
 * Lifecycle: dnssec_kasp_new() or dnssec_kasp_load() → step / add_key / ds_seen / rollover /
 * unsign, save after each change → dnssec_kasp_free().
 * Threading: the loader thread owns a zone's state and is its only reader and writer; nothing
 * here is locked. Other threads (ctl, metrics) read only immutable snapshots the loader made: the
 * text of dnssec_kasp_status_text() or counts from dnssec_kasp_count(), published by the caller.
 */
#ifndef TERN_DNSSEC_DNSSEC_KASP_H
#define TERN_DNSSEC_DNSSEC_KASP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"

/* Keys one zone's state holds, removed ones included: an algorithm rollover during a KSK and a
 * ZSK rollover has at most 8 live keys; the rest is history, the oldest removed key is forgotten
 * when room is needed. */
#define DNSSEC_KASP_KEYS_MAX 32
/* A key id: a BIND file stem ("Kexample.com.+013+12345") or a Redis id; a path component. */
#define DNSSEC_KASP_ID_MAX 255
/* Transition lines one step reports; a step moves each key at most a few times. */
#define DNSSEC_KASP_LOG_MAX  32
#define DNSSEC_KASP_LINE_MAX 128

typedef enum dnssec_kasp_role {
    DNSSEC_KASP_KSK, /* signs the DNSKEY RRset; its DS is at the parent */
    DNSSEC_KASP_ZSK, /* signs every other RRset */
    DNSSEC_KASP_CSK, /* both */
} dnssec_kasp_role_t;

/* Derived from a key's timestamps (the latest event that happened). */
typedef enum dnssec_kasp_state {
    DNSSEC_KASP_GENERATED,   /* made, not yet used */
    DNSSEC_KASP_PRE_ACTIVE,  /* algorithm rollover: signs before its DNSKEY is published */
    DNSSEC_KASP_PUBLISHED,   /* in DNSKEY, not yet in every cache (a KSK/CSK signs DNSKEY) */
    DNSSEC_KASP_READY,       /* in every cache; a KSK's CDS is published, its DS wanted */
    DNSSEC_KASP_ACTIVE,      /* the zone's signer (ZSK) / its DS is at the parent (KSK) */
    DNSSEC_KASP_RETIRED,     /* ZSK: signs no more; KSK: its successor's DS replaced its own */
    DNSSEC_KASP_POST_ACTIVE, /* algorithm rollover: out of DNSKEY, its signatures stay a while */
    DNSSEC_KASP_REMOVED,     /* gone for good: never published or used again */
    DNSSEC_KASP_STATE_COUNT
} dnssec_kasp_state_t;

typedef struct dnssec_kasp_policy {
    uint8_t algorithm;         /* DNSSEC_ALG_*: 8, 13 or 15 */
    bool csk;                  /* one combined key instead of a KSK and a ZSK */
    uint16_t rsa_bits;         /* algorithm 8 only: 1024..4096 */
    int64_t ksk_lifetime;      /* seconds from active to the successor's DS wanted (KSK, CSK);
                                  0: never rolls by itself */
    int64_t zsk_lifetime;      /* seconds a ZSK is active; 0: never rolls by itself */
    int64_t propagation_delay; /* seconds until every secondary has a change (Dprp) */
    uint32_t dnskey_ttl;       /* TTL of DNSKEY, CDS, CDNSKEY */
    uint32_t zone_max_ttl;     /* the zone's largest TTL: the caller sets it per zone version
                                  (after it shrinks, keep the old value for the old value's
                                  seconds: answers cached before live that long) */
    uint32_t parent_ds_ttl;    /* TTL of the DS RRset at the parent */
    uint8_t cds_digest;        /* CDS digest type: 2 (SHA-256) or 4 (SHA-384) */
    bool publish_cds;          /* publish CDS/CDNSKEY for the parent (RFC 7344) */
} dnssec_kasp_policy_t;

/* One key's record. The timestamps are when each event happened (0: not yet). */
typedef struct dnssec_kasp_key {
    char id[DNSSEC_KASP_ID_MAX + 1];
    uint16_t tag;
    uint8_t alg;
    dnssec_kasp_role_t role;
    int64_t created;      /* registered by dnssec_kasp_add_key() */
    int64_t pre_active;   /* algorithm rollover: began signing before publication */
    int64_t publish;      /* Tpub: entered DNSKEY */
    int64_t ready;        /* Trdy: its DNSKEY is in every cache that may see its signatures */
    int64_t active;       /* Tact: ZSK signs the zone; KSK/CSK: its DS is at the parent */
    int64_t retire;       /* Tret: ZSK stopped signing; KSK/CSK: its DS was replaced */
    int64_t post_active;  /* algorithm rollover: left DNSKEY, signatures kept a while */
    int64_t remove;       /* Trem: out of DNSKEY and signing nothing, for good */
    int64_t ds_submitted; /* KSK/CSK: its CDS was published / its DS first wanted */
    int64_t ds_seen;      /* KSK/CSK: its DS was seen at the parent */
} dnssec_kasp_key_t;

/* What the zone must look like after a step, key by key. */
typedef struct dnssec_kasp_plan_key {
    char id[DNSSEC_KASP_ID_MAX + 1];
    uint16_t tag;
    uint8_t alg;
    dnssec_kasp_role_t role;
    dnssec_kasp_state_t state;
    bool in_dnskey;    /* its DNSKEY is in the DNSKEY RRset */
    bool signs_dnskey; /* KSK/CSK: signs the DNSKEY (and CDS/CDNSKEY) RRsets */
    bool signs_zone;   /* ZSK/CSK: signs every other RRset */
    bool in_cds;       /* its CDS (digest pol->cds_digest) and CDNSKEY are published */
} dnssec_kasp_plan_key_t;

typedef struct dnssec_kasp_generate {
    dnssec_kasp_role_t role;
    uint8_t alg;
    uint16_t rsa_bits; /* algorithm 8: the modulus size; else 0 */
} dnssec_kasp_generate_t;

typedef struct dnssec_kasp_plan {
    dnssec_kasp_plan_key_t keys[DNSSEC_KASP_KEYS_MAX]; /* every key of the state, removed too */
    size_t nkeys;
    dnssec_kasp_generate_t generate[2]; /* keys to make now (then add_key, then step again) */
    size_t ngenerate;
    uint16_t ds_wanted[4]; /* tags of the KSK/CSKs whose DS the caller should look for */
    size_t nds_wanted;
    bool cds_delete;    /* publish CDS/CDNSKEY DELETE (RFC 8078): the zone is being unsigned */
    bool unsigned_zone; /* no key signs: serve the zone unsigned */
    int64_t next_event; /* earliest time anything changes by itself; 0: nothing scheduled */
    char next_what[DNSSEC_KASP_LINE_MAX]; /* what happens then, for logs and status */
    char log[DNSSEC_KASP_LOG_MAX][DNSSEC_KASP_LINE_MAX]; /* "ZSK 12345: published → active" */
    size_t nlog;
} dnssec_kasp_plan_t;

typedef struct dnssec_kasp dnssec_kasp_t;

/**
 * The defaults, each as Knot's KASP has it: algorithm 13 (small signatures, RFC 8624 MUST),
 * KSK and ZSK (not CSK), rsa_bits 2048, ksk_lifetime 0 (a KSK rollover involves the parent: only
 * when the operator asks), zsk_lifetime 30 days, propagation_delay 1 hour, dnskey_ttl 3600,
 * zone_max_ttl 86400 (until the caller sets the zone's), parent_ds_ttl 86400 (the usual TLD DS
 * TTL), cds_digest 2 (SHA-256, RFC 8624 MUST), publish_cds true.
 */
void dnssec_kasp_policy_default(dnssec_kasp_policy_t *pol);

/**
 * 0 if pol makes sense, else TERN_EINVAL with one line in err naming the field and why, e.g.
 * "zsk_lifetime 3600 s is shorter than the ZSK rollover it needs: dnskey_ttl + zone_max_ttl +
 * 2 x propagation_delay = 93600 s". Checks: algorithm 8, 13 or 15; rsa_bits 1024..4096 for 8;
 * no negative time; TTLs at most 2^31 - 1 (RFC 2181 §8); cds_digest 2 or 4; a ZSK lifetime at
 * least dnskey_ttl + zone_max_ttl + 2 Dprp (one rollover ends before the next starts) and a KSK
 * lifetime at least dnskey_ttl + parent_ds_ttl + 2 Dprp (or max(DS, zone max) for a CSK).
 */
int dnssec_kasp_policy_check(const dnssec_kasp_policy_t *pol, char *err, size_t errlen) TERN_WUR;

/** An empty state: a zone never signed (the first step asks for its keys). NULL: no memory. */
dnssec_kasp_t *dnssec_kasp_new(void);

/** Free st (NULL: nothing). */
void dnssec_kasp_free(dnssec_kasp_t *st);

/** Keys in st, removed ones included. */
size_t dnssec_kasp_key_count(const dnssec_kasp_t *st);

/** The i-th key (i < dnssec_kasp_key_count()), valid until the next call that changes st. */
const dnssec_kasp_key_t *dnssec_kasp_key_at(const dnssec_kasp_t *st, size_t i);

/** The state a key's timestamps say. */
dnssec_kasp_state_t dnssec_kasp_key_state(const dnssec_kasp_key_t *k);

/** "generated", "pre-active", "published", "ready", "active", "retired", "post-active",
 * "removed". */
const char *dnssec_kasp_state_name(dnssec_kasp_state_t s);

/** "KSK", "ZSK", "CSK". */
const char *dnssec_kasp_role_name(dnssec_kasp_role_t r);

/**
 * Move every key whose event is due at now (several events in a row when each is due), then fill
 * *out with the resulting plan: every key's flags, the keys to generate, the DS to look for,
 * CDS DELETE, the next event and the transitions made (log). Transition times are recorded as
 * now, so every later wait counts from when a change really happened. If out->ngenerate > 0 the
 * caller makes those keys, registers them with dnssec_kasp_add_key() and steps again at the same
 * now. Returns 0, or TERN_EINVAL if dnssec_kasp_policy_check() refuses pol (st unchanged).
 */
int dnssec_kasp_step(dnssec_kasp_t *st, const dnssec_kasp_policy_t *pol, int64_t now,
                     dnssec_kasp_plan_t *out) TERN_WUR;

/**
 * Register a key the caller generated after a step asked for it (state generated; the next step
 * uses it). id names it for the caller (file stem, Redis id). Refused with a line in err:
 * TERN_EINVAL (an id empty, over 255 characters, with blanks, '=' or control characters; an
 * algorithm other than 8, 13, 15), TERN_EEXIST (the id is taken, or a live key of alg has the same
 * tag: make another key), TERN_ELIMIT (DNSSEC_KASP_KEYS_MAX keys, none removed to forget).
 */
int dnssec_kasp_add_key(dnssec_kasp_t *st, dnssec_kasp_role_t role, uint8_t alg, uint16_t tag,
                        const char *id, int64_t now, char *err, size_t errlen) TERN_WUR;

/**
 * The DS of the KSK/CSK with this tag is at the parent (its servers answered it, or the operator
 * said so: ternctl dnssec ds-seen). The next step makes it active once it is ready and retires
 * the key it replaces. 0, or with a line in err: TERN_ENOENT (no published KSK/CSK with that tag
 * waits for its DS), TERN_EEXIST (two do: tags collide), TERN_EINVAL (the zone is being
 * unsigned). Seeing the same DS again is 0 and changes nothing.
 */
int dnssec_kasp_ds_seen(dnssec_kasp_t *st, uint16_t tag, int64_t now, char *err,
                        size_t errlen) TERN_WUR;

/**
 * Start a rollover of role now (ZSK; KSK or CSK roll the zone's DNSKEY signer): the next step
 * asks for the new key. Refused with TERN_EAGAIN and the reason in err if a rollover of that role
 * is in progress (a successor exists, or the old key is not yet removed), an algorithm rollover
 * or the initial DS is pending, or the zone is being unsigned; TERN_ENOENT if no key of that role
 * is active (nothing to roll). pol: the policy the rollover follows.
 */
int dnssec_kasp_rollover(dnssec_kasp_t *st, const dnssec_kasp_policy_t *pol,
                         dnssec_kasp_role_t role, int64_t now, char *err, size_t errlen) TERN_WUR;

/**
 * Start unsigning the zone (RFC 8078): from the next step CDS/CDNSKEY DELETE are published, no
 * DS is wanted and no rollover starts. 0, or TERN_EINVAL in err: already unsigning, or no key
 * was ever published (nothing to unsign).
 */
int dnssec_kasp_unsign(dnssec_kasp_t *st, int64_t now, char *err, size_t errlen) TERN_WUR;

/**
 * While unsigning: the parent has no DS for the zone any more (seen at its servers, or said by
 * the operator). Parent DS TTL + Dprp later the step removes every key. 0, or TERN_EINVAL in err
 * if the zone is not being unsigned. A second call is 0 and keeps the first time.
 */
int dnssec_kasp_ds_gone(dnssec_kasp_t *st, int64_t now, char *err, size_t errlen) TERN_WUR;

/** Unsigning: when it started (dnssec_kasp_unsign(); 0: it has not), and in *ds_gone when the
 * parent's DS was reported gone (0: not yet). */
int64_t dnssec_kasp_unsigning(const dnssec_kasp_t *st, int64_t *ds_gone);

/** True while some key of st is in use: published, or signing before its publication. */
bool dnssec_kasp_in_use(const dnssec_kasp_t *st);

/** Count st's keys by state into counts[DNSSEC_KASP_STATE_COUNT] (metrics). */
void dnssec_kasp_count(const dnssec_kasp_t *st, size_t counts[DNSSEC_KASP_STATE_COUNT]);

/**
 * Status text for `ternctl dnssec status`: one line per key (role, tag, algorithm, state, id,
 * the time and kind of its next event or what it waits for), then one for the zone's next event.
 * Times are ISO 8601 UTC. Returns a malloc'ed NUL-terminated string the caller frees (an
 * immutable snapshot another thread may read), or NULL when out of memory.
 */
char *dnssec_kasp_status_text(const dnssec_kasp_t *st, const dnssec_kasp_policy_t *pol,
                              int64_t now);

/**
 * The state as text in the state-file format (see above). Returns a malloc'ed NUL-terminated
 * string the caller frees (to store in Redis, say), or NULL when out of memory.
 */
char *dnssec_kasp_to_text(const dnssec_kasp_t *st);

/**
 * Parse a whole state text. where names it in messages ("/var/lib/tern/example.com.kasp",
 * "redis key ..."). 0 and *out (the caller frees it), or TERN_ESYNTAX with "WHERE:LINE: what"
 * in err (a bad or missing header, an unknown or repeated or missing field, a bad number, role
 * or id, an impossible order of events, a duplicate id, a key count that does not match `end`,
 * no `end`: truncated), TERN_ELIMIT (too many keys), TERN_ENOMEM. Nothing is half loaded.
 */
int dnssec_kasp_from_text(const char *text, const char *where, dnssec_kasp_t **out, char *err,
                          size_t errlen) TERN_WUR;

/**
 * Write st to path atomically: a temporary file beside it, fsync'ed, renamed over path, the
 * directory fsync'ed (tern_file_replace()). A crash leaves the old file or the new one. 0 or a
 * negative code with a line naming the file in err.
 */
int dnssec_kasp_save(const dnssec_kasp_t *st, const char *path, char *err, size_t errlen) TERN_WUR;

/**
 * Read path (a regular file of at most 1 MiB) with dnssec_kasp_from_text(): 0 and *out, or a
 * negative code with "PATH:LINE: what" in err; TERN_ENOENT when the file does not exist (a zone
 * never signed: the caller starts with dnssec_kasp_new()).
 */
int dnssec_kasp_load(const char *path, dnssec_kasp_t **out, char *err, size_t errlen) TERN_WUR;

#endif
