// Clang thread-safety annotations (-Wthread-safety), empty under other
// compilers. Lock order for the whole model is written down once, in
// src/sync/lock_order.h; every guarded member names its lock.
#pragma once

#if defined(__clang__)
#define MM_TSA(x) __attribute__((x))
#else
#define MM_TSA(x)
#endif

#define CAPABILITY(x) MM_TSA(capability(x))
#define SCOPED_CAPABILITY MM_TSA(scoped_lockable)
#define GUARDED_BY(x) MM_TSA(guarded_by(x))
#define PT_GUARDED_BY(x) MM_TSA(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) MM_TSA(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) MM_TSA(acquired_after(__VA_ARGS__))
#define REQUIRES(...) MM_TSA(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) MM_TSA(requires_shared_capability(__VA_ARGS__))
#define ACQUIRE(...) MM_TSA(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) MM_TSA(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) MM_TSA(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) MM_TSA(release_shared_capability(__VA_ARGS__))
#define RELEASE_GENERIC(...) MM_TSA(release_generic_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) MM_TSA(try_acquire_capability(__VA_ARGS__))
#define TRY_ACQUIRE_SHARED(...) MM_TSA(try_acquire_shared_capability(__VA_ARGS__))
#define EXCLUDES(...) MM_TSA(locks_excluded(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) MM_TSA(assert_capability(x))
#define ASSERT_SHARED_CAPABILITY(x) MM_TSA(assert_shared_capability(x))
#define RETURN_CAPABILITY(x) MM_TSA(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS MM_TSA(no_thread_safety_analysis)
