# AXFR/IXFR messages and the journal (src/xfr/stream.cmake): responses checked through ldns and a
# real client (kdig), zone diffs and the journal. ldns parses what the tests compare.
tern_unit_test(test_xfr_stream test_xfr_stream.c tern_xfr_stream PkgConfig::LDNS)
tern_unit_test(test_journal test_journal.c tern_xfr_stream PkgConfig::LDNS)
