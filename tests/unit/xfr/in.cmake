# Incoming transfers: crafted streams, the zone writer, and a real knotd as the primary (the test
# builds its messages and reads master files through ldns).
tern_unit_test(test_xfr_in test_xfr_in.c tern_xfr_in tern_zone PkgConfig::LDNS)
