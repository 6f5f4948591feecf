// The whole-system invariant checker; see
// check/checker.h for what it promises and when it may run.
//
// One pass over every live mm's page tables (walk_page_range) records, per
// folio, the entries that map it (per page, per mm, PTE or entire) and, per
// mm, its rss and its page-table pages; per-entry invariants (writable ⇒
// AnonExclusive, zero pages read-only, leaf geometry) are checked as entries
// are met. Then the recorded counts are compared with what the folios store,
// the deferred split queue and the deferred table list are audited, and a
// scan of the frame store proves that every frame is free, a zero page, a
// page-table page, or held by a mapping or a known holder.
#include "check/checker.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "mm/hugetlb.h"
#include "mm/file.h"
#include "mm/swapfile.h"
#include "mm/kernel.h"
#include "mm/mm.h"
#include "mm/debug.h"
#include "pgtable/entry.h"
#include "pgtable/pagewalk.h"
#include "pgtable/pgtable.h"
#include "phys/phys.h"

namespace mmlab {
namespace {

// Report at most this many findings of one invariant, then a summary line.
constexpr long kMaxPerInvariant = 20;

template <typename T>
T ld(const T& x) {
  return aref(const_cast<T&>(x)).load(std::memory_order_acquire);
}

const char* level_name(int level) { return level == 1 ? "PTE" : level == 2 ? "PMD" : "PUD"; }

const char* counter_name(int c) {
  switch (c) {
    case MM_FILEPAGES: return "MM_FILEPAGES";
    case MM_ANONPAGES: return "MM_ANONPAGES";
    case MM_SWAPENTS: return "MM_SWAPENTS";
    case MM_SHMEMPAGES: return "MM_SHMEMPAGES";
    default: return "?";
  }
}

// What the frame scan knows about each pfn.
enum FrameState : uint8_t {
  kUnseen = 0,
  kZeroPage,       // the shared zero page
  kHugeZero,       // the huge zero folio
  kTable,          // a page-table page of a live mm (linked or deposited)
  kDeferredTable,  // a page-table page waiting for its grace period
  kMapped,         // part of a folio some live mm maps
};

class Reporter {
 public:
  void add(const std::string& invariant, std::string where, std::string dump) {
    long n = ++counts_[invariant];
    if (n <= kMaxPerInvariant) out_.push_back({invariant, std::move(where), std::move(dump)});
  }
  // A line that is never capped (the leak total).
  void add_uncapped(Violation v) { out_.push_back(std::move(v)); }
  CheckReport finish() {
    for (auto& [inv, n] : counts_)
      if (n > kMaxPerInvariant)
        out_.push_back({inv, "(summary)", fmt::format("{} more not shown ({} in all)", n - kMaxPerInvariant, n)});
    CheckReport r;
    r.violations = std::move(out_);
    return r;
  }

 private:
  std::vector<Violation> out_;
  std::map<std::string, long> counts_;
};

struct MmUse;

// Everything the page tables say about one folio.
struct FolioUse {
  long ptes = 0;                      // PTEs mapping any page of it
  long entire = 0;                    // PMD/PUD entries mapping it
  long entire_writable = 0;
  std::vector<int32_t> page_ptes;     // large folios: PTEs per page (allocated on the first PTE)
  std::vector<std::pair<int, long>> per_mm;  // (mm_id, mappings in that mm)
  // The first mapping met, for the report (formatted only when reporting).
  const MmUse* first_mm = nullptr;
  uint64_t first_addr = 0;
  int first_level = 0;

  void add_mm(int id) {
    for (auto& [m, n] : per_mm)
      if (m == id) {
        n++;
        return;
      }
    per_mm.push_back({id, 1});
  }
  long in_mm(int id) const {
    for (auto& [m, n] : per_mm)
      if (m == id) return n;
    return 0;
  }
};

// Everything the page tables say about one mm.
struct MmUse {
  const CheckedMm* proc = nullptr;
  Mm* mm = nullptr;
  long rss[NR_MM_COUNTERS] = {};
  long tables = 0;  // linked and deposited table pages
  // PMD table page -> (deposited tables, PMD leaves that need a deposit)
  std::unordered_map<Page*, std::pair<long, long>> pmd_tables;
  Vma* last_vma = nullptr;  // lookup cache: walks visit addresses in order
};

std::vector<uint8_t>& frame_state_buffer() {
  static thread_local std::vector<uint8_t> buf;
  return buf;
}

class Checker {
 public:
  Checker(Kernel* k, const std::vector<CheckedMm>& mms, const CheckerExtraRefs& extra)
      : live_(mms), k_(k), phys_(k_->phys.get()), extra_(extra) {}

  CheckReport run() {
    state_.assign(phys_->nr_frames(), kUnseen);
    snapshot_queues();
    note_zero_pages();
    for (const CheckedMm& p : live_) {
      if (!p.mm) continue;  // exited: its mm is gone
      mms_.push_back(MmUse{});
      mms_.back().proc = &p;
      mms_.back().mm = p.mm;
    }
    // mms_ is complete before the walks: FolioUse keeps pointers into it.
    for (MmUse& mu : mms_) walk_mm(mu);
    for (MmUse& mu : mms_) check_mm_totals(mu);
    check_folios();
    check_zero_pages();
    check_split_queue();
    check_swap();
    check_hugetlb();
    check_deferred_tables();
    check_table_stat();
    check_frames();
    return rep_.finish();
  }

