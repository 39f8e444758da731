/*
 * main.c — ternd: arguments → config → first zone table → workers → signals.
 *
 * Only wiring lives here. Command-line flags are applied after the config file: --listen
 * replaces the file's listen list (as NSD's -a does: the usual reason to give it is to serve the
 * same config somewhere else), --zone adds zones, --workers overrides. There is no default listen
 * address: a DNS server silently binding port 53 on some address is a surprise, so ternd refuses
 * to start without one (--check-config does not need one).
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <pthread.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tern/answer/answer.h"
#include "tern/common/err.h"
#include "tern/common/log.h"
#include "tern/conf/config.h"
#include "tern/net/server.h"
#include "tern/zone/zone_file.h"
#include "tern/zone/zone_table.h"

enum { OPT_LISTEN = 256, OPT_ZONE, OPT_WORKERS, OPT_CHECK };

static const struct option long_opts[] = {
    {"config", required_argument, NULL, 'c'},
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"zone", required_argument, NULL, OPT_ZONE},
    {"workers", required_argument, NULL, OPT_WORKERS},
    {"check-config", no_argument, NULL, OPT_CHECK},
    {"version", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: ternd [options]\n"
                 "\n"
                 "  -c, --config FILE       read the YAML (or JSON) configuration FILE\n"
                 "      --listen ADDR:PORT  serve UDP and TCP on ADDR:PORT ([V6]:PORT for IPv6);\n"
                 "                          repeatable; replaces the config file's listen list\n"
                 "      --zone ORIGIN=FILE  serve zone ORIGIN from master file FILE; repeatable;\n"
                 "                          added to the config file's zones\n"
                 "      --workers N|auto    worker threads (overrides the config file)\n"
                 "      --check-config      validate the configuration and load every zone, then\n"
                 "                          exit 0 (valid) or 1 (not) without serving\n"
                 "  -v, --version           print the version and exit\n"
                 "  -h, --help              print this help and exit\n"
                 "\n"
                 "A listen address is required (flag or config). SIGTERM/SIGINT stop the server.\n"
                 "\n"
                 "Configuration keys:\n");
    config_schema_print(out);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Load every configured zone into a new frozen table. NULL after logging the error. */
static zone_table_t *load_zones(const config_t *cfg)
{
    int64_t start = now_ms();
    char err[512];
    size_t records = 0;
    zone_table_t *t = zone_table_new();
    if (!t) {
        log_err("out of memory");
        return NULL;
    }
    for (size_t i = 0; i < cfg->nzones; i++) {
        const config_zone_t *cz = &cfg->zones[i];
        zone_t *z = NULL;
        err[0] = '\0';
        int r = zone_file_load(cz->origin, cz->file, &z, err, sizeof(err));
        if (r < 0) {
            log_err("%s", err[0] ? err : tern_strerror(r));
            goto fail;
        }
        records += z->rr_count;
        r = zone_table_add(t, z);
        if (r < 0) {
            if (r == TERN_EDUPZONE)
                log_err("zone %s (%s) is given twice", cz->origin, cz->file);
            else
                log_err("zone %s: %s", cz->origin, tern_strerror(r));
            zone_free(z);
            goto fail;
        }
    }
    if (zone_table_freeze(t) < 0) {
        log_err("out of memory");
        goto fail;
    }
    log_info("loaded %zu zones, %zu records in %lld ms", cfg->nzones, records,
             (long long)(now_ms() - start));
    return t;
fail:
    zone_table_free(t);
    return NULL;
}

static void log_listen(const config_t *cfg, const server_t *s)
{
    for (size_t i = 0; i < cfg->nlisten; i++) {
        const struct sockaddr_storage *ss = &cfg->listen[i].addr;
        char host[INET6_ADDRSTRLEN] = "?";
        if (ss->ss_family == AF_INET) {
            inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, host, sizeof(host));
            log_info("listening on %s:%u (udp, tcp)", host, server_port(s, i));
        } else {
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, host, sizeof(host));
            log_info("listening on [%s]:%u (udp, tcp)", host, server_port(s, i));
        }
    }
}

/* Apply the command line over the config, in two passes so flags override the config file
 * wherever they appear: first -c (and the flags that exit at once), then everything else.
 * Returns 0, 1 for an error, or -1 for "exit 0". */
