// The user-folio copies of mm/memory.c that move nothing but frame bytes,
// for the fault paths and hugetlb (declared in phys/frame_copy.h).
#include "phys/frame_copy.h"

namespace mmlab {

// Zero a new folio, the page containing the faulting address last so it is
// cache-hot (folio_zero_user).
void folio_zero_user(Folio* folio, uint64_t fault_addr, uint64_t folio_addr, Stats* st) {
  long nr = folio_nr_pages(folio);
  long target = static_cast<long>((fault_addr - folio_addr) >> PAGE_SHIFT);
  if (target < 0 || target >= nr) target = 0;
  PhysMem* phys = PhysMem::of(&folio->page);
  zero_folio_frames(phys, static_cast<uint8_t*>(phys->page_address(&folio->page)), nr, target);
  st->count_zeroed(folio_order(folio), static_cast<uint64_t>(nr) * PAGE_SIZE);
}

// The kernel copies page by page with copy_mc_user_highpage and stops with
// -EHWPOISON at the first page that meets a machine check (the caller then
// frees the partly written destination). The model's machine checks are the
// injector's `copy_mc` site, drawn once per page in the same order; the bytes
// then move in one bulk copy, since a destination that failed is never read.
int copy_user_large_folio(Folio* dst, Folio* src, Stats* st) {
  PhysMem* phys = PhysMem::of(&src->page);
  const long nr = folio_nr_pages(src);
  for (long i = 0; i < nr; i++)
    if (phys->should_fail(FaultSite::copy_mc)) return -EHWPOISON;
  const uint64_t bytes = static_cast<uint64_t>(nr) * PAGE_SIZE;
  copy_frames(phys, folio_address(dst), folio_address(src), bytes);
  st->count_copied(folio_order(dst), bytes);
  return 0;
}

}  // namespace mmlab
