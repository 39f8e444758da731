/*
 * ternctl.c — control a running ternd over its UNIX socket, or check a config or zone offline.
 *
 *   ternctl [-s SOCKET | -c CONFIG] [-t SECONDS] reload|status|stats|zone ZONE|zone flush ZONE|
 *           health
 *   ternctl ... health set ADDR[:PORT] up|down|auto
 *   ternctl ... dnssec ds ZONE
 *   ternctl ... explain NAME [TYPE] --client ADDR [--ecs PREFIX] [--do] [--tcp] [--json]
 *   ternctl check-config FILE
 *   ternctl check-zone ORIGIN FILE
 *   ternctl dnssec keygen ZONE [-a 13|15|8] [-b BITS] [-d DIR]
 *   ternctl dnssec ds [--all] KEYFILE...
 *
 * Online commands send one request line (see tern/ctl/ctl.h for the protocol) and print the
 * response: to stdout when it starts with "ok", to stderr when it starts with "error:". Exit
 * status: 0 ok, 1 the server answered with an error (or a check failed), 2 usage, or the server
 * could not be reached or did not answer.
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tern/common/err.h"
#include "tern/conf/config.h"
#include "tern/ctl/ctl.h"
#include "tern/dnssec/dnssec_key.h"
#include "tern/geo/asn_compile.h"
#include "tern/geo/asn_table.h"
#include "tern/geo/geoip.h"
#include "tern/zone/zone_file.h"
#include "tern/zone/zone_json.h"
#include "tern/zone/zone_table.h"

enum { EXIT_OK = 0, EXIT_ERROR = 1, EXIT_USAGE = 2, EXIT_UNREACHABLE = 2 };

/* Connecting only waits while ternd's backlog is full; the response may take as long as a reload
 * of every zone (seconds for millions of records), so its default bound is generous. */
#define CONNECT_TIMEOUT_MS 5000
#define DEFAULT_TIMEOUT_S  120
#define MAX_TIMEOUT_S      86400

static const struct option long_opts[] = {
    {"socket", required_argument, NULL, 's'},  {"config", required_argument, NULL, 'c'},
    {"timeout", required_argument, NULL, 't'}, {"version", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: ternctl [options] COMMAND [ARGS]\n"
            "\n"
            "Commands (talk to a running ternd):\n"
            "  reload              re-read the config and every zone; wait and print the result\n"
            "                      (zones, changed zones, or the error with file:line)\n"
            "  status              uptime, workers, zones with serials and record counts, last\n"
            "                      reload time and result\n"
            "  stats               query counters (by transport, qtype, rcode) and reload "
            "counters\n"
            "  zone ZONE           one zone's serial, records, size, load time and file; its\n"
            "                      transfers, and its dynamic updates' journal and last changes\n"
            "  zone flush ZONE     write a zone's dynamic updates back into its file (atomic)\n"
            "                      and empty its journal\n"
            "  health              every health-checked endpoint: state, counter, override,\n"
            "                      last result and error\n"
            "  health set ADDR[:PORT] up|down|auto\n"
            "                      force endpoints up or down (kept across reloads), or give\n"
            "                      them back to their checks\n"
            "  dnssec ds ZONE      the DS records of a signed zone's KSKs, as ternd has them\n"
            "  dnssec status [ZONE]\n"
            "                      the keys of zones with a dnssec policy: role, tag, state,\n"
            "                      next event; the DS each zone waits for at its parent\n"
            "  dnssec rollover ZONE ksk|zsk|csk\n"
            "                      start a key rollover now\n"
            "  dnssec ds-seen ZONE [TAG]\n"
            "                      the parent has the DS of the KSK with TAG (default: every KSK\n"
            "                      whose DS the zone waits for): it becomes active\n"
            "  dnssec ds-gone ZONE the parent has no DS any more for a zone being unsigned\n"
            "                      (dnssec: {policy, unsign: true}): its keys can go\n"
            "  explain NAME [TYPE] --client ADDR [--ecs PREFIX] [--do] [--tcp] [--json]\n"
            "                      why ADDR gets the answer it gets: ternd runs the query (EDNS,\n"
            "                      ECS and DO as given) through its own pipeline and shows the\n"
            "                      zone and version, the lookup path, each steering step\n"
            "                      (health, geo, order, count), the records, ECS scope and TTL,\n"
            "                      DNSSEC signatures and the ACL/rate/RRL verdicts (nothing\n"
            "                      charged); --json: one JSON object\n"
            "\n"
            "Offline (no server needed):\n"
            "  check-config FILE   parse the config and load every zone it lists\n"
            "  check-zone ORIGIN FILE\n"
            "                      load one zone file\n"
            "  asn compile -o OUT INPUT...\n"
            "                      compile ip2asn data (iptoasn TSV, ip-location-db CSV, or a\n"
            "                      MaxMind ASN database such as GeoLite2-ASN.mmdb) into the\n"
            "                      binary range table ternd maps\n"
            "  asn lookup FILE IP  print the ASN, country and name of IP in a compiled table\n"
            "  geoip lookup FILE IP\n"
            "                      print the country, coordinates and network of IP in a\n"
            "                      MaxMind DB, as the geo filters see them\n"
            "  dnssec keygen ZONE [-a 13|15|8] [-b BITS] [-d DIR]\n"
            "                      write a KSK and a ZSK as BIND K<zone>.+<alg>+<tag> .key and\n"
            "                      .private files into DIR (default .) and print their stems;\n"
            "                      algorithm 13 (ECDSA P-256, the default), 15 (Ed25519) or 8\n"
            "                      (RSA/SHA-256 of BITS bits, default 2048)\n"
            "  dnssec ds [--all] KEYFILE...\n"
            "                      print the DS record (SHA-256) of each KSK (SEP flag) among\n"
            "                      the key files (stem, .key or .private); --all: of every key.\n"
            "                      A name that is no file is a zone asked of ternd instead\n"
            "\n"
            "Options:\n"
            "  -s, --socket PATH   the control socket (default: the config's control_socket,\n"
            "                      else " CTL_DEFAULT_SOCKET ")\n"
            "  -c, --config FILE   read control_socket from ternd's config FILE\n"
            "  -t, --timeout SECS  how long to wait for the answer (default %d)\n"
            "  -v, --version       print the version and exit\n"
            "  -h, --help          print this help and exit\n"
            "\n"
            "Exit status: 0 ok; 1 the server answered with an error, or a check failed;\n"
            "2 bad usage, or the server could not be reached or did not answer.\n",
            DEFAULT_TIMEOUT_S);
}

