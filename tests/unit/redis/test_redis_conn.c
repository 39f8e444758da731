/*
 * test_redis_conn.c — the one Redis connection type (tern/redis/redis_conn.h) against a real
 * redis-server: bad settings refused, AUTH and SELECT, the backoff, a reply's deadline and the
 * stop flag, the subscriber's replies, and Sentinel (a fake sentinel on a thread of the test,
 * naming one real server, then another): discovery, the ROLE check, a move found by the check.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "redis_server.h"

#include "tern/redis/redis_conn.h"

static redis_conn_config_t base(uint16_t port)
{
    return (redis_conn_config_t){.where = "test",
                                 .host = "127.0.0.1",
                                 .port = port,
                                 .connect_timeout_ms = 1000,
                                 .read_timeout_ms = 1000,
                                 .backoff_min_ms = 100,
                                 .backoff_max_ms = 400,
                                 .wakefd = -1};
}

static void expect_refused(const redis_conn_config_t *cc, const char *want)
{
    char err[256] = "";
    redis_conn_t *c = redis_conn_new(cc, err, sizeof(err));
    assert_null(c);
    assert_string_equal(err, want);
}

static void test_bad_config(void **state)
{
    (void)state;
    const char *sen[] = {"127.0.0.1:1"};
    const char *bad[] = {"localhost:26379"};
    redis_conn_config_t cc = base(6379);
    cc.sentinels = sen;
    cc.nsentinels = 1;
    expect_refused(&cc, "sentinels without a master name");
    cc.sentinel_master = "m";
    cc.sentinels = bad;
    expect_refused(&cc, "bad sentinel address \"localhost:26379\"");
    cc = base(6379);
    cc.read_replica = true;
    expect_refused(&cc, "read_from replica needs sentinels");
    cc = base(6379);
    cc.host = NULL;
    expect_refused(&cc, "no host");
}

static void test_auth_select(void **state)
{
    (void)state;
    redis_server_t srv;
    rsrv_start(&srv, 0, NULL, "--requirepass", "pw", NULL);
    redis_conn_config_t cc = base(srv.port);
    cc.password = "wrong";
    char err[256];
    redis_conn_t *c = redis_conn_new(&cc, err, sizeof(err));
    assert_non_null(c);
    assert_int_equal(redis_conn_open(c), REDIS_CONN_DOWN);
    assert_non_null(strstr(redis_conn_why(c), "AUTH"));
    assert_false(redis_conn_is_open(c));
    redis_conn_free(c);

    cc.password = "pw";
    cc.db = 3;
    assert_non_null(c = redis_conn_new(&cc, err, sizeof(err)));
    assert_int_equal(redis_conn_open(c), 0);
    const char *set[] = {"SET", "conn-key", "v", NULL};
    assert_int_equal(redis_conn_run_ok(c, redis_conn_cmd(c), "SET", set), 0);
    redis_conn_free(c);
    redisContext *t = rsrv_connect(&srv, "pw");
    rsrv_cmd(t, "SELECT 3");
    redisReply *r = redisCommand(t, "GET conn-key");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, "v");
    freeReplyObject(r);
    redisFree(t);
    rsrv_stop(&srv);
}

static void test_backoff(void **state)
{
    (void)state;
    redis_conn_config_t cc = base(rsrv_free_port()); /* nobody listens */
    char err[256];
    redis_conn_t *c = redis_conn_new(&cc, err, sizeof(err));
    assert_non_null(c);
    assert_int_equal(redis_conn_retry_at(c), 0); /* the first attempt at once */
    assert_int_equal(redis_conn_open(c), REDIS_CONN_DOWN);
    assert_non_null(strstr(redis_conn_why(c), "connect"));
    int64_t t = rsrv_now_ms();
    redis_conn_failed(c);
    assert_true(redis_conn_retry_at(c) >= t + 100 && redis_conn_retry_at(c) <= t + 200);
    assert_int_equal(redis_conn_backoff(c), 200);
    redis_conn_failed(c);
    redis_conn_failed(c);
    assert_int_equal(redis_conn_backoff(c), 400); /* at most backoff_max_ms */
    redis_conn_lost(c);                           /* a lost connection starts again */
    assert_int_equal(redis_conn_backoff(c), 100);
    redis_conn_free(c);
}

