# What transfers out are made of: AXFR/IXFR messages from pinned zone versions (xfr_stream.c),
# zone diffs and the IXFR journal (journal.c). No threads, no sockets: the out thread (xfr_out.c,
# in tern_xfr) drives them.
add_library(tern_xfr_stream STATIC xfr_stream.c journal.c)
target_link_libraries(tern_xfr_stream PUBLIC tern_zone tern_dnssec tern_wire tern_common
                      Threads::Threads)