/* --- offline checks */

/* Load every zone of the config at path; print each error with its file:line. */
static int check_config(const char *path)
{
    char err[1024] = "";
    config_t cfg;
    config_init(&cfg);
    if (config_load(&cfg, path, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s\n", err[0] ? err : path);
        config_free(&cfg);
        return EXIT_ERROR;
    }
    zone_table_t *t = zone_table_new();
    if (!t) {
        fprintf(stderr, "ternctl: out of memory\n");
        config_free(&cfg);
        return EXIT_ERROR;
    }
    size_t records = 0, failed = 0;
    /* every zone is tried, so one run lists every broken zone */
    for (size_t i = 0; i < cfg.nzones; i++) {
        const config_zone_t *cz = &cfg.zones[i];
        zone_t *z = NULL;
        err[0] = '\0';
        /* transfer settings of a Redis zone, or a secondary zone not transferred yet: no file */
        if (!cz->file || (cz->nprimaries && access(cz->file, F_OK) != 0))
            continue;
        /* records are not located here: that needs the geo databases and changes no validity */
        int r = cz->format == CONFIG_ZONE_JSON
                    ? zone_json_load_file(cz->origin, cz->file, NULL, &z, err, sizeof(err))
                    : zone_file_load(cz->origin, cz->file, &z, err, sizeof(err));
        if (r < 0) {
            fprintf(stderr, "%s\n", err[0] ? err : tern_strerror(r));
            failed++;
            continue;
        }
        size_t n = z->rr_count;
        if ((r = zone_table_add(t, z)) < 0) {
            zone_free(z);
            if (r == TERN_EDUPZONE)
                fprintf(stderr, "%s: zone %s (%s) is configured twice\n", path, cz->origin,
                        cz->file);
            else
                fprintf(stderr, "%s: zone %s: %s\n", path, cz->origin, tern_strerror(r));
            failed++;
            continue;
        }
        records += n;
    }
    int rc = EXIT_OK;
    if (failed) {
        fprintf(stderr, "FAILED: %zu of %zu zones have errors\n", failed, cfg.nzones);
        rc = EXIT_ERROR;
    } else if (zone_table_freeze(t) < 0) {
        fprintf(stderr, "ternctl: out of memory\n");
        rc = EXIT_ERROR;
    } else {
        printf("OK: %zu zones, %zu records\n", cfg.nzones, records);
    }
    zone_table_free(t);
    config_free(&cfg);
    return rc;
}

/* ternctl asn compile -o OUT INPUT... */
static int asn_compile_cmd(int nargs, char **args)
{
    const char *out = NULL;
    const char *inputs[256];
    size_t n = 0;
    for (int i = 0; i < nargs; i++) {
        if (strcmp(args[i], "-o") == 0 && i + 1 < nargs) {
            out = args[++i];
        } else if (n < sizeof(inputs) / sizeof(inputs[0])) {
            inputs[n++] = args[i];
        } else {
            fprintf(stderr, "ternctl: asn compile: at most %zu inputs\n",
                    sizeof(inputs) / sizeof(inputs[0]));
            return EXIT_USAGE;
        }
    }
    if (!out || n == 0) {
        fprintf(stderr, "ternctl: usage: ternctl asn compile -o OUT INPUT...\n");
        return EXIT_USAGE;
    }
    char err[1024] = "";
    asn_compile_stats_t st;
    int r = asn_compile(inputs, n, out, &st, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "ternctl: asn compile: %s\n", err[0] ? err : tern_strerror(r));
        return EXIT_ERROR;
    }
    printf("OK: %s: ", out);
    if (st.lines || !st.networks)
        printf("%zu lines, ", st.lines);
    if (st.networks)
        printf("%zu MaxMind DB networks (%zu copies of the IPv4 data skipped), ", st.networks,
               st.aliases);
    printf("%zu IPv4 and %zu IPv6 ranges (%zu overlapping), %zu + %zu entries, %zu names\n",
           st.ranges_v4, st.ranges_v6, st.overlaps, st.entries_v4, st.entries_v6, st.names);
    return EXIT_OK;
}