static atomic_bool stop_flag;

struct waker {
    int fd;
    int after_ms;
};

static void *wake_later(void *arg)
{
    struct waker *w = arg;
    rsrv_sleep_ms(w->after_ms);
    atomic_store(&stop_flag, true);
    uint64_t one = 1;
    assert_int_equal(write(w->fd, &one, sizeof(one)), (ssize_t)sizeof(one));
    return NULL;
}

static void test_deadline_and_stop(void **state)
{
    (void)state;
    redis_server_t srv;
    rsrv_start(&srv, 0, NULL, NULL);
    int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    assert_true(efd >= 0);
    atomic_store(&stop_flag, false);
    redis_conn_config_t cc = base(srv.port);
    cc.read_timeout_ms = 300;
    cc.wakefd = efd;
    cc.stop = &stop_flag;
    char err[256];
    redis_conn_t *c = redis_conn_new(&cc, err, sizeof(err));
    assert_non_null(c);
    assert_int_equal(redis_conn_open(c), 0);

    /* a server that stops answering: the reply's deadline */
    kill(srv.pid, SIGSTOP);
    const char *ping[] = {"PING", NULL};
    int64_t t = rsrv_now_ms();
    assert_int_equal(redis_conn_run_ok(c, redis_conn_cmd(c), "PING", ping), REDIS_CONN_DOWN);
    int64_t took = rsrv_now_ms() - t;
    assert_true(took >= 250 && took < 2000);
    assert_non_null(strstr(redis_conn_why(c), "read_timeout"));
    redis_conn_lost(c);
    kill(srv.pid, SIGCONT);
    redis_conn_free(c);

    /* a long deadline, and a stop request: the wait ends at once */
    cc.read_timeout_ms = 10000;
    assert_non_null(c = redis_conn_new(&cc, err, sizeof(err)));
    assert_int_equal(redis_conn_open(c), 0);
    kill(srv.pid, SIGSTOP);
    struct waker w = {efd, 100};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, wake_later, &w), 0);
    t = rsrv_now_ms();
    assert_int_equal(redis_conn_run_ok(c, redis_conn_cmd(c), "PING", ping), REDIS_CONN_STOP);
    assert_true(rsrv_now_ms() - t < 2000);
    pthread_join(th, NULL);
    kill(srv.pid, SIGCONT);
    redis_conn_free(c);
    close(efd);
    rsrv_stop(&srv);
}

static int messages;

static void on_sub(void *ctx, const redisReply *r)
{
    (void)ctx;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 && r->element[0]->str &&
        strcmp(r->element[0]->str, "message") == 0)
        messages++;
}

static void test_subscriber(void **state)
{
    (void)state;
    redis_server_t srv;
    rsrv_start(&srv, 0, NULL, NULL);
    redis_conn_config_t cc = base(srv.port);
    cc.subscriber = true;
    cc.on_sub = on_sub;
    char err[256];
    redis_conn_t *c = redis_conn_new(&cc, err, sizeof(err));
    assert_non_null(c);
    assert_int_equal(redis_conn_open(c), 0);
    redisContext *sub = redis_conn_sub(c);
    assert_non_null(sub);
    const char *subscribe[] = {"SUBSCRIBE", "conn-test", NULL};
    redisReply *r;
    assert_int_equal(redis_conn_run(c, sub, &r, subscribe), 0); /* the confirmation */
    freeReplyObject(r);
    redisContext *t = rsrv_connect(&srv, NULL);
    rsrv_cmd(t, "PUBLISH conn-test hello");
    struct pollfd p = {.fd = sub->fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 2000), 1);
    assert_int_equal(redis_conn_sub_drain(c), 0);
    assert_int_equal(messages, 1);
    redisFree(t);
    redis_conn_free(c);
    rsrv_stop(&srv);
}

/* --- a fake sentinel: answers get-master-addr-by-name with 127.0.0.1 and fake_port --- */

static atomic_int fake_port;
static atomic_bool fake_stop;

