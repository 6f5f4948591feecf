// Process: the system calls of one user process, on its Mm.
#include "fmt/format.h"
#include "mm/filemap.h"
#include "mm/fork.h"
#include "mm/kernel.h"
#include "mm/madvise.h"
#include "mm/mm.h"
#include "mm/mmap.h"
#include "mm/mprotect.h"
#include "mm/mremap.h"
#include "mm/userfaultfd.h"
#include "mm/vmdebug.h"
#include "mmlab/system.h"
#include "pgtable/pagewalk.h"
#include "pgtable/pgtable.h"
#include "process/process_internal.h"

namespace mmlab {

Process::Process(System* sys, std::unique_ptr<Mm> mm, std::string name, int pid)
    : sys_(sys), mm_(std::move(mm)), name_(std::move(name)), pid_(pid) {}

Process::~Process() { exit(); }

long Process::mmap(uint64_t addr, uint64_t len, int prot, int flags, uint64_t off) {
  if (!mm_) return -ESRCH;
  if (off & ~PAGE_MASK) return -EINVAL;
  return do_mmap(mm_.get(), addr, len, prot, flags, off >> PAGE_SHIFT);
}

int Process::munmap(uint64_t addr, uint64_t len) { return mm_ ? do_munmap(mm_.get(), addr, len) : -ESRCH; }
int Process::mprotect(uint64_t addr, uint64_t len, int prot) {
  return mm_ ? do_mprotect(mm_.get(), addr, len, prot) : -ESRCH;
}
long Process::mremap(uint64_t addr, uint64_t old_len, uint64_t new_len, int flags, uint64_t new_addr) {
  return mm_ ? do_mremap(mm_.get(), addr, old_len, new_len, flags, new_addr) : -ESRCH;
}
int Process::madvise(uint64_t addr, uint64_t len, int advice) {
  return mm_ ? do_madvise(mm_.get(), addr, len, advice) : -ESRCH;
}

int Process::prctl_set_thp_disable(bool disable, unsigned long flags) {
  return mm_ ? mmlab::prctl_set_thp_disable(mm_.get(), disable, flags) : -ESRCH;
}
int Process::uffd_register(uint64_t addr, uint64_t len, unsigned modes) {
  if (!mm_) return -ESRCH;
  if (!modes || (modes & ~(kUffdMissing | kUffdWp))) return -EINVAL;
  vm_flags_t f = ((modes & kUffdMissing) ? VM_UFFD_MISSING : 0) | ((modes & kUffdWp) ? VM_UFFD_WP : 0);
  return userfaultfd_register(mm_.get(), addr, len, f);
}
int Process::uffd_writeprotect(uint64_t addr, uint64_t len, bool wp) {
  return mm_ ? mwriteprotect_range(mm_.get(), addr, len, wp) : -ESRCH;
}

void Process::exit() {
  if (!mm_) return;
  mmput(mm_.get());
  mm_.reset();
}

AccessResult Process::read(uint64_t addr, void* buf, uint64_t len) {
  if (!mm_) return {Signal::kSigsegv, addr};
  return user_read(mm_.get(), addr, buf, len);
}
AccessResult Process::write(uint64_t addr, const void* buf, uint64_t len) {
  if (!mm_) return {Signal::kSigsegv, addr};
  return user_write(mm_.get(), addr, buf, len);
}
AccessResult Process::fill(uint64_t addr, uint8_t byte, uint64_t len) {
  if (!mm_) return {Signal::kSigsegv, addr};
  return user_fill(mm_.get(), addr, byte, len);
}
AccessResult Process::read_expect(uint64_t addr, uint8_t byte, uint64_t len, int64_t* first_mismatch, uint8_t* found) {
  if (!mm_) return {Signal::kSigsegv, addr};
  return user_read_expect(mm_.get(), addr, byte, len, first_mismatch, found);
}

long Process::rss_anon() const { return mm_ ? mm_->get_mm_counter(MM_ANONPAGES) * static_cast<long>(PAGE_SIZE) : 0; }
long Process::rss_file() const { return mm_ ? mm_->get_mm_counter(MM_FILEPAGES) * static_cast<long>(PAGE_SIZE) : 0; }
long Process::rss_shmem() const { return mm_ ? mm_->get_mm_counter(MM_SHMEMPAGES) * static_cast<long>(PAGE_SIZE) : 0; }
long Process::pgtables_bytes() const { return mm_ ? mm_->pgtables_bytes.load() : 0; }

std::string Process::smaps() const { return mm_ ? proc_smaps(mm_.get()) : ""; }
long Process::pss() const { return mm_ ? static_cast<long>(proc_pss(mm_.get())) : 0; }
std::string Process::status_rss() const { return mm_ ? proc_status_rss(mm_.get()) : ""; }

std::vector<PteDumpEntry> Process::pagetable_dump(uint64_t start, uint64_t end) const {
  std::vector<PteDumpEntry> out;
  if (!mm_) return out;
  Mm* mm = mm_.get();
  PhysMem* phys = mm->phys;
  end = std::min(end, TASK_SIZE);
  auto order_of = [&](pfn_t pfn) {
    if (phys->is_zero_pfn(pfn) || !phys->pfn_valid(pfn)) return -1;
    return static_cast<int>(folio_order(page_folio(phys->pfn_to_page(pfn))));
  };
  PageWalkOps ops;
  ops.pud_leaf = [&](uint64_t a, pud_t* p) {
    pud_t v = pudp_get(p);
    out.push_back({a, 3, pud_pfn(v), v.v, order_of(pud_pfn(v)), false});
  };
  ops.pmd_leaf = [&](uint64_t a, pmd_t* p) {
    pmd_t v = pmdp_get(p);
    out.push_back({a, 2, pmd_pfn(v), v.v, order_of(pmd_pfn(v)), false});
  };
  ops.pte_entry = [&](uint64_t a, pte_t* p) {
    pte_t v = ptep_get(p);
    bool swap = !pte_present(v);
    out.push_back({a, 1, swap ? 0 : pte_pfn(v), v.v, swap ? -1 : order_of(pte_pfn(v)), swap});
  };
  walk_page_range(mm, start, end, ops);
  return out;
}

PageInfo Process::page_info(uint64_t addr) const {
  PageInfo info;
  if (!mm_) return info;
  Mm* mm = mm_.get();
  PhysMem* phys = mm->phys;
  mmap_read_lock(mm);
  auto entries = pagetable_dump(addr & PAGE_MASK, (addr & PAGE_MASK) + PAGE_SIZE);
  if (!entries.empty()) {
    const PteDumpEntry& e = entries.front();
    info.level = e.swap ? 0 : e.level;
    info.swap = e.swap;
    if (!e.swap) {
      uint64_t leaf = e.level == 3 ? PUD_SIZE : e.level == 2 ? PMD_SIZE : PAGE_SIZE;
      info.pfn = e.pfn + (((addr & PAGE_MASK) - e.addr) >> PAGE_SHIFT) * (leaf > PAGE_SIZE ? 1 : 0);
      info.writable = e.bits & _PAGE_RW;
      info.dirty = e.bits & _PAGE_DIRTY;
      info.young = e.bits & _PAGE_ACCESSED;
      info.soft_dirty = e.bits & _PAGE_SOFT_DIRTY;
      info.uffd_wp = e.bits & _PAGE_UFFD_WP;
      if (phys->pfn_valid(info.pfn)) {
        Page* page = phys->pfn_to_page(info.pfn);
        Folio* folio = page_folio(page);
        info.zero = phys->is_zero_pfn(info.pfn) || phys->is_huge_zero_pfn(info.pfn);
        info.order = static_cast<int>(folio_order(folio));
        info.anon = folio_test_anon(folio);
        Page* excl = e.level > 1 ? &folio->page : page;
        info.anon_exclusive = info.anon && PageAnonExclusive(excl);
        info.maybe_pinned = !info.zero && folio_maybe_dma_pinned(folio);
        info.refcount = folio_ref_count(folio);
        info.mapcount = folio_mapcount(folio);
        info.pincount = folio_pincount(folio);
        info.folio_dirty = folio_test_dirty(folio);
        info.referenced = folio_test_referenced(folio);
        info.active = folio_test_active(folio);
        info.lru = folio_test_lru(folio);
      }
    }
  }
  mmap_read_unlock(mm);
  return info;
}

std::string Process::folio_dump(uint64_t addr) const {
  if (!mm_) return "";
  Mm* mm = mm_.get();
  PhysMem* phys = mm->phys;
  std::string out;
  mmap_read_lock(mm);
  auto entries = pagetable_dump(addr & PAGE_MASK, (addr & PAGE_MASK) + PAGE_SIZE);
  if (!entries.empty() && !entries.front().swap) {
    const PteDumpEntry& e = entries.front();
    const pfn_t pfn = e.pfn + (e.level > 1 ? ((addr & PAGE_MASK) - e.addr) >> PAGE_SHIFT : 0);
    if (phys->pfn_valid(pfn)) {
      Page* page = phys->pfn_to_page(pfn);
      Folio* folio = page_folio(page);
      out = fmt::format("page {:#x} is page {} of its folio\n{}", pfn, pfn - phys->page_to_pfn(&folio->page), dump_folio(folio));
      // The mapping is a host pointer: name its kind, so that a run prints the same text each time.
      const size_t at = out.find("mapping:0x");
      const size_t end = at == std::string::npos ? at : out.find(' ', at);
      if (end != std::string::npos)
        out.replace(at, end - at, folio->page.mapping == 0 ? "mapping:none" : folio_test_anon(folio) ? "mapping:anon" : "mapping:file");
    }
  }
  mmap_read_unlock(mm);
  return out;
}

std::string Process::pagetable_dump_text(uint64_t start, uint64_t end) const {
  std::string s = "address          level  pfn       bits                    order\n";
  for (auto& e : pagetable_dump(start, end)) {
    std::string bits;
    auto add = [&](bool on, const char* n) {
      if (on) bits += bits.empty() ? n : std::string("|") + n;
    };
    if (e.swap) {
      add(true, "swap");
      add(e.bits & _PAGE_SWP_EXCLUSIVE, "exclusive");
    } else {
      add(e.bits & _PAGE_RW, "write");
      add(e.bits & _PAGE_DIRTY, "dirty");
      add(e.bits & _PAGE_ACCESSED, "young");
      add(e.bits & _PAGE_SPECIAL, "special");
      add(e.bits & _PAGE_SOFT_DIRTY, "soft-dirty");
      add(e.bits & _PAGE_UFFD_WP, "uffd-wp");
      add(!(e.bits & _PAGE_PRESENT), "protnone");
    }
    static const char* lv[] = {"", "pte", "pmd", "pud"};
    s += fmt::format("{:016x} {:<6} {:<9x} {:<23} {}\n", e.addr, lv[e.level], e.pfn, bits,
                     e.folio_order < 0 ? std::string("-") : std::to_string(e.folio_order));
  }
  return s;
}

// kernel_clone(), the address-space part (copy_mm), and the child Process
// registered with the System as new_process() does.
Process* Process::fork(const std::string& child_name, int* err) {
  int ret = -ESRCH;
  std::unique_ptr<Mm> mm = mm_ ? dup_mm(mm_.get(), &ret) : nullptr;
  if (err) *err = ret;
  if (!mm) return nullptr;
  return sys_->add_process(std::move(mm), child_name);
}

long Process::mmap_file(uint64_t addr, uint64_t len, int prot, int flags, int fd, uint64_t off) {
  return mm_ ? ksys_mmap_pgoff(mm_.get(), addr, len, prot, flags, fd, off) : -ESRCH;
}

void Process::clear_soft_dirty() {
  if (mm_) clear_refs_soft_dirty(mm_.get());
}

}  // namespace mmlab
