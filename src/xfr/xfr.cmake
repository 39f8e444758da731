# The transfer service and its threads (xfr.h): the service and the workers' hand-off queue
# (xfr.c), AXFR/IXFR out (xfr_out.c), journal entries and NOTIFY (xfr_notify.c), secondary zones
# (xfr_secondary.c). Its API names config_t and zone_t (PUBLIC), and answer_view_t and
# server_handoff_t as types only: it sits beside the workers and calls nothing of net, and of
# answer only answer_pin_zone() (the version a transfer streams, pinned from the view served).
add_library(tern_xfr STATIC xfr.c xfr_out.c xfr_notify.c xfr_secondary.c xfr_update.c
            xfr_catalog.c xfr_catalog_parse.c)
target_link_libraries(tern_xfr PUBLIC tern_conf tern_zone tern_common
                      PRIVATE tern_xfr_stream tern_xfr_in tern_tsig tern_wire tern_answer tern_limit
                              tern_net_tls Threads::Threads)
