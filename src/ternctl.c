/*
 * ternctl.c — control a running ternd over its UNIX socket, or check a config or zone offline.
 *
 *   ternctl [-s SOCKET | -c CONFIG] [-t SECONDS] reload|status|stats|zone ZONE|health
 *   ternctl ... health set ADDR[:PORT] up|down|auto
 *   ternctl check-config FILE
 *   ternctl check-zone ORIGIN FILE
 *
 * Online commands send one request line (see tern/ctl/ctl.h for the protocol) and print the
 * response: to stdout when it starts with "ok", to stderr when it starts with "error:". Exit
 * status: 0 ok, 1 the server answered with an error (or a check failed), 2 usage, or the server
 * could not be reached or did not answer.
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "tern/common/err.h"
#include "tern/conf/config.h"
#include "tern/ctl/ctl.h"
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
            "  zone ZONE           one zone's serial, records, size, load time and file\n"
            "  health              every health-checked endpoint: state, counter, override,\n"
            "                      last result and error\n"
            "  health set ADDR[:PORT] up|down|auto\n"
            "                      force endpoints up or down (kept across reloads), or give\n"
            "                      them back to their checks\n"
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
        fputs(resp, stdout);
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

int main(int argc, char **argv)
{
    const char *sock = NULL, *config = NULL;
    int timeout_s = DEFAULT_TIMEOUT_S;
    int opt;
    /* "+": options end at the command, so a zone name starting with '-' is not an option;
     * getopt_long visits each argument once: bounded by argc */
    while ((opt = getopt_long(argc, argv, "+s:c:t:vh", long_opts, NULL)) != -1) {
        switch (opt) {
        case 's':
            sock = optarg;
            break;
        case 'c':
            config = optarg;
            break;
        case 't': {
            char *end;
            long n = strtol(optarg, &end, 10);
            if (end == optarg || *end || n < 1 || n > MAX_TIMEOUT_S) {
                fprintf(stderr, "ternctl: --timeout %s: want 1..%d seconds\n", optarg,
                        MAX_TIMEOUT_S);
                return EXIT_USAGE;
            }
            timeout_s = (int)n;
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
    int nargs = argc - optind;
    char **args = argv + optind;
    if (nargs < 1) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = args[0];
    if (strcmp(cmd, "check-config") == 0 || strcmp(cmd, "check-zone") == 0) {
        bool zone = cmd[6] == 'z';
        if (nargs != (zone ? 3 : 2)) {
            fprintf(stderr, "ternctl: usage: ternctl %s\n",
                    zone ? "check-zone ORIGIN FILE" : "check-config FILE");
            return EXIT_USAGE;
        }
        if (sock || config)
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

    char request[CTL_MAX_REQUEST];
    if (strcmp(cmd, "reload") == 0 || strcmp(cmd, "status") == 0 || strcmp(cmd, "stats") == 0) {
        if (nargs != 1) {
            fprintf(stderr, "ternctl: %s takes no arguments\n", cmd);
            return EXIT_USAGE;
        }
        snprintf(request, sizeof(request), "%s", cmd);
    } else if (strcmp(cmd, "health") == 0) {
        if (nargs == 1) {
            snprintf(request, sizeof(request), "health");
        } else if (nargs == 4 && strcmp(args[1], "set") == 0 && plain_word(args[2]) &&
                   (strcmp(args[3], "up") == 0 || strcmp(args[3], "down") == 0 ||
                    strcmp(args[3], "auto") == 0)) {
            snprintf(request, sizeof(request), "health set %s %s", args[2], args[3]);
        } else {
            fprintf(stderr, "ternctl: usage: ternctl health | ternctl health set ADDR[:PORT] "
                            "up|down|auto\n");
            return EXIT_USAGE;
        }
    } else if (strcmp(cmd, "zone") == 0) {
        if (nargs != 2 || !plain_word(args[1])) {
            fprintf(stderr, "ternctl: usage: ternctl zone ZONE (one name, no spaces)\n");
            return EXIT_USAGE;
        }
        snprintf(request, sizeof(request), "zone %s", args[1]);
    } else {
        fprintf(stderr, "ternctl: unknown command '%s' (see ternctl --help)\n", cmd);
        return EXIT_USAGE;
    }
    if (sock && config) {
        fprintf(stderr, "ternctl: give -s or -c, not both\n");
        return EXIT_USAGE;
    }
    char *owned;
    const char *path = socket_path(sock, config, &owned);
    if (!path)
        return EXIT_UNREACHABLE;
    int rc = run_online(path, request, timeout_s);
    free(owned);
    return rc;
}
