# XFR over TLS as a secondary (RFC 9103; xfr_tls.h): the pullers' TLS client. libssl does the
# handshakes, authentication and session resumption; the pullers (xfr_secondary.c) wait for it.
pkg_check_modules(XOT_LIBSSL REQUIRED IMPORTED_TARGET libssl libcrypto)
target_sources(tern_xfr PRIVATE xfr_tls.c)
target_link_libraries(tern_xfr PRIVATE PkgConfig::XOT_LIBSSL)
