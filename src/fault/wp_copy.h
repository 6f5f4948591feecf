// The copy-on-write order policies (`tune cow.policy`, `cow.max_order`,
// `cow.reuse`) that wp_page_copy() and do_wp_page() consult; the policies
// live in fault/wp_copy.cpp, the kernel's order-0 path in fault/memory.cpp.
#pragma once

#include "fault/fault.h"
#include "mm/kernel.h"

namespace mmlab {

// ---- mm/memory.c helpers fault/memory.cpp shares with the policies ----
// folio_prealloc: an order-0 folio for a CoW, zeroed when need_zero.
Folio* folio_prealloc(Mm* mm, uint64_t addr, bool need_zero);
// The new folio of a write-protect copy over the nr PTEs from pte at addr,
// which the caller cleared and flushed under their lock (patches 1/7 and 5/7
// of the posting make this multi-page; for nr 1 it is v6.18's): one
// reference per PTE, exclusive rmap, LRU, then set_ptes of entries that are
// young and, for a write, dirty and writable where the VMA allows (an
// unshare keeps the faulting entry's soft-dirty and uffd-wp, read-only).
void wp_install_new_folio(VmFault* vmf, Folio* new_folio, pte_t* pte, uint64_t addr, unsigned nr);
// The model's write-protect fault counters: a copy into a new folio of
// `order` that was installed by vmf (fault.wp_copy or fault.unshare,
// cow.copy/unshare.orderN), and the first nr pages of new_folio just copied
// from old pages (counted where they are copied, installed or not): their
// bytes, and how many of them came out all zero (cow.zero_subpages_copied,
// the model's own figure of copies that moved nothing but zeroes).
void count_wp_copy(const VmFault* vmf, unsigned order);
void count_wp_copy_bytes(Mm* mm, const Folio* new_folio, unsigned nr);
// mmu_notifier_invalidate_range_start() over the range about to be
// replaced (the model has no notifier subscribers: counted), then the
// wp_copy.before_revalidate label.
void wp_copy_before_revalidate(Mm* mm);
// The copy's two windows, where the kernel's fault may sleep or be
// preempted with only the fault's mmap_lock or VMA lock held: on entry (the
// PTL dropped by do_wp_page) and after the copy, before the PTL is retaken
// to re-validate. Each is a scheduler label (wp_copy.enter,
// wp_copy.before_revalidate; docs/RACES.md) that a directed schedule can
// stop a fault at.
enum class WpCopyPoint : uint8_t { kEnter, kBeforeRevalidate };
void wp_copy_window(Mm* mm, WpCopyPoint point);

// `cow.policy rfc`: wp_page_copy() as the posting's patch 6/7 makes it, for
// every order including 0. Entered as the kernel's: no PTL, holding a
// reference on the old folio (if any).
namespace rfc {
[[nodiscard]] vm_fault_t wp_page_copy(VmFault* vmf);
}  // namespace rfc

// `cow.policy fixed`: copy (or, over zero-page PTEs, fill) a naturally
// aligned run larger than one page when every rule of docs/VARIANTS.md
// holds. Returns false having done nothing (the old folio's reference still
// held) when the kernel's order-0 copy should run instead; true with *ret
// set when the fault was handled or backed out.
[[nodiscard]] bool wp_page_copy_large(VmFault* vmf, vm_fault_t* ret);

// `cow.reuse whole`: called by do_wp_page() with the PTL held once it has
// decided to reuse vmf->page of the large folio `folio` for a write. Makes
// the folio's whole read-only run around the fault writable and returns true
// when the folio is exclusively this mm's; false changes nothing (the caller
// reuses the one page, as v6.18 does). The PTL stays held either way.
[[nodiscard]] bool wp_page_reuse_run(VmFault* vmf, Folio* folio) REQUIRES(vmf->ptl);

}  // namespace mmlab