 private:
  // ---- helpers ----

  long extra(const Folio* f) const { return extra_ ? extra_(f) : 0; }

  std::string where(const MmUse& mu, uint64_t addr, const char* what) const {
    return fmt::format("{} (pid {}) {:#x} {}", mu.proc->name, mu.proc->pid, addr, what);
  }

  std::string table_dump(const Page* t) const {
    return fmt::format("table page pfn:{:#x} flags:{:#x} refcount:{} free:{}", phys_->page_to_pfn(t),
                       ld(t->flags) & ~PG_ORDER_MASK, ld(t->refcount), phys_->page_is_free(phys_->page_to_pfn(t)));
  }

  void mark(pfn_t start, uint64_t n, FrameState s) {
    uint64_t end = std::min<uint64_t>(start + n, state_.size());
    for (pfn_t p = start; p < end; p++) state_[p] = s;
  }

  // The VMA containing addr, without mmap_lock (the system is quiescent and
  // the caller holds vma_tree_lock shared).
  Vma* vma_at(MmUse& mu, uint64_t addr) {
    if (mu.last_vma && addr >= mu.last_vma->vm_start && addr < mu.last_vma->vm_end) return mu.last_vma;
    auto& tree = mu.mm->vmas;
    auto it = tree.upper_bound(addr);
    if (it == tree.begin()) return nullptr;
    --it;
    Vma* v = it->second.get();
    if (addr >= v->vm_end) return nullptr;
    mu.last_vma = v;
    return v;
  }

  // Copy the queues that have locks of their own: the deferred split queue
  // and the deferred-free table list.
  void snapshot_queues() {
    {
      MutexGuard g(&k_->split_queue_lock);
      split_queue_ = k_->split_queue;
    }
    MutexGuard g(&k_->deferred_tables.lock);
    for (auto& d : k_->deferred_tables.tables) deferred_tables_.push_back(d.table);
  }

  void note_zero_pages() {
    state_[phys_->zero_pfn()] = kZeroPage;
    if (Folio* hz = phys_->huge_zero_folio()) mark(folio_pfn(hz), folio_nr_pages(hz), kHugeZero);
  }

  // ---- the walk ----

  void walk_mm(MmUse& mu) {
    Mm* mm = mu.mm;
    // Stands in for RCU over the VMA tree: vma_at() reads it.
    ReadGuard tree(&mm->vma_tree_lock);
    PageWalkOps ops;
    ops.table = [&](int level, uint64_t addr, Page* t) { visit_table(mu, level, addr, t); };
    ops.pte_entry = [&](uint64_t addr, pte_t* pte) { visit_pte(mu, addr, pte); };
    ops.pmd_leaf = [&](uint64_t addr, pmd_t* pmd) {
      pmd_t v = pmdp_get(pmd);
      visit_huge_leaf(mu, 2, addr, pmd_pfn(v), pmd_write(v), pmd_special(v), table_page_of(phys_, pmd));
    };
    ops.pud_leaf = [&](uint64_t addr, pud_t* pud) {
      pud_t v = pudp_get(pud);
      visit_huge_leaf(mu, 3, addr, pud_pfn(v), pud_write(v), pud_special(v), nullptr);
    };
    walk_page_range(mm, 0, TASK_SIZE, ops);
  }

  // Each table page of an mm: linked (levels 4..1) or deposited under a PMD leaf (0).
  void account_table(MmUse& mu, int level, uint64_t addr, Page* t) {
    static const char* names[] = {"deposited PTE table", "PTE table", "PMD table", "PUD table", "PGD"};
    pfn_t pfn = phys_->page_to_pfn(t);
    if (!phys_->pfn_valid(pfn)) {
      rep_.add("page-table page outside RAM", where(mu, addr, names[level]), fmt::format("pfn {:#x}", pfn));
      return;
    }
    mu.tables++;
    if (phys_->page_is_free(pfn)) {
      rep_.add("page-table page is free", where(mu, addr, names[level]), table_dump(t));
      return;
    }
    if (!PageTable(t)) rep_.add("page-table page without PG_table", where(mu, addr, names[level]), table_dump(t));
    if (level <= 2 && level >= 1 && t->pt.ptl.is_locked())
      rep_.add("page-table lock held in a quiescent system", where(mu, addr, names[level]), table_dump(t));
    if (state_[pfn] == kTable) {
      rep_.add("page-table page reachable twice", where(mu, addr, names[level]), table_dump(t));
      return;
    }
    state_[pfn] = kTable;
  }

  void visit_table(MmUse& mu, int level, uint64_t addr, Page* t) {
    account_table(mu, level, addr, t);
    if (level != 2) return;
    // The PTE tables deposited under this PMD table's leaves
    // (pgtable_trans_huge_deposit): a list headed at the PMD table page's
    // pt.free_next, linked through each deposited page's pt.free_next.
    long n = 0;
    for (auto* d = reinterpret_cast<Page*>(ld(t->pt.free_next)); d; d = reinterpret_cast<Page*>(ld(d->pt.free_next))) {
      if (++n > static_cast<long>(PTRS_PER_PMD)) {
        rep_.add("deposited page-table list corrupt", where(mu, addr, "PMD table"), table_dump(t));
        break;
      }
      if (!phys_->pfn_valid(phys_->page_to_pfn(d))) {
        rep_.add("deposited page-table list corrupt", where(mu, addr, "PMD table"),
                 fmt::format("{}; deposit at {:p} is not a Page", table_dump(t), static_cast<void*>(d)));
        break;
      }
      account_table(mu, 0, addr, d);
    }
    mu.pmd_tables[t].first = n;
  }

