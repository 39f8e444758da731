/*
 * config_qlog.c — "query_log:", query logging: its rows (sample, ring_size, exclude_zones, and
 * the two sinks, dnstap and the request log), the request-log settings that redins' "log"
 * blocks (handler's, or the top-level one of older redins) fill too, and the reset, copy and
 * comparison of config_qlog_t.
 *
 * The workers copy each logged query into a ring of their own and never wait for the writer
 * thread (tern/qlog/qlog.h): a full ring drops the record and counts it. The rings and the
 * writer are made at startup, so everything here is restart-only (the schema row says so);
 * SIGHUP only reopens the files, for log rotation.
 *
 * One file sets the request log once: query_log's "requests" (or a null query_log, which turns
 * everything off) and a redins "log" claim it (CLAIM_REQLOG), and a second claim is an error
 * naming both lines. A query_log without "requests" leaves what a redins log in the same file
 * set, in whatever order the two come. Nothing here holds state beyond one config_load() call;
 * config_qlog_t is read-only once loaded.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "config_blocks.h"
#include "tern/common/err.h"
#include "tern/wire/dname.h"

#define QFIELD(f) .offset = offsetof(config_qlog_t, f), .size = sizeof(((config_qlog_t *)0)->f)

/* dnstap's identity and version are free text; a host name is at most 255 bytes, and so is
 * what tern answers for version.bind: anything longer is a mistake. */
#define DNSTAP_STR_MAX 255

_Static_assert(sizeof(unsigned) == sizeof(uint32_t), "sample and ring_kib are stored as 32 bits");

/* By config_reqlog_target_t and config_reqlog_format_t. */
static const char *const reqlog_targets[] = {"file", "stdout", "stderr", "syslog"};
static const char *const reqlog_formats[] = {"json", "text"};

/* query_log's nested blocks, parsed here (get_dnstap(), get_requests()); their rows are
 * --help's */
static const conf_block_t dnstap_block = {.rows = config_qlog_dnstap_schema, .nrows = QD_COUNT};
static const conf_block_t requests_block = {.rows = config_qlog_requests_schema, .nrows = QR_COUNT};

const opt_t config_qlog_schema[QL_COUNT] = {
    [QL_SAMPLE] = {.key = "sample",
                   .type = OPT_UINT,
                   QFIELD(sample),
                   .def = 1,
                   .min = 1,
                   .max = 1000000,
                   .desc = "log 1 query in this many (1: every query); the others cost nothing"},
    /* 64 KiB holds a dozen records of the largest size (4 KiB of query and response and the
     * header); 1 GiB per worker is past any burst the writer could catch up with. */
    [QL_RING_SIZE] = {.key = "ring_size",
                      .type = OPT_UINT,
                      QFIELD(ring_kib),
                      .def = 4096,
                      .min = 64,
                      .max = 1048576,
                      .desc = "KiB of each worker's ring; a full ring drops (and counts) records, "
                              "never waits"},
    [QL_EXCLUDE_ZONES] = {.key = "exclude_zones",
                          .type = OPT_CUSTOM,
                          .desc = "zones whose queries (at and under them) are never logged: a "
                                  "name or a list, at most 4096"},
    [QL_DNSTAP] = {.key = "dnstap",
                   .type = OPT_BLOCK,
                   .block = &dnstap_block,
                   .desc = "dnstap messages over Frame Streams: a mapping of these keys; unset or "
                           "~ = none"},
    [QL_REQUESTS] = {.key = "requests",
                     .type = OPT_BLOCK,
                     .block = &requests_block,
                     .desc = "redins' request log, one line per query: a mapping of these keys; "
                             "unset or ~ = none"},
};

