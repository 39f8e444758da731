/*
 * dnssec_sign.c — see dnssec_sign.h.
 *
 * The region: libcrypto calls our malloc/realloc/free for everything it allocates
 * (CRYPTO_set_mem_functions). While a thread is inside dnssec_sign() its region is active and
 * an allocation is carved from it (a 16-byte header keeps the size, for realloc); free() of a
 * pointer inside a region is nothing; the region is reset when the signature is done. Outside a
 * signature, and when a region is full, the calls go to the C library as before. A region must
 * never hold something libcrypto keeps past the signature: every such object (the thread's DRBG
 * and error state, the key's precomputation, the EVP_PKEY_CTX) is made by the warm-up
 * signatures of dnssec_signer_new() and dnssec_keyctx_new(), outside any region. The unit test
 * poisons each region after use and verifies every signature, which a kept object would break.
 */
#include "tern/dnssec/dnssec_sign.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "tern/common/err.h"
#include "tern/wire/rdata.h"

/* What one ECDSA or RSA signature allocates inside libcrypto is a few KiB (OpenSSL 3.0: 45
 * objects for P-256, 25 for RSA-2048, most of them bignums); 256 KiB leaves room for RSA-4096
 * and for libcrypto versions that allocate more, and costs nothing until touched. */
#define REGION_BYTES (256u * 1024u)
#define REGION_HDR   16u

typedef struct region {
    uint8_t *base;
    size_t cap, used;
    uint64_t spills; /* allocations that did not fit and went to malloc() */
} region_t;

static __thread region_t *tls_active; /* the region of the signature being made, or NULL */
static __thread region_t *tls_own;    /* this thread's region (frees into it are no-ops) */

static bool in_region(const region_t *r, const void *p)
{
    return r && (const uint8_t *)p >= r->base && (const uint8_t *)p < r->base + r->cap;
}

static void *region_alloc(region_t *r, size_t n)
{
    size_t need = (n + REGION_HDR + 15u) & ~(size_t)15u;
    if (need > r->cap - r->used) {
        r->spills++;
        return NULL;
    }
    uint8_t *p = r->base + r->used;
    r->used += need;
    memcpy(p, &n, sizeof(n));
    return p + REGION_HDR;
}

static void *mem_malloc(size_t n, const char *file, int line)
{
    (void)file;
    (void)line;
    region_t *r = tls_active;
    void *p = r ? region_alloc(r, n) : NULL;
    return p ? p : malloc(n);
}

static void *mem_realloc(void *old, size_t n, const char *file, int line)
{
    region_t *own = tls_own;
    if (old && in_region(own, old)) {
        size_t was;
        memcpy(&was, (uint8_t *)old - REGION_HDR, sizeof(was));
        void *p = mem_malloc(n, file, line);
        if (p)
            memcpy(p, old, was < n ? was : n);
        return p;
    }
    if (!old)
        return mem_malloc(n, file, line);
    return realloc(old, n);
}

static void mem_free(void *p, const char *file, int line)
{
    (void)file;
    (void)line;
    if (p && in_region(tls_own, p))
        return; /* the region is reset in one go */
    free(p);
}

bool dnssec_mem_install(void)
{
    static int installed = -1;
    if (installed < 0)
        installed = CRYPTO_set_mem_functions(mem_malloc, mem_realloc, mem_free) == 1;
    return installed == 1;
}

struct dnssec_keyctx {
    const dnssec_key_t *key;
    EVP_PKEY_CTX *pctx; /* ECDSA, RSA: initialised for signing a digest, reused */
    EVP_MD *md;         /* SHA-256 fetched once (ECDSA, RSA) */
};

struct dnssec_signer {
    uint8_t *buf; /* signing data */
    size_t cap;
    bool grow;
    uint8_t *canon; /* the RRs' canonical RDATA, back to back */
    size_t canon_cap;
    uint32_t *idx; /* per RR: offset in canon (sorted) */
    uint32_t *len; /* per RR: RDATA length, by RR number */
    uint32_t *ord; /* RR numbers in canonical order */
    size_t nidx;   /* entries of idx, len and ord */
    EVP_MD_CTX *mdctx;
    region_t region;
    uint64_t sigs, ns;
};

static void set_err(char *err, size_t errlen, const char *what, const dnssec_key_t *k)
{
    unsigned long e = ERR_get_error();
    char ebuf[160] = "";
    if (e)
        ERR_error_string_n(e, ebuf, sizeof(ebuf));
    ERR_clear_error();
    if (errlen)
        snprintf(err, errlen, "%s: %s%s%s", k->label, what, ebuf[0] ? ": " : "", ebuf);
}