  // The folio a present leaf maps, or nullptr (reported) if the frame is free.
  Folio* mapped_folio(MmUse& mu, int level, uint64_t addr, Page* page) {
    pfn_t pfn = phys_->page_to_pfn(page);
    if (phys_->page_is_free(pfn)) {
      rep_.add(fmt::format("{} maps a freed frame", level_name(level)), where(mu, addr, level_name(level)),
               fmt::format("pfn {:#x} is on the free lists", pfn));
      return nullptr;
    }
    if (PageTable(page)) {
      rep_.add(fmt::format("{} maps a page-table page", level_name(level)), where(mu, addr, level_name(level)),
               table_dump(page));
      return nullptr;
    }
    Folio* folio = page_folio(page);
    if (folio_ref_count(folio) <= 0) {
      rep_.add(fmt::format("{} maps a freed frame", level_name(level)), where(mu, addr, level_name(level)),
               dump_folio(folio));
      return nullptr;
    }
    return folio;
  }

  FolioUse& use_of(Folio* folio, const MmUse& mu, uint64_t addr, int level) {
    auto [it, fresh] = folios_.try_emplace(folio);
    if (fresh) {
      it->second.first_mm = &mu;
      it->second.first_addr = addr;
      it->second.first_level = level;
      mark(folio_pfn(folio), folio_nr_pages(folio), kMapped);
    }
    return it->second;
  }

  void visit_pte(MmUse& mu, uint64_t addr, pte_t* ptep) {
    pte_t pte = ptep_get(ptep);
    Vma* vma = vma_at(mu, addr);
    if (!vma) rep_.add("page-table entry outside any VMA", where(mu, addr, "PTE"), fmt::format("pte {:#x}", pte.v));
    if (!pte_present(pte)) {
      swp_entry_t e = pte_to_swp_entry(pte);
      if (!non_swap_entry(e)) {
        mu.rss[MM_SWAPENTS]++;
        swap_refs_[e.val]++;
      }
      return;
    }
    pfn_t pfn = pte_pfn(pte);
    if (phys_->is_zero_pfn(pfn)) {
      if (pte_write(pte)) rep_.add("zero page mapped writable", where(mu, addr, "PTE"), fmt::format("pte {:#x}", pte.v));
      if (!pte_special(pte)) rep_.add("zero-page PTE not special", where(mu, addr, "PTE"), fmt::format("pte {:#x}", pte.v));
      return;
    }
    bool pfnmap = vma && (vma->vm_flags & (VM_PFNMAP | VM_MIXEDMAP));
    if (!phys_->pfn_valid(pfn)) {
      if (!(pte_special(pte) && pfnmap))
        rep_.add("PTE maps a pfn outside RAM", where(mu, addr, "PTE"), fmt::format("pte {:#x}", pte.v));
      return;
    }
    if (phys_->is_huge_zero_pfn(pfn)) {
      rep_.add("huge zero folio mapped by a PTE", where(mu, addr, "PTE"), dump_folio(phys_->huge_zero_folio()));
      if (pte_write(pte)) rep_.add("zero page mapped writable", where(mu, addr, "PTE"), fmt::format("pte {:#x}", pte.v));
      return;
    }
    if (pte_special(pte)) {
      // vm_normal_page() gives no page: no mapcount, no reference, no rss.
      if (!pfnmap)
        rep_.add("special PTE maps a page outside a PFN map", where(mu, addr, "PTE"), fmt::format("pte {:#x}", pte.v));
      return;
    }
    Page* page = phys_->pfn_to_page(pfn);
    Folio* folio = mapped_folio(mu, 1, addr, page);
    if (!folio) return;
    FolioUse& fu = use_of(folio, mu, addr, 1);
    fu.ptes++;
    fu.add_mm(mu.mm->mm_id);
    if (folio_test_large(folio)) {
      if (fu.page_ptes.empty()) fu.page_ptes.assign(folio_nr_pages(folio), 0);
      fu.page_ptes[folio_page_idx(folio, page)]++;
    }
    bool anon = folio_test_anon(folio);
    if (anon && pte_write(pte) && !PageAnonExclusive(page)) {
      // Also "shared anon is read-only": in a CoW mapping a !AnonExclusive page may be shared.
      rep_.add("writable PTE maps !PageAnonExclusive anon page",
               fmt::format("{} (page {} of the folio{})", where(mu, addr, "PTE"), folio_page_idx(folio, page),
                           vma && is_cow_mapping(vma->vm_flags) ? ", CoW mapping" : ""),
               dump_folio(folio));
    }
    if (!folio_test_hugetlb(folio)) mu.rss[anon ? MM_ANONPAGES : mm_counter_file(folio)]++;
  }