const opt_t config_qlog_dnstap_schema[QD_COUNT] = {
    [QD_SOCKET] = {.key = "socket",
                   .type = OPT_PATH,
                   QFIELD(dnstap_socket),
                   .min = 1,
                   .max = SUN_PATH_MAX,
                   .desc = "a collector's Frame Streams UNIX socket, relative to the config's "
                           "directory (or file)"},
    [QD_FILE] = {.key = "file",
                 .type = OPT_PATH,
                 QFIELD(dnstap_file),
                 .min = 1,
                 .max = PATH_MAX - 1,
                 .desc = "a file of dnstap frames instead, relative to the config file's "
                         "directory; SIGHUP reopens it"},
    [QD_QUERIES] = {.key = "queries",
                    .type = OPT_BOOL,
                    QFIELD(dnstap_queries),
                    .def = 1,
                    .desc = "write AUTH_QUERY messages"},
    [QD_RESPONSES] = {.key = "responses",
                      .type = OPT_BOOL,
                      QFIELD(dnstap_responses),
                      .def = 1,
                      .desc = "write AUTH_RESPONSE messages"},
    [QD_IDENTITY] = {.key = "identity",
                     .type = OPT_STR,
                     QFIELD(dnstap_identity),
                     .max = DNSTAP_STR_MAX,
                     .desc = "the messages' identity; unset = the host name"},
    [QD_VERSION] = {.key = "version",
                    .type = OPT_STR,
                    QFIELD(dnstap_version),
                    .max = DNSTAP_STR_MAX,
                    .desc = "the messages' version; unset = \"tern VERSION\""},
};

const opt_t config_qlog_requests_schema[QR_COUNT] = {
    [QR_ENABLE] = {.key = "enable",
                   .type = OPT_BOOL,
                   QFIELD(requests),
                   .def = 1,
                   .desc = "false: no request log (the block is still checked)"},
    /* the index is stored in a uint8_t by hand (get_requests()): no field here */
    [QR_TARGET] = {.key = "target",
                   .type = OPT_ENUM,
                   .def = CONFIG_REQLOG_FILE,
                   .max = 3,
                   .names = reqlog_targets,
                   .desc = "where the lines go (stdout, stderr, syslog: the journal under "
                           "systemd)"},
    [QR_FORMAT] = {.key = "format",
                   .type = OPT_ENUM,
                   .def = CONFIG_REQLOG_JSON,
                   .max = 1,
                   .names = reqlog_formats,
                   .desc = "json: redins' request line; text: its fields as key=value"},
    [QR_PATH] = {.key = "path",
                 .type = OPT_PATH,
                 QFIELD(requests_path),
                 .min = 1,
                 .max = PATH_MAX - 1,
                 .desc = "the file (target file only, and then required), appended to; SIGHUP "
                         "reopens it"},
};

/* ---- the struct --------------------------------------------------------------------------- */

static void free_zones(config_qlog_t *q)
{
    for (size_t i = 0; i < q->nexclude_zones; i++)
        free(q->exclude_zones[i]);
    free(q->exclude_zones);
    q->exclude_zones = NULL;
    q->nexclude_zones = 0;
}

void config_qlog_reset(config_qlog_t *q)
{
    free(q->dnstap_socket);
    free(q->dnstap_file);
    free(q->dnstap_identity);
    free(q->dnstap_version);
    free(q->requests_path);
    free_zones(q);
    memset(q, 0, sizeof(*q));
    config_set_defaults(q, config_qlog_schema, QL_COUNT);
    config_set_defaults(q, config_qlog_dnstap_schema, QD_COUNT);
    /* not the requests rows: their enable's default is a given block's, and no block is off */
    q->requests = false;
    q->requests_target = CONFIG_REQLOG_FILE;
    q->requests_format = CONFIG_REQLOG_JSON;
}

static int dup_str(char **dst, const char *src)
{
    *dst = NULL;
    return src && !(*dst = strdup(src)) ? TERN_ENOMEM : 0;
}

int config_qlog_copy(config_qlog_t *dst, const config_qlog_t *src)
{
    *dst = *src;
    dst->dnstap_socket = dst->dnstap_file = dst->dnstap_identity = dst->dnstap_version = NULL;
    dst->requests_path = NULL;
    dst->exclude_zones = NULL;
    dst->nexclude_zones = 0;
    if (dup_str(&dst->dnstap_socket, src->dnstap_socket) < 0 ||
        dup_str(&dst->dnstap_file, src->dnstap_file) < 0 ||
        dup_str(&dst->dnstap_identity, src->dnstap_identity) < 0 ||
        dup_str(&dst->dnstap_version, src->dnstap_version) < 0 ||
        dup_str(&dst->requests_path, src->requests_path) < 0)
        return TERN_ENOMEM;
    if (!src->nexclude_zones)
        return 0;
    if (!(dst->exclude_zones = calloc(src->nexclude_zones, sizeof(*dst->exclude_zones))))
        return TERN_ENOMEM;
    for (size_t i = 0; i < src->nexclude_zones; i++) {
        if (!(dst->exclude_zones[i] = strdup(src->exclude_zones[i])))
            return TERN_ENOMEM;
        dst->nexclude_zones++;
    }
    return 0;
}

