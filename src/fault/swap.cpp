// PLACEHOLDER until the swap layer lands (owner: swap layer).
#include "fault/fault.h"
#include "fault/swap.h"
#include "mm/internal.h"
#include "mm/kernel.h"
#include "mmlab/system.h"

namespace mmlab {

vm_fault_t do_swap_page(VmFault*) { return VM_FAULT_SIGBUS; }
unsigned zap_nonpresent_ptes(Vma* vma, pte_t* pte, pte_t, uint64_t addr, unsigned) {
  ptep_get_and_clear(vma->vm_mm, addr, pte);
  return 1;
}
int copy_nonpresent_pte(Vma*, Vma*, pte_t* dst_pte, pte_t* src_pte, uint64_t) {
  entry_set(dst_pte, ptep_get(src_pte));
  return 0;
}
bool folio_free_swap(Folio*) { return false; }
void madvise_pageout_range(Vma*, uint64_t, uint64_t) {}
int System::add_swap(uint64_t) { return -ENOSYS; }
long System::run_shrinkers() { return 0; }
void Process::clear_soft_dirty() {}

}  // namespace mmlab