  // A present PMD (level 2) or PUD (level 3) leaf.
  void visit_huge_leaf(MmUse& mu, int level, uint64_t addr, pfn_t pfn, bool write, bool special, Page* pmd_table) {
    const char* lv = level_name(level);
    Vma* vma = vma_at(mu, addr);
    if (!vma) rep_.add("page-table entry outside any VMA", where(mu, addr, lv), fmt::format("pfn {:#x}", pfn));
    bool hugetlb_vma = vma && (vma->vm_flags & VM_HUGETLB);
    unsigned order = level == 2 ? PMD_ORDER : PUD_ORDER;
    if (!is_aligned(pfn, 1ull << order))
      rep_.add(fmt::format("{} leaf maps a pfn that is not {}-aligned", lv, lv), where(mu, addr, lv),
               fmt::format("pfn {:#x}", pfn));
    // Every PMD leaf of an anonymous VMA (a THP or the huge zero folio)
    // keeps a deposited PTE table for its split; a file PMD has none (x86).
    if (pmd_table && !hugetlb_vma && vma && vma_is_anonymous(vma)) mu.pmd_tables[pmd_table].second++;
    if (phys_->is_zero_pfn(pfn)) {
      rep_.add(fmt::format("{} leaf maps the shared zero page", lv), where(mu, addr, lv), fmt::format("pfn {:#x}", pfn));
      return;
    }
    if (phys_->is_huge_zero_pfn(pfn)) {
      Folio* hz = phys_->huge_zero_folio();
      if (level != 2 || pfn != folio_pfn(hz))
        rep_.add("huge zero leaf does not map the folio head", where(mu, addr, lv), dump_folio(hz));
      if (write) rep_.add("zero page mapped writable", where(mu, addr, lv), dump_folio(hz));
      if (!mu.mm->test_flag(MMF_HUGE_ZERO_PAGE))
        rep_.add("huge zero PMD in an mm without MMF_HUGE_ZERO_PAGE", where(mu, addr, lv), dump_folio(hz));
      return;
    }
    bool pfnmap = vma && (vma->vm_flags & (VM_PFNMAP | VM_MIXEDMAP));
    if (!phys_->pfn_valid(pfn)) {
      if (!(special && pfnmap))
        rep_.add(fmt::format("{} maps a pfn outside RAM", lv), where(mu, addr, lv), fmt::format("pfn {:#x}", pfn));
      return;
    }
    if (special) {
      if (!pfnmap)
        rep_.add(fmt::format("special {} maps a page outside a PFN map", lv), where(mu, addr, lv),
                 fmt::format("pfn {:#x}", pfn));
      return;
    }
    Page* page = phys_->pfn_to_page(pfn);
    Folio* folio = mapped_folio(mu, level, addr, page);
    if (!folio) return;
    if (page != &folio->page)
      rep_.add(fmt::format("{} leaf does not map the folio head", lv), where(mu, addr, lv), dump_folio(folio));
    if (folio_order(folio) != order)
      rep_.add(fmt::format("{} leaf maps a folio that is not order {}", lv, order), where(mu, addr, lv),
               dump_folio(folio));
    FolioUse& fu = use_of(folio, mu, addr, level);
    fu.entire++;
    fu.add_mm(mu.mm->mm_id);
    if (write) fu.entire_writable++;
    bool anon = folio_test_anon(folio);
    if (anon && write && !PageAnonExclusive(&folio->page))
      rep_.add(fmt::format("writable {} maps !PageAnonExclusive anon page", lv), where(mu, addr, lv),
               dump_folio(folio));
    if (!folio_test_hugetlb(folio) && !hugetlb_vma)
      mu.rss[anon ? MM_ANONPAGES : mm_counter_file(folio)] += 1l << order;
  }

  // ---- per-mm totals ----

  void check_mm_totals(MmUse& mu) {
    Mm* mm = mu.mm;
    std::string who = fmt::format("{} (pid {})", mu.proc->name, mu.proc->pid);
    for (int c : {MM_ANONPAGES, MM_FILEPAGES, MM_SHMEMPAGES, MM_SWAPENTS}) {
      long stored = mm->get_mm_counter(static_cast<MmCounter>(c));
      if (stored != mu.rss[c])
        rep_.add("rss counter mismatch", fmt::format("{} {}", who, counter_name(c)),
                 fmt::format("stored {} pages, page tables map {}", stored, mu.rss[c]));
    }
    long bytes = mm->pgtables_bytes.load(std::memory_order_relaxed);
    if (bytes != mu.tables * static_cast<long>(PAGE_SIZE))
      rep_.add("mm->pgtables_bytes mismatch", who,
               fmt::format("pgtables_bytes {} ({} pages), tables reachable {}", bytes, bytes / static_cast<long>(PAGE_SIZE),
                           mu.tables));
    for (auto& [t, dl] : mu.pmd_tables) {
      if (dl.first != dl.second)
        rep_.add("deposited page tables != PMD leaves", who,
                 fmt::format("{}: {} deposited, {} PMD leaves", table_dump(t), dl.first, dl.second));
    }
    if (mm->test_flag(MMF_HUGE_ZERO_PAGE)) huge_zero_users_++;
    nr_tables_ += mu.tables;
  }

  // ---- per-folio invariants ----

  void check_folios() {
    for (auto& [folio, fu] : folios_) check_folio(folio, fu);
  }

  std::string where(const FolioUse& fu) const {
    return where(*fu.first_mm, fu.first_addr, level_name(fu.first_level));
  }

