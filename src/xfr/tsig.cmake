# TSIG (RFC 8945): keys (tern's config, BIND key files) and signing/verifying transfer and NOTIFY
# messages. libcrypto computes every HMAC.
pkg_check_modules(TSIG_LIBCRYPTO REQUIRED IMPORTED_TARGET libcrypto)
add_library(tern_tsig STATIC tsig.c tsig_keys.c)
target_link_libraries(tern_tsig PUBLIC tern_wire tern_common PRIVATE PkgConfig::TSIG_LIBCRYPTO)
