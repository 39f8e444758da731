/*
 * main.c — ternd: arguments → config → first view → workers → signals.
 *
 * Only wiring lives here: every background thread is a service of the supervisor
 * (tern/load/supervisor.h), which starts them in the order they are wired and stops them in the
 * order their lifecycles need.
 *
 * Command-line flags are applied after the config file: --listen
 * replaces the file's listen list (as NSD's -a does: the usual reason to give it is to serve the
 * same config somewhere else), --zone adds zones, --workers overrides. There is no default listen
 * address: a DNS server silently binding port 53 on some address is a surprise, so ternd refuses
 * to start without one (and so do --check-config and every reload: config_check_complete()).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <pthread.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <stdarg.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "tern/answer/answer.h"
#include "tern/common/clock.h"
#include "tern/common/compiler.h"
#include "tern/common/dl.h"
#include "tern/common/err.h"
#include "tern/dnssec/dnssec_sign.h"
#include "tern/common/log.h"
#include "tern/conf/config.h"
#include "tern/ctl/ctl.h"
#include "tern/load/loader.h"
#include "tern/load/supervisor.h"
#include "tern/api/api.h"
#include "tern/metrics/metrics.h"
#include "tern/net/server.h"
#include "tern/source/source_catalog_member.h"
#include "tern/source/source_primary.h"
#include "tern/update/update.h"
#include "tern/xfr/xfr.h"

enum { OPT_LISTEN = 256, OPT_ZONE, OPT_WORKERS, OPT_CHECK, OPT_USER, OPT_GROUP, OPT_ALLOW_ROOT };

static const struct option long_opts[] = {
    {"config", required_argument, NULL, 'c'},
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"zone", required_argument, NULL, OPT_ZONE},
    {"workers", required_argument, NULL, OPT_WORKERS},
    {"check-config", no_argument, NULL, OPT_CHECK},
    {"user", required_argument, NULL, OPT_USER},
    {"group", required_argument, NULL, OPT_GROUP},
    {"allow-root", no_argument, NULL, OPT_ALLOW_ROOT},
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
                 "      --user NAME         after binding, run as this user (config: user)\n"
                 "      --group NAME        ... and this group (config: group)\n"
                 "      --allow-root        keep running as root (config: allow_root: true)\n"
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

static void log_listen(const config_t *cfg, const server_t *s)
{
    for (size_t i = 0; i < cfg->nlisten; i++) {
        const config_listen_t *l = &cfg->listen[i];
        const char *proto = l->udp && l->tcp ? "udp, tcp" : l->udp ? "udp" : "tcp";
        char host[INET6_ADDRSTRLEN] = "?";
        if (l->addr.ss_family == AF_INET) {
            inet_ntop(AF_INET, &((const struct sockaddr_in *)&l->addr)->sin_addr, host,
                      sizeof(host));
            log_info("listening on %s:%u (%s)", host, server_port(s, i), proto);
        } else {
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&l->addr)->sin6_addr, host,
                      sizeof(host));
            log_info("listening on [%s]:%u (%s)", host, server_port(s, i), proto);
        }
    }
    for (size_t i = 0; i < cfg->tls.nlisten && cfg->tls.certificate; i++)
        log_info("listening on %s (tls, port %u)", cfg->tls.listen[i].text, server_tls_port(s, i));
}

/* The server whose DoT credentials a SIGHUP reads again (server_tls_reload()); set once the
 * workers are bound, read by the signal-handling thread (the same one). */
static server_t *hup_server;

/* Write our PID to path (atomically: a temp file renamed over it). 0 or a negative code. */
static int write_pid_file(const char *path)
{
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
        return TERN_ERANGE;
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -errno;
    fprintf(f, "%ld\n", (long)getpid());
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        int e = -errno;
        unlink(tmp);
        return e;
    }
    return 0;
}

/* After binding: become the configured user and group, with the user's supplementary groups
 * (initgroups, as NSD and Knot do) and no privileges left. 0 or -1 (logged). glibc applies
 * set*id to every thread of the process. */
