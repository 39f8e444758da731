# The transfer service (src/xfr/xfr.cmake) over real loopback sockets: AXFR/IXFR out with TSIG,
# NOTIFY out and in, the hand-over queue's bound. ldns parses every message the service writes;
# the test signs and verifies as a peer would (tern_tsig).
tern_unit_test(test_xfr test_xfr.c tern_xfr tern_tsig tern_zone tern_wire PkgConfig::LDNS)
# the NOTIFY retries and a few transfers of ~100 KB: seconds at most, even under TSan
set_tests_properties(unit/test_xfr PROPERTIES TIMEOUT 120)
# Catalog zones consumed (src/xfr/xfr_catalog*.c): the parse, the member list file, and the
# service's member decisions told through its hooks (no threads; files in a scratch directory).
tern_unit_test(test_xfr_catalog test_xfr_catalog.c tern_xfr tern_zone tern_wire)
target_include_directories(test_xfr_catalog PRIVATE ${PROJECT_SOURCE_DIR}/src/xfr)
