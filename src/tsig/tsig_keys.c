/*
 * tsig_keys.c — TSIG keys from text: one key from its three fields (tern's YAML config), and
 * BIND's key statements (key files written by tsig-keygen or rndc-confgen -a, named.conf
 * fragments).
 *
 * Secrets pass through a few stack buffers and the growing key array; each is cleansed before it
 * is released, so a freed page never keeps a key.
 */
#include "tern/tsig/tsig.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "tern/common/base64.h"
#include "tern/common/err.h"

/* ---- one key ---- */

/* Why a secret is not base64, in the words BIND users know from tsig-keygen's output. */
static const char *b64_why(tern_base64_fault_t f)
{
    switch (f) {
    case TERN_BASE64_PAD_EARLY:
        return "'=' where data should be";
    case TERN_BASE64_AFTER_PAD:
        return "data after the '=' padding";
    case TERN_BASE64_LENGTH:
        return "its length is not a multiple of 4 (cut short?)";
    default:
        return "a character that is not base64";
    }
}

static bool is_blank(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static int key_set_name(tsig_key_t *k, const char *name, char *err, size_t errlen)
{
    const char *why = NULL;
    uint8_t wire[DNAME_MAXLEN];
    char text[DNAME_KEY_MAX];
    if (!name || !*name) {
        tern_set_err(err, errlen, "empty key name");
        return TERN_EINVAL;
    }
    int n = dname_from_str(name, strlen(name), false, wire, &why);
    if (n < 0) {
        tern_set_err(err, errlen, "bad key name \"%s\": %s", name, why);
        return TERN_EINVAL;
    }
    if (n == 1) {
        tern_set_err(err, errlen, "bad key name \"%s\": the root", name);
        return TERN_EINVAL;
    }
    k->wire_len = (uint8_t)dname_lower(k->wire, wire);
    int tl = dname_key(name, text, sizeof(text), &why);
    if (tl < 0 || (size_t)tl >= sizeof(k->name)) {
        tern_set_err(err, errlen, "bad key name \"%s\": longer than %zu characters", name,
                     sizeof(k->name) - 1);
        return TERN_EINVAL;
    }
    memcpy(k->name, text, (size_t)tl + 1);
    return 0;
}

static int key_set_alg(tsig_key_t *k, const char *alg, char *err, size_t errlen)
{
    k->alg = tsig_alg_from_name(alg);
    if (k->alg != TSIG_ALG_NONE)
        return 0;
    tern_set_err(err, errlen,
                 "unknown algorithm \"%s\" (expected hmac-md5, hmac-sha1, hmac-sha224, "
                 "hmac-sha256, hmac-sha384 or hmac-sha512)",
                 alg ? alg : "");
    return TERN_EINVAL;
}

static int key_set_secret(tsig_key_t *k, const char *b64, char *err, size_t errlen)
{
    size_t n = 0;
    tern_base64_err_t e;
    /* blanks inside are skipped, as BIND does: key files wrap long secrets */
    if (tern_base64_decode(b64 ? b64 : "", b64 ? strlen(b64) : 0, TERN_BASE64_BLANKS, k->secret,
                           sizeof(k->secret), &n, &e) < 0) {
        tern_set_err(err, errlen, "bad base64 in secret: %s", b64_why(e.fault));
        return TERN_EINVAL;
    }
    if (n == 0) {
        tern_set_err(err, errlen, "empty secret");
        return TERN_EINVAL;
    }
    if (n > sizeof(k->secret)) {
        tern_set_err(err, errlen, "secret too long (%zu bytes, at most %zu)", n, sizeof(k->secret));
        return TERN_EINVAL;
    }
    k->secret_len = n;
    return 0;
}

int tsig_key_init(tsig_key_t *k, const char *name, const char *alg, const char *secret_b64,
                  char *err, size_t errlen)
{
    memset(k, 0, sizeof(*k));
    int r = key_set_name(k, name, err, errlen);
    if (r == 0)
        r = key_set_alg(k, alg, err, errlen);
    if (r == 0)
        r = key_set_secret(k, secret_b64, err, errlen);
    if (r < 0)
        OPENSSL_cleanse(k, sizeof(*k));
    return r;
}

/* ---- BIND key statements ---- */

/* The longest token: a quoted secret of TSIG_SECRET_MAX bytes is 172 characters, with blanks a
 * few more; a key name is at most 1,020 characters in \DDD escapes. */
#define TOKEN_MAX 2048

typedef enum { T_EOF, T_WORD, T_STRING, T_LBRACE, T_RBRACE, T_SEMI } tok_type_t;

typedef struct lexer {
    const char *p;
    const char *file;
    unsigned line;
    char *err;
    size_t errlen;
    tok_type_t type;
    unsigned tline; /* line of the last token */
    char tok[TOKEN_MAX];
} lexer_t;

static int lex_fail(lexer_t *lx, unsigned line, int code, const char *fmt, ...) TERN_PRINTF(4, 5);

static int lex_fail(lexer_t *lx, unsigned line, int code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    tern_set_err(lx->err, lx->errlen, "%s:%u: %s", lx->file, line, msg);
    return code;
}

/* Skip blanks and comments (#, //, C blocks). */
static int lex_skip(lexer_t *lx)
{
    for (;;) {
        char c = *lx->p;
        if (c == '\n') {
            lx->line++;
            lx->p++;
        } else if (is_blank((unsigned char)c)) {
            lx->p++;
        } else if (c == '#' || (c == '/' && lx->p[1] == '/')) {
            while (*lx->p && *lx->p != '\n')
                lx->p++;
        } else if (c == '/' && lx->p[1] == '*') {
            unsigned start = lx->line;
            lx->p += 2;
            while (*lx->p && !(lx->p[0] == '*' && lx->p[1] == '/'))
                lx->line += *lx->p++ == '\n';
            if (!*lx->p)
                return lex_fail(lx, start, TERN_ESYNTAX, "unterminated comment");
            lx->p += 2;
        } else {
            return 0;
        }
    }
}

static bool word_char(const char *p)
{
    char c = *p;
    return c && !is_blank((unsigned char)c) && c != '{' && c != '}' && c != ';' && c != '"' &&
           c != '#' && !(c == '/' && (p[1] == '/' || p[1] == '*'));
}

/* The next token into lx->type / lx->tok / lx->tline. */
static int lex_next(lexer_t *lx)
{
    int r = lex_skip(lx);
    if (r < 0)
        return r;
    lx->tline = lx->line;
    lx->tok[0] = '\0';
    char c = *lx->p;
    size_t n = 0;
    switch (c) {
    case '\0':
        lx->type = T_EOF;
        return 0;
    case '{':
    case '}':
    case ';':
        lx->type = c == '{' ? T_LBRACE : c == '}' ? T_RBRACE : T_SEMI;
        lx->tok[0] = c;
        lx->tok[1] = '\0';
        lx->p++;
        return 0;
    case '"':
        lx->type = T_STRING;
        lx->p++;
        while (*lx->p != '"') {
            char ch = *lx->p;
            if (ch == '\\' && lx->p[1])
                ch = *++lx->p;
            if (!ch)
                return lex_fail(lx, lx->tline, TERN_ESYNTAX, "unterminated string");
            if (ch == '\n')
                lx->line++;
            if (n + 1 >= sizeof(lx->tok))
                return lex_fail(lx, lx->tline, TERN_ESYNTAX, "string longer than %d bytes",
                                TOKEN_MAX - 1);
            lx->tok[n++] = ch;
            lx->p++;
        }
        lx->p++;
        lx->tok[n] = '\0';
        return 0;
    default:
        lx->type = T_WORD;
        while (word_char(lx->p)) {
            if (n + 1 >= sizeof(lx->tok))
                return lex_fail(lx, lx->tline, TERN_ESYNTAX, "word longer than %d bytes",
                                TOKEN_MAX - 1);
            lx->tok[n++] = *lx->p++;
        }
        lx->tok[n] = '\0';
        return 0;
    }
}

/* What the last token was, for messages. */
static const char *tok_desc(const lexer_t *lx)
{
    return lx->type == T_EOF ? "the end of the file" : lx->tok;
}

typedef struct key_list {
    tsig_key_t *v;
    size_t n, cap;
} key_list_t;

static void key_list_free(key_list_t *l)
{
    if (l->v)
        OPENSSL_cleanse(l->v, l->cap * sizeof(*l->v));
    free(l->v);
    *l = (key_list_t){0};
}

/* Append k. Grows by a fresh block and cleanses the old one: realloc() would free it as is. */
static int key_list_add(key_list_t *l, const tsig_key_t *k)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        tsig_key_t *v = calloc(cap, sizeof(*v));
        if (!v)
            return TERN_ENOMEM;
        if (l->v) {
            memcpy(v, l->v, l->n * sizeof(*v));
            OPENSSL_cleanse(l->v, l->cap * sizeof(*v));
            free(l->v);
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = *k;
    return 0;
}

/* A value of a key option: a word or a string, then ';'. Copied to out (TOKEN_MAX). */
static int option_value(lexer_t *lx, const char *opt, const char *key, char *out, unsigned *line)
{
    int r = lex_next(lx);
    if (r < 0)
        return r;
    if (lx->type != T_WORD && lx->type != T_STRING)
        return lex_fail(lx, lx->tline, TERN_ESYNTAX,
                        "key \"%s\": expected a value after %s, got %s", key, opt, tok_desc(lx));
    memcpy(out, lx->tok, strlen(lx->tok) + 1);
    *line = lx->tline;
    if ((r = lex_next(lx)) < 0)
        return r;
    if (lx->type != T_SEMI)
        return lex_fail(lx, lx->tline, TERN_ESYNTAX, "key \"%s\": expected ';' after %s %s, got %s",
                        key, opt, opt[0] == 's' ? "\"...\"" : out, tok_desc(lx));
    return 0;
}

typedef struct key_stmt {
    char name[TOKEN_MAX];
    char alg[TOKEN_MAX];
    char secret[TOKEN_MAX];
    unsigned line, alg_line, secret_line;
    bool has_alg, has_secret;
} key_stmt_t;

/* The body of `key NAME { ... };` after the name, into st. */
static int key_body(lexer_t *lx, key_stmt_t *st)
{
    int r = lex_next(lx);
    if (r < 0)
        return r;
    if (lx->type != T_LBRACE)
        return lex_fail(lx, lx->tline, TERN_ESYNTAX, "key \"%s\": expected '{', got %s", st->name,
                        tok_desc(lx));
    for (;;) {
        if ((r = lex_next(lx)) < 0)
            return r;
        if (lx->type == T_RBRACE)
            break;
        if (lx->type == T_EOF)
            return lex_fail(lx, lx->tline, TERN_ESYNTAX,
                            "key \"%s\" (line %u): unterminated block, '};' missing", st->name,
                            st->line);
        bool alg = lx->type == T_WORD && strcasecmp(lx->tok, "algorithm") == 0;
        bool secret = lx->type == T_WORD && strcasecmp(lx->tok, "secret") == 0;
        if (!alg && !secret)
            return lex_fail(lx, lx->tline, TERN_ESYNTAX,
                            "key \"%s\": unknown option \"%s\" (expected algorithm or secret)",
                            st->name, lx->tok);
        if ((alg && st->has_alg) || (secret && st->has_secret))
            return lex_fail(lx, lx->tline, TERN_ESYNTAX, "key \"%s\": %s given twice", st->name,
                            lx->tok);
        if (alg) {
            st->has_alg = true;
            r = option_value(lx, "algorithm", st->name, st->alg, &st->alg_line);
        } else {
            st->has_secret = true;
            r = option_value(lx, "secret", st->name, st->secret, &st->secret_line);
        }
        if (r < 0)
            return r;
    }
    if ((r = lex_next(lx)) < 0)
        return r;
    if (lx->type != T_SEMI)
        return lex_fail(lx, lx->tline, TERN_ESYNTAX,
                        "key \"%s\" (line %u): unterminated block, ';' missing after '}'", st->name,
                        st->line);
    return 0;
}

/* Turn a parsed statement into a key, each error at the line of what caused it. */
static int key_make(lexer_t *lx, const key_stmt_t *st, tsig_key_t *k)
{
    char msg[512];
    int r;
    memset(k, 0, sizeof(*k));
    if (!st->has_alg)
        return lex_fail(lx, st->line, TERN_ESYNTAX, "key \"%s\": missing algorithm", st->name);
    if (!st->has_secret)
        return lex_fail(lx, st->line, TERN_ESYNTAX, "key \"%s\": missing secret", st->name);
    if ((r = key_set_name(k, st->name, msg, sizeof(msg))) < 0)
        return lex_fail(lx, st->line, r, "%s", msg);
    if ((r = key_set_alg(k, st->alg, msg, sizeof(msg))) < 0)
        return lex_fail(lx, st->alg_line, r, "key \"%s\": %s", st->name, msg);
    if ((r = key_set_secret(k, st->secret, msg, sizeof(msg))) < 0)
        return lex_fail(lx, st->secret_line, r, "key \"%s\": %s", st->name, msg);
    return 0;
}

int tsig_keys_parse_bind(const char *text, const char *file, tsig_key_t **keys, size_t *n,
                         char *err, size_t errlen)
{
    *keys = NULL;
    *n = 0;
    key_list_t l = {0};
    tsig_key_t k;
    /* the lexer and a statement hold ~10 KiB of text buffers: heap, not a thread's stack */
    lexer_t *lx = calloc(1, sizeof(*lx));
    key_stmt_t *st = calloc(1, sizeof(*st));
    int r = TERN_ENOMEM;
    if (!lx || !st)
        goto fail;
    *lx = (lexer_t){
        .p = text, .file = file ? file : "(key text)", .line = 1, .err = err, .errlen = errlen};
    for (;;) {
        if ((r = lex_next(lx)) < 0)
            goto fail;
        if (lx->type == T_EOF)
            break;
        if (lx->type != T_WORD || strcasecmp(lx->tok, "key") != 0) {
            r = lex_fail(lx, lx->tline, TERN_ESYNTAX, "expected a key statement, got %s",
                         tok_desc(lx));
            goto fail;
        }
        memset(st, 0, sizeof(*st));
        st->line = lx->tline;
        if ((r = lex_next(lx)) < 0)
            goto fail;
        if (lx->type != T_WORD && lx->type != T_STRING) {
            r = lex_fail(lx, lx->tline, TERN_ESYNTAX, "expected a key name after \"key\", got %s",
                         tok_desc(lx));
            goto fail;
        }
        memcpy(st->name, lx->tok, strlen(lx->tok) + 1);
        if ((r = key_body(lx, st)) < 0 || (r = key_make(lx, st, &k)) < 0)
            goto fail;
        for (size_t i = 0; i < l.n; i++) {
            if (strcmp(l.v[i].name, k.name) == 0) {
                r = lex_fail(lx, st->line, TERN_ESYNTAX, "key \"%s\" is defined twice", k.name);
                goto fail;
            }
        }
        if ((r = key_list_add(&l, &k)) < 0)
            goto fail;
        OPENSSL_cleanse(&k, sizeof(k));
    }
    *keys = l.v;
    *n = l.n;
    r = 0;
    l.v = NULL; /* handed over */
fail:
    OPENSSL_cleanse(&k, sizeof(k));
    if (st)
        OPENSSL_cleanse(st, sizeof(*st));
    if (lx)
        OPENSSL_cleanse(lx, sizeof(*lx));
    free(st);
    free(lx);
    if (r < 0)
        key_list_free(&l);
    return r;
}