static int raw_sign(dnssec_signer_t *s, const dnssec_keyctx_t *kc, const uint8_t *data, size_t len,
                    uint8_t *sig, region_t *region);

/* One signature over a few bytes, outside any region: what libcrypto makes on first use of
 * this key (and of this thread's random generator) is made now, with malloc(). */
static int warm_up(dnssec_signer_t *s, const dnssec_keyctx_t *kc)
{
    static const uint8_t probe[32] = {0};
    uint8_t sig[DNSSEC_SIG_MAX];
    return raw_sign(s, kc, probe, sizeof(probe), sig, NULL);
}

dnssec_keyctx_t *dnssec_keyctx_new(const dnssec_key_t *k, char *err, size_t errlen)
{
    dnssec_keyctx_t *kc = calloc(1, sizeof(*kc));
    dnssec_signer_t *tmp = NULL;
    if (!kc) {
        if (errlen)
            snprintf(err, errlen, "%s: out of memory", k->label);
        return NULL;
    }
    kc->key = k;
    if (!k->pkey) {
        if (errlen)
            snprintf(err, errlen, "%s: no private key", k->label);
        goto fail;
    }
    if (k->alg != DNSSEC_ALG_ED25519) {
        kc->md = EVP_MD_fetch(NULL, "SHA256", NULL);
        kc->pctx = EVP_PKEY_CTX_new_from_pkey(NULL, k->pkey, NULL);
        if (!kc->md || !kc->pctx || EVP_PKEY_sign_init(kc->pctx) != 1) {
            set_err(err, errlen, "cannot sign with this key", k);
            goto fail;
        }
        if (k->alg == DNSSEC_ALG_RSASHA256 &&
            (EVP_PKEY_CTX_set_rsa_padding(kc->pctx, RSA_PKCS1_PADDING) != 1 ||
             EVP_PKEY_CTX_set_signature_md(kc->pctx, kc->md) != 1)) {
            set_err(err, errlen, "cannot set RSA PKCS#1 v1.5 with SHA-256", k);
            goto fail;
        }
    }
    tmp = dnssec_signer_new(1024, false);
    if (!tmp || warm_up(tmp, kc) < 0) {
        set_err(err, errlen, "test signature failed", k);
        goto fail;
    }
    dnssec_signer_free(tmp);
    return kc;
fail:
    dnssec_signer_free(tmp);
    dnssec_keyctx_free(kc);
    return NULL;
}

void dnssec_keyctx_free(dnssec_keyctx_t *kc)
{
    if (!kc)
        return;
    EVP_PKEY_CTX_free(kc->pctx);
    EVP_MD_free(kc->md);
    free(kc);
}

const dnssec_key_t *dnssec_keyctx_key(const dnssec_keyctx_t *kc)
{
    return kc->key;
}