  void check_folio(Folio* folio, const FolioUse& fu) {
    // Formatted only when reporting: most folios have nothing to report.
    auto w = [&] { return where(fu); };
    bool large = folio_test_large(folio);
    bool anon = folio_test_anon(folio);
    long nr = folio_nr_pages(folio);
    long mappings = fu.ptes + fu.entire;
    auto page_ptes = [&](long i) -> long { return fu.page_ptes.empty() ? 0 : fu.page_ptes[i]; };

    if (folio_test_locked(folio)) rep_.add("folio lock held in a quiescent system", w(), dump_folio(folio));

    // Mapcounts.
    long pte_mapped_pages = 0;
    if (!large) {
      pte_mapped_pages = fu.ptes > 0;
      if (folio_mapcount(folio) != mappings)
        rep_.add("folio_mapcount mismatch", w(),
                 fmt::format("stored {}, page tables {}\n{}", folio_mapcount(folio), mappings, dump_folio(folio)));
    } else {
      const Page* p1 = folio_page(folio, 1);
      if (folio_large_mapcount(folio) != mappings)
        rep_.add("folio_large_mapcount mismatch", w(),
                 fmt::format("stored {}, page tables {} ({} PTEs + {} entire)\n{}", folio_large_mapcount(folio),
                             mappings, fu.ptes, fu.entire, dump_folio(folio)));
      if (folio_entire_mapcount(folio) != fu.entire)
        rep_.add("folio_entire_mapcount mismatch", w(),
                 fmt::format("stored {}, page tables {}\n{}", folio_entire_mapcount(folio), fu.entire, dump_folio(folio)));
      long bad = 0, first_bad = -1;
      for (long i = 0; i < nr; i++) {
        long want = page_ptes(i);
        pte_mapped_pages += want > 0;
        if (page_mapcount(folio_page(folio, i)) != want && bad++ == 0) first_bad = i;
      }
      if (bad)
        rep_.add("page mapcount mismatch", w(),
                 fmt::format("{} pages differ; page {} stores {}, page tables {}\n{}", bad, first_bad,
                             page_mapcount(folio_page(folio, first_bad)), page_ptes(first_bad), dump_folio(folio)));
      if (ld(p1->f1.nr_pages_mapped) != pte_mapped_pages)
        rep_.add("folio nr_pages_mapped mismatch", w(),
                 fmt::format("stored {}, pages PTE-mapped {}\n{}", ld(p1->f1.nr_pages_mapped), pte_mapped_pages,
                             dump_folio(folio)));
      check_mm_id(folio, fu);
      if (test_bit(PG_mapcount_lock, p1)) rep_.add("large mapcount lock held in a quiescent system", w(), dump_folio(folio));
    }

    // References and pins.
    long refs = folio_ref_count(folio);
    long pins = folio_has_pincount(folio) ? folio_pincount(folio) : 0;
    long cache = (folio_test_swapcache(folio) || (!anon && ld(folio->page.mapping) != 0)) ? nr : 0;
    long ext = extra(folio);
    if (pins > refs)
      rep_.add("pins exceed references", w(), fmt::format("pincount {} > refcount {}\n{}", pins, refs, dump_folio(folio)));
    long floor = mappings + pins + cache;
    if (refs < floor)
      rep_.add("folio_ref_count(folio) < mappings (refcount floor)", w(),
               fmt::format("refcount {} < {} mappings + {} pins + {} cache\n{}", refs, mappings, pins, cache,
                           dump_folio(folio)));
    else if (refs != floor + ext)
      rep_.add("folio_ref_count(folio) != expected (refcount floor)", w(),
               fmt::format("refcount {} != {} mappings + {} pins + {} cache + {} held elsewhere\n{}", refs, mappings,
                           pins, cache, ext, dump_folio(folio)));

    if (!anon) return;

    // AnonExclusive: an exclusive page has one mapping in all.
    long shared_excl = 0, first = -1;
    for (long i = 0; i < nr; i++) {
      long maps = page_ptes(i) + (large ? fu.entire : 0);
      if (!large) maps = mappings;
      if (maps > 1 && PageAnonExclusive(folio_page(folio, i)) && shared_excl++ == 0) first = i;
    }
    if (shared_excl)
      rep_.add("PageAnonExclusive on a page mapped more than once", w(),
               fmt::format("{} pages; page {} has {} mappings\n{}", shared_excl, first,
                           large ? page_ptes(first) + fu.entire : mappings, dump_folio(folio)));
    // A maybe-pinned page that is still mapped stays exclusive. For a large
    // folio the pincount does not say which page is pinned, so only a
    // PMD-only mapping (whose head carries the bit) can be checked.
    bool pinned_small = !large && refs - mappings - cache >= GUP_PIN_COUNTING_BIAS;
    if (pinned_small && mappings > 0 && !PageAnonExclusive(&folio->page))
      rep_.add("pinned anon page not PageAnonExclusive", w(), dump_folio(folio));
    if (large && pins > 0 && fu.entire > 0 && fu.ptes == 0 && !PageAnonExclusive(&folio->page))
      rep_.add("pinned anon page not PageAnonExclusive", w(), dump_folio(folio));

    // Deferred split.
    if (large) check_deferred(folio, fu);
  }

