# TSIG: keys, both sides of signing, against knotd, kdig and ldns as peers.
tern_unit_test(test_tsig test_tsig.c tern_tsig)
# the test computes reference HMACs itself and checks ldns's view of our messages
pkg_check_modules(TSIG_TEST_LIBCRYPTO REQUIRED IMPORTED_TARGET libcrypto)
target_link_libraries(test_tsig PRIVATE PkgConfig::TSIG_TEST_LIBCRYPTO PkgConfig::LDNS
                      Threads::Threads)
# knotd and kdig run as peers; the transfer of ~2,000 records takes a few seconds at most
set_tests_properties(unit/test_tsig PROPERTIES TIMEOUT 120)