/* ternctl asn lookup FILE IP */
static int asn_lookup_cmd(const char *file, const char *ip)
{
    uint8_t a6[16];
    struct in_addr a4;
    bool v4 = inet_pton(AF_INET, ip, &a4) == 1;
    if (!v4 && inet_pton(AF_INET6, ip, a6) != 1) {
        fprintf(stderr, "ternctl: asn lookup: '%s' is not an IPv4 or IPv6 address\n", ip);
        return EXIT_USAGE;
    }
    char err[512] = "";
    asn_table_t *t = asn_table_open(file, err, sizeof(err));
    if (!t) {
        fprintf(stderr, "ternctl: asn lookup: %s\n", err);
        return EXIT_ERROR;
    }
    uint32_t asn = v4 ? asn_table_lookup_v4(t, ntohl(a4.s_addr)) : asn_table_lookup_v6(t, a6);
    const char *cc = "", *name = "";
    size_t cc_len = 0, name_len = 0;
    if (asn && asn_table_info(t, asn, &cc, &cc_len, &name, &name_len) < 0)
        cc_len = name_len = 0;
    if (cc_len == 0) {
        cc = "-"; /* no country in the data (ip-location-db's ASN files have none) */
        cc_len = 1;
    }
    if (asn)
        printf("%s AS%u %.*s %.*s\n", ip, (unsigned)asn, (int)cc_len, cc, (int)name_len, name);
    else
        printf("%s no ASN\n", ip);
    asn_table_close(t);
    return EXIT_OK;
}

/* ternctl geoip lookup FILE IP */
static int geoip_lookup_cmd(const char *file, const char *ip)
{
    uint8_t a[16];
    int fam = AF_INET;
    if (inet_pton(AF_INET, ip, a) != 1) {
        fam = AF_INET6;
        if (inet_pton(AF_INET6, ip, a) != 1) {
            fprintf(stderr, "ternctl: geoip lookup: '%s' is not an IPv4 or IPv6 address\n", ip);
            return EXIT_USAGE;
        }
    }
    char err[512] = "";
    geoip_db_t *db = geoip_open(file, err, sizeof(err));
    if (!db) {
        fprintf(stderr, "ternctl: geoip lookup: %s\n", err);
        return EXIT_ERROR;
    }
    geoip_result_t r;
    geoip_lookup(db, fam, a, &r);
    char cc[3] = "-";
    if (r.country) {
        cc[0] = (char)(r.country >> 8);
        cc[1] = (char)r.country;
        cc[2] = '\0';
    }
    if (r.has_location)
        printf("%s country %s location %.4f,%.4f network /%u (%s)\n", ip, cc, r.lat, r.lon,
               r.prefix, geoip_describe(db));
    else
        printf("%s country %s location unknown network /%u (%s)\n", ip, cc, r.prefix,
               geoip_describe(db));
    geoip_close(db);
    return EXIT_OK;
}