  // MM-ID: each slot counts the mappings its mm added since it took the
  // slot. An mm that mapped the folio while both slots were taken and took
  // one later has mappings the slot never counted (the kernel's "valid
  // corner cases" of a per-MM underflow), so the count is exact only while
  // "maybe mapped shared" is clear, and otherwise a lower bound; with the
  // bit clear, one mm holds every mapping.
  void check_mm_id(Folio* folio, const FolioUse& fu) {
    const Page* p1 = folio_page(folio, 1);
    int ids[2] = {ld(p1->mm_id[0]), ld(p1->mm_id[1])};
    int counts[2] = {ld(p1->mm_id_mapcount[0]), ld(p1->mm_id_mapcount[1])};
    const bool shared = test_bit(PG_maybe_shared, p1);
    for (int s = 0; s < 2; s++) {
      if (!ids[s]) continue;
      const long maps = fu.in_mm(ids[s]);
      if (shared ? counts[s] <= 0 || counts[s] > maps : counts[s] != maps)
        rep_.add("MM-ID slot mapcount mismatch", where(fu),
                 fmt::format("slot {} (mm {}) stores {}, page tables {}\n{}", s, ids[s], counts[s], fu.in_mm(ids[s]),
                             dump_folio(folio)));
    }
    if (ids[0] && ids[0] == ids[1])
      rep_.add("MM-ID slots hold one mm twice", where(fu), dump_folio(folio));
    if (shared) return;
    if (fu.per_mm.size() > 1) {
      std::string mms;
      for (auto& [id, n] : fu.per_mm) mms += fmt::format(" mm {}: {}", id, n);
      rep_.add("maybe_mapped_shared clear but mapped in two mms", where(fu),
               fmt::format("mappings by mm:{}\n{}", mms, dump_folio(folio)));
    } else if (fu.per_mm.size() == 1 && ids[0] != fu.per_mm[0].first && ids[1] != fu.per_mm[0].first) {
      rep_.add("maybe_mapped_shared clear but the mapping mm has no MM-ID slot", where(fu), dump_folio(folio));
    }
  }

  void check_deferred(Folio* folio, const FolioUse& fu) {
    auto w = [&] { return where(fu); };
    Page* p1 = folio_page(folio, 1);
    bool flagged = test_bit(PG_partially_mapped, p1);
    bool in_queue = split_queue_.count(folio) != 0;
    if (folio_order(folio) < 2) {
      if (flagged || test_bit(PG_deferred_list, p1))
        rep_.add("deferred list: folio of order < 2 queued", w(), dump_folio(folio));
      return;
    }
    if (test_bit(PG_deferred_list, p1) != in_queue)
      rep_.add("deferred list: PG_deferred_list disagrees with the split queue", w(),
               fmt::format("flag {}, on queue {}\n{}", test_bit(PG_deferred_list, p1), in_queue, dump_folio(folio)));
    // The flag says the folio was partially mapped since it was queued, not
    // that it is now: it is only cleared when the folio leaves the queue
    // (deferred_split_folio() never unsets it), so a split whose refcount
    // freeze failed after unmap_folio() flagged it leaves it set on the
    // remapped folio, and a failed migration on a folio mapped by a PMD
    // again. Only "flagged, so queued" holds.
    if (flagged && !in_queue)
      rep_.add("deferred list: partially mapped folio not on the split queue", w(), dump_folio(folio));
  }

  // ---- global objects ----

  void check_zero_pages() {
    Folio* zero = reinterpret_cast<Folio*>(phys_->zero_page());
    if (!PageReserved(&zero->page)) rep_.add("zero page lost PG_reserved", "zero page", dump_folio(zero));
    if (folio_ref_count(zero) != 1 + extra(zero))
      rep_.add("zero page refcount changed", "zero page",
               fmt::format("refcount {}, expected 1 + {} held elsewhere", folio_ref_count(zero), extra(zero)));
    if (Folio* hz = phys_->huge_zero_folio()) {
      // One reference of the global holder, one per mm with MMF_HUGE_ZERO_PAGE.
      long want = 1 + huge_zero_users_ + extra(hz);
      if (folio_ref_count(hz) != want)
        rep_.add("huge zero folio refcount mismatch", "huge zero folio",
                 fmt::format("refcount {}, expected 1 + {} mms with MMF_HUGE_ZERO_PAGE + {} held elsewhere\n{}",
                             folio_ref_count(hz), huge_zero_users_, extra(hz), dump_folio(hz)));
    }
  }

  void check_split_queue() {
    std::vector<long> partially(kMthpOrders, 0);
    for (Folio* f : split_queue_) {
      pfn_t pfn = phys_->page_to_pfn(&f->page);
      std::string w = fmt::format("split queue pfn {:#x}", pfn);
      if (!phys_->pfn_valid(pfn)) {
        rep_.add("deferred list holds a pointer outside the memmap", w, "");
        continue;
      }
      if (phys_->page_is_free(pfn) || folio_ref_count(f) <= 0) {
        rep_.add("deferred list holds a freed folio", w, dump_folio(f));
        continue;
      }
      if (!folio_test_large(f) || folio_order(f) < 2) {
        rep_.add("deferred list: folio of order < 2 queued", w, dump_folio(f));
        continue;
      }
      Page* p1 = folio_page(f, 1);
      bool flagged = test_bit(PG_partially_mapped, p1);
      if (flagged && folio_order(f) < kMthpOrders) partially[folio_order(f)]++;
      if (folios_.count(f)) continue;  // mapped: checked with its mappings
      if (!test_bit(PG_deferred_list, p1))
        rep_.add("deferred list: PG_deferred_list disagrees with the split queue", w, dump_folio(f));
      if (folio_mapcount(f) != 0)
        rep_.add("folio_large_mapcount mismatch", w,
                 fmt::format("stored {}, no live mm maps it\n{}", folio_mapcount(f), dump_folio(f)));
      // Unmapped yet queued: someone must hold it; the frame scan decides.
      queued_unmapped_.insert(f);
    }
    for (unsigned o = 2; o < kMthpOrders; o++) {
      int64_t stat = k_->stats->read_mthp(o, MthpStat::nr_anon_partially_mapped);
      if (stat != partially[o])
        rep_.add("nr_anon_partially_mapped mismatch", fmt::format("order {}", o),
                 fmt::format("statistic {}, flagged folios on the queue {}", stat, partially[o]));
    }
  }