bool config_same_qlog(const config_qlog_t *a, const config_qlog_t *b)
{
    if (a->enabled != b->enabled || a->dnstap_queries != b->dnstap_queries ||
        a->dnstap_responses != b->dnstap_responses || a->requests != b->requests ||
        a->requests_target != b->requests_target || a->requests_format != b->requests_format ||
        a->sample != b->sample || a->ring_kib != b->ring_kib ||
        a->nexclude_zones != b->nexclude_zones ||
        !config_same_str(a->dnstap_socket, b->dnstap_socket) ||
        !config_same_str(a->dnstap_file, b->dnstap_file) ||
        !config_same_str(a->dnstap_identity, b->dnstap_identity) ||
        !config_same_str(a->dnstap_version, b->dnstap_version) ||
        !config_same_str(a->requests_path, b->requests_path))
        return false;
    for (size_t i = 0; i < a->nexclude_zones; i++)
        if (strcmp(a->exclude_zones[i], b->exclude_zones[i]) != 0)
            return false;
    return true;
}

/* enabled: a sink is configured. */
static void update_enabled(config_qlog_t *q)
{
    q->enabled = q->dnstap_socket || q->dnstap_file || q->requests;
}

/* The request-log settings of src into dst (whose own are dropped); src has none left. */
static void move_requests(config_qlog_t *dst, config_qlog_t *src)
{
    free(dst->requests_path);
    dst->requests = src->requests;
    dst->requests_target = src->requests_target;
    dst->requests_format = src->requests_format;
    dst->requests_path = src->requests_path;
    src->requests = false;
    src->requests_path = NULL;
}

/* ---- query_log ---------------------------------------------------------------------------- */

/* exclude_zones (named key) at n: a name or a list of them, into q as canonical keys. */
static int get_exclude(parse_ctx_t *pc, const yaml_node_t *n, const char *key, config_qlog_t *q)
{
    char ikey[96], zkey[DNAME_KEY_MAX];
    if (is_null(n))
        return 0;
    bool list = n->type == YAML_SEQUENCE_NODE;
    if (!list && n->type != YAML_SCALAR_NODE)
        return config_fail(pc, n, key, "expected a zone name or a list of them, got %s",
                           config_node_kind(n));
    size_t count = list ? (size_t)(n->data.sequence.items.top - n->data.sequence.items.start) : 1;
    if (count > CONFIG_QLOG_MAX_EXCLUDE)
        return config_fail(pc, node(pc, n->data.sequence.items.start[CONFIG_QLOG_MAX_EXCLUDE]), key,
                           "more than %d zones", CONFIG_QLOG_MAX_EXCLUDE);
    if (count && !(q->exclude_zones = calloc(count, sizeof(*q->exclude_zones))))
        return TERN_ENOMEM;
    for (size_t i = 0; i < count; i++) {
        const yaml_node_t *item = list ? node(pc, n->data.sequence.items.start[i]) : n;
        const char *why = "";
        config_item_key(ikey, sizeof(ikey), key, n, i);
        if (!is_text(item) || is_null(item))
            return config_fail(pc, item, ikey, "expected a zone name, got %s",
                               is_null(item) ? "nothing" : config_node_kind(item));
        if (dname_key(scalar(item), zkey, sizeof(zkey), &why) < 0)
            return config_fail(pc, item, ikey, "bad zone name \"%s\": %s", scalar(item), why);
        if (strcmp(zkey, ".") == 0)
            return config_fail(pc, item, ikey,
                               "the root would exclude every query (query_log: ~ logs none)");
        for (size_t j = 0; j < i; j++)
            if (strcmp(q->exclude_zones[j], zkey) == 0)
                return config_fail(pc, item, ikey, "%s is given twice (first at line %zu)", zkey,
                                   line_of(node(pc, n->data.sequence.items.start[j])));
        if (!(q->exclude_zones[i] = strdup(zkey)))
            return TERN_ENOMEM;
        q->nexclude_zones++;
    }
    return 0;
}