static int check_zone(const char *origin, const char *file)
{
    char err[1024] = "";
    zone_t *z = NULL;
    size_t fl = strlen(file);
    int r = fl > 5 && strcasecmp(file + fl - 5, ".json") == 0
                ? zone_json_load_file(origin, file, NULL, &z, err, sizeof(err))
                : zone_file_load(origin, file, &z, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "%s\n", err[0] ? err : tern_strerror(r));
        return EXIT_ERROR;
    }
    printf("OK: %s serial %u, %zu records\n", origin, (unsigned)z->serial, z->rr_count);
    zone_free(z);
    return EXIT_OK;
}

/* --- DNSSEC keys */

/* Tries for a new key whose tag is not taken yet (by its sibling or a key file in the
 * directory): with 65536 tags, a second collision in a row is already unheard of. */
#define KEYGEN_TRIES 8

static bool parse_alg(const char *s, unsigned *alg)
{
    static const struct {
        const char *num, *name;
        unsigned alg;
    } algs[] = {{"13", "ECDSAP256SHA256", DNSSEC_ALG_ECDSAP256SHA256},
                {"15", "ED25519", DNSSEC_ALG_ED25519},
                {"8", "RSASHA256", DNSSEC_ALG_RSASHA256}};
    for (size_t i = 0; i < sizeof(algs) / sizeof(algs[0]); i++) {
        if (strcmp(s, algs[i].num) == 0 || strcasecmp(s, algs[i].name) == 0) {
            *alg = algs[i].alg;
            return true;
        }
    }
    return false;
}

/* One new key written into dir, its stem into stem; avoid: a tag the zone's other new key has. */
static int keygen_one(const uint8_t *origin, unsigned alg, bool ksk, unsigned bits, const char *dir,
                      int avoid, char *stem, size_t stemlen, uint16_t *tag)
{
    char err[1024] = "";
    for (int i = 0; i < KEYGEN_TRIES; i++) {
        dnssec_key_t *k = NULL;
        int r = dnssec_key_generate(origin, alg, ksk, bits, &k, err, sizeof(err));
        if (r == 0 && k->tag == avoid) {
            dnssec_key_free(k);
            continue;
        }
        if (r == 0) {
            *tag = k->tag;
            r = dnssec_key_write(k, dir, stem, stemlen, err, sizeof(err));
            dnssec_key_free(k);
        }
        if (r == TERN_EEXIST) /* a key in dir has this tag already: another key */
            continue;
        if (r < 0) {
            fprintf(stderr, "ternctl: dnssec keygen: %s\n", err[0] ? err : tern_strerror(r));
            return EXIT_ERROR;
        }
        return EXIT_OK;
    }
    fprintf(stderr, "ternctl: dnssec keygen: %s\n", err[0] ? err : "no free key tag");
    return EXIT_ERROR;
}

