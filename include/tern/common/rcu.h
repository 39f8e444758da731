/*
 * rcu.h — the one place tern touches liburcu: the QSBR flavour, inlined (_LGPL_SOURCE).
 *
 * Readers are the workers. Each registers once, reads the published pointer with tern_rcu_deref()
 * and announces a quiescent state after every batch (it holds no pointer from before then). Around
 * a blocking epoll_wait it goes offline, so an idle worker never delays a grace period; online
 * and quiescent cost a couple of memory barriers and no syscall (a futex wake happens only while
 * a writer is actually waiting in tern_rcu_synchronize()).
 *
 * The writer is the loader thread: tern_rcu_xchg() publishes a new object and returns the old
 * one, tern_rcu_synchronize() returns once every registered reader has passed a quiescent state
 * (or is offline), after which the old object can be freed. The writer need not register.
 */
#ifndef TERN_COMMON_RCU_H
#define TERN_COMMON_RCU_H

#ifndef _LGPL_SOURCE
#define _LGPL_SOURCE 1 /* inline the read-side fast paths (liburcu is LGPL-2.1; tern links it) */
#endif
#include <urcu/pointer.h>
#include <urcu/urcu-qsbr.h>

/* Reader side (worker threads). */
static inline void tern_rcu_register(void)
{
    urcu_qsbr_register_thread();
}
static inline void tern_rcu_unregister(void)
{
    urcu_qsbr_unregister_thread();
}
static inline void tern_rcu_quiescent(void)
{
    urcu_qsbr_quiescent_state();
}
static inline void tern_rcu_offline(void)
{
    urcu_qsbr_thread_offline();
}
static inline void tern_rcu_online(void)
{
    urcu_qsbr_thread_online();
}
#define tern_rcu_deref(p) rcu_dereference(p)

/* Writer side (the loader thread). */
#define tern_rcu_xchg(pp, v) rcu_xchg_pointer(pp, v)
static inline void tern_rcu_synchronize(void)
{
    urcu_qsbr_synchronize_rcu();
}

#endif
