// mm_struct lifetime (kernel/fork.c's mm_alloc / __mmput) and rss helpers.
#include "mm/mm.h"
#include "mm/variants.h"

#include "base/mmdebug.h"
#include "mm/filemap.h"
#include "mm/kernel.h"
#include "mm/khugepaged_hooks.h"
#include "mm/mm.h"
#include "mm/mmap.h"
#include "pgtable/pgtable.h"
#include "tlb/tlb.h"

namespace mmlab {

Kernel* kernel_of(const Page* p) { return static_cast<Kernel*>(PhysMem::of(p)->owner); }

std::unique_ptr<Mm> mm_alloc(Kernel* k) {
  int id = k->next_mm_id.fetch_add(1);
  auto mm = std::make_unique<Mm>(k, k->phys.get(), k->stats.get(), &k->deferred_tables, id);
  if (!mm->pgd) return nullptr;
  init_new_context(&k->tlb, mm.get());
  return mm;
}

bool mm_forbids_zeropage(const Mm* mm) {
  return mm->kernel->settings.zero_page.load(std::memory_order_relaxed) == ZeroPage::kOff;
}

void mmput(Mm* mm) {
  mm->mm_users.store(0, std::memory_order_release);
  khugepaged_exit(mm);
  exit_mmap(mm);
}

int prctl_set_thp_disable(Mm* mm, bool disable, unsigned long flags) {
  constexpr unsigned long PR_THP_DISABLE_EXCEPT_ADVISED = 1ul << 1;
  // Flags only when disabling, and only the one there is.
  if ((!disable && flags) || (flags & ~PR_THP_DISABLE_EXCEPT_ADVISED)) return -EINVAL;
  mmap_write_lock(mm);
  mm->clear_flag(MMF_DISABLE_THP);
  mm->clear_flag(MMF_DISABLE_THP_EXCEPT_ADVISED);
  if (disable) mm->set_flag((flags & PR_THP_DISABLE_EXCEPT_ADVISED) ? MMF_DISABLE_THP_EXCEPT_ADVISED : MMF_DISABLE_THP);
  mmap_write_unlock(mm);
  return 0;
}

MmCounter mm_counter_file(const Folio* folio) {
  return folio_test_swapbacked(folio) ? MM_SHMEMPAGES : MM_FILEPAGES;
}

MmCounter mm_counter(const Folio* folio) {
  return folio_test_anon(folio) ? MM_ANONPAGES : mm_counter_file(folio);
}

}  // namespace mmlab