  // Swap: each slot's count is the number of swap PTEs naming it; the swap
  // cache holds a folio for a slot exactly when SWAP_HAS_CACHE is set, and
  // that folio is in the swap cache under the slot's entry; no swap PTE names
  // a free slot. An unmapped swap-cache folio that no swap PTE needs is an
  // orphan: the kernel's LRU reclaim would free it, the model never would.
  // shmem's swapped-out pages: each swap entry a file holds in place of a
  // folio counts like a swap PTE (one swap count). Files are reached through
  // the file table and through the VMAs of the live mms (shared anonymous
  // memory has no fd).
  void note_shmem_swap() {
    std::set<File*> files;
    {
      FileTable* t = k_->files.get();
      MutexGuard g(&t->lock);
      for (auto& [fd, f] : t->files) files.insert(f.get());
    }
    for (MmUse& mu : mms_)
      for (auto& [start, vma] : mu.mm->vmas)
        if (vma->vm_file) files.insert(vma->vm_file.get());
    for (File* f : files) {
      MutexGuard g(&f->lock);
      for (auto& [index, entry] : f->swapped) {
        swap_refs_[entry.val]++;
        if (f->pages.count(index))
          rep_.add("shmem index both cached and swapped", fmt::format("file {} index {:#x}", f->name, index), "");
      }
    }
  }

  void check_swap() {
    note_shmem_swap();
    std::unordered_map<uint64_t, unsigned> counts;
    swap_for_each_slot(k_, [&](swp_entry_t e, unsigned count, bool, Folio*) { counts[e.val] = count; });
    auto swapped = [&](const Folio* f) {
      for (long i = 0; i < folio_nr_pages(f); i++) {
        auto it = counts.find(folio_swap_entry(f).val + static_cast<uint64_t>(i));
        if (it != counts.end() && it->second) return true;
      }
      return false;
    };
    swap_for_each_slot(k_, [&](swp_entry_t e, unsigned count, bool has_cache, Folio* cached) {
      std::string w = fmt::format("swap slot {}:{:#x}", swp_type(e), swp_offset(e));
      auto it = swap_refs_.find(e.val);
      long ptes = it == swap_refs_.end() ? 0 : it->second;
      if (it != swap_refs_.end()) swap_refs_.erase(it);
      if (static_cast<long>(count) != ptes)
        rep_.add("swap_map count != swap PTEs", w, fmt::format("swap_map count {}, swap PTEs {}", count, ptes));
      if (has_cache != (cached != nullptr))
        rep_.add("SWAP_HAS_CACHE disagrees with the swap cache", w, fmt::format("SWAP_HAS_CACHE {}", has_cache));
      if (cached && !swap_cache_holds(k_, cached))
        rep_.add("swap cache entry names a folio not in the swap cache", w, dump_folio(cached));
      if (!cached && !count) rep_.add("swap slot in use with no reference", w, "");
      // A folio under writeback stays: freeing its swap waits for the I/O
      // (folio_free_swap() refuses it), and a later reclaim frees it.
      if (cached && !count && !folio_mapped(cached) && !swapped(cached) && !folio_test_writeback(cached))
        rep_.add("orphaned swap-cache folio", w, dump_folio(cached));
    });
    for (auto& [v, n] : swap_refs_)
      rep_.add("swap PTE names a free slot", fmt::format("entry {:#x}", v), fmt::format("{} PTEs", n));
  }

  // hugetlb: the pools' counters against their free lists, and every
  // reservation accounted for (a leaked one is found where it happens, not
  // only as a pool page that never goes back).
  void check_hugetlb() {
    std::vector<Mm*> live;
    for (const MmUse& mu : mms_) live.push_back(mu.mm);
    std::string pool = hugetlb_pool_audit(k_);
    if (!pool.empty()) rep_.add("hugetlb pool counters", "hugetlb pools", pool);
    std::string resv = hugetlb_resv_audit(k_, live);
    if (!resv.empty()) rep_.add("hugetlb reservation accounting", "hugetlb pools", resv);
  }

  void check_deferred_tables() {
    for (Page* t : deferred_tables_) {
      pfn_t pfn = phys_->page_to_pfn(t);
      std::string w = fmt::format("deferred-free table pfn {:#x}", pfn);
      if (!phys_->pfn_valid(pfn)) {
        rep_.add("deferred-free table outside RAM", w, "");
        continue;
      }
      if (phys_->page_is_free(pfn)) rep_.add("deferred-free table already freed", w, table_dump(t));
      else if (!PageTable(t)) rep_.add("page-table page without PG_table", w, table_dump(t));
      if (state_[pfn] == kTable) rep_.add("page-table page linked and queued for freeing", w, table_dump(t));
      state_[pfn] = kDeferredTable;
    }
  }

