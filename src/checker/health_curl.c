/*
 * health_curl.c — libcurl, loaded when health checking is first enabled (health_curl.h).
 *
 * Not linked: linked, libcurl brings OpenSSL's TLS, GnuTLS (through librtmp), Kerberos, LDAP,
 * SSH, HTTP/2 and a dozen more libraries, about 5 MiB of PSS in every ternd, health checks or
 * not.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define HEALTH_CURL_NO_MACROS 1 /* this file fills the table the macros read */
#include "health_curl.h"
#include "tern/common/dl.h"

struct health_curl health_curl;
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;
static char cu_error[256];

/* Load libcurl and initialise it, once per process; cu_error says why it failed. */
static void cu_load(void)
{
    static const char *const names[] = {"libcurl.so.4", "libcurl.so"};
#define CURL_NAME(f) #f,
    static const char *const syms[] = {CURL_FUNCS(CURL_NAME)};
#undef CURL_NAME
    void *p[sizeof(syms) / sizeof(syms[0])];
    if (tern_dl_load(names, 2, syms, p, sizeof(syms) / sizeof(syms[0]), cu_error,
                     sizeof(cu_error)) < 0)
        return;
    size_t i = 0;
#define CURL_SET(f) memcpy(&health_curl.f, &p[i++], sizeof(void *));
    CURL_FUNCS(CURL_SET)
#undef CURL_SET
    /* thread-safe since libcurl 7.84 (Debian 12 has 7.88); this runs at startup anyway, or on
     * the loader thread at the reload that enables health checking */
    CURLcode rc = health_curl.curl_global_init(CURL_GLOBAL_DEFAULT);
    if (rc != CURLE_OK)
        snprintf(cu_error, sizeof(cu_error), "libcurl: %s", health_curl.curl_easy_strerror(rc));
}

const char *health_curl_load(void)
{
    pthread_once(&cu_once, cu_load);
    return cu_error[0] ? cu_error : NULL;
}
