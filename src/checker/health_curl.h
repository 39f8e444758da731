/*
 * health_curl.h — private to src/health: libcurl, loaded with dlopen() at first use.
 *
 * health_curl_load() fills the table once per process (thread-safe: pthread_once); after it
 * succeeds, the checker and its probes call libcurl through the macros below as if it were
 * linked. A file that fills the table itself defines HEALTH_CURL_NO_MACROS before including this.
 */
#ifndef TERN_HEALTH_HEALTH_CURL_H
#define TERN_HEALTH_HEALTH_CURL_H

/* no type-checking macros: every libcurl function is called through the table below */
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

/* The libcurl functions the checker and its probes use; the macros at the end make the calls
 * read like plain libcurl. */
#define CURL_FUNCS(X)                                                                              \
    X(curl_global_init)                                                                            \
    X(curl_easy_init)                                                                              \
    X(curl_easy_setopt)                                                                            \
    X(curl_easy_getinfo)                                                                           \
    X(curl_easy_reset)                                                                             \
    X(curl_easy_cleanup)                                                                           \
    X(curl_easy_strerror)                                                                          \
    X(curl_multi_init)                                                                             \
    X(curl_multi_setopt)                                                                           \
    X(curl_multi_add_handle)                                                                       \
    X(curl_multi_remove_handle)                                                                    \
    X(curl_multi_assign)                                                                           \
    X(curl_multi_socket_action)                                                                    \
    X(curl_multi_info_read)                                                                        \
    X(curl_multi_cleanup)                                                                          \
    X(curl_slist_append)                                                                           \
    X(curl_slist_free_all)

/* The table, filled once per process by health_curl_load(). */
struct health_curl {
#define CURL_FIELD(f) __typeof__(&f) f;
    CURL_FUNCS(CURL_FIELD)
#undef CURL_FIELD
};
extern struct health_curl health_curl;

/** Load libcurl and initialise it, once per process: NULL, or why it cannot be used (the same
 * text on every later call). */
const char *health_curl_load(void);

#ifndef HEALTH_CURL_NO_MACROS
/* curl.h defines these three as macros of themselves even without type checks */
#undef curl_easy_setopt
#undef curl_easy_getinfo
#undef curl_multi_setopt
#define curl_easy_init           health_curl.curl_easy_init
#define curl_easy_setopt         health_curl.curl_easy_setopt
#define curl_easy_getinfo        health_curl.curl_easy_getinfo
#define curl_easy_reset          health_curl.curl_easy_reset
#define curl_easy_cleanup        health_curl.curl_easy_cleanup
#define curl_easy_strerror       health_curl.curl_easy_strerror
#define curl_multi_init          health_curl.curl_multi_init
#define curl_multi_setopt        health_curl.curl_multi_setopt
#define curl_multi_add_handle    health_curl.curl_multi_add_handle
#define curl_multi_remove_handle health_curl.curl_multi_remove_handle
#define curl_multi_assign        health_curl.curl_multi_assign
#define curl_multi_socket_action health_curl.curl_multi_socket_action
#define curl_multi_info_read     health_curl.curl_multi_info_read
#define curl_multi_cleanup       health_curl.curl_multi_cleanup
#define curl_slist_append        health_curl.curl_slist_append
#define curl_slist_free_all      health_curl.curl_slist_free_all
#endif

#endif
