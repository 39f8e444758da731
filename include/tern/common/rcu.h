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

/*
 * ThreadSanitizer does not see liburcu's ordering (barriers in inline asm, address dependencies),
 * so under TERN_SANITIZE=thread the same protocol is spelled in terms it does see: publish and
 * read the pointer with release/acquire atomics, and a reader's quiescent state (or going
 * offline) releases everything it read before, which synchronize() acquires. That is exactly the
 * grace-period guarantee the writer relies on to free. Other builds use liburcu unchanged.
 */
#if defined(__SANITIZE_THREAD__)
#define TERN_RCU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TERN_RCU_TSAN 1
#endif
#endif
#ifdef TERN_RCU_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
extern char tern_rcu_tsan_gp; /* the grace-period sync object (rcu.c is not needed: weak) */
__attribute__((weak)) char tern_rcu_tsan_gp;
#define TERN_RCU_TSAN_RELEASE() __tsan_release(&tern_rcu_tsan_gp)
#define TERN_RCU_TSAN_ACQUIRE() __tsan_acquire(&tern_rcu_tsan_gp)
#else
#define TERN_RCU_TSAN_RELEASE() ((void)0)
#define TERN_RCU_TSAN_ACQUIRE() ((void)0)
#endif

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
    TERN_RCU_TSAN_RELEASE();
    urcu_qsbr_quiescent_state();
}
static inline void tern_rcu_offline(void)
{
    TERN_RCU_TSAN_RELEASE();
    urcu_qsbr_thread_offline();
}
static inline void tern_rcu_online(void)
{
    urcu_qsbr_thread_online();
}
#ifdef TERN_RCU_TSAN
#define tern_rcu_deref(p) __atomic_load_n(&(p), __ATOMIC_ACQUIRE)
#else
#define tern_rcu_deref(p) rcu_dereference(p)
#endif

/* Writer side (the loader thread). */
#ifdef TERN_RCU_TSAN
#define tern_rcu_xchg(pp, v) __atomic_exchange_n(pp, v, __ATOMIC_ACQ_REL)
#else
#define tern_rcu_xchg(pp, v) rcu_xchg_pointer(pp, v)
#endif
static inline void tern_rcu_synchronize(void)
{
    urcu_qsbr_synchronize_rcu();
    TERN_RCU_TSAN_ACQUIRE();
}

#endif