/* ternctl dnssec keygen ZONE [-a 13|15|8] [-b BITS] [-d DIR] */
static int dnssec_keygen_cmd(int nargs, char **args)
{
    const char *zone = NULL, *dir = ".";
    unsigned alg = DNSSEC_ALG_ECDSAP256SHA256, bits = 0;
    bool bad = false;
    for (int i = 0; i < nargs && !bad; i++) {
        const char *a = args[i], *v = i + 1 < nargs ? args[i + 1] : NULL;
        char *end = NULL;
        if (strcmp(a, "-a") == 0 && v) {
            bad = !parse_alg(v, &alg);
            i++;
        } else if (strcmp(a, "-b") == 0 && v) {
            unsigned long n = strtoul(v, &end, 10);
            bad = end == v || *end || n < 1024 || n > 4096;
            bits = (unsigned)n;
            i++;
        } else if (strcmp(a, "-d") == 0 && v) {
            dir = v;
            i++;
        } else {
            bad = a[0] == '-' || zone;
            zone = a;
        }
    }
    uint8_t origin[DNAME_MAXLEN];
    const char *why = "";
    if (bad || !zone || (bits && alg != DNSSEC_ALG_RSASHA256)) {
        fprintf(stderr, "ternctl: usage: ternctl dnssec keygen ZONE [-a 13|15|8] [-b BITS] "
                        "[-d DIR] (-b: 1024..4096, with -a 8 only)\n");
        return EXIT_USAGE;
    }
    if (dname_from_str(zone, strlen(zone), false, origin, &why) < 0) {
        fprintf(stderr, "ternctl: dnssec keygen: bad zone name '%s': %s\n", zone, why);
        return EXIT_USAGE;
    }
    char stems[2][PATH_MAX];
    uint16_t tag = 0;
    /* the KSK first; the ZSK must not share its tag, or signatures would name either */
    if (keygen_one(origin, alg, true, bits, dir, -1, stems[0], sizeof(stems[0]), &tag) != 0)
        return EXIT_ERROR;
    printf("%s\n", stems[0]);
    fflush(stdout);
    if (keygen_one(origin, alg, false, bits, dir, tag, stems[1], sizeof(stems[1]), &tag) != 0)
        return EXIT_ERROR;
    printf("%s\n", stems[1]);
    /* a relative DIR would be resolved against the config's directory: give absolute paths */
    char abs[PATH_MAX];
    bool full = dir[0] != '/' && realpath(dir, abs);
    const char *base[2];
    for (int i = 0; i < 2; i++) {
        base[i] = strrchr(stems[i], '/');
        base[i] = base[i] ? base[i] + 1 : stems[i];
    }
    if (full)
        fprintf(stderr, "hint: ternd.yaml, in the zone's entry: dnssec: {keys: [%s/%s, %s/%s]}\n",
                abs, base[0], abs, base[1]);
    else
        fprintf(stderr, "hint: ternd.yaml, in the zone's entry: dnssec: {keys: [%s, %s]}\n",
                stems[0], stems[1]);
    return EXIT_OK;
}

static bool has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* A ternctl dnssec ds argument names a zone (asked of ternd) rather than a key file: no '/',
 * no .key/.private, and neither it nor ARG.key is a file (a stem in the current directory). */
static bool ds_arg_is_zone(const char *a)
{
    struct stat st;
    char key[PATH_MAX];
    if (strchr(a, '/') || has_suffix(a, ".key") || has_suffix(a, ".private") || stat(a, &st) == 0)
        return false;
    return snprintf(key, sizeof(key), "%s.key", a) >= (int)sizeof(key) || stat(key, &st) != 0;
}

/* The DS of one key file (only a KSK's unless all); works from the .key alone, as the
 * .private may be readable by ternd's user only. */
static int ds_of_file(const char *path, bool all)
{
    char err[1024] = "", line[600];
    dnssec_key_t *k = NULL;
    int r = dnssec_key_load_public(path, NULL, &k, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "ternctl: dnssec ds: %s\n", err[0] ? err : tern_strerror(r));
        return EXIT_ERROR;
    }
    if (!all && !(k->flags & DNSSEC_FLAG_SEP)) {
        fprintf(stderr,
                "ternctl: dnssec ds: %s: a ZSK (flags %u, no SEP bit): skipped (--all: "
                "every key)\n",
                path, k->flags);
    } else if ((r = dnssec_key_ds_text(k, 2, line, sizeof(line))) < 0) {
        fprintf(stderr, "ternctl: dnssec ds: %s: %s\n", path, tern_strerror(r));
    } else {
        printf("%s\n", line);
    }
    dnssec_key_free(k);
    return r < 0 ? EXIT_ERROR : EXIT_OK;
}

/* --- online commands */

/* The socket to talk to: -s, else the config's control_socket, else the default. NULL (after
 * saying why) when the config cannot be read or sets none; *owned is what to free. */
static const char *socket_path(const char *sock, const char *config, char **owned)
{
    *owned = NULL;
    if (sock)
        return sock;
    if (!config)
        return CTL_DEFAULT_SOCKET;
    char err[1024] = "";
    config_t cfg;
    config_init(&cfg);
    const char *path = NULL;
    if (config_load(&cfg, config, err, sizeof(err)) < 0)
        fprintf(stderr, "ternctl: %s\n", err[0] ? err : config);
    else if (!cfg.control_socket)
        fprintf(stderr, "ternctl: %s sets no control_socket: ternd serves no control socket\n",
                config);
    else if (!(path = *owned = strdup(cfg.control_socket)))
        fprintf(stderr, "ternctl: out of memory\n");
    config_free(&cfg);
    return path;
}