static int drop_privileges(const config_t *cfg)
{
    if (!cfg->user && !cfg->group)
        return 0;
    uid_t uid = getuid();
    gid_t gid = getgid();
    char name[256] = "";
    if (cfg->user) {
        const struct passwd *pw = config_user(cfg->user);
        if (!pw) {
            log_err("user '%s': no such user", cfg->user);
            return -1;
        }
        uid = pw->pw_uid;
        gid = pw->pw_gid;
        snprintf(name, sizeof(name), "%s", pw->pw_name);
    }
    if (cfg->group) {
        const struct group *gr = config_group(cfg->group);
        if (!gr) {
            log_err("group '%s': no such group", cfg->group);
            return -1;
        }
        gid = gr->gr_gid;
    }
    if (geteuid() != 0) {
        if (geteuid() == uid && getegid() == gid)
            return 0; /* already who we should be */
        log_err("user/group given, but not started as root: cannot switch to them");
        return -1;
    }
    int g = name[0] ? initgroups(name, gid) : setgroups(1, &gid);
    if (g < 0 || setgid(gid) < 0 || setuid(uid) < 0) {
        log_err("cannot switch to uid %u gid %u: %s", (unsigned)uid, (unsigned)gid,
                strerror(errno));
        return -1;
    }
    if (uid != 0 && setuid(0) == 0) { /* paranoia: root must be gone for good */
        log_err("could regain root after switching user");
        return -1;
    }
    log_info("running as uid %u gid %u", (unsigned)uid, (unsigned)gid);
    return 0;
}

/*
 * systemd (Type=notify). libsystemd is loaded only when systemd asks for notifications
 * (NOTIFY_SOCKET is set): linked, it and its compression and crypto libraries would cost every
 * ternd about a megabyte of PSS. Without it every notification is a no-op.
 */
static __typeof__(&sd_notify) notify_fn;

static void notify_init(void)
{
    if (!getenv("NOTIFY_SOCKET"))
        return;
    static const char *const names[] = {"libsystemd.so.0"}, *const syms[] = {"sd_notify"};
    void *p;
    char err[256];
    if (tern_dl_load(names, 1, syms, &p, 1, err, sizeof(err)) < 0)
        log_warn("NOTIFY_SOCKET is set but %s: no notifications", err);
    else
        memcpy(&notify_fn, &p, sizeof(p));
}

static void notify(const char *fmt, ...) TERN_PRINTF(1, 2);
static void notify(const char *fmt, ...)
{
    if (!notify_fn)
        return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    notify_fn(0, buf);
}
static void notify_status(const loader_stats_t *st, const char *prefix)
{
    char status[768];
    if (st->last_time == 0)
        snprintf(status, sizeof(status), "%sserving %zu zones, %zu records", prefix, st->zones,
                 st->records);
    else if (st->last_ok)
        snprintf(status, sizeof(status),
                 "%sserving %zu zones, %zu records; last reload ok in %lld ms", prefix, st->zones,
                 st->records, (long long)st->last_duration_ms);
    else
        snprintf(status, sizeof(status), "%sserving %zu zones, %zu records; last reload FAILED: %s",
                 prefix, st->zones, st->records, st->last_error);
    notify("STATUS=%s", status);
}

/* Set once main() has said READY=1: before that (the ANAME wait) a reload's end must not say it
 * for main, whoever asked for the reload (SIGHUP, `ternctl reload`). */
static atomic_bool ready_said;

/* loader_listener_fn: RELOADING=1 with the monotonic time when a reload starts (systemd's reload
 * protocol), READY=1 and the new status when it ends; only the status before the first READY. */
static void on_reload(void *ctx, bool done, const loader_stats_t *st)
{
    (void)ctx;
    if (!atomic_load(&ready_said)) {
        if (done)
            notify_status(st, "starting; ");
        return;
    }
    if (!done) {
        notify("RELOADING=1\nMONOTONIC_USEC=%lld\nSTATUS=reloading",
               (long long)tern_monotonic_us());
        return;
    }
    notify("%s", "READY=1");
    notify_status(st, "");
}

/* One signal from sfd: SIGHUP reopens the query log and asks for a reload (before READY too: its
 * end then says only STATUS=, see on_reload()). 1 for SIGINT/SIGTERM (shut down),
 * 0 otherwise, -1 when sfd cannot be read (logged; shut down too). */
static int take_signal(int sfd, loader_t *loader, qlog_t *qlog)
{
    struct signalfd_siginfo si;
    ssize_t n = read(sfd, &si, sizeof(si));
    if (n != (ssize_t)sizeof(si)) {
        if (n < 0 && errno == EINTR)
            return 0;
        log_err("signalfd read: %s", n < 0 ? strerror(errno) : "short read");
        return -1;
    }
    if (si.ssi_signo == SIGHUP) {
        log_info("SIGHUP: reloading");
        qlog_reopen(qlog);                   /* log rotation */
        (void)server_tls_reload(hup_server); /* a bad file is logged, the old one kept */
        loader_request(loader);
        return 0;
    }
    log_info("signal %u: shutting down", si.ssi_signo);
    notify("%s", "STOPPING=1\nSTATUS=shutting down");
    return 1;
}