  void check_table_stat() {
    int64_t stat = k_->stats->read(VmStat::nr_page_table_pages);
    long want = nr_tables_ + static_cast<long>(deferred_tables_.size());
    if (stat != want)
      rep_.add("nr_page_table_pages mismatch", "vmstat",
               fmt::format("statistic {}, tables of live mms {} + awaiting free {}", stat, nr_tables_,
                           deferred_tables_.size()));
  }

  // ---- leaks ----
  //
  // Every frame is free (a free block head marks the whole block: PG_buddy
  // or PG_pcp with private_ = order), a zero page, a table page of a live
  // mm or awaiting its grace period, part of a mapped folio, or part of a
  // folio that a caller-declared holder has references on. The scan jumps
  // over free blocks and mapped folios, so untouched parts of the memmap
  // stay untouched. Per-CPU lists are not drained: a PG_pcp block is as free
  // as a buddy one, and the audit must not change the allocator's state.
  void check_frames() {
    const uint64_t nr = state_.size();
    constexpr uint64_t kFreeMask = (1ull << PG_buddy) | (1ull << PG_pcp);
    long leaked_frames = 0, leaked_groups = 0;
    for (pfn_t pfn = 0; pfn < nr;) {
      if (state_[pfn] != kUnseen) {
        pfn++;
        continue;
      }
      Page* p = phys_->pfn_to_page(pfn);
      if (ld(p->flags) & kFreeMask) {
        uint64_t o = ld(p->private_);
        if (o <= MAX_PAGE_ORDER && is_aligned(pfn, 1ull << o)) {
          pfn += 1ull << o;
          continue;
        }
      }
      // Allocated, and no live mm or known holder accounts for it.
      Folio* f = page_folio(p);
      pfn_t head = phys_->page_to_pfn(&f->page);
      uint64_t end = std::min<uint64_t>(std::max<uint64_t>(head + folio_nr_pages(f), pfn + 1), nr);
      if (!PageTable(p) && held_elsewhere(f)) {
        pfn = end;
        continue;
      }
      leaked_frames += static_cast<long>(end - pfn);
      leaked_groups++;
      std::string w = fmt::format("pfn {:#x}-{:#x} ({} frames)", pfn, end - 1, end - pfn);
      if (PageTable(p)) {
        rep_.add("page-table page leaked", w, table_dump(p) + " (no live mm reaches it)");
      } else {
        std::string why = queued_unmapped_.count(f) ? "on the deferred split queue, mapped by no live mm"
                                                     : "mapped by no live mm, held by no known holder";
        rep_.add("frame leaked", w, dump_folio(f) + "\n" + why);
      }
      pfn = end;
    }
    if (leaked_groups > kMaxPerInvariant)
      rep_.add_uncapped({"frame leaked", "(total)", fmt::format("{} frames in {} groups", leaked_frames, leaked_groups)});
  }

  // An unmapped folio with references the caller declared (a GUP handle, a
  // cache) or owned by a hugetlb pool. Its refcount must match exactly.
  bool held_elsewhere(Folio* f) {
    if (folio_ref_count(f) <= 0) return false;
    if (folio_test_hugetlb(f)) return true;  // the pool holds free hugetlb folios
    long ext = extra(f);
    long pins = folio_has_pincount(f) ? folio_pincount(f) : 0;
    // The swap cache and the page cache hold unmapped folios legitimately
    // (after fork and a CoW, the old folio stays in the swap cache while the
    // other process's swap entry still uses the slot).
    long cache = (folio_test_swapcache(f) || (!folio_test_anon(f) && ld(f->page.mapping) != 0)) ? folio_nr_pages(f) : 0;
    if (ext <= 0 && cache == 0 && pins == 0) return false;
    if (folio_ref_count(f) != pins + cache + ext)
      rep_.add("folio_ref_count(folio) != expected (refcount floor)", fmt::format("unmapped folio pfn {:#x}", folio_pfn(f)),
               fmt::format("refcount {} != 0 mappings + {} pins + {} cache + {} held elsewhere\n{}", folio_ref_count(f),
                           pins, cache, ext, dump_folio(f)));
    return true;
  }

  const std::vector<CheckedMm>& live_;
  Kernel* k_;
  PhysMem* phys_;
  const CheckerExtraRefs& extra_;
  Reporter rep_;
  // FrameState per pfn, in a buffer the thread keeps between checks:
  // allocating and zeroing a fresh one (a byte per frame) was a tenth of
  // a short fuzz_ops input under ASan (docs/NOTES.md, issue 32).
  std::vector<uint8_t>& state_ = frame_state_buffer();
  std::vector<MmUse> mms_;
  std::unordered_map<Folio*, FolioUse> folios_;
  std::set<Folio*> split_queue_;
  std::set<Folio*> queued_unmapped_;
  std::unordered_map<uint64_t, long> swap_refs_;  // swap entry -> swap PTEs naming it
  std::vector<Page*> deferred_tables_;
  long huge_zero_users_ = 0;
  long nr_tables_ = 0;
};

}  // namespace

CheckReport check_kernel(Kernel* k, const std::vector<CheckedMm>& mms, const CheckerExtraRefs& extra_refs) {
  return Checker(k, mms, extra_refs).run();
}

std::string CheckReport::to_string() const {
  std::string s;
  for (auto& v : violations) s += fmt::format("{} at {}\n{}\n", v.invariant, v.where, v.dump);
  return s.empty() ? "ok\n" : s;
}

}  // namespace mmlab
