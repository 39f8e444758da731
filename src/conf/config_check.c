/*
 * config_check.c — what a config names outside ternd, checked before anything depends on it.
 *
 * config_load() checks the file against the schema; it cannot know whether "user: tern" exists
 * here or whether /run/tern does. Those used to fail after the sockets were bound and the pid
 * file written (the user), or as a bare errno from fopen() or bind() (the directories). This pass
 * runs once the config is complete (file and flags), at startup and for --check-config, and
 * names the line of the config (or the flag) each bad value came from.
 *
 * The run directory: like NSD and Knot, ternd creates the missing directory of pid_file and
 * control_socket itself (one level: its parent must exist), before privileges are dropped, and
 * gives it to user/group, because /run is a tmpfs that starts empty after every boot. An
 * existing directory is never touched. Under systemd the unit's RuntimeDirectory=tern makes it
 * first, so the packaged service never needs this.
 *
 * Threading: the control thread, at startup; getpwnam() and getgrnam() are not reentrant.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tern/conf/config.h"
#include "tern/common/err.h"
#include "tern/common/log.h"

const char *config_state_path(const char *leaf, char *buf, size_t len)
{
    /* systemd sets it for StateDirectory= (a colon-separated list for several): the first */
    const char *dir = getenv("STATE_DIRECTORY");
    if (!dir || dir[0] != '/')
        return NULL;
    size_t dlen = strcspn(dir, ":");
    if ((size_t)snprintf(buf, len, "%.*s/%s", (int)dlen, dir, leaf) >= len)
        return NULL;
    return buf;
}

/* The run directory is traversable by all: the pid file is for anyone to read, and the control
 * socket carries its own mode (0660), which is what limits who may use ternctl. The same mode
 * as the unit's RuntimeDirectoryMode. */
#define RUN_DIR_MODE 0755

/* Every problem found, "; "-separated, each escaped (a user name can hold anything). */
typedef struct report {
    const config_t *c;
    char *err;
    size_t len, off;
    int rc; /* the first problem's code */
} report_t;

static void add(report_t *r, int rc, const char *key, const char *flag, const char *value,
                const char *fmt, ...) TERN_PRINTF(6, 7);

/* A problem with option key's value: "file:line: key 'value': problem" when the value came from
 * the config file, else "key 'value' (flag): problem" (flag NULL: no flag sets it). */
static void add(report_t *r, int rc, const char *key, const char *flag, const char *value,
                const char *fmt, ...)
{
    char where[PATH_MAX + 32] = "", by[64] = "", problem[PATH_MAX + 128], msg[3 * PATH_MAX];
    size_t line = config_line_of(r->c, key);
    if (line && r->c->file)
        snprintf(where, sizeof(where), "%s:%zu: ", r->c->file, line);
    else if (flag)
        snprintf(by, sizeof(by), " (%s)", flag);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(problem, sizeof(problem), fmt, ap);
    va_end(ap);
    snprintf(msg, sizeof(msg), "%s%s%s '%s'%s: %s", r->off ? "; " : "", where, key, value, by,
             problem);
    if (r->off < r->len) {
        (void)tern_escape_controls(r->err + r->off, r->len - r->off, msg);
        r->off += strlen(r->err + r->off);
    }
    if (!r->rc)
        r->rc = rc;
}

/* The directory part of path into dir: "." when there is none, "/" for a file at the root. */
static void dir_of(const char *path, char *dir, size_t len)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, len, ".");
    else if (slash == path)
        snprintf(dir, len, "/");
    else
        snprintf(dir, len, "%.*s", (int)(slash - path), path);
}

/* Make dir (one level) for ternd: mode RUN_DIR_MODE whatever the umask, owned by uid/gid when
 * those are not -1. Through a descriptor opened without following links, so a directory swapped
 * for a link in between is refused rather than given away. 0 or -errno. */
static int make_run_dir(const char *dir, uid_t uid, gid_t gid)
{
    if (mkdir(dir, RUN_DIR_MODE) < 0)
        return -errno;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = 0;
    if (fchmod(fd, RUN_DIR_MODE) < 0 ||
        ((uid != (uid_t)-1 || gid != (gid_t)-1) && fchown(fd, uid, gid) < 0))
        rc = -errno;
    close(fd);
    if (rc < 0)
        rmdir(dir); /* not left half made: the next start would take it as it is */
    return rc;
}