/* dnstap (named key) at n into q's dnstap_*; null = none. */
static int get_dnstap(parse_ctx_t *pc, const yaml_node_t *n, const char *key, config_qlog_t *q)
{
    const opt_t *rows = config_qlog_dnstap_schema;
    field_t fields[QD_COUNT];
    const yaml_node_t *val[QD_COUNT];
    int rc;
    if (is_null(n))
        return 0;
    config_row_fields(fields, rows, QD_COUNT);
    if ((rc = config_get_fields(pc, n, key, fields, QD_COUNT, val)) < 0)
        return rc;
    for (size_t i = 0; i < QD_COUNT; i++)
        if (val[i] && (rc = config_get_row(pc, val[i], key, &rows[i], q)) < 0)
            return rc;
    /* one collector: Frame Streams has one output, and two would make "which one has it all"
     * a question */
    if (q->dnstap_socket && q->dnstap_file)
        return config_fail(pc, config_key_node(pc, n, "file"), key,
                           "file: give socket or file, not both");
    if (!q->dnstap_socket && !q->dnstap_file)
        return config_fail(pc, n, key,
                           "missing \"socket\" or \"file\" (where the dnstap messages go; "
                           "dnstap: ~ for none)");
    if (!q->dnstap_queries && !q->dnstap_responses)
        return config_fail(pc, n, key,
                           "queries and responses are both false (nothing to write; dnstap: ~ "
                           "for none)");
    return 0;
}

/* tern's requests (named key) at n into q's requests_*; null = none. */
static int get_requests(parse_ctx_t *pc, const yaml_node_t *n, const char *key, config_qlog_t *q)
{
    const opt_t *rows = config_qlog_requests_schema;
    field_t fields[QR_COUNT];
    const yaml_node_t *val[QR_COUNT];
    size_t e = 0;
    int rc;
    if (is_null(n))
        return 0;
    config_row_fields(fields, rows, QR_COUNT);
    if ((rc = config_get_fields(pc, n, key, fields, QR_COUNT, val)) < 0)
        return rc;
    q->requests = true;
    for (size_t i = 0; i < QR_COUNT; i++) {
        if (!val[i])
            continue;
        if (i == QR_TARGET || i == QR_FORMAT) {
            rc = config_get_enum(pc, val[i], key, rows[i].key, rows[i].names,
                                 (size_t)rows[i].max + 1, &e);
            if (i == QR_TARGET)
                q->requests_target = (uint8_t)e;
            else
                q->requests_format = (uint8_t)e;
        } else {
            rc = config_get_row(pc, val[i], key, &rows[i], q);
        }
        if (rc < 0)
            return rc;
    }
    if (q->requests_target != CONFIG_REQLOG_FILE && q->requests_path)
        return config_fail(pc, val[QR_PATH], key, "path: only with target file (not %s)",
                           reqlog_targets[q->requests_target]);
    if (q->requests_target == CONFIG_REQLOG_FILE && q->requests && !q->requests_path)
        return config_fail(pc, n, key, "missing \"path\" (target file writes to it)");
    return 0;
}

/* query_log's keys at n (a mapping, checked against fields) into t, from its defaults. */
static int get_query_log(parse_ctx_t *pc, const yaml_node_t *n, const char *okey,
                         const yaml_node_t **val, config_qlog_t *t)
{
    const opt_t *rows = config_qlog_schema;
    char key[64];
    int rc;
    for (size_t i = QL_SAMPLE; i <= QL_RING_SIZE; i++)
        if (val[i] && (rc = config_get_row(pc, val[i], okey, &rows[i], t)) < 0)
            return rc;
    snprintf(key, sizeof(key), "%s: %s", okey, rows[QL_EXCLUDE_ZONES].key);
    if (val[QL_EXCLUDE_ZONES] && (rc = get_exclude(pc, val[QL_EXCLUDE_ZONES], key, t)) < 0)
        return rc;
    snprintf(key, sizeof(key), "%s: %s", okey, rows[QL_DNSTAP].key);
    if (val[QL_DNSTAP] && (rc = get_dnstap(pc, val[QL_DNSTAP], key, t)) < 0)
        return rc;
    if (!val[QL_REQUESTS])
        return 0;
    /* a string that outlives the parse, for config_claim() */
    static const char rkey[] = "query_log: requests";
    if ((rc = config_claim(pc, CLAIM_REQLOG, config_key_node(pc, n, rows[QL_REQUESTS].key), rkey)) <
        0)
        return rc;
    return get_requests(pc, val[QL_REQUESTS], rkey, t);
}

