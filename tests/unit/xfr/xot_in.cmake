# The XoT client (src/xfr/xfr_tls.c, private to src/xfr) against an OpenSSL server in a thread:
# strict/opportunistic authentication, TLS 1.3 only, ALPN, mutual TLS, resumption.
pkg_check_modules(TEST_XOT_LIBSSL REQUIRED IMPORTED_TARGET libssl libcrypto)
tern_unit_test(test_xfr_tls test_xfr_tls.c tern_xfr PkgConfig::TEST_XOT_LIBSSL)
target_include_directories(test_xfr_tls PRIVATE ${PROJECT_SOURCE_DIR}/src/xfr)