static int run_online(const char *path, const char *request, int timeout_s)
{
    int fd = ctl_connect(path, CONNECT_TIMEOUT_MS);
    if (fd < 0) {
        const char *hint = fd == -ENOENT         ? " (is ternd running with control_socket set?)"
                           : fd == -ECONNREFUSED ? " (a stale socket: is ternd running?)"
                           : fd == -EACCES       ? " (not in ternd's group?)"
                                                 : "";
        fprintf(stderr, "ternctl: cannot connect to %s: %s%s\n", path, tern_strerror(fd), hint);
        return EXIT_UNREACHABLE;
    }
    char *resp = NULL;
    int r = ctl_exchange(fd, request, timeout_s * 1000, &resp);
    close(fd);
    if (r < 0) {
        fprintf(stderr, "ternctl: %s: no answer to '%s': %s\n", path, request, tern_strerror(r));
        return EXIT_UNREACHABLE;
    }
    int rc;
    if (strncmp(resp, "ok\n", 3) == 0) {
        /* explain --json: the JSON object alone, for scripts (the exit status says ok) */
        bool json = strncmp(request, "explain ", 8) == 0 && strstr(request, " --json");
        fputs(json ? resp + 3 : resp, stdout);
        rc = EXIT_OK;
    } else if (strncmp(resp, "error:", 6) == 0) {
        fputs(resp, stderr);
        rc = EXIT_ERROR;
    } else {
        fprintf(stderr, "ternctl: %s: %s\n", path,
                resp[0] ? "unexpected answer (not ternd?)"
                        : "the server closed the connection without answering");
        rc = EXIT_UNREACHABLE;
    }
    free(resp);
    return rc;
}

/* A zone name for the request line: printable, no spaces (it would become a second word). */
static bool plain_word(const char *s)
{
    if (!*s || strlen(s) > 255)
        return false;
    for (; *s; s++)
        if ((unsigned char)*s <= 0x20 || (unsigned char)*s == 0x7f)
            return false;
    return true;
}

/* ternctl dnssec ds [--all] KEYFILE|ZONE...: key files offline, zones from the running ternd */
static int dnssec_ds_cmd(int nargs, char **args, const char *sock, const char *config,
                         int timeout_s)
{
    bool all = false;
    int n = 0, rc = EXIT_OK;
    bool bad = false;
    for (int i = 0; i < nargs; i++) {
        if (strcmp(args[i], "--all") == 0)
            all = true;
        else if (args[i][0] == '-' || !args[i][0])
            bad = true;
        else
            n++;
    }
    if (bad || n == 0) {
        fprintf(stderr, "ternctl: usage: ternctl dnssec ds [--all] KEYFILE|ZONE...\n");
        return EXIT_USAGE;
    }
    for (int i = 0; i < nargs; i++) {
        if (strcmp(args[i], "--all") == 0)
            continue;
        int r;
        if (!ds_arg_is_zone(args[i])) {
            r = ds_of_file(args[i], all);
        } else if (!plain_word(args[i])) {
            fprintf(stderr, "ternctl: dnssec ds: '%s' is neither a key file nor a zone name\n",
                    args[i]);
            r = EXIT_USAGE;
        } else if (sock && config) {
            fprintf(stderr, "ternctl: give -s or -c, not both\n");
            return EXIT_USAGE;
        } else {
            /* the server's answer is every KSK's DS, as it signs with them */
            char request[CTL_MAX_REQUEST], *owned;
            snprintf(request, sizeof(request), "dnssec ds %s", args[i]);
            const char *path = socket_path(sock, config, &owned);
            r = path ? run_online(path, request, timeout_s) : EXIT_UNREACHABLE;
            free(owned);
        }
        rc = r > rc ? r : rc;
    }
    return rc;
}

/* The options before the command. */
typedef struct opts {
    const char *sock, *config;
    int timeout_s;
} opts_t;

