# The transfer threads (xfr.c): requests handed over by workers, AXFR/IXFR out, journals,
# NOTIFY both ways, secondary zones.
add_library(tern_xfr STATIC xfr.c xfr_out.c xfr_notify.c xfr_secondary.c)
target_link_libraries(tern_xfr PUBLIC tern_answer tern_conf tern_net tern_xfr_out tern_xfr_in
                      tern_tsig tern_zone tern_wire tern_common PRIVATE Threads::Threads)