/* The directory of option key's path: there, or creatable (and created with create). */
static void check_dir(report_t *r, const char *key, const char *path, bool create, uid_t uid,
                      gid_t gid)
{
    char dir[PATH_MAX], parent[PATH_MAX];
    struct stat st;
    if (!path)
        return;
    dir_of(path, dir, sizeof(dir));
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            add(r, TERN_EINVAL, key, NULL, path, "%s is not a directory", dir);
        return;
    }
    if (errno != ENOENT) {
        int e = errno;
        add(r, -e, key, NULL, path, "%s: %s", dir, strerror(e));
        return;
    }
    dir_of(dir, parent, sizeof(parent));
    if (stat(parent, &st) < 0 || !S_ISDIR(st.st_mode)) {
        add(r, TERN_ENOENT, key, NULL, path,
            "directory %s does not exist, nor does %s to create it in", dir, parent);
        return;
    }
    char shown[PATH_MAX]; /* dir for the log lines, escaped as every message from the config is */
    (void)tern_escape_controls(shown, sizeof(shown), dir);
    if (!create) {
        log_info("%s: directory %s does not exist; ternd will create it", key, shown);
        return;
    }
    int rc = make_run_dir(dir, uid, gid);
    if (rc == -EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
        return; /* made meanwhile (pid_file and control_socket may share it) */
    if (rc < 0)
        add(r, rc, key, NULL, path, "cannot create directory %s: %s", dir, strerror(-rc));
    else
        log_info("created directory %s (for %s)", shown, key);
}

/* A whole decimal number that fits an id (uid_t and gid_t are 32 bits; -1 is "none"). */
static bool numeric_id(const char *s, unsigned long *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || v >= UINT32_MAX)
        return false;
    *out = v;
    return true;
}

const struct passwd *config_user(const char *user)
{
    unsigned long id;
    const struct passwd *pw = getpwnam(user);
    if (!pw && numeric_id(user, &id))
        pw = getpwuid((uid_t)id);
    return pw;
}

const struct group *config_group(const char *group)
{
    unsigned long id;
    const struct group *gr = getgrnam(group);
    if (!gr && numeric_id(group, &id))
        gr = getgrgid((gid_t)id);
    return gr;
}

int config_check_runtime(const config_t *c, bool create_dirs, char *err, size_t errlen)
{
    report_t r = {.c = c, .err = err, .len = errlen};
    uid_t uid = (uid_t)-1;
    gid_t gid = (gid_t)-1;
    if (errlen)
        err[0] = '\0';
    if (c->user) {
        const struct passwd *pw = config_user(c->user);
        if (!pw)
            add(&r, TERN_ENOENT, "user", "--user", c->user, "no such user");
        else
            uid = pw->pw_uid, gid = pw->pw_gid;
    }
    if (c->group) {
        const struct group *gr = config_group(c->group);
        if (!gr)
            add(&r, TERN_ENOENT, "group", "--group", c->group, "no such group");
        else
            gid = gr->gr_gid;
    }
    /* The directories go to the account ternd becomes, which only root can give them to, and
     * only once that account is known to exist. */
    if (r.rc || geteuid() != 0)
        uid = (uid_t)-1, gid = (gid_t)-1;
    bool create = create_dirs && !r.rc;
    check_dir(&r, "pid_file", c->pid_file, create, uid, gid);
    check_dir(&r, "control_socket", c->control_socket, create, uid, gid);
    return r.rc;
}

int config_check_complete(const config_t *c, char *err, size_t errlen)
{
    if (errlen)
        err[0] = '\0';
    /* the server has nothing to serve on: a start stops here, so a reload must too */
    if (c->nlisten == 0) {
        snprintf(err, errlen,
                 "no listen address: give --listen ADDR:PORT or 'listen:' in the "
                 "config");
        return TERN_EINVAL;
    }
    return 0;
}