static void fake_answer(int cfd)
{
    char buf[1024];
    ssize_t n = recv(cfd, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return;
    buf[n] = '\0';
    char out[128];
    if (strstr(buf, "get-master-addr-by-name")) {
        char port[8];
        snprintf(port, sizeof(port), "%d", atomic_load(&fake_port));
        snprintf(out, sizeof(out), "*2\r\n$9\r\n127.0.0.1\r\n$%zu\r\n%s\r\n", strlen(port), port);
    } else {
        snprintf(out, sizeof(out), "-ERR unknown command\r\n");
    }
    assert_int_equal(send(cfd, out, strlen(out), MSG_NOSIGNAL), (ssize_t)strlen(out));
}

static void *fake_sentinel(void *arg)
{
    int lfd = *(int *)arg, cfd = -1;
    while (!atomic_load(&fake_stop)) {
        struct pollfd p[2] = {{.fd = lfd, .events = POLLIN}, {.fd = cfd, .events = POLLIN}};
        if (poll(p, 2, 50) <= 0)
            continue;
        if (p[0].revents) {
            if (cfd >= 0)
                close(cfd);
            cfd = accept(lfd, NULL, NULL);
        } else if (p[1].revents & (POLLHUP | POLLERR)) {
            close(cfd);
            cfd = -1;
        } else if (p[1].revents) {
            fake_answer(cfd);
        }
    }
    if (cfd >= 0)
        close(cfd);
    return NULL;
}

static void test_sentinel(void **state)
{
    (void)state;
    redis_server_t a, b;
    rsrv_start(&a, 0, NULL, NULL);
    char primary[16];
    snprintf(primary, sizeof(primary), "%u", a.port);
    rsrv_start(&b, 0, NULL, "--replicaof", "127.0.0.1", primary, NULL);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof(sa);
    assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(lfd, 4), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&sa, &sl), 0);
    char addr[32];
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", ntohs(sa.sin_port));
    atomic_store(&fake_port, a.port);
    atomic_store(&fake_stop, false);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, fake_sentinel, &lfd), 0);

    /* a dead sentinel first: the next one in the list answers */
    char dead[32];
    snprintf(dead, sizeof(dead), "127.0.0.1:%u", rsrv_free_port());
    const char *sentinels[] = {dead, addr};
    redis_conn_config_t cc = base(0);
    cc.host = NULL;
    cc.sentinels = sentinels;
    cc.nsentinels = 2;
    cc.sentinel_master = "m";
    char err[256], node[64], want[64];
    redis_conn_t *c = redis_conn_new(&cc, err, sizeof(err));
    assert_non_null(c);
    assert_true(redis_conn_sentinel(c));
    assert_int_equal(redis_conn_open(c), 0);
    snprintf(want, sizeof(want), "127.0.0.1:%u", a.port);
    assert_string_equal(redis_conn_node_text(c, node, sizeof(node)), want);
    assert_false(redis_conn_replica(c));
    assert_int_equal(redis_conn_sentinel_check(c), 0); /* still the same */

    /* Sentinel names another node: the check says move */
    atomic_store(&fake_port, b.port);
    assert_int_equal(redis_conn_sentinel_check(c), REDIS_CONN_DOWN);
    assert_non_null(strstr(redis_conn_why(c), "moving"));
    redis_conn_lost(c);
    /* ... but b is a replica: a primary must say so (ROLE) */
    assert_int_equal(redis_conn_open(c), REDIS_CONN_DOWN);
    assert_non_null(strstr(redis_conn_why(c), "not the primary Sentinel named"));
    /* promoted: followed */
    redisContext *t = rsrv_connect(&b, NULL);
    rsrv_cmd(t, "REPLICAOF NO ONE");
    redisFree(t);
    assert_int_equal(redis_conn_open(c), 0);
    snprintf(want, sizeof(want), "127.0.0.1:%u", b.port);
    assert_string_equal(redis_conn_node_text(c, node, sizeof(node)), want);
    redis_conn_free(c);

    atomic_store(&fake_stop, true);
    pthread_join(th, NULL);
    close(lfd);
    rsrv_stop(&b);
    rsrv_stop(&a);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_config), cmocka_unit_test(test_auth_select),
        cmocka_unit_test(test_backoff),    cmocka_unit_test(test_deadline_and_stop),
        cmocka_unit_test(test_subscriber), cmocka_unit_test(test_sentinel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
