# Incoming zone transfers (xfr_in.h): AXFR/IXFR responses into a new zone version, and the
# secondary's on-disk copy. ldns prints records (messages, the zone file); the wire is read here.
add_library(tern_xfr_in STATIC xfr_in.c)
target_link_libraries(tern_xfr_in PUBLIC tern_zone tern_wire tern_common PRIVATE PkgConfig::LDNS)