static int parse_args(int argc, char **argv, config_t *cfg, bool *check_only)
{
    char err[512];
    bool cli_listen = false;
    int opt;
    /* getopt_long visits each argument once per pass: bounded by argc */
    while ((opt = getopt_long(argc, argv, "c:vh", long_opts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            if (config_load(cfg, optarg, err, sizeof(err)) < 0) {
                log_err("%s", err);
                return 1;
            }
            break;
        case 'v':
            printf("ternd " TERN_VERSION "\n");
            return -1;
        case 'h':
            usage(stdout);
            return -1;
        case '?':
            usage(stderr);
            return 1;
        default:
            break;
        }
    }
    if (optind < argc) {
        log_err("unexpected argument '%s' (see --help)", argv[optind]);
        return 1;
    }
    optind = 0; /* glibc: 0 re-initialises getopt for the second pass */
    while ((opt = getopt_long(argc, argv, "c:vh", long_opts, NULL)) != -1) {
        switch (opt) {
        case OPT_LISTEN:
            if (!cli_listen) {
                cfg->nlisten = 0;
                cli_listen = true;
            }
            if (config_add_listen(cfg, optarg) < 0) {
                log_err("--listen %s: want ADDR:PORT or [V6]:PORT (at most %d)", optarg,
                        CONFIG_MAX_LISTEN);
                return 1;
            }
            break;
        case OPT_ZONE: {
            char *eq = strchr(optarg, '=');
            if (!eq || eq == optarg || eq[1] == '\0') {
                log_err("--zone %s: want ORIGIN=FILE", optarg);
                return 1;
            }
            *eq = '\0';
            int r = config_add_zone(cfg, optarg, eq + 1);
            *eq = '=';
            if (r < 0) {
                log_err("out of memory");
                return 1;
            }
            break;
        }
        case OPT_WORKERS: {
            char *end;
            long n = strtol(optarg, &end, 10);
            if (strcmp(optarg, "auto") == 0) {
                cfg->workers = config_auto_workers();
            } else if (end != optarg && *end == '\0' && n >= 1 && n <= CONFIG_MAX_WORKERS) {
                cfg->workers = (unsigned)n;
            } else {
                log_err("--workers %s: want 1..%d or auto", optarg, CONFIG_MAX_WORKERS);
                return 1;
            }
            break;
        }
        case OPT_CHECK:
            *check_only = true;
            break;
        default:
            break; /* handled, or reported, by the first pass */
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    config_t cfg;
    bool check_only = false;
    int rc = 1;
    zone_table_t *table = NULL;
    server_t *srv = NULL;

    config_init(&cfg);
    int r = parse_args(argc, argv, &cfg, &check_only);
    if (r != 0) {
        rc = r < 0 ? 0 : 1;
        goto out;
    }
    if (!check_only && cfg.nlisten == 0) {
        log_err("no listen address: give --listen ADDR:PORT or 'listen:' in the config");
        goto out;
    }
    if (!(table = load_zones(&cfg)))
        goto out;
    if (check_only) {
        log_info("configuration OK");
        rc = 0;
        goto out;
    }

    answer_config_t acfg = {
        .edns_max_udp = cfg.edns_max_udp,
        .identity = cfg.identity,
        .version = cfg.version,
    };

    /* Block the control signals before any worker exists so every thread inherits the mask and
     * only sigwaitinfo() below ever receives them. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGHUP);
    if (pthread_sigmask(SIG_BLOCK, &sigs, NULL) != 0) {
        log_err("cannot block signals");
        goto out;
    }
    const zone_table_t *published = table;
    if (!(srv = server_start(&cfg, &acfg, &published)))
        goto out;
    log_listen(&cfg, srv);
    log_info("ready: %u workers", cfg.workers);

    /* Waits for signals only; leaves on SIGINT/SIGTERM. */
    for (;;) {
        siginfo_t si;
        int sig = sigwaitinfo(&sigs, &si);
        if (sig == SIGHUP) {
            log_warn("SIGHUP: reload not yet supported");
            continue;
        }
        if (sig == SIGINT || sig == SIGTERM) {
            log_info("signal %d: shutting down", sig);
            break;
        }
        /* sig < 0: EINTR from a signal outside the set; wait again */
    }
    server_stop(srv);
    srv = NULL;
    rc = 0;
out:
    zone_table_free(table);
    config_free(&cfg);
    return rc;
}
