// /proc/PID/smaps and the rss lines of /proc/PID/status, in the kernel's
// formats (fs/proc/task_mmu.c: show_smap, smaps_account, task_mem).
#include <set>
#include <string>

#include "fault/fault.h"
#include "fmt/format.h"
#include "mm/file.h"
#include "mm/hugetlb.h"
#include "mm/kernel.h"
#include "mm/mm.h"
#include "mm/settings.h"
#include "mm/swapfile.h"
#include "pgtable/pagewalk.h"
#include "pgtable/pgtable.h"
#include "process/process_internal.h"
#include "tlb/tlb.h"

namespace mmlab {
namespace {

// Proportional sizes carry PSS_SHIFT fractional bits, as in the kernel.
constexpr unsigned PSS_SHIFT = 12;

// struct mem_size_stats: bytes (pss_* in bytes << PSS_SHIFT).
struct MemSizeStats {
  uint64_t resident = 0, shared_clean = 0, shared_dirty = 0, private_clean = 0, private_dirty = 0;
  uint64_t referenced = 0, anonymous = 0, lazyfree = 0, anonymous_thp = 0, shmem_thp = 0, file_thp = 0;
  uint64_t swap = 0, shared_hugetlb = 0, private_hugetlb = 0, ksm = 0;
  uint64_t pss = 0, pss_dirty = 0, pss_locked = 0, swap_pss = 0;
};

// smaps_page_accumulate()
void smaps_page_accumulate(MemSizeStats* mss, const Folio* folio, uint64_t size, uint64_t pss, bool dirty,
                           bool locked, bool is_private) {
  mss->pss += pss;
  if (locked) mss->pss_locked += pss;
  if (dirty || folio_test_dirty(folio)) {
    mss->pss_dirty += pss;
    (is_private ? mss->private_dirty : mss->shared_dirty) += size;
  } else {
    (is_private ? mss->private_clean : mss->shared_clean) += size;
  }
}

// smaps_account(): one present entry mapping `page` (the whole folio from
// `page` on when compound, i.e. a PMD/PUD leaf).
void smaps_account(MemSizeStats* mss, Page* page, bool compound, bool young, bool dirty, bool locked) {
  Folio* folio = page_folio(page);
  long nr = compound ? folio_nr_pages(folio) : 1;
  uint64_t size = static_cast<uint64_t>(nr) * PAGE_SIZE;

  // Quantities that depend only on the size and the kind of folio.
  if (folio_test_anon(folio)) {
    mss->anonymous += size;
    if (!folio_test_swapbacked(folio) && !dirty && !folio_test_dirty(folio)) mss->lazyfree += size;
  }
  mss->resident += size;
  if (young || folio_test_referenced(folio)) mss->referenced += size;

  // refcount 1: mapped exactly once (by this entry), so private and whole.
  if (folio_ref_count(folio) == 1) {
    smaps_page_accumulate(mss, folio, size, size << PSS_SHIFT, dirty, locked, /*is_private=*/true);
    return;
  }
  // CONFIG_PAGE_MAPCOUNT: the precise per-page mapcount (PTEs of the page
  // plus the folio's entire mappings; a small folio's own mapcount).
  for (long i = 0; i < nr; i++, page++) {
    int mapcount = page_mapcount(page) + folio_entire_mapcount(folio);
    uint64_t pss = PAGE_SIZE << PSS_SHIFT;
    if (mapcount >= 2) pss /= static_cast<uint64_t>(mapcount);
    smaps_page_accumulate(mss, folio, PAGE_SIZE, pss, dirty, locked, mapcount < 2);
  }
}

// A shmem VMA's swapped-out pages are held by its file, not by swap PTEs
// (shmem_swap_usage): a shared or read-only mapping counts every one in its
// range; a private writable one only those under an empty PTE, since a CoW
// copy hides the file's page there (smaps_shmem_walk_ops' pte_hole).
// Swap only: the kernel adds nothing to SwapPss for them.
void smaps_shmem_swap(Vma* vma, const std::set<uint64_t>& filled, MemSizeStats* mss) {
  if (!vma_is_shmem(vma)) return;
  File* f = vma->vm_file.get();
  const bool all = (vma->vm_flags & VM_SHARED) || !(vma->vm_flags & VM_WRITE);
  const uint64_t first = vma->vm_pgoff, last = vma->vm_pgoff + vma->pages();
  MutexGuard g(&f->lock);
  for (auto it = f->swapped.lower_bound(first); it != f->swapped.end() && it->first < last; ++it) {
    const uint64_t addr = vma->vm_start + ((it->first - first) << PAGE_SHIFT);
    if (all || !filled.count(addr)) mss->swap += PAGE_SIZE;
  }
}

// smap_gather_stats() for one VMA. mmap_lock held (read).
void smap_gather_stats(Vma* vma, MemSizeStats* mss, uint64_t* huge_page_size) {
  mmap_assert_locked(vma->vm_mm);
  bool locked = vma->vm_flags & VM_LOCKED;
  bool hugetlb = vma->vm_flags & VM_HUGETLB;
  PageWalkOps ops;
  std::set<uint64_t> filled;  // addresses with a PTE (for a shmem VMA's swap, below)
  ops.pte_entry = [&](uint64_t addr, pte_t* ptep) {
    filled.insert(addr);
    pte_t pte = ptep_get(ptep);
    if (!pte_present(pte)) {
      // Swap entries (no swap device yet: each counts as mapped once).
      if (!non_swap_entry(pte_to_swp_entry(pte))) {
        mss->swap += PAGE_SIZE;
        mss->swap_pss += PAGE_SIZE << PSS_SHIFT;
      }
      return;
    }
    Page* page = vm_normal_page(vma, addr, pte);  // nullptr for the zero page
    if (!page) return;
    smaps_account(mss, page, /*compound=*/false, pte_young(pte), pte_dirty(pte), locked);
  };
  // hugetlb leaves: smaps_hugetlb_range() (not resident in Rss).
  auto hugetlb_leaf = [&](Page* page, uint64_t size) {
    Folio* folio = page_folio(page);
    *huge_page_size = size;
    (folio_maybe_mapped_shared(folio) ? mss->shared_hugetlb : mss->private_hugetlb) += size;
  };
  ops.pmd_leaf = [&](uint64_t addr, pmd_t* pmdp) {
    pmd_t pmd = pmdp_get(pmdp);
    Page* page = vm_normal_page_pmd(vma, addr, pmd);  // nullptr for the huge zero folio
    if (!page) return;
    if (hugetlb) {
      hugetlb_leaf(page, PMD_SIZE);
      return;
    }
    Folio* folio = page_folio(page);
    if (folio_test_anon(folio)) mss->anonymous_thp += PMD_SIZE;
    else if (folio_test_swapbacked(folio)) mss->shmem_thp += PMD_SIZE;
    else mss->file_thp += PMD_SIZE;
    smaps_account(mss, page, /*compound=*/true, pmd_young(pmd), pmd_dirty(pmd), locked);
  };
  ops.pud_leaf = [&](uint64_t, pud_t* pudp) {
    pud_t pud = pudp_get(pudp);
    PhysMem* phys = vma->vm_mm->phys;
    if (pud_special(pud) || !phys->pfn_valid(pud_pfn(pud))) return;
    Page* page = phys->pfn_to_page(pud_pfn(pud));
    if (hugetlb) {
      hugetlb_leaf(page, PUD_SIZE);
      return;
    }
    smaps_account(mss, page, /*compound=*/true, pud_young(pud), pud_dirty(pud), locked);
  };
  walk_page_range(vma->vm_mm, vma->vm_start, vma->vm_end, ops);
  smaps_shmem_swap(vma, filled, mss);
}

// show_smap_vma_flags(): two letters per set flag, by bit number.
std::string vma_flags_text(vm_flags_t flags) {
  static const char* const mnemonics[64] = {
      "rd", "wr", "ex", "sh", "mr", "mw", "me", "ms",  // 0..7
      "gd", "um", "pf", "??", "uw", "lo", "io", "sr",  // 8..15
      "rr", "dc", "de", "lf", "ac", "nr", "ht", "sf",  // 16..23
      "ar", "wf", "dd", "sd", "mm", "hg", "nh", "mg",  // 24..31
  };
  std::string s = "VmFlags: ";
  for (unsigned i = 0; i < 64; i++) {
    if (!(flags & (1ull << i))) continue;
    s += mnemonics[i] ? mnemonics[i] : "??";
    s += ' ';
  }
  s += '\n';
  return s;
}

// show_map_vma(): "start-end perms offset dev inode", padded name.
std::string vma_header(const Vma* vma) {
  vm_flags_t f = vma->vm_flags;
  uint64_t pgoff = vma->vm_file ? vma->vm_pgoff << PAGE_SHIFT : 0;
  std::string s = fmt::format("{:08x}-{:08x} {}{}{}{} {:08x} {:02x}:{:02x} {} ", vma->vm_start, vma->vm_end,
                              f & VM_READ ? 'r' : '-', f & VM_WRITE ? 'w' : '-', f & VM_EXEC ? 'x' : '-',
                              f & VM_MAYSHARE ? 's' : 'p', pgoff, 0, 0, 0);
  // Shared anonymous memory is a shmem file the kernel names this way;
  // private anonymous memory has no name.
  const char* name = nullptr;
  if (vma->vm_file && vma->vm_file->anon_shared) name = "/dev/zero (deleted)";
  if (is_vm_hugetlb_page(vma) && vma->vm_file && vma->vm_file->name.empty()) name = "/anon_hugepage (deleted)";
  if (name) {
    // seq_setwidth(25 + sizeof(void*) * 6 - 1) then seq_pad(m, ' ').
    constexpr size_t kWidth = 25 + sizeof(void*) * 6 - 1;
    if (s.size() < kWidth) s.append(kWidth - s.size(), ' ');
    s += ' ';
    s += name;
  }
  s += '\n';
  return s;
}

// SEQ_PUT_DEC(): a label, the value in kB right-aligned in `width`, " kB".
void put_kb(std::string* out, const char* label, uint64_t bytes, int width = 8) {
  *out += fmt::format("{}{:>{}} kB\n", label, bytes >> 10, width);
}


// walk_page_vma() with a pmd_entry, as smaps_pte_range() and
// clear_refs_pte_range() are called: each PMD of the VMA in turn, a PMD leaf
// passed to leaf(addr, pmd, value) under the PMD lock, a PTE table to
// table(addr, next, first pte) under its lock.
template <typename Leaf, typename Table>
void walk_vma_pmds_locked(Vma* vma, Leaf leaf, Table table) {
  Mm* mm = vma->vm_mm;
  for (uint64_t addr = vma->vm_start, next; addr < vma->vm_end; addr = next) {
    next = pmd_addr_end(addr, vma->vm_end);
    pmd_t* pmd = mm_find_pmd(mm, addr);
    if (!pmd) {
      next = pud_addr_end(addr, vma->vm_end);  // no PMD table here at all
      continue;
    }
    pmd_t v = pmdp_get(pmd);
    if (pmd_none(v)) continue;
    if (pmd_trans_huge(v)) {
      SpinLock* ptl = pmd_lock(mm, pmd);
      ptl->assert_held();
      pmd_t cur = pmdp_get(pmd);
      if (pmd_trans_huge(cur)) {
        leaf(addr, pmd, cur);
        ptl->unlock();
        continue;
      }
      ptl->unlock();
      if (pmd_none(cur)) continue;
    }
    SpinLock* ptl;
    pte_t* pte = pte_offset_map_lock(mm, pmd, addr, &ptl);
    if (!pte) continue;
    ptl->assert_held();
    table(addr, next, pte);
    ptl->unlock();
  }
}

// smaps_pte_range() for the Pss alone.
void smaps_pss_vma(Vma* vma, MemSizeStats* mss) {
  const bool locked = vma->vm_flags & VM_LOCKED;
  walk_vma_pmds_locked(
      vma,
      [&](uint64_t addr, pmd_t*, pmd_t cur) {
        if (Page* page = vm_normal_page_pmd(vma, addr, cur))
          smaps_account(mss, page, /*compound=*/true, pmd_young(cur), pmd_dirty(cur), locked);
      },
      [&](uint64_t addr, uint64_t next, pte_t* pte) {
        for (uint64_t a = addr; a < next; a += PAGE_SIZE, pte++) {
          const pte_t ptent = ptep_get(pte);
          if (!pte_present(ptent)) continue;
          if (Page* page = vm_normal_page(vma, a, ptent))
            smaps_account(mss, page, /*compound=*/false, pte_young(ptent), pte_dirty(ptent), locked);
        }
      });
}

}  // namespace

std::string proc_smaps(Mm* mm) {
  std::string out;
  mmap_read_lock(mm);
  for (auto& [start, v] : mm->vmas) {
    Vma* vma = v.get();
    MemSizeStats mss;
    uint64_t huge_page_size = PMD_SIZE;  // hugetlb VMAs: the size of the leaves found
    smap_gather_stats(vma, &mss, &huge_page_size);
    uint64_t page_size = (vma->vm_flags & VM_HUGETLB) ? huge_page_size : PAGE_SIZE;
    out += vma_header(vma);
    put_kb(&out, "Size:           ", vma->vm_end - vma->vm_start);
    put_kb(&out, "KernelPageSize: ", page_size);
    put_kb(&out, "MMUPageSize:    ", page_size);
    // __show_smap()
    put_kb(&out, "Rss:            ", mss.resident);
    put_kb(&out, "Pss:            ", mss.pss >> PSS_SHIFT);
    put_kb(&out, "Pss_Dirty:      ", mss.pss_dirty >> PSS_SHIFT);
    put_kb(&out, "Shared_Clean:   ", mss.shared_clean);
    put_kb(&out, "Shared_Dirty:   ", mss.shared_dirty);
    put_kb(&out, "Private_Clean:  ", mss.private_clean);
    put_kb(&out, "Private_Dirty:  ", mss.private_dirty);
    put_kb(&out, "Referenced:     ", mss.referenced);
    put_kb(&out, "Anonymous:      ", mss.anonymous);
    put_kb(&out, "KSM:            ", mss.ksm);
    put_kb(&out, "LazyFree:       ", mss.lazyfree);
    put_kb(&out, "AnonHugePages:  ", mss.anonymous_thp);
    put_kb(&out, "ShmemPmdMapped: ", mss.shmem_thp);
    put_kb(&out, "FilePmdMapped:  ", mss.file_thp);
    put_kb(&out, "Shared_Hugetlb: ", mss.shared_hugetlb);
    put_kb(&out, "Private_Hugetlb: ", mss.private_hugetlb, 7);
    put_kb(&out, "Swap:           ", mss.swap);
    put_kb(&out, "SwapPss:        ", mss.swap_pss >> PSS_SHIFT);
    put_kb(&out, "Locked:         ", mss.pss_locked >> PSS_SHIFT);
    // v6.8+: eligible for THP of any order (THP_ORDERS_ALL), not only PMD size.
    bool eligible = thp_vma_allowable_orders(vma, vma->vm_flags, ~0ull) != 0;
    out += fmt::format("THPeligible:    {:>8}\n", eligible ? 1 : 0);
    out += vma_flags_text(vma->vm_flags);
  }
  mmap_read_unlock(mm);
  return out;
}

// task_mem(): the rss lines, counters summed as get_mm_counter_sum() does.
std::string proc_status_rss(Mm* mm) {
  auto kb = [](long pages) { return static_cast<uint64_t>(pages < 0 ? 0 : pages) << (PAGE_SHIFT - 10); };
  long anon = mm->get_mm_counter(MM_ANONPAGES);
  long file = mm->get_mm_counter(MM_FILEPAGES);
  long shmem = mm->get_mm_counter(MM_SHMEMPAGES);
  long swap = mm->get_mm_counter(MM_SWAPENTS);
  std::string s;
  s += fmt::format("VmRSS:\t{:>8} kB\n", kb(anon + file + shmem));
  s += fmt::format("RssAnon:\t{:>8} kB\n", kb(anon));
  s += fmt::format("RssFile:\t{:>8} kB\n", kb(file));
  s += fmt::format("RssShmem:\t{:>8} kB\n", kb(shmem));
  // mm_pgtables_bytes() counts the PTE, PMD and PUD tables (mm_inc_nr_ptes,
  // _pmds, _puds), never the PGD, which comes and goes with the mm; the
  // model's pgtables_bytes counts every table it allocates, the PGD too.
  long tables = mm->pgtables_bytes.load(std::memory_order_relaxed) - (mm->pgd ? static_cast<long>(PAGE_SIZE) : 0);
  s += fmt::format("VmPTE:\t{:>8} kB\n", static_cast<uint64_t>(tables < 0 ? 0 : tables) >> 10);
  s += fmt::format("VmSwap:\t{:>8} kB\n", kb(swap));
  s += fmt::format("HugetlbPages:\t{:>8} kB\n", kb(hugetlb_usage_pages(mm)));
  return s;
}

// The field names of the two texts above, for the scenario parser; the
// unit test proc_views_fields checks that each appears in the text.
bool smaps_field_known(const std::string& name) {
  static const std::set<std::string> kFields = {
      "Size",          "KernelPageSize", "MMUPageSize",    "Rss",           "Pss",          "Pss_Dirty",
      "Shared_Clean",  "Shared_Dirty",   "Private_Clean",  "Private_Dirty", "Referenced",   "Anonymous",
      "KSM",           "LazyFree",       "AnonHugePages",  "ShmemPmdMapped", "FilePmdMapped", "Shared_Hugetlb",
      "Private_Hugetlb", "Swap",         "SwapPss",        "Locked"};
  return kFields.count(name) != 0;
}

bool status_field_known(const std::string& name) {
  static const std::set<std::string> kFields = {"VmRSS", "RssAnon", "RssFile", "RssShmem", "VmPTE", "VmSwap", "HugetlbPages"};
  return kFields.count(name) != 0;
}

// The sum of the Pss lines of /proc/PID/smaps, in bytes, for a reader that
// runs beside the faults: the same accounting (smaps_account), but each PTE
// table under its lock and each PMD leaf under the PMD lock, as
// smaps_pte_range() takes them, so that no entry or folio changes under the
// count. hugetlb VMAs have no Pss (their smaps lines are Shared/Private_Hugetlb).
uint64_t proc_pss(Mm* mm) {
  MemSizeStats mss;
  mmap_read_lock(mm);
  for (auto& [start, v] : mm->vmas) {
    Vma* vma = v.get();
    if (vma->vm_flags & VM_HUGETLB) continue;
    smaps_pss_vma(vma, &mss);
  }
  mmap_read_unlock(mm);
  return mss.pss >> PSS_SHIFT;
}

// ---- /proc/PID/clear_refs ----

namespace {

// pte_is_pinned: a writable PTE of a maybe-pinned page keeps its state: the
// pinning device may write it without the page tables noticing.
bool pte_is_pinned(Vma* vma, uint64_t addr, pte_t pte) {
  if (!pte_write(pte)) return false;
  if (!is_cow_mapping(vma->vm_flags)) return false;
  if (!vma->vm_mm->test_flag(MMF_HAS_PINNED)) return false;
  Page* page = vm_normal_page(vma, addr, pte);
  return page && folio_maybe_dma_pinned(page_folio(page));
}

// clear_refs_pte_range(CLEAR_REFS_SOFT_DIRTY) over the whole VMA:
// clear_soft_dirty_pmd / clear_soft_dirty write-protect every present entry
// and clear its soft-dirty bit; swap PTEs lose their soft-dirty bit.
void clear_soft_dirty_vma(Vma* vma) {
  bool flush = false;
  walk_vma_pmds_locked(
      vma,
      [&](uint64_t addr, pmd_t* pmd, pmd_t cur) {
        // Invalidate first (see change_huge_pmd), keeping the A/D bits the
        // hardware may set meanwhile.
        pmd_t old = entry_xchg(pmd, pmd_mkinvalid(cur));
        flush_pmd_tlb_range(vma, addr & PMD_MASK, (addr & PMD_MASK) + PMD_SIZE);
        entry_set(pmd, pmd_clear_soft_dirty(pmd_wrprotect(old)));
      },
      [&](uint64_t addr, uint64_t next, pte_t* pte) {
        for (uint64_t a = addr; a < next; a += PAGE_SIZE, pte++) {
          pte_t ptent = ptep_get(pte);
          if (pte_none(ptent)) continue;
          if (pte_present(ptent)) {
            if (pte_is_pinned(vma, a, ptent)) continue;
            // ptep_modify_prot_start/commit.
            pte_t old = entry_xchg(pte, pte_t{0});
            entry_set(pte, pte_clear_soft_dirty(pte_wrprotect(old)));
            flush |= pte_write(old);
          } else {
            entry_set(pte, pte_swp_clear_soft_dirty(ptent));
          }
        }
      });
  if (flush) flush_tlb_range(vma, vma->vm_start, vma->vm_end);
}

}  // namespace

// clear_refs_write(CLEAR_REFS_SOFT_DIRTY): mmap_lock for write; every VMA
// loses VM_SOFTDIRTY (so soft-dirty tracking is on and mprotect() keeps
// clean PTEs read-only), and every entry is write-protected and cleaned.
void clear_refs_soft_dirty(Mm* mm) {
  mmap_write_lock(mm);
  for (auto& kv : mm->vmas) {
    Vma* vma = kv.second.get();
    if (vma_soft_dirty_enabled(vma)) continue;
    mmap_assert_write_locked(vma->vm_mm);
    vma_start_write(vma);  // vm_flags_clear
    vm_flags_reset(vma, vma->vm_flags & ~VM_SOFTDIRTY);
    vma_set_page_prot(vma);
  }
  for (auto& kv : mm->vmas) {
    Vma* vma = kv.second.get();
    // clear_refs_test_walk skips PFN maps; the walk has no hugetlb callback.
    if (vma->vm_flags & (VM_PFNMAP | VM_HUGETLB)) continue;
    clear_soft_dirty_vma(vma);
  }
  mmap_write_unlock(mm);
}

}  // namespace mmlab