/* tern's "query_log" at n, whose key node is k: replaces every query logging setting but the
 * request log's when the block has no "requests" and a redins log gave it; null = none. A
 * "requests" key (or a null block) claims CLAIM_REQLOG. */
static int qlog_parse(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k, const yaml_node_t *n)
{
    config_qlog_t *q = &pc->c->qlog, t;
    field_t fields[QL_COUNT];
    const yaml_node_t *val[QL_COUNT];
    int rc;
    if (is_null(n)) {
        /* off, the request log included: a redins log in the same file contradicts it */
        if ((rc = config_claim(pc, CLAIM_REQLOG, k, o->key)) < 0)
            return rc;
        config_qlog_reset(q);
        return 0;
    }
    config_row_fields(fields, config_qlog_schema, QL_COUNT);
    if ((rc = config_get_fields(pc, n, o->key, fields, QL_COUNT, val)) < 0)
        return rc;
    memset(&t, 0, sizeof(t));
    config_qlog_reset(&t);
    if ((rc = get_query_log(pc, n, o->key, val, &t)) < 0) {
        config_qlog_reset(&t);
        return rc;
    }
    /* no requests here: a redins log earlier in the file set the request log, keep it */
    if (!val[QL_REQUESTS] && pc->claimed[CLAIM_REQLOG].by)
        move_requests(&t, q);
    config_qlog_reset(q);
    *q = t;
    update_enabled(q);
    return 0;
}

/* ---- redins' log -------------------------------------------------------------------------- */

/* redins' logger settings (handler.log, or the top-level log of older redins; hawell/logger's
 * LogConfig). redins wrote one line per request at level info into this logger. */
enum {
    RQ_ENABLE,
    RQ_LEVEL,
    RQ_TARGET,
    RQ_FORMAT,
    RQ_PATH,
    RQ_TIME_FORMAT,
    RQ_KAFKA,
    RQ_SENTRY,
    RQ_SYSLOG,
    RQ_COUNT
};

/* desc: what config_schema_print() says each maps to. */
static const field_t redins_log_fields[RQ_COUNT] = {
    [RQ_ENABLE] = {"enable", "into query_log: requests: enable; default false (no request log)",
                   false, NULL},
    [RQ_LEVEL] = {"level",
                  "debug or info (default): on; warning, error, fatal, panic: off (requests "
                  "were logged at info)",
                  false, NULL},
    [RQ_TARGET] = {"target",
                   "file, stdout, stderr or syslog (default stdout), into requests: target", false,
                   NULL},
    [RQ_FORMAT] = {"format", "json or text (default text), into requests: format", false, NULL},
    [RQ_PATH] = {"path", "into requests: path (with target file, and then required)", false, NULL},
    [RQ_TIME_FORMAT] = {"time_format", "accepted and ignored: tern writes RFC 3339 UTC times",
                        false, NULL},
    [RQ_KAFKA] = {"kafka", "{enable: false, ...} only: Kafka is out of scope", false, NULL},
    [RQ_SENTRY] = {"sentry", "{enable: false, ...} only: Sentry is out of scope", false, NULL},
    [RQ_SYSLOG] = {"syslog",
                   "{enable: false, ...} only (remote syslog): target syslog reaches the journal",
                   false, NULL},
};

/* logrus' levels, which redins' logger parses; a request line is written at info. */
static const char *const redins_levels[] = {"trace", "debug", "info",  "warning",
                                            "warn",  "error", "fatal", "panic"};
#define REDINS_LEVEL_INFO 2

