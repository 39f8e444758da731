# AXFR/IXFR responses from pinned zone versions, zone diffs and the IXFR journal.
add_library(tern_xfr_out STATIC xfr_stream.c journal.c)
target_link_libraries(tern_xfr_out PUBLIC tern_zone tern_wire tern_common Threads::Threads)
