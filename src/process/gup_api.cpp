// The public face of GUP (include/mmlab/gup.h).
#include "fault/current.h"
#include "gup/gup.h"
#include "mm/kernel.h"
#include "mm/mm.h"
#include "mm/debug.h"
#include "mmlab/gup.h"
#include "phys/frame_copy.h"
#include "process/process_internal.h"
#include "sync/rwsem.h"

namespace mmlab {

// The public foll:: table is the internal FOLL_* table, bit for bit.
static_assert(foll::WRITE == FOLL_WRITE && foll::GET == FOLL_GET && foll::DUMP == FOLL_DUMP);
static_assert(foll::FORCE == FOLL_FORCE && foll::NOWAIT == FOLL_NOWAIT && foll::NOFAULT == FOLL_NOFAULT);
static_assert(foll::HWPOISON == FOLL_HWPOISON && foll::ANON == FOLL_ANON && foll::LONGTERM == FOLL_LONGTERM);
static_assert(foll::SPLIT_PMD == FOLL_SPLIT_PMD && foll::PCI_P2PDMA == FOLL_PCI_P2PDMA);
static_assert(foll::INTERRUPTIBLE == FOLL_INTERRUPTIBLE && foll::HONOR_NUMA_FAULT == FOLL_HONOR_NUMA_FAULT);
static_assert(foll::TOUCH == FOLL_TOUCH && foll::PIN == FOLL_PIN);

bool gup_entry_is_pin(GupEntry e) {
  return e == GupEntry::kPinUserPages || e == GupEntry::kPinUserPagesFast || e == GupEntry::kPinUserPagesUnlocked ||
         e == GupEntry::kPinUserPagesRemote;
}

const char* gup_entry_name(GupEntry e) {
  static const char* n[] = {"get_user_pages",          "get_user_pages_fast", "get_user_pages_fast_only",
                            "get_user_pages_unlocked", "pin_user_pages",      "pin_user_pages_fast",
                            "pin_user_pages_unlocked", "get_user_pages_remote", "pin_user_pages_remote"};
  return n[static_cast<int>(e)];
}

GupPages& GupPages::operator=(GupPages&& o) noexcept {
  release();
  pages_ = std::move(o.pages_);
  count_ = o.count_;
  pin_ = o.pin_;
  o.count_ = 0;
  o.pages_.clear();
  return *this;
}

void GupPages::release(Dirty dirty) {
  const bool make_dirty = dirty == Dirty::kYes;
  if (count_ > 0) {
    if (pin_) {
      unpin_user_pages_dirty_lock(pages_.data(), count_, make_dirty);
    } else {
      for (long i = 0; i < count_; i++) {
        if (make_dirty) folio_set_dirty(page_folio(pages_[static_cast<size_t>(i)]));
        put_page(pages_[static_cast<size_t>(i)]);
      }
    }
  }
  count_ = 0;
  pages_.clear();
}

// The device's view of the pinned pages: runs of consecutive frames move as
// one block.
template <typename Op>
static int device_access(const std::vector<Page*>& pages, long count, uint64_t off, uint64_t len, Op&& op) {
  if (off + len < off || off + len > static_cast<uint64_t>(count) * PAGE_SIZE) return -EFAULT;
  uint64_t done = 0;
  while (done < len) {
    uint64_t cur = off + done;
    Page* page = pages[cur >> PAGE_SHIFT];
    uint64_t n = std::min(len - done, PAGE_SIZE - (cur & ~PAGE_MASK));
    for (uint64_t i = (cur >> PAGE_SHIFT) + 1; done + n < len && pages[i] == page + (i - (cur >> PAGE_SHIFT)); i++)
      n += std::min(len - done - n, PAGE_SIZE);
    PhysMem* phys = PhysMem::of(page);
    op(phys, static_cast<uint8_t*>(phys->page_address(page)) + (cur & ~PAGE_MASK), done, n);
    done += n;
  }
  return 0;
}

int GupPages::read(uint64_t off, void* buf, uint64_t len) const {
  auto* out = static_cast<uint8_t*>(buf);
  return device_access(pages_, count_, off, len,
                       [&](PhysMem* phys, uint8_t* frame, uint64_t d, uint64_t n) { user_memcpy(phys, out + d, frame, n); });
}

int GupPages::write(uint64_t off, const void* buf, uint64_t len) const {
  auto* in = static_cast<const uint8_t*>(buf);
  return device_access(pages_, count_, off, len,
                       [&](PhysMem* phys, uint8_t* frame, uint64_t d, uint64_t n) { user_memcpy(phys, frame, in + d, n); });
}

int GupPages::fill(uint64_t off, uint8_t byte, uint64_t len) const {
  return device_access(pages_, count_, off, len,
                       [&](PhysMem* phys, uint8_t* frame, uint64_t, uint64_t n) { user_memset(phys, frame, byte, n); });
}

int GupPages::read_expect(uint64_t off, uint8_t byte, uint64_t len, int64_t* first_mismatch, uint8_t* found) const {
  *first_mismatch = -1;
  return device_access(pages_, count_, off, len, [&](PhysMem* phys, uint8_t* frame, uint64_t d, uint64_t n) {
    if (*first_mismatch >= 0) return;
    const int64_t bad = user_find_not(phys, frame, byte, n, found);
    if (bad >= 0) *first_mismatch = static_cast<int64_t>(d) + bad;
  });
}

uint64_t GupPages::pfn(long i) const { return page_to_pfn(pages_[static_cast<size_t>(i)]); }

bool GupPages::all_maybe_dma_pinned() const {
  for (long i = 0; i < count_; i++) {
    Page* pg = pages_[static_cast<size_t>(i)];
    if (PhysMem::of(pg)->zero_page() == pg) continue;  // never accounted
    if (!folio_maybe_dma_pinned(page_folio(pg))) return false;
  }
  return true;
}

bool GupPages::all_longterm_pinnable() const {
  for (long i = 0; i < count_; i++) {
    Page* pg = pages_[static_cast<size_t>(i)];
    if (PhysMem::of(pg)->page_zonenum(pg) == ZONE_MOVABLE) return false;
  }
  return true;
}

void GupPages::add_refs(std::map<uint64_t, long>* refs) const {
  for (long i = 0; i < count_; i++) {
    Page* pg = pages_[static_cast<size_t>(i)];
    Folio* f = page_folio(pg);
    if (pin_ && PhysMem::of(pg)->zero_page() == pg) continue;
    // A pin of a folio with a pincount is counted by the checker from the
    // pincount itself; only pins of small folios (GUP_PIN_COUNTING_BIAS
    // references each) and FOLL_GET references are declared.
    if (pin_ && folio_has_pincount(f)) continue;
    (*refs)[folio_pfn(f)] += pin_ ? GUP_PIN_COUNTING_BIAS : 1;
  }
}

long gup_reachable_pages(Process* p, uint64_t start, long nr_pages) {
  Mm* mm = p->mm();
  if (!mm || nr_pages <= 0) return 0;
  const uint64_t want = static_cast<uint64_t>(nr_pages), from = start & PAGE_MASK;
  mmap_read_lock(mm);
  uint64_t end = from;
  for (Vma* vma = vma_lookup(mm, from); vma && vma->vm_start <= end && (end - from) / PAGE_SIZE < want; vma = vma_next(mm, vma))
    end = vma->vm_end;
  mmap_read_unlock(mm);
  return static_cast<long>(std::min(want, (end - from) / PAGE_SIZE));
}

long gup(Process* p, GupEntry e, uint64_t start, long nr_pages, unsigned flags, GupPages* out, long capacity) {
  // The driver's caller is the process (an ioctl on its own memory), unless
  // a call already runs for another task (process_vm_readv's reader).
  CurrentTask cur(p->task());
  out->release();
  Mm* mm = p->mm();
  if (!mm) return -ESRCH;
  const long slots = capacity >= 0 ? std::min(capacity, nr_pages) : nr_pages;
  out->pages_.assign(static_cast<size_t>(std::max<long>(slots, 1)), nullptr);
  Page** pages = out->pages_.data();
  long ret = 0;
  switch (e) {
    case GupEntry::kGetUserPages:  // the caller's mmap_read_lock, as a driver takes it
      mmap_read_lock(mm);
      ret = get_user_pages(mm, start, nr_pages, flags, pages);
      mmap_read_unlock(mm);
      break;
    case GupEntry::kPinUserPages:
      mmap_read_lock(mm);
      ret = pin_user_pages(mm, start, nr_pages, flags, pages);
      mmap_read_unlock(mm);
      break;
    case GupEntry::kGetUserPagesFast: ret = get_user_pages_fast(mm, start, nr_pages, flags, pages); break;
    case GupEntry::kGetUserPagesFastOnly: ret = get_user_pages_fast_only(mm, start, nr_pages, flags, pages); break;
    case GupEntry::kGetUserPagesUnlocked: ret = get_user_pages_unlocked(mm, start, nr_pages, pages, flags); break;
    case GupEntry::kPinUserPagesFast: ret = pin_user_pages_fast(mm, start, nr_pages, flags, pages); break;
    case GupEntry::kPinUserPagesUnlocked: ret = pin_user_pages_unlocked(mm, start, nr_pages, pages, flags); break;
    case GupEntry::kGetUserPagesRemote:
    case GupEntry::kPinUserPagesRemote: {
      // The caller's mmap_read_lock, which a fault may drop (*locked = 0).
      RwSemHold hold(&mm->mmap_lock, RwSemHold::Mode::kRead);
      int locked = 1;
      ret = e == GupEntry::kGetUserPagesRemote ? get_user_pages_remote(mm, start, nr_pages, flags, pages, &locked)
                                               : pin_user_pages_remote(mm, start, nr_pages, flags, pages, &locked);
      if (!locked) hold.forget();
      break;
    }
  }
  // More pages than the array holds would have been written past its end:
  // a caller's capacity that was not an upper bound, or a model bug.
  VM_BUG_ON(ret > static_cast<long>(out->pages_.size()), "GUP returned more pages than its caller's capacity");
  out->count_ = ret > 0 ? ret : 0;
  out->pin_ = gup_entry_is_pin(e);
  return ret;
}

void dump_range(Process* p, uint64_t start, uint64_t len, long* pages, long* holes) {
  CurrentTask cur(p->task());  // the dumping task is the process itself
  *pages = *holes = 0;
  for (uint64_t a = start & PAGE_MASK; a < start + len; a += PAGE_SIZE) {
    Page* pg = p->mm() ? get_dump_page(p->mm(), a) : nullptr;
    if (pg) {
      ++*pages;
      put_page(pg);
    } else {
      ++*holes;
    }
  }
}

long process_vm_readv(Process* reader, uint64_t local, Process* target, uint64_t remote, uint64_t len) {
  CurrentTask cur(reader->task());  // the target's faults count to the reader
  if (!reader->mm() || !target->mm()) return -ESRCH;
  reader->mm()->stats->count(Event::mm_syscall);
  constexpr long kChunkPages = 16;  // PVM_MAX_PP_ARRAY_COUNT
  std::vector<uint8_t> buf(kChunkPages * PAGE_SIZE);
  uint64_t done = 0;
  while (done < len) {
    const uint64_t addr = remote + done;
    const uint64_t start = addr & PAGE_MASK;
    const uint64_t end = std::min(round_up(remote + len, PAGE_SIZE), start + kChunkPages * PAGE_SIZE);
    GupPages pages;
    const long pinned = gup(target, GupEntry::kPinUserPagesRemote, start, static_cast<long>((end - start) >> PAGE_SHIFT), 0, &pages);
    if (pinned <= 0) break;
    const uint64_t off = addr - start;
    const uint64_t n = std::min<uint64_t>(static_cast<uint64_t>(pinned) * PAGE_SIZE - off, len - done);
    (void)pages.read(off, buf.data(), n);
    pages.release();
    if (!copy_to_user(reader->mm(), local + done, buf.data(), n).ok()) break;  // stopped short
    done += n;
  }
  return done ? static_cast<long>(done) : -EFAULT;
}

}  // namespace mmlab