/* The other keys of redins' kafka, sentry and syslog blocks: type-free, since only enable
 * matters (the block is refused when it is true). */
static const field_t kafka_fields[] = {
    {"enable", "true or false", false, NULL}, {"topic", "ignored", false, NULL},
    {"topics", "ignored", false, NULL},       {"brokers", "ignored", false, NULL},
    {"format", "ignored", false, NULL},       {"compression", "ignored", false, NULL},
    {"timeout", "ignored", false, NULL},      {"buffer_size", "ignored", false, NULL},
};
static const field_t sentry_fields[] = {
    {"enable", "true or false", false, NULL},
    {"dsn", "ignored", false, NULL},
};
static const field_t syslog_fields[] = {
    {"enable", "true or false", false, NULL},
    {"protocol", "ignored", false, NULL},
    {"address", "ignored", false, NULL},
};

/* A kafka, sentry or syslog block (named field, inside key) at n: an error if it is enabled,
 * why in reason. */
static int check_elsewhere(parse_ctx_t *pc, const yaml_node_t *n, const char *key,
                           const char *field, const field_t *fields, size_t nfields,
                           const char *reason)
{
    const yaml_node_t *val[MAX_FIELDS];
    char sub[96];
    bool on = false;
    int rc;
    if (is_null(n))
        return 0;
    snprintf(sub, sizeof(sub), "%s: %s", key, field);
    if ((rc = config_get_fields(pc, n, sub, fields, nfields, val)) < 0)
        return rc;
    if (val[0] && (rc = config_get_bool(pc, val[0], sub, "enable", &on)) < 0)
        return rc;
    if (on)
        return config_fail(pc, val[0], sub, "enable: true: %s", reason);
    return 0;
}

static const char kafka_reason[] =
    "Kafka is out of scope for tern: the request log goes to a file, stdout or stderr (the "
    "journal); use dnstap (query_log.dnstap) or the request log file with a shipper";
static const char sentry_reason[] =
    "Sentry is out of scope for tern: the request log goes to a file, stdout or stderr (the "
    "journal); use dnstap (query_log.dnstap) or the request log file with a shipper";
static const char syslog_reason[] =
    "remote syslog is out of scope for tern: the request log goes to a file, stdout, stderr or "
    "the local syslog (target: syslog, the journal under systemd); use dnstap (query_log.dnstap) "
    "or the file with a shipper";

/* target at n into *out; redins' other targets are refused saying where lines can go. */
static int get_redins_target(parse_ctx_t *pc, const yaml_node_t *n, const char *key, size_t *out)
{
    static const char *const elsewhere[] = {"udp", "kafka", "sentry"};
    for (size_t i = 0; is_text(n) && i < TERN_ARRAY_SIZE(elsewhere); i++)
        if (strcmp(scalar(n), elsewhere[i]) == 0)
            return config_fail(pc, n, key,
                               "target: \"%s\" is not supported: tern writes the request log to "
                               "a file, stdout, stderr or the local syslog (the journal under "
                               "systemd) and queries as dnstap (query_log.dnstap); Kafka is out "
                               "of scope",
                               elsewhere[i]);
    return config_get_enum(pc, n, key, "target", reqlog_targets, TERN_ARRAY_SIZE(reqlog_targets),
                           out);
}