/* Hold READY until the ANAME resolver's first round is in the published view, for at most
 * aname.ready_wait ms (then the targets without an answer are logged); the workers serve
 * meanwhile. SIGTERM/SIGINT end the wait at once; a SIGHUP reloads. 0 to go on, nonzero to
 * shut down. */
static int wait_aname(loader_t *loader, qlog_t *qlog, const config_t *cfg, int sfd)
{
    int fd = loader_aname_ready_fd(loader);
    if (fd < 0 || cfg->aname.ready_wait_ms == 0)
        return 0;
    int64_t start = tern_monotonic_ms(), end = start + cfg->aname.ready_wait_ms;
    notify("STATUS=waiting up to %u ms for ANAME targets", cfg->aname.ready_wait_ms);
    for (;;) {
        int64_t left = end - tern_monotonic_ms();
        if (left <= 0) {
            log_warn("aname: the first round is not in after %u ms; ready anyway",
                     cfg->aname.ready_wait_ms);
            loader_aname_log_pending(loader);
            return 0;
        }
        struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
        int n = poll(p, 2, (int)left);
        if (n < 0 && errno != EINTR) {
            log_err("poll: %s; not waiting for ANAME targets", strerror(errno));
            return 0;
        }
        if (n > 0 && p[0].revents) {
            log_info("aname: first round in after %lld ms",
                     (long long)(tern_monotonic_ms() - start));
            return 0;
        }
        int sig = n > 0 && p[1].revents ? take_signal(sfd, loader, qlog) : 0;
        if (sig)
            return sig;
    }
}

/* The command line, kept so every reload applies it again over a fresh read of the config file. */
typedef struct cli {
    const char *config_path; /* -c, or NULL */
    const char *listen[CONFIG_MAX_LISTEN];
    size_t nlisten;
    struct {
        const char *origin, *file;
    } zones[256];
    size_t nzones;
    unsigned workers; /* 0 = from the config */
    const char *user, *group;
    bool allow_root;
    bool check_only;
} cli_t;

