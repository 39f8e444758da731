# AXFR/IXFR out (src/xfr/out.cmake): responses checked through ldns and a real client (kdig),
# zone diffs and the journal. ldns parses what the tests compare.
tern_unit_test(test_xfr_stream test_xfr_stream.c tern_xfr_out PkgConfig::LDNS)
tern_unit_test(test_journal test_journal.c tern_xfr_out PkgConfig::LDNS)
