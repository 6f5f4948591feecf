// mm/madvise.c: the system call and the PTE-table walk its advice handlers
// share. Defined in mm/madvise.cpp.
#pragma once

#include <cstdint>

#include "mm/mm.h"

namespace mmlab {
// madvise(2): 0 or -errno.
[[nodiscard]] int do_madvise(Mm* mm, uint64_t start, uint64_t len, int advice);

// The PTE-table part that the madvise walkers over [start, end) inside one
// PMD share (madvise_cold_or_pageout_pte_range, madvise_free_pte_range,
// mm/madvise.cpp): the table's lock, the TLB flush owed for the entries
// made old or clean under it, and the step for a large folio.
class MadvisePteWalk {
 public:
  MadvisePteWalk(Vma* vma, pmd_t* pmd, uint64_t start, uint64_t end) : vma_(vma), pmd_(pmd), start_(start), end_(end) {}
  ~MadvisePteWalk() { unlock(); }
  MadvisePteWalk(const MadvisePteWalk&) = delete;
  MadvisePteWalk& operator=(const MadvisePteWalk&) = delete;
  // Map and lock the table at addr (pte_offset_map_lock); false if none.
  bool lock(uint64_t addr);
  // Flush what is owed, then unlock (nothing if not locked).
  void unlock();
  pte_t* pte() const { return pte_; }
  void advance(unsigned nr) { pte_ += nr; }
  // An entry under the lock was made old or clean: flush before unlocking.
  void owe_flush() { flush_ = true; }
  // The large folio mapped from pte() at addr (*ptent its PTE): with the
  // run of PTEs that map it inside the range in *nr (young and dirty bits
  // merged into *ptent), kWhole when the range maps all of it; otherwise it
  // is split, unless another mm may map it or it is locked (kNext: go on
  // after *nr entries, 0 to look at addr again after a split), and kStop if
  // the table went away meanwhile.
  enum class LargeFolio : uint8_t { kWhole, kNext, kStop };
  LargeFolio large_folio(Folio* folio, uint64_t addr, pte_t* ptent, unsigned* nr);

 private:
  Vma* vma_;
  pmd_t* pmd_;
  uint64_t start_, end_;
  pte_t* pte_ = nullptr;
  SpinLock* ptl_ = nullptr;
  bool flush_ = false;
};

}  // namespace mmlab