/* Parse argv into cli, checking every value. Returns 0, 1 for an error, or -1 for "exit 0". */
static int parse_args(int argc, char **argv, cli_t *cli)
{
    int opt;
    /* getopt_long visits each argument once: bounded by argc */
    while ((opt = getopt_long(argc, argv, "c:vh", long_opts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            cli->config_path = optarg;
            break;
        case 'v':
            printf("ternd " TERN_VERSION "\n");
            return -1;
        case 'h':
            usage(stdout);
            return -1;
        case OPT_LISTEN: {
            config_listen_t l;
            if (cli->nlisten == CONFIG_MAX_LISTEN || config_parse_listen(&l, optarg) < 0) {
                log_err("--listen %s: want ADDR:PORT or [V6]:PORT (at most %d)", optarg,
                        CONFIG_MAX_LISTEN);
                return 1;
            }
            cli->listen[cli->nlisten++] = optarg;
            break;
        }
        case OPT_ZONE: {
            char *eq = strchr(optarg, '=');
            if (!eq || eq == optarg || eq[1] == '\0') {
                log_err("--zone %s: want ORIGIN=FILE", optarg);
                return 1;
            }
            if (cli->nzones == TERN_ARRAY_SIZE(cli->zones)) {
                log_err("--zone: at most %zu on the command line; use a config file",
                        TERN_ARRAY_SIZE(cli->zones));
                return 1;
            }
            *eq = '\0';
            cli->zones[cli->nzones].origin = optarg;
            cli->zones[cli->nzones++].file = eq + 1;
            break;
        }
        case OPT_WORKERS: {
            char *end;
            long n = strtol(optarg, &end, 10);
            if (strcmp(optarg, "auto") == 0) {
                cli->workers = config_auto_workers();
            } else if (end != optarg && *end == '\0' && n >= 1 && n <= CONFIG_MAX_WORKERS) {
                cli->workers = (unsigned)n;
            } else {
                log_err("--workers %s: want 1..%d or auto", optarg, CONFIG_MAX_WORKERS);
                return 1;
            }
            break;
        }
        case OPT_CHECK:
            cli->check_only = true;
            break;
        case OPT_USER:
            cli->user = optarg;
            break;
        case OPT_GROUP:
            cli->group = optarg;
            break;
        case OPT_ALLOW_ROOT:
            cli->allow_root = true;
            break;
        default:
            usage(stderr);
            return 1;
        }
    }
    if (optind < argc) {
        log_err("unexpected argument '%s' (see --help)", argv[optind]);
        return 1;
    }
    return 0;
}

/* loader_config_fn: the config file, then the command line over it. */
static int read_config(void *ctx, config_t *cfg, char *err, size_t errlen)
{
    const cli_t *cli = ctx;
    config_init(cfg);
    int r;
    if (cli->config_path && (r = config_load(cfg, cli->config_path, err, errlen)) < 0)
        return r;
    if (cli->nlisten)
        cfg->nlisten = 0;
    for (size_t i = 0; i < cli->nlisten; i++)
        if ((r = config_add_listen(cfg, cli->listen[i])) < 0) {
            snprintf(err, errlen, "--listen %s: %s", cli->listen[i], tern_strerror(r));
            return r;
        }
    for (size_t i = 0; i < cli->nzones; i++)
        if ((r = config_add_zone(cfg, cli->zones[i].origin, cli->zones[i].file)) < 0) {
            snprintf(err, errlen, "--zone %s: %s", cli->zones[i].origin, tern_strerror(r));
            return r;
        }
    if (cli->workers)
        cfg->workers = cli->workers;
    if (cli->user) {
        free(cfg->user);
        if (!(cfg->user = strdup(cli->user)))
            return TERN_ENOMEM;
    }
    if (cli->group) {
        free(cfg->group);
        if (!(cfg->group = strdup(cli->group)))
            return TERN_ENOMEM;
    }
    if (cli->allow_root)
        cfg->allow_root = true;
    return 0;
}

/* Everything main() wires together: the supervisor's services and what the way out needs. */
typedef struct ternd {
    cli_t cli;
    loader_t *loader;
    const config_t *cfg; /* the startup config (the loader's) */
    server_t *srv;
    qlog_t *qlog;
    xfr_t *xfr;
    metrics_t *metrics;
    api_t *api;
    ctl_t *ctl;
    supervisor_t *sup;
    int sfd;              /* the control signals */
    const char *pid_file; /* written, to remove at exit */
} ternd_t;

/* The supervisor's services (tern/load/supervisor.h): each start and stop of what main made. */
static int start_workers(void *ctx)
{
    return server_run(ctx);
}

static void stop_workers(void *ctx)
{
    server_stop(ctx);
}

static void stop_metrics(void *ctx)
{
    metrics_stop(ctx);
}

static int start_api(void *ctx)
{
    return api_start(ctx);
}

static void stop_api(void *ctx)
{
    api_stop(ctx);
}

static void free_api(void *ctx)
{
    api_free(ctx); /* after the loader thread, whose config hook it is */
}

static int start_xfr(void *ctx)
{
    return xfr_start(ctx);
}

static void stop_xfr(void *ctx)
{
    xfr_free(ctx); /* before the workers: it answers through their sockets */
}

static int start_qlog(void *ctx)
{
    int r = qlog_start(ctx);
    if (r < 0)
        log_err("query log: cannot start its writer thread: %s", tern_strerror(r));
    return r;
}

static void stop_qlog(void *ctx)
{
    qlog_free(ctx); /* after the workers: the writer drains their rings a last time */
}

static int start_loader(void *ctx)
{
    loader_set_listener(ctx, on_reload, NULL);
    return loader_start(ctx);
}

static void stop_loader(void *ctx)
{
    loader_stop_thread(ctx);
}

static void stop_sources(void *ctx)
{
    loader_stop_sources(ctx);
}

static void stop_health(void *ctx)
{
    loader_stop_health(ctx);
}

/* after loader_start (a reload request needs the loader thread) and after dropping privileges
 * (the socket belongs to the user that removes it at exit) */
static int start_ctl(void *ctx)
{
    ternd_t *t = ctx;
    if (t->cfg->control_socket &&
        !(t->ctl = ctl_start(t->cfg->control_socket, t->loader, t->srv, t->cfg->workers)))
        return TERN_EINVAL;
    ctl_set_xfr(t->ctl, t->xfr);
    return 0;
}

static void stop_ctl(void *ctx)
{
    ternd_t *t = ctx;
    ctl_stop(t->ctl); /* first: a reload it waits for finishes, then nobody asks for more */
    t->ctl = NULL;
}

/* Register a service with t's supervisor. 0 or a negative code. */
static int supervise(ternd_t *t, const char *name, int (*start)(void *), void (*stop)(void *),
                     void *ctx, supervisor_rank_t rank)
{
    const supervisor_service_t s = {
        .name = name, .start = start, .stop = stop, .ctx = ctx, .rank = rank};
    return supervisor_add(t->sup, &s);
}

/* Block the control signals before any thread exists so every thread inherits the mask and only
 * the signalfd ever sees them. 0 or -1 (logged). */
static int block_signals(ternd_t *t)
{
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGHUP);
    if (pthread_sigmask(SIG_BLOCK, &sigs, NULL) != 0 ||
        (t->sfd = signalfd(-1, &sigs, SFD_CLOEXEC)) < 0) {
        log_err("cannot set up signal handling: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* The loader and the startup config: users, groups and run directories are checked here, not
 * after binding. 0 or -1 (logged). */
static int wire_config(ternd_t *t)
{
    if (!(t->loader = loader_new(read_config, &t->cli))) {
        log_err("out of memory");
        return -1;
    }
    if (loader_read_config(t->loader, &t->cfg) < 0)
        return -1;
    char err[1024];
    if (config_check_runtime(t->cfg, !t->cli.check_only, err, sizeof(err)) < 0) {
        log_err("%s", err);
        return -1;
    }
    return 0;
}

/* The order NSD and Knot keep: bind, write the pid file, become the configured user, and only
 * then open the query log and read zones, databases and includes, so a reload (which runs as
 * that user) sees exactly what startup saw and a zone file can never name a file only root may
 * read. 0 or -1 (logged). */
static int wire_server(ternd_t *t)
{
    const config_t *cfg = t->cfg;
    int r;
    if (!(t->srv = server_bind(config_server_settings(cfg), loader_published(t->loader))) ||
        supervise(t, "workers", start_workers, stop_workers, t->srv, SUPERVISOR_WORKERS) < 0)
        return -1;
    server_set_limits(t->srv, loader_limits(t->loader));
    hup_server = t->srv;
    if (cfg->metrics_listen &&
        (!(t->metrics = metrics_start(cfg->metrics_listen, t->loader, t->srv)) ||
         supervise(t, "metrics", NULL, stop_metrics, t->metrics, SUPERVISOR_METRICS) < 0))
        return -1;
    if (cfg->pid_file) {
        if ((r = write_pid_file(cfg->pid_file)) < 0) {
            log_err("pid file %s: %s", cfg->pid_file, tern_strerror(r));
            return -1;
        }
        t->pid_file = cfg->pid_file;
    }
    if (drop_privileges(cfg) < 0)
        return -1;
    if (geteuid() == 0 && !cfg->allow_root) {
        log_err("refusing to run as root: set 'user:' (or --user) to the account ternd should run "
                "as, or 'allow_root: true' (--allow-root) to stay root");
        return -1;
    }
    return 0;
}

/* Zone transfers and the query log. Transfers: the service always exists (two idle threads when
 * nothing is configured), so a reload can turn them on; workers hand it requests only when some
 * are. The query log's files and socket are opened as the user ternd runs as, so SIGHUP can
 * reopen them after a rotation. 0 or -1 (logged). */
/* xfr_hooks_t.update: an UPDATE verified by the transfer side, for the update service. */
static bool submit_update(void *ctx, const uint8_t *msg, size_t len, const char *key,
                          const struct sockaddr_storage *peer, uint64_t token)
{
    return update_submit(ctx, msg, len, key, peer, token);
}

static int wire_services(ternd_t *t)
{
    /* dynamic updates: a source of the loader's, fed by the transfer side and answering
     * through it */
    if (loader_add_source(t->loader, &update_source_ops) < 0) {
        log_err("out of memory");
        return -1;
    }
    update_t *upd = update_of(loader_source(t->loader, "update"));
    xfr_hooks_t hooks = {.zone_in = source_primary_zone_in,
                         .ctx = loader_source(t->loader, "xfr"),
                         .member_in = source_catalog_member_in,
                         .member_gone = source_catalog_member_gone,
                         .member_ctx = loader_source(t->loader, "catalog"),
                         .update = submit_update,
                         .update_ctx = upd};
    if (!(t->xfr = xfr_new(loader_published(t->loader), &hooks))) {
        log_err("out of memory");
        return -1;
    }
    if (supervise(t, "xfr", start_xfr, stop_xfr, t->xfr, SUPERVISOR_XFR) < 0)
        return -1;
    loader_set_xfr(t->loader, t->xfr);
    update_wire(upd, loader_published(t->loader), xfr_update_done, t->xfr);
    if (t->cfg->api.listen &&
        (!(t->api = api_new(t->cfg, t->loader, upd, t->xfr)) ||
         supervise(t, "api state", NULL, free_api, t->api, SUPERVISOR_SOURCES) < 0 ||
         supervise(t, "api", start_api, stop_api, t->api, SUPERVISOR_API) < 0))
        return -1;
    if (t->api) /* a reload's keys, zones and redis: (the listener stays) */
        loader_set_config_hook(t->loader, api_configure, t->api);
    server_handoff_t handoff = xfr_handoff(t->xfr);
    server_set_handoff(t->srv, &handoff);
    metrics_set_xfr(t->metrics, t->xfr);
    if (t->cfg->qlog.enabled) {
        char qerr[512];
        if (!(t->qlog = qlog_new(&t->cfg->qlog, t->cfg->workers, qerr, sizeof(qerr)))) {
            log_err("%s", qerr);
            return -1;
        }
        server_set_qlog(t->srv, t->qlog);
        if (supervise(t, "qlog writer", start_qlog, stop_qlog, t->qlog, SUPERVISOR_QLOG) < 0)
            return -1;
    }
    /* the loader's threads start once the first view is out and the workers run */
    if (supervise(t, "loader", start_loader, stop_loader, t->loader, SUPERVISOR_LOADER) < 0 ||
        supervise(t, "zone sources", NULL, stop_sources, t->loader, SUPERVISOR_SOURCES) < 0 ||
        supervise(t, "health checker", NULL, stop_health, t->loader, SUPERVISOR_HEALTH) < 0 ||
        supervise(t, "control socket", start_ctl, stop_ctl, t, SUPERVISOR_CTL) < 0)
        return -1;
    return 0;
}

/* READY=1 once every thread runs and the ANAME wait is over. */
static void say_ready(ternd_t *t)
{
    log_info("ready: %u workers, tern " TERN_VERSION, t->cfg->workers);
    loader_stats_t st;
    loader_get_stats(t->loader, &st);
    atomic_store(&ready_said, true);
    notify("%s", "READY=1");
    notify_status(&st, "");
}

int main(int argc, char **argv)
{
    ternd_t t = {.sfd = -1};
    int rc = 1;
    /* before anything can make libcrypto allocate: workers sign without malloc() */
    (void)dnssec_mem_install();
    int r = parse_args(argc, argv, &t.cli);
    if (r != 0)
        return r < 0 ? 0 : 1;
    notify_init();
    if (block_signals(&t) < 0 || !(t.sup = supervisor_new()) || wire_config(&t) < 0)
        goto out;
    if (t.cli.check_only) {
        /* as the server would: the zones are read as the configured user */
        if (drop_privileges(t.cfg) < 0 || loader_load_zones(t.loader) < 0 || api_check(t.cfg) < 0)
            goto out;
        log_info("configuration OK");
        rc = 0;
        goto out;
    }
    /* the first view is published before any thread but the workers' sockets exists */
    if (wire_server(&t) < 0 || wire_services(&t) < 0 || loader_load_zones(t.loader) < 0 ||
        supervisor_start(t.sup) < 0)
        goto out;
    log_listen(t.cfg, t.srv);
    if (wait_aname(t.loader, t.qlog, t.cfg, t.sfd) != 0) {
        rc = 0;
        goto out;
    }
    say_ready(&t);
    /* Reads signals only; leaves on SIGINT/SIGTERM. A SIGHUP during a reload is coalesced by
     * the loader into one more reload after it. */
    while (take_signal(t.sfd, t.loader, t.qlog) == 0)
        ;
    rc = 0;
out:
    supervisor_free(t.sup); /* every thread, in the order supervisor.h gives */
    if (t.srv)
        log_info("stopped");
    if (t.pid_file && unlink(t.pid_file) < 0 && errno != ENOENT)
        log_warn("pid file %s: %s", t.pid_file, strerror(errno)); /* e.g. no longer ours */
    loader_free(t.loader);
    if (t.sfd >= 0)
        close(t.sfd);
    return rc;
}