int config_get_redins_log(parse_ctx_t *pc, const yaml_node_t *n, const char *key)
{
    /* requests' own path row: resolved against the config's directory; "" = none (redins'
     * default) */
    static const opt_t path_opt = {
        .type = OPT_PATH, .min = 1, .max = PATH_MAX - 1, .empty_unsets = true};
    config_qlog_t *q = &pc->c->qlog;
    const yaml_node_t *val[RQ_COUNT];
    size_t target = CONFIG_REQLOG_STDOUT, format = CONFIG_REQLOG_TEXT, level = REDINS_LEVEL_INFO;
    bool enable = false;
    char *path = NULL;
    int rc;
    if (is_null(n)) {
        config_qlog_t off = {0};
        move_requests(q, &off); /* no request log */
        update_enabled(q);
        return 0;
    }
    if ((rc = config_get_fields(pc, n, key, redins_log_fields, RQ_COUNT, val)) < 0)
        return rc;
    if (val[RQ_ENABLE] && (rc = config_get_bool(pc, val[RQ_ENABLE], key, "enable", &enable)) < 0)
        return rc;
    if (val[RQ_LEVEL] && (rc = config_get_enum(pc, val[RQ_LEVEL], key, "level", redins_levels,
                                               TERN_ARRAY_SIZE(redins_levels), &level)) < 0)
        return rc;
    if (val[RQ_TARGET] && (rc = get_redins_target(pc, val[RQ_TARGET], key, &target)) < 0)
        return rc;
    if (val[RQ_FORMAT] && (rc = config_get_enum(pc, val[RQ_FORMAT], key, "format", reqlog_formats,
                                                TERN_ARRAY_SIZE(reqlog_formats), &format)) < 0)
        return rc;
    /* time_format: a Go layout string; tern's lines carry RFC 3339 UTC times whatever it says */
    if (val[RQ_TIME_FORMAT] && val[RQ_TIME_FORMAT]->type != YAML_SCALAR_NODE)
        return config_fail(pc, val[RQ_TIME_FORMAT], key, "time_format: expected a string, got %s",
                           config_node_kind(val[RQ_TIME_FORMAT]));
    if ((val[RQ_KAFKA] &&
         (rc = check_elsewhere(pc, val[RQ_KAFKA], key, "kafka", kafka_fields,
                               TERN_ARRAY_SIZE(kafka_fields), kafka_reason)) < 0) ||
        (val[RQ_SENTRY] &&
         (rc = check_elsewhere(pc, val[RQ_SENTRY], key, "sentry", sentry_fields,
                               TERN_ARRAY_SIZE(sentry_fields), sentry_reason)) < 0) ||
        (val[RQ_SYSLOG] &&
         (rc = check_elsewhere(pc, val[RQ_SYSLOG], key, "syslog", syslog_fields,
                               TERN_ARRAY_SIZE(syslog_fields), syslog_reason)) < 0))
        return rc;
    if (val[RQ_PATH] && (rc = config_get_str(pc, val[RQ_PATH], key, "path", &path_opt, &path)) < 0)
        return rc;
    /* redins' logger only opens the path of target file; elsewhere it is left unused */
    if (target != CONFIG_REQLOG_FILE) {
        free(path);
        path = NULL;
    } else if (!path && enable) {
        return config_fail(pc, val[RQ_TARGET], key, "target: file needs path, the log file");
    }
    /* requests went to redins' logger at info: a logger at warning or above wrote none */
    config_qlog_t t = {.requests = enable && level <= REDINS_LEVEL_INFO,
                       .requests_target = (uint8_t)target,
                       .requests_format = (uint8_t)format,
                       .requests_path = path};
    move_requests(q, &t);
    update_enabled(q);
    return 0;
}

static void redins_log_print(FILE *out, int depth)
{
    for (size_t j = 0; j < RQ_COUNT; j++)
        fprintf(out, "%*s%-*s %s\n", 2 + 2 * depth, "", 20 - 2 * depth, redins_log_fields[j].key,
                redins_log_fields[j].desc);
}

/* redins' "log" (older redins, top level) at n: the request log only. */
static int redins_log_parse(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k,
                            const yaml_node_t *n)
{
    return config_get_redins_log(pc, n, o->key);
}

static void qlog_reset(config_t *c)
{
    config_qlog_reset(&c->qlog);
}

static int qlog_copy(config_t *dst, const config_t *src)
{
    memset(&dst->qlog, 0, sizeof(dst->qlog)); /* nothing of it is dst's yet */
    return config_qlog_copy(&dst->qlog, &src->qlog);
}

/* whichever key set it: a redins log too */
static bool qlog_same(const config_t *a, const config_t *b)
{
    return config_same_qlog(&a->qlog, &b->qlog);
}

const conf_block_t config_qlog_block = {
    .rows = config_qlog_schema,
    .nrows = QL_COUNT,
    .parse = qlog_parse,
    .reset = qlog_reset,
    .copy = qlog_copy,
    .same = qlog_same,
};

const conf_block_t config_redins_log_block = {.parse = redins_log_parse, .print = redins_log_print};
