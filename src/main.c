/*
 * main.c — ternd: arguments → loader (config, zones, first view) → workers → signals.
 *
 * Only wiring lives here. Command-line flags are applied after the config file: --listen
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
#include "tern/metrics/metrics.h"
#include "tern/net/server.h"
#include "tern/source/source_primary.h"
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
}

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
        qlog_reopen(qlog); /* log rotation */
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

int main(int argc, char **argv)
{
    cli_t cli = {0};
    int rc = 1;
    loader_t *loader = NULL;
    server_t *srv = NULL;
    qlog_t *qlog = NULL;
    xfr_t *xfr = NULL;
    /* before anything can make libcrypto allocate: workers sign without malloc() */
    (void)dnssec_mem_install();
    metrics_t *metrics = NULL;
    ctl_t *ctl = NULL;
    int sfd = -1;
    const char *pid_file = NULL;

    int r = parse_args(argc, argv, &cli);
    if (r != 0)
        return r < 0 ? 0 : 1;
    notify_init();

    /* Block the control signals before any thread exists so every thread inherits the mask and
     * only the signalfd below ever sees them. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGHUP);
    if (pthread_sigmask(SIG_BLOCK, &sigs, NULL) != 0 ||
        (sfd = signalfd(-1, &sigs, SFD_CLOEXEC)) < 0) {
        log_err("cannot set up signal handling: %s", strerror(errno));
        goto out;
    }

    /* The order NSD and Knot keep: read the config, bind, write the pid file, become the
     * configured user, and only then read zones, databases and includes, so a reload (which
     * runs as that user) sees exactly what startup saw and a zone file can never name a file
     * only root may read. */
    const config_t *cfg;
    if (!(loader = loader_new(read_config, &cli))) {
        log_err("out of memory");
        goto out;
    }
    if (loader_read_config(loader, &cfg) < 0)
        goto out;
    char check_err[1024]; /* users, groups, run directories: fail here, not after binding */
    if (config_check_runtime(cfg, !cli.check_only, check_err, sizeof(check_err)) < 0) {
        log_err("%s", check_err);
        goto out;
    }
    if (cli.check_only) {
        /* as the server would: the zones are read as the configured user */
        if (drop_privileges(cfg) < 0 || loader_load_zones(loader) < 0)
            goto out;
        log_info("configuration OK");
        rc = 0;
        goto out;
    }
    if (!(srv = server_bind(cfg, loader_published(loader))))
        goto out;
    server_set_limits(srv, loader_limits(loader));
    if (cfg->metrics_listen && !(metrics = metrics_start(cfg->metrics_listen, loader, srv)))
        goto out;
    if (cfg->pid_file) {
        if ((r = write_pid_file(cfg->pid_file)) < 0) {
            log_err("pid file %s: %s", cfg->pid_file, tern_strerror(r));
            goto out;
        }
        pid_file = cfg->pid_file;
    }
    if (drop_privileges(cfg) < 0)
        goto out;
    if (geteuid() == 0 && !cfg->allow_root) {
        log_err("refusing to run as root: set 'user:' (or --user) to the account ternd should run "
                "as, or 'allow_root: true' (--allow-root) to stay root");
        goto out;
    }
    /* the query log's files and socket are opened as the user ternd runs as, so SIGHUP can
     * reopen them after a rotation */
    if (cfg->qlog.enabled) {
        char qerr[512];
        if (!(qlog = qlog_new(cfg, cfg->workers, qerr, sizeof(qerr)))) {
            log_err("%s", qerr);
            goto out;
        }
        server_set_qlog(srv, qlog);
    }
    /* zone transfers: the service always exists (two idle threads when nothing is configured),
     * so a reload can turn transfers on; workers hand it requests only when some are */
    xfr_hooks_t hooks = {.zone_in = source_primary_zone_in, .ctx = loader_source(loader, "xfr")};
    if (!(xfr = xfr_new(loader_published(loader), &hooks))) {
        log_err("out of memory");
        goto out;
    }
    loader_set_xfr(loader, xfr);
    server_handoff_t handoff = xfr_handoff(xfr);
    server_set_handoff(srv, &handoff);
    if (loader_load_zones(loader) < 0 || server_run(srv) < 0 || xfr_start(xfr) < 0)
        goto out;
    if (qlog && (r = qlog_start(qlog)) < 0) {
        log_err("query log: cannot start its writer thread: %s", tern_strerror(r));
        goto out;
    }
    loader_set_listener(loader, on_reload, NULL);
    if (loader_start(loader) < 0)
        goto out;
    /* after loader_start (a reload request needs the loader thread) and after dropping
     * privileges (the socket belongs to the user that removes it at exit) */
    if (cfg->control_socket && !(ctl = ctl_start(cfg->control_socket, loader, srv, cfg->workers)))
        goto out;
    ctl_set_xfr(ctl, xfr);
    metrics_set_xfr(metrics, xfr);
    log_listen(cfg, srv);
    if (wait_aname(loader, qlog, cfg, sfd) != 0) {
        rc = 0;
        goto out;
    }
    log_info("ready: %u workers, tern " TERN_VERSION, cfg->workers);
    loader_stats_t st;
    loader_get_stats(loader, &st);
    atomic_store(&ready_said, true);
    notify("%s", "READY=1");
    notify_status(&st, "");

    /* Reads signals only; leaves on SIGINT/SIGTERM. A SIGHUP during a reload is coalesced by
     * the loader into one more reload after it. */
    while (take_signal(sfd, loader, qlog) == 0)
        ;
    rc = 0;
out:
    ctl_stop(ctl);         /* first: a reload it waits for finishes, then nobody asks for more */
    metrics_stop(metrics); /* it reads the loader and the workers: stop it before either */
    /* The loader first: a reload in progress may be waiting for the workers' grace period. */
    loader_stop(loader);
    xfr_free(xfr); /* before the workers: it answers through their sockets */
    server_stop(srv);
    qlog_free(qlog); /* after the workers: the writer drains their rings a last time */
    if (srv)
        log_info("stopped");
    if (pid_file && unlink(pid_file) < 0 && errno != ENOENT)
        log_warn("pid file %s: %s", pid_file, strerror(errno)); /* e.g. no longer ours to remove */
    loader_free(loader);
    if (sfd >= 0)
        close(sfd);
    return rc;
}