dnssec_signer_t *dnssec_signer_new(size_t max_bytes, bool grow)
{
    dnssec_signer_t *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->grow = grow;
    s->cap = max_bytes < 1024 ? 1024 : max_bytes;
    s->canon_cap = s->cap;
    s->buf = malloc(s->cap);
    s->canon = malloc(s->canon_cap);
    /* every RR takes at least 11 bytes of signing data (a root owner, type, class, TTL,
     * RDLENGTH), so a signer that cannot grow never sorts more than cap / 11 */
    s->nidx = grow ? UINT16_MAX + 1u : s->cap / 11 + 1;
    s->idx = malloc(s->nidx * sizeof(*s->idx));
    s->len = malloc(s->nidx * sizeof(*s->len));
    s->ord = malloc(s->nidx * sizeof(*s->ord));
    s->mdctx = EVP_MD_CTX_new();
    s->region.cap = REGION_BYTES;
    /* anonymous pages: resident only once a signature has used them */
    void *m = mmap(NULL, REGION_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    s->region.base = m == MAP_FAILED ? NULL : m;
    if (!s->buf || !s->canon || !s->idx || !s->len || !s->ord || !s->mdctx || !s->region.base) {
        dnssec_signer_free(s);
        return NULL;
    }
    /* this thread's libcrypto state, made now and with malloc(): the error queue and the
     * random generators ECDSA's nonce and RSA's blinding draw from */
    ERR_clear_error();
    uint8_t rnd[16];
    if (RAND_priv_bytes(rnd, sizeof(rnd)) != 1 || RAND_bytes(rnd, sizeof(rnd)) != 1) {
        dnssec_signer_free(s);
        return NULL;
    }
    tls_own = &s->region;
    return s;
}

void dnssec_signer_free(dnssec_signer_t *s)
{
    if (!s)
        return;
    EVP_MD_CTX_free(s->mdctx);
    if (tls_own == &s->region)
        tls_own = NULL;
    if (s->region.base)
        munmap(s->region.base, REGION_BYTES);
    free(s->buf);
    free(s->canon);
    free(s->idx);
    free(s->len);
    free(s->ord);
    free(s);
}

void dnssec_signer_stats(const dnssec_signer_t *s, uint64_t *sigs, uint64_t *ns)
{
    *sigs = __atomic_load_n(&s->sigs, __ATOMIC_RELAXED);
    *ns = __atomic_load_n(&s->ns, __ATOMIC_RELAXED);
}

/* libcrypto's signature over data into sig (k->siglen bytes, DNSSEC form). With region (a
 * worker's signer), libcrypto's allocations come from it, for contexts made and freed within
 * the call only: RSA's blinding keeps what it allocates (see the header). */
static int raw_sign(dnssec_signer_t *s, const dnssec_keyctx_t *kc, const uint8_t *data, size_t len,
                    uint8_t *sig, region_t *region)
{
    const dnssec_key_t *k = kc->key;
    int ok;
    if (k->alg == DNSSEC_ALG_ED25519) {
        /* EdDSA signs the message itself (RFC 8080 §4), one shot; the context is reset before
         * the region is, so nothing of the signature outlives it */
        size_t sl = k->siglen;
        tls_active = region;
        ok = EVP_DigestSignInit_ex(s->mdctx, NULL, NULL, NULL, NULL, k->pkey, NULL) == 1 &&
             EVP_DigestSign(s->mdctx, sig, &sl, data, len) == 1 && sl == k->siglen;
        EVP_MD_CTX_reset(s->mdctx);
        tls_active = NULL;
        return ok ? 0 : TERN_EINVAL;
    }
    /* one shot: its context is made and freed inside (in the region: nothing is kept) */
    uint8_t dgst[EVP_MAX_MD_SIZE];
    unsigned dl = 0;
    tls_active = k->alg == DNSSEC_ALG_RSASHA256 ? NULL : region;
    ok = EVP_Digest(data, len, dgst, &dl, kc->md, NULL) == 1;
    tls_active = NULL;
    if (!ok)
        return TERN_EINVAL;
    if (k->alg == DNSSEC_ALG_RSASHA256) {
        /* never in the region: RSA's blinding, kept in the key, is renewed in place every 32
         * signatures (a worker's miss with an RSA key allocates; see the header) */
        size_t sl = k->siglen;
        if (EVP_PKEY_sign(kc->pctx, sig, &sl, dgst, dl) != 1 || sl != k->siglen)
            return TERN_EINVAL;
        return 0;
    }
    /* ECDSA: libcrypto gives DER SEQUENCE { r, s }; DNSSEC wants r and s as two 32-byte
     * big-endian integers (RFC 6605 §4) */
    uint8_t der[80];
    size_t dlen = sizeof(der);
    tls_active = region;
    ok = EVP_PKEY_sign(kc->pctx, der, &dlen, dgst, dl) == 1;
    const uint8_t *p = der;
    ECDSA_SIG *es = ok ? d2i_ECDSA_SIG(NULL, &p, (long)dlen) : NULL;
    if (es) {
        const BIGNUM *r, *sv;
        ECDSA_SIG_get0(es, &r, &sv);
        ok = BN_bn2binpad(r, sig, 32) == 32 && BN_bn2binpad(sv, sig + 32, 32) == 32;
        ECDSA_SIG_free(es);
    } else {
        ok = 0;
    }
    tls_active = NULL;
    return ok ? 0 : TERN_EINVAL;
}

static void put16(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static bool grow_to(uint8_t **buf, size_t *cap, size_t need)
{
    size_t n = *cap;
    while (n < need)
        n *= 2;
    uint8_t *p = realloc(*buf, n);
    if (!p)
        return false;
    *buf = p;
    *cap = n;
    return true;
}

int dnssec_sign(dnssec_signer_t *s, const dnssec_keyctx_t *kc, const dnssec_rrsig_req_t *req,
                uint16_t count, const uint8_t *rdata, const uint32_t *offs, uint8_t *out,
                size_t cap)
{
    const dnssec_key_t *k = kc->key;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);

    uint8_t owner[DNAME_MAXLEN];
    size_t olen = dname_lower(owner, req->owner);
    size_t slen = dname_len(req->signer);
    if (cap < DNSSEC_RRSIG_FIXED + slen + k->siglen)
        return TERN_ENOSPC;

    /* the RRSIG RDATA up to the signature: the start of the signing data and of out */
    uint8_t *h = out;
    put16(h, req->type);
    h[2] = k->alg;
    h[3] = (uint8_t)req->labels;
    put32(h + 4, req->ttl);
    put32(h + 8, req->expiration);
    put32(h + 12, req->inception);
    put16(h + 16, k->tag);
    memcpy(h + DNSSEC_RRSIG_FIXED, req->signer, slen);
    size_t hlen = DNSSEC_RRSIG_FIXED + slen;

    /* canonical RDATA of every RR, then their order */
    size_t cpos = 0, total = hlen;
    if (count > s->nidx)
        return TERN_ENOSPC;
    const uint8_t *p = rdata;
    for (unsigned i = 0; i < count; i++) {
        const uint8_t *rr = offs ? rdata + offs[i] : p;
        uint32_t rl = (uint32_t)rr[0] << 8 | rr[1];
        if (cpos + rl > s->canon_cap && (!s->grow || !grow_to(&s->canon, &s->canon_cap, cpos + rl)))
            return TERN_ENOSPC;
        wire_rdata_canon(req->type, rr + 2, rl, s->canon + cpos);
        s->idx[i] = (uint32_t)cpos;
        s->len[i] = rl;
        cpos += rl;
        total += olen + 10 + rl;
        p = rr + 2 + rl;
    }
    if (total > s->cap && (!s->grow || !grow_to(&s->buf, &s->cap, total)))
        return TERN_ENOSPC;
    /* sort the RR numbers by their canonical RDATA (RFC 4034 §6.3: left-justified octet
     * strings, a missing octet first): insertion sort, RRsets are small; a large one (the
     * loader's) pays O(n^2) compares once per signature period */
    uint32_t *ord = s->ord;
    uint32_t *pos = s->idx;
    for (unsigned i = 0; i < count; i++)
        ord[i] = i;
    for (unsigned i = 1; i < count; i++) {
        uint32_t x = ord[i];
        unsigned j = i;
        while (j > 0) {
            uint32_t y = ord[j - 1];
            uint32_t lx = s->len[x], ly = s->len[y];
            int c = memcmp(s->canon + pos[y], s->canon + pos[x], lx < ly ? lx : ly);
            if (c < 0 || (c == 0 && ly <= lx))
                break;
            ord[j] = y;
            j--;
        }
        ord[j] = x;
    }

    uint8_t *d = s->buf;
    memcpy(d, h, hlen);
    size_t dpos = hlen;
    for (unsigned i = 0; i < count; i++) {
        uint32_t r = ord[i];
        memcpy(d + dpos, owner, olen);
        dpos += olen;
        put16(d + dpos, req->type);
        put16(d + dpos + 2, 1); /* class IN */
        put32(d + dpos + 4, req->ttl);
        put16(d + dpos + 8, s->len[r]);
        dpos += 10;
        memcpy(d + dpos, s->canon + pos[r], s->len[r]);
        dpos += s->len[r];
    }

    /* the signature, libcrypto's allocations in this thread's region (a worker's signer) */
    region_t *reg = &s->region;
    tls_own = reg;
    int rc = raw_sign(s, kc, d, dpos, out + hlen, s->grow ? NULL : reg);
    if (rc < 0)
        ERR_clear_error(); /* the queue's strings may live in the region: gone before it is */
    reg->used = 0;
    if (rc < 0)
        return rc;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    __atomic_store_n(&s->sigs, s->sigs + 1, __ATOMIC_RELAXED);
    __atomic_store_n(
        &s->ns,
        s->ns + (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec)),
        __ATOMIC_RELAXED);
    return (int)(hlen + k->siglen);
}

/* For tests: poison and report the region (dnssec_sign_test.h is not public API). */
uint64_t dnssec_signer_spills(const dnssec_signer_t *s);
uint64_t dnssec_signer_spills(const dnssec_signer_t *s)
{
    memset(s->region.base, 0xA5, s->region.cap);
    return s->region.spills;
}
