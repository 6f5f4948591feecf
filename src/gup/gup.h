// get_user_pages and friends (mm/gup.c, include/linux/mm.h): the FOLL_*
// flags, the entry points with the flags each adds, pinning and unpinning,
// get_dump_page and the populate path. The slow path's follow_page_mask()
// chain exists in every posting of the batching series (`tune gup.walk`),
// GUP-fast in two (`tune gup.fast`); see gup.cpp and gup_fast.cpp.
#pragma once

#include <cstdint>

#include "mm/gup_hooks.h"
#include "mm/mm.h"
#include "phys/page.h"

namespace mmlab {

// External FOLL_* flags (include/linux/mm_types.h, v6.18 values). The public
// foll:: table (include/mmlab/gup.h) repeats them for callers; process/gup_api.cpp
// asserts at compile time that the two agree.
inline constexpr unsigned FOLL_WRITE = 1u << 0;
inline constexpr unsigned FOLL_GET = 1u << 1;
inline constexpr unsigned FOLL_DUMP = 1u << 2;
inline constexpr unsigned FOLL_FORCE = 1u << 3;
inline constexpr unsigned FOLL_NOWAIT = 1u << 4;
inline constexpr unsigned FOLL_NOFAULT = 1u << 5;
inline constexpr unsigned FOLL_HWPOISON = 1u << 6;
inline constexpr unsigned FOLL_ANON = 1u << 7;
inline constexpr unsigned FOLL_LONGTERM = 1u << 8;
inline constexpr unsigned FOLL_SPLIT_PMD = 1u << 9;
inline constexpr unsigned FOLL_PCI_P2PDMA = 1u << 10;
inline constexpr unsigned FOLL_INTERRUPTIBLE = 1u << 11;
inline constexpr unsigned FOLL_HONOR_NUMA_FAULT = 1u << 12;
// Internal flags (mm/internal.h).
inline constexpr unsigned FOLL_TOUCH = 1u << 16;
inline constexpr unsigned FOLL_TRIED = 1u << 17;
inline constexpr unsigned FOLL_REMOTE = 1u << 18;
inline constexpr unsigned FOLL_PIN = 1u << 19;
inline constexpr unsigned FOLL_FAST_ONLY = 1u << 20;
inline constexpr unsigned FOLL_UNLOCKABLE = 1u << 21;
inline constexpr unsigned FOLL_MADV_POPULATE = 1u << 22;
inline constexpr unsigned INTERNAL_GUP_FLAGS = FOLL_TOUCH | FOLL_TRIED | FOLL_REMOTE | FOLL_PIN | FOLL_FAST_ONLY |
                                               FOLL_UNLOCKABLE | FOLL_MADV_POPULATE;

// ---- entry points. Callers of the *_locked-free forms hold mmap_lock for
// read (as the kernel's get_user_pages and pin_user_pages require); the
// unlocked and fast forms take it themselves. Returns pages obtained, or
// -errno (pin_user_pages* return 0 for invalid arguments).
[[nodiscard]] long get_user_pages_remote(Mm* mm, uint64_t start, long nr_pages, unsigned gup_flags, Page** pages, int* locked);
[[nodiscard]] long pin_user_pages_remote(Mm* mm, uint64_t start, long nr_pages, unsigned gup_flags, Page** pages, int* locked);
[[nodiscard]] long get_user_pages(Mm* mm, uint64_t start, long nr_pages, unsigned gup_flags, Page** pages);
[[nodiscard]] long pin_user_pages(Mm* mm, uint64_t start, long nr_pages, unsigned gup_flags, Page** pages);
[[nodiscard]] long get_user_pages_unlocked(Mm* mm, uint64_t start, long nr_pages, Page** pages, unsigned gup_flags);
[[nodiscard]] long pin_user_pages_unlocked(Mm* mm, uint64_t start, long nr_pages, Page** pages, unsigned gup_flags);
[[nodiscard]] long get_user_pages_fast(Mm* mm, uint64_t start, long nr_pages, unsigned gup_flags, Page** pages);
[[nodiscard]] long get_user_pages_fast_only(Mm* mm, uint64_t start, long nr_pages, unsigned gup_flags, Page** pages);
[[nodiscard]] long pin_user_pages_fast(Mm* mm, uint64_t start, long nr_pages, unsigned gup_flags, Page** pages);

// ---- releasing ----
void put_page(Page* page);
void unpin_user_page(Page* page);
void unpin_user_pages(Page** pages, long npages);
void unpin_user_pages_dirty_lock(Page** pages, long npages, bool make_dirty);

// get_dump_page: FOLL_FORCE|FOLL_DUMP|FOLL_GET of one page; nullptr for a hole.
// Takes mmap_lock itself. *addr_out receives nothing; the caller puts the page.
Page* get_dump_page(Mm* mm, uint64_t addr);

// ---- internals shared with gup_fast.cpp ----
// The pin on top of refs references already taken (GUP_PIN_COUNTING_BIAS in
// the refcount of a small folio, the pincount of a large one), counted in
// nr_foll_pin_acquired: what try_grab_folio and try_grab_folio_fast share.
void gup_pin_referenced_folio(Folio* folio, int refs, Stats* stats);
[[nodiscard]] int try_grab_folio(Folio* folio, int refs, unsigned flags);
void gup_put_folio(Folio* folio, int refs, unsigned flags);
bool gup_must_unshare(Vma* vma, unsigned flags, Page* page);  // vma may be nullptr (GUP-fast)
[[nodiscard]] long __gup_longterm_locked(Mm* mm, uint64_t start, long nr_pages, Page** pages, int* locked, unsigned gup_flags);
[[nodiscard]] long gup_fast_fallback(Mm* mm, uint64_t start, long nr_pages, unsigned gup_flags, Page** pages);

// MADV_POPULATE_READ/WRITE: fault in [start, end); 0 or -errno.
[[nodiscard]] long faultin_page_range(Mm* mm, uint64_t start, uint64_t end, bool write) REQUIRES_SHARED(mm->mmap_lock);
// The table through which mm's populate paths reach faultin_page_range
// (mm/gup_hooks.h); the System installs it in its Kernel.
extern const GupHooks kGupHooks;

}  // namespace mmlab