/* Read the options into o; -1 to go on, or the exit status (--help, --version, a bad option). */
static int parse_options(int argc, char **argv, opts_t *o)
{
    int opt;
    /* "+": options end at the command, so a zone name starting with '-' is not an option;
     * getopt_long visits each argument once: bounded by argc */
    while ((opt = getopt_long(argc, argv, "+s:c:t:vh", long_opts, NULL)) != -1) {
        switch (opt) {
        case 's':
            o->sock = optarg;
            break;
        case 'c':
            o->config = optarg;
            break;
        case 't': {
            char *end;
            long n = strtol(optarg, &end, 10);
            if (end == optarg || *end || n < 1 || n > MAX_TIMEOUT_S) {
                fprintf(stderr, "ternctl: --timeout %s: want 1..%d seconds\n", optarg,
                        MAX_TIMEOUT_S);
                return EXIT_USAGE;
            }
            o->timeout_s = (int)n;
            break;
        }
        case 'v':
            printf("ternctl " TERN_VERSION "\n");
            return EXIT_OK;
        case 'h':
            usage(stdout);
            return EXIT_OK;
        default:
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    return -1;
}

/* The commands that need no ternd (checks, ASN and GeoIP tables, DNSSEC keys; "dnssec ds"
 * answers key files itself): their exit status, or -1 when cmd is none of them. */
static int run_offline(int nargs, char **args, const opts_t *o)
{
    const char *cmd = args[0];
    if (strcmp(cmd, "check-config") == 0 || strcmp(cmd, "check-zone") == 0) {
        bool zone = cmd[6] == 'z';
        if (nargs != (zone ? 3 : 2)) {
            fprintf(stderr, "ternctl: usage: ternctl %s\n",
                    zone ? "check-zone ORIGIN FILE" : "check-config FILE");
            return EXIT_USAGE;
        }
        if (o->sock || o->config)
            fprintf(stderr, "ternctl: %s works offline; -s/-c are ignored\n", cmd);
        return zone ? check_zone(args[1], args[2]) : check_config(args[1]);
    }

    if (strcmp(cmd, "asn") == 0) {
        if (nargs >= 2 && strcmp(args[1], "compile") == 0)
            return asn_compile_cmd(nargs - 2, args + 2);
        if (nargs == 4 && strcmp(args[1], "lookup") == 0)
            return asn_lookup_cmd(args[2], args[3]);
        fprintf(stderr, "ternctl: usage: ternctl asn compile -o OUT INPUT... | "
                        "ternctl asn lookup FILE IP\n");
        return EXIT_USAGE;
    }

    if (strcmp(cmd, "geoip") == 0) {
        if (nargs == 4 && strcmp(args[1], "lookup") == 0)
            return geoip_lookup_cmd(args[2], args[3]);
        fprintf(stderr, "ternctl: usage: ternctl geoip lookup FILE IP\n");
        return EXIT_USAGE;
    }

    if (strcmp(cmd, "dnssec") == 0 && nargs >= 2 && strcmp(args[1], "keygen") == 0) {
        if (o->sock || o->config)
            fprintf(stderr, "ternctl: dnssec keygen works offline; -s/-c are ignored\n");
        return dnssec_keygen_cmd(nargs - 2, args + 2);
    }
    if (strcmp(cmd, "dnssec") == 0 && nargs >= 2 && strcmp(args[1], "ds") == 0)
        return dnssec_ds_cmd(nargs - 2, args + 2, o->sock, o->config, o->timeout_s);
    if (strcmp(cmd, "dnssec") == 0 && nargs >= 2 &&
        (strcmp(args[1], "status") == 0 || strcmp(args[1], "rollover") == 0 ||
         strcmp(args[1], "ds-seen") == 0 || strcmp(args[1], "ds-gone") == 0))
        return -1; /* asked of ternd */
    if (strcmp(cmd, "dnssec") == 0) {
        fprintf(stderr, "ternctl: usage: ternctl dnssec keygen ZONE [-a 13|15|8] [-b BITS] "
                        "[-d DIR] | ternctl dnssec ds [--all] KEYFILE|ZONE... | ternctl dnssec "
                        "status [ZONE] | ternctl dnssec rollover ZONE ksk|zsk|csk | ternctl "
                        "dnssec ds-seen ZONE [TAG] | ternctl dnssec ds-gone ZONE\n");
        return EXIT_USAGE;
    }
    return -1;
}

/* The request line of an online command into request (len bytes): 0, or the exit status of a
 * usage error (said on stderr). */
static int online_request(int nargs, char **args, char *request, size_t len)
{
    const char *cmd = args[0];
    if (strcmp(cmd, "reload") == 0 || strcmp(cmd, "status") == 0 || strcmp(cmd, "stats") == 0) {
        if (nargs != 1) {
            fprintf(stderr, "ternctl: %s takes no arguments\n", cmd);
            return EXIT_USAGE;
        }
        snprintf(request, len, "%s", cmd);
    } else if (strcmp(cmd, "health") == 0) {
        if (nargs == 1) {
            snprintf(request, len, "health");
        } else if (nargs == 4 && strcmp(args[1], "set") == 0 && plain_word(args[2]) &&
                   (strcmp(args[3], "up") == 0 || strcmp(args[3], "down") == 0 ||
                    strcmp(args[3], "auto") == 0)) {
            snprintf(request, len, "health set %s %s", args[2], args[3]);
        } else {
            fprintf(stderr, "ternctl: usage: ternctl health | ternctl health set ADDR[:PORT] "
                            "up|down|auto\n");
            return EXIT_USAGE;
        }
    } else if (strcmp(cmd, "zone") == 0) {
        if (nargs == 3 && strcmp(args[1], "flush") == 0 && plain_word(args[2])) {
            snprintf(request, len, "zone flush %s", args[2]);
            return 0;
        }
        if (nargs != 2 || !plain_word(args[1])) {
            fprintf(stderr, "ternctl: usage: ternctl zone ZONE | ternctl zone flush ZONE (one "
                            "name, no spaces)\n");
            return EXIT_USAGE;
        }
        snprintf(request, len, "zone %s", args[1]);
    } else if (strcmp(cmd, "dnssec") == 0) {
        bool ok = (strcmp(args[1], "status") == 0 && nargs <= 3) ||
                  (strcmp(args[1], "rollover") == 0 && nargs == 4) ||
                  (strcmp(args[1], "ds-seen") == 0 && (nargs == 3 || nargs == 4)) ||
                  (strcmp(args[1], "ds-gone") == 0 && nargs == 3);
        for (int i = 2; ok && i < nargs; i++)
            ok = plain_word(args[i]);
        if (!ok) {
            fprintf(stderr, "ternctl: usage: ternctl dnssec status [ZONE] | ternctl dnssec "
                            "rollover ZONE ksk|zsk|csk | ternctl dnssec ds-seen ZONE [TAG] | "
                            "ternctl dnssec ds-gone ZONE\n");
            return EXIT_USAGE;
        }
        size_t pos = (size_t)snprintf(request, len, "dnssec");
        for (int i = 1; i < nargs && pos < len; i++)
            pos += (size_t)snprintf(request + pos, len - pos, " %s", args[i]);
    } else if (strcmp(cmd, "explain") == 0) {
        bool ok = nargs >= 4 && nargs <= 10;
        for (int i = 1; ok && i < nargs; i++)
            ok = plain_word(args[i]);
        if (!ok) {
            fprintf(stderr, "ternctl: usage: ternctl explain NAME [TYPE] --client ADDR [--ecs "
                            "PREFIX] [--do] [--tcp] [--json]\n");
            return EXIT_USAGE;
        }
        size_t pos = (size_t)snprintf(request, len, "explain");
        for (int i = 1; i < nargs && pos < len; i++)
            pos += (size_t)snprintf(request + pos, len - pos, " %s", args[i]);
    } else {
        fprintf(stderr, "ternctl: unknown command '%s' (see ternctl --help)\n", cmd);
        return EXIT_USAGE;
    }
    return 0;
}

int main(int argc, char **argv)
{
    opts_t o = {.timeout_s = DEFAULT_TIMEOUT_S};
    int rc = parse_options(argc, argv, &o);
    if (rc >= 0)
        return rc;
    int nargs = argc - optind;
    char **args = argv + optind;
    if (nargs < 1) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if ((rc = run_offline(nargs, args, &o)) >= 0)
        return rc;
    char request[CTL_MAX_REQUEST];
    if ((rc = online_request(nargs, args, request, sizeof(request))) != 0)
        return rc;
    if (o.sock && o.config) {
        fprintf(stderr, "ternctl: give -s or -c, not both\n");
        return EXIT_USAGE;
    }
    char *owned;
    const char *path = socket_path(o.sock, o.config, &owned);
    if (!path)
        return EXIT_UNREACHABLE;
    rc = run_online(path, request, o.timeout_s);
    free(owned);
    return rc;
}
