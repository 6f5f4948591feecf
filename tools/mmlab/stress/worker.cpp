// The operations of a `mmlab stress` worker and its data tracker
// (worker.h; docs/STRESS.md).
#include "stress/worker.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "mmlab/tune.h"

namespace mmlab::stress {

std::vector<TypeInfo> all_types() {
  std::vector<TypeInfo> v;
  for (unsigned order = 2; order <= 8; order++) {
    const uint64_t sz = PAGE_SIZE << order;
    v.push_back({sz >= (1u << 20) ? fmt::format("anon-{}M", sz >> 20) : fmt::format("anon-{}K", sz >> 10),
                 Backing::kAnonPrivate, 4 * sz, sz});
  }
  v.push_back({"thp", Backing::kAnonPrivate, 2 * PMD_SIZE, PMD_SIZE, FsClass::kShmem, 0, true});
  v.push_back({"anon-shared", Backing::kAnonShared, 64 * PAGE_SIZE, PAGE_SIZE});
  v.push_back({"shmem", Backing::kFile, 64 * PAGE_SIZE, PAGE_SIZE, FsClass::kShmem});
  v.push_back({"ext4", Backing::kFile, 64 * PAGE_SIZE, PAGE_SIZE, FsClass::kExt4});
  v.push_back({"hugetlb-2M", Backing::kHugetlbPrivate, PMD_SIZE, PMD_SIZE, FsClass::kShmem, PMD_SHIFT});
  v.push_back({"hugetlb-2M-shared", Backing::kHugetlbShared, PMD_SIZE, PMD_SIZE, FsClass::kHugetlbfs, PMD_SHIFT});
  v.push_back({"hugetlb-1G", Backing::kHugetlbPrivate, PUD_SIZE, PUD_SIZE, FsClass::kShmem, PUD_SHIFT});
  return v;
}

uint64_t Worker::next() {
  const std::string_view c = s_->cfg->choices;
  if (c.empty()) return rng_();
  uint64_t v = 0;
  for (int k = 0; k < 2; k++, choice_at_++) v |= uint64_t{choice_at_ < c.size() ? static_cast<uint8_t>(c[choice_at_]) : 0u} << (8 * k);
  return v;
}

bool Worker::choices_spent() const { return !s_->cfg->choices.empty() && choice_at_ >= s_->cfg->choices.size(); }

void Worker::mismatch(const std::string& what) {
  std::lock_guard<std::mutex> g(s_->mu);
  s_->res->nr_mismatches++;
  if (s_->res->mismatches.size() < kMaxMismatchesKept) s_->res->mismatches.push_back(fmt::format("thread {}: {}", id_, what));
}

InjectSnapshot injected_snapshot() {
  InjectSnapshot s;
  for (size_t i = 0; i < std::size(kAccessCauses); i++) s.n[i] = System::injected_on_this_thread(kAccessCauses[i].site);
  return s;
}

const char* access_cause(const InjectSnapshot& before, const InjectSnapshot& now, Signal sig) {
  for (size_t i = 0; i < std::size(kAccessCauses); i++)
    if (kAccessCauses[i].sig == sig && now.n[i] != before.n[i]) return kAccessCauses[i].site;
  return nullptr;
}

InjectSnapshot Worker::inject_snapshot() const { return s_->injecting ? injected_snapshot() : InjectSnapshot{}; }

bool Worker::injected_outcome(const InjectSnapshot& before, const char* what, Signal sig) {
  if (!s_->injecting) return false;
  const char* site = access_cause(before, injected_snapshot(), sig);
  if (site) errors[fmt::format("{}: injected {} ({})", what, signal_name(sig), site)]++;
  return site;
}

bool Worker::swapin_outcome(const Region* r, uint64_t i, const char* what, Signal sig) {
  if (sig != Signal::kSigbus || !r->paged_out[i]) return false;
  if (static_cast<uint64_t>(s_->sys->injected("swapin")) < r->paged_out[i]) return false;
  errors[fmt::format("{}: injected swap-in SIGBUS", what)]++;
  return true;
}

// A child's CoW of a private hugetlb page: the kernel keeps the pool's
// pages for the reservation's owner and gives a child SIGBUS when none is
// free (hugetlb_wp), which the worker's pool sizing cannot rule out while
// other threads' cross pins hold zapped huge pages. Accepted only when this
// thread's fault counted exactly that.
bool Worker::pool_empty_outcome(const std::optional<EventTally>& tally, const char* what, Signal sig) {
  static const int slot = EventTally::slot("fault.hugetlb_cow_nopage");
  if (sig != Signal::kSigbus || !tally || slot < 0 || tally->at(slot) == 0) return false;
  errors[fmt::format("{}: SIGBUS, no free huge page for a child's CoW", what)]++;
  return true;
}

// An address range of len aligned to align, placed by the kernel (never
// MAP_FIXED over an address another thread might have just been given).
long reserve_aligned(Process* p, uint64_t len, uint64_t align) {
  long raw = p->mmap(0, len + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE);
  if (raw < 0) return raw;
  const uint64_t start = round_up(static_cast<uint64_t>(raw), align);
  if (start > static_cast<uint64_t>(raw)) (void)p->munmap(static_cast<uint64_t>(raw), start - static_cast<uint64_t>(raw));
  const uint64_t end = static_cast<uint64_t>(raw) + len + align;
  if (end > start + len) (void)p->munmap(start + len, end - (start + len));
  return static_cast<long>(start);
}

bool Worker::map_region(Region* r) {
  Process* p = s_->parent;
  const TypeInfo& t = *r->type;
  std::lock_guard<PlacementMutex> placed(s_->placement);
  long at = reserve_aligned(p, t.len, t.align);
  if (at < 0) return false;
  const uint64_t a = static_cast<uint64_t>(at);
  const int rw = PROT_READ | PROT_WRITE;
  long ret = -EINVAL;
  switch (t.backing) {
    case Backing::kAnonPrivate: ret = p->mmap(a, t.len, rw, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED); break;
    case Backing::kAnonShared: ret = p->mmap(a, t.len, rw, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED); break;
    case Backing::kHugetlbPrivate:
      ret = p->mmap(a, t.len, rw,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_HUGETLB | static_cast<int>(t.huge_shift << MAP_HUGE_SHIFT));
      break;
    case Backing::kFile:
    case Backing::kHugetlbShared: ret = p->mmap_file(a, t.len, rw, MAP_SHARED | MAP_FIXED, r->fd); break;
  }
  if (ret < 0) {
    (void)p->munmap(a, t.len);
    return false;
  }
  if (t.thp_advise) (void)p->madvise(a, t.len, MADV_HUGEPAGE);
  r->addr.store(a, std::memory_order_release);
  r->ro = false;
  apply_fork_mode(r);
  return true;
}

// map_region, again while an injected failure (a hugetlb reservation, a
// table) is what made it fail.
bool Worker::map_region_retrying(Region* r) {
  for (int attempt = 0; attempt < 100; attempt++) {
    const uint64_t before = System::injected_on_this_thread();
    if (map_region(r)) return true;
    if (System::injected_on_this_thread() == before) return false;
    errors["remap: injected ENOMEM (mapped again)"]++;
  }
  return false;
}

void Worker::apply_fork_mode(Region* r) {
  const uint64_t a = r->addr.load(std::memory_order_relaxed);
  if (r->fork_mode == ForkMode::kDontfork) (void)s_->parent->madvise(a, r->type->len, MADV_DONTFORK);
  if (r->fork_mode == ForkMode::kWipeonfork) (void)s_->parent->madvise(a, r->type->len, MADV_WIPEONFORK);
}

// Fuzzing: the input's first choice picks the memory types the run maps:
// its low four bits name one, bits 4-7 a second when bit 12 is set, bits
// 8-11 a third when bit 13 is set (each modulo the number of types; a
// repeat maps nothing more), so that an input pays for one to three
// regions. Each region costs the whole run something (every fork copies
// it, the sweep reads it back, the teardown unmaps it): a bit per type, as
// before, made an average input map six or seven, most of its time
// (docs/NOTES.md, issue 32, sixth round). Types still meet in a run through
// the forks, the file table and the hugetlb pool they share.
std::vector<const TypeInfo*> Worker::types_to_map() {
  if (s_->cfg->choices.empty()) return s_->types;
  const uint64_t v = next(), n = s_->types.size();
  std::vector<const TypeInfo*> chosen;
  for (unsigned k = 0; k < 3; k++) {
    const TypeInfo* t = s_->types[(v >> (4 * k) & 0xf) % n];
    if ((k == 0 || v >> (11 + k) & 1) && std::find(chosen.begin(), chosen.end(), t) == chosen.end()) chosen.push_back(t);
  }
  return chosen;
}

bool Worker::setup(std::string* err) {
  for (const TypeInfo* t : types_to_map()) {
    auto r = std::make_unique<Region>();
    r->type = t;
    r->val.assign(r->pages(), 0);
    r->lazy.assign(r->pages(), 0);
    r->paged_out.assign(r->pages(), 0);
    // One region in six forks specially; WIPEONFORK exists for private anonymous memory only.
    const uint64_t m = rnd(6);
    if (m == 0) r->fork_mode = ForkMode::kDontfork;
    if (m == 1 && t->backing == Backing::kAnonPrivate) r->fork_mode = ForkMode::kWipeonfork;
    if (t->backing == Backing::kFile || t->backing == Backing::kHugetlbShared) {
      r->fd = s_->sys->create_file(t->len, t->fs, t->backing == Backing::kHugetlbShared ? t->huge_shift : 0,
                                   fmt::format("stress-{}-{}", id_, t->name));
      if (r->fd < 0) {
        *err = fmt::format("create_file for {}: {}", t->name, errno_name(-r->fd));
        return false;
      }
    }
    if (!map_region(r.get())) {
      *err = fmt::format("mmap of a {} region failed", t->name);
      return false;
    }
    regions.push_back(std::move(r));
  }
  return true;
}

Op Worker::pick_op() {
  const unsigned total = s_->mix_cdf.back();
  const unsigned x = static_cast<unsigned>(rnd(total));
  return static_cast<Op>(std::upper_bound(s_->mix_cdf.begin(), s_->mix_cdf.end(), x) - s_->mix_cdf.begin());
}

Region* Worker::pick_region(bool (*eligible)(const Region&)) {
  std::vector<Region*> c;
  for (auto& r : regions)
    if (!eligible || eligible(*r)) c.push_back(r.get());
  Region* r = c.empty() ? nullptr : c[rnd(c.size())];
  note_type(r);
  return r;
}

void Worker::note_type(const Region* r) {
  if (!r) return;
  const std::vector<const TypeInfo*>& types = s_->types;
  const auto t = static_cast<uint32_t>(std::find(types.begin(), types.end(), r->type) - types.begin());
  std::atomic<uint32_t>& slot = recent_[recent_at_.load(std::memory_order_relaxed) % kRecent];
  slot.store((slot.load(std::memory_order_relaxed) & ~0xffu) | (t & 0xff), std::memory_order_relaxed);
}

std::vector<std::string> Worker::recent_ops() const {
  std::vector<std::string> out;
  const uint64_t at = recent_at_.load(std::memory_order_relaxed);
  for (uint64_t k = at >= kRecent ? at - kRecent + 1 : 1; k <= at; k++) {
    const uint32_t v = recent_[k % kRecent].load(std::memory_order_relaxed);
    const unsigned op = v >> 8, t = v & 0xff;
    if (op >= kNrOps) continue;
    out.push_back(fmt::format("{}{}", kOpNames[op], t < s_->types.size() ? " " + s_->types[t]->name : ""));
  }
  return out;
}

void Worker::check_page(Process* p, Region* r, uint64_t i, uint8_t want, bool lazy, const char* what) {
  const uint64_t a = r->addr.load(std::memory_order_relaxed) + i * PAGE_SIZE;
  int64_t bad = -1;
  uint8_t found = 0;
  const InjectSnapshot inj = inject_snapshot();
  AccessResult res = p->read_expect(a, want, PAGE_SIZE, &bad, &found);
  if (!res.ok()) {
    if (injected_outcome(inj, "read", res.sig) || swapin_outcome(r, i, "read", res.sig)) return;
    mismatch(fmt::format("{}: {} page {} of {} at {:#x} in {}: {} on read", what, r->type->name, i, r->type->name, a,
                         p->name(), signal_name(res.sig)));
    return;
  }
  if (bad < 0) return;
  if (lazy) {
    res = p->read_expect(a, 0, PAGE_SIZE, &bad, &found);
    if (res.ok() && bad < 0) {
      if (p == s_->parent) {
        r->val[i] = 0;  // discarded: zeros from now on
        r->lazy[i] = 0;
      }
      return;
    }
  }
  mismatch(fmt::format("{}: {} page {} at {:#x} in {}: byte +{} is {:#04x}, expected {:#04x}{}", what, r->type->name, i,
                       a + static_cast<uint64_t>(bad), p->name(), bad, found, want, lazy ? " or zeros" : ""));
}

void Worker::check_run(Region* r, uint64_t i, uint64_t end, const char* what) {
  int64_t bad = -1;
  uint8_t found = 0;
  const AccessResult res = s_->parent->read_expect(r->addr.load(std::memory_order_relaxed) + i * PAGE_SIZE, r->val[i],
                                                   (end - i) * PAGE_SIZE, &bad, &found);
  if (res.ok() && bad < 0) return;
  for (uint64_t k = i; k < end; k++) check_page(s_->parent, r, k, r->val[k], r->lazy[k], what);
}

void Worker::op_read() {
  Region* r = pick_region();
  const uint64_t i = rnd(r->pages()), n = 1 + rnd(std::min<uint64_t>(8, r->pages() - i));
  for (uint64_t k = i; k < i + n; k++) check_page(s_->parent, r, k, r->val[k], r->lazy[k], "read");
}

void Worker::op_write() {
  Region* r = pick_region();
  const uint64_t i = rnd(r->pages()), n = 1 + rnd(std::min<uint64_t>(8, r->pages() - i));
  for (uint64_t k = i; k < i + n; k++) {
    const uint8_t v = new_byte();
    const uint64_t a = r->addr.load(std::memory_order_relaxed) + k * PAGE_SIZE;
    const InjectSnapshot inj = inject_snapshot();
    AccessResult res = s_->parent->fill(a, v, PAGE_SIZE);
    if (r->ro) {
      if (res.sig != Signal::kSigsegv)
        mismatch(fmt::format("write to read-only {} at {:#x}: {} instead of SIGSEGV", r->type->name, a, signal_name(res.sig)));
      check_page(s_->parent, r, k, r->val[k], r->lazy[k], "read after refused write");
      return;
    }
    if (!res.ok()) {
      // A failed fault wrote nothing: the page keeps its content.
      if (injected_outcome(inj, "write", res.sig) || swapin_outcome(r, k, "write", res.sig)) continue;
      mismatch(fmt::format("write to {} at {:#x}: {}", r->type->name, a, signal_name(res.sig)));
      return;
    }
    r->val[k] = v;
    r->lazy[k] = 0;
    r->paged_out[k] = 0;
  }
}

// The planted bug (--plant-corruption): one byte of a tracked page changes
// behind the tracker's back, through the page tables as any CPU store.
void Worker::plant_corruption() {
  Region* r = pick_region();
  const uint64_t i = rnd(r->pages());
  const uint64_t a = r->addr.load(std::memory_order_relaxed) + i * PAGE_SIZE + 100;
  (void)s_->parent->mprotect(r->addr.load(std::memory_order_relaxed), r->type->len, PROT_READ | PROT_WRITE);
  (void)s_->parent->fill(a, static_cast<uint8_t>(r->val[i] ^ 0xff), 1);
  r->ro = false;
}

const GupEntry kEntries[] = {GupEntry::kGetUserPages,         GupEntry::kGetUserPagesFast,
                             GupEntry::kGetUserPagesFastOnly, GupEntry::kGetUserPagesUnlocked,
                             GupEntry::kPinUserPages,         GupEntry::kPinUserPagesFast,
                             GupEntry::kPinUserPagesUnlocked, GupEntry::kGetUserPagesRemote,
                             GupEntry::kPinUserPagesRemote};

// Pin a range of the thread's own region, check what the device sees, write
// through a R/W pin, release, and check what the CPU sees.
void Worker::op_pin() {
  Region* r = pick_region();
  const GupEntry e = kEntries[rnd(std::size(kEntries))];
  unsigned flags = rnd(2) ? foll::WRITE : 0;
  if (gup_entry_is_pin(e) && rnd(3) == 0) flags |= foll::LONGTERM;
  const uint64_t i = rnd(r->pages()), n = 1 + rnd(std::min<uint64_t>(16, r->pages() - i));
  GupPages gp;
  const long ret = gup(s_->parent, e, r->addr.load(std::memory_order_relaxed) + i * PAGE_SIZE, static_cast<long>(n), flags, &gp);
  if (ret < 0) {
    error(kPin, ret);
    return;
  }
  if (ret > 0 && r->ro && (flags & foll::WRITE)) {
    mismatch(fmt::format("{} with FOLL_WRITE pinned {} pages of read-only {}", gup_entry_name(e), ret, r->type->name));
    return;
  }
  for (long k = 0; k < ret; k++) {
    const uint64_t pg = i + static_cast<uint64_t>(k);
    if (r->lazy[pg]) continue;
    int64_t bad = -1;
    uint8_t found = 0;
    (void)gp.read_expect(static_cast<uint64_t>(k) * PAGE_SIZE, r->val[pg], PAGE_SIZE, &bad, &found);
    if (bad >= 0)
      mismatch(fmt::format("{} {:#x}: device reads {:#04x} at +{} of {} page {}, expected {:#04x}", gup_entry_name(e), flags,
                           found, bad, r->type->name, pg, r->val[pg]));
  }
  // Only through FOLL_PIN: writing a page's data through a FOLL_GET
  // reference is not coherent with a concurrent fork (the parent's page is
  // shared, and an unshare or CoW then moves the parent to a copy, leaving
  // the device writing the child's page); the kernel requires FOLL_PIN for
  // that (Documentation/core-api/pin_user_pages.rst, case 5).
  const bool dirty = (flags & foll::WRITE) && ret > 0 && gup_entry_is_pin(e);
  if (dirty) {
    for (long k = 0; k < ret; k++) {
      const uint64_t pg = i + static_cast<uint64_t>(k);
      const uint8_t v = new_byte();
      (void)gp.fill(static_cast<uint64_t>(k) * PAGE_SIZE, v, PAGE_SIZE);
      r->val[pg] = v;
      r->lazy[pg] = 0;
      r->paged_out[pg] = 0;
    }
  }
  gp.release(dirty ? Dirty::kYes : Dirty::kNo);
  for (long k = 0; k < ret; k++) {
    const uint64_t pg = i + static_cast<uint64_t>(k);
    check_page(s_->parent, r, pg, r->val[pg], r->lazy[pg],
               fmt::format("read after {} {}", gup_entry_name(e), dirty ? "and a device write" : "").c_str());
  }
}

// Pin some pages of another thread's region and hold them across later
// operations: nothing is read or written through them (their owner may be
// changing them), so they change no content.
void Worker::op_cross_pin() {
  Worker* other = s_->workers[rnd(s_->workers.size())].get();
  Region* r = other->regions[rnd(other->regions.size())].get();
  // Not a 1 GiB page: a held pin keeps a page its owner zaps, and the
  // owner's next fault (or re-mmap's reservation) needs another; the pool
  // cannot hold a spare gigabyte per pin slot, and without one the kernel
  // answers SIGBUS (or ENOMEM), as the model does.
  if (r->type->huge_shift == PUD_SHIFT) return;
  const GupEntry e = kEntries[rnd(std::size(kEntries))];
  unsigned flags = rnd(2) ? foll::WRITE : 0;
  if (gup_entry_is_pin(e) && rnd(2) == 0) flags |= foll::LONGTERM;
  const uint64_t pages = r->type->len / PAGE_SIZE;
  const uint64_t i = rnd(pages), n = 1 + rnd(std::min<uint64_t>(32, pages - i));
  GupPages& slot = held_[rnd(std::size(held_))];
  const long ret = gup(s_->parent, e, r->addr.load(std::memory_order_acquire) + i * PAGE_SIZE, static_cast<long>(n), flags, &slot);
  if (ret < 0) error(kCrossPin, ret);
}

bool not_special_fork(const Region& r) { return r.fork_mode == ForkMode::kNormal; }

// A pinned page keeps its content across fork: pin, fork, write through the
// pin; the parent sees the write, a private mapping's child does not.
void Worker::op_pin_fork() {
  Region* r = pick_region(not_special_fork);
  if (!r) return;
  const uint64_t i = rnd(r->pages());
  if (r->lazy[i] || r->ro) return;
  const GupEntry pins[] = {GupEntry::kPinUserPages, GupEntry::kPinUserPagesFast, GupEntry::kPinUserPagesUnlocked};
  const GupEntry e = pins[rnd(3)];
  const unsigned flags = foll::WRITE | (rnd(2) ? foll::LONGTERM : 0);
  GupPages gp;
  const long ret = gup(s_->parent, e, r->addr.load(std::memory_order_relaxed) + i * PAGE_SIZE, 1, flags, &gp);
  if (ret <= 0) {
    if (ret < 0) error(kPinFork, ret);
    return;
  }
  const uint8_t old = r->val[i];
  int err = 0;
  Process* child = s_->parent->fork(fmt::format("t{}-pinfork", id_), &err);
  if (!child) {
    errors[fmt::format("pin-fork: fork {}", errno_name(-err))]++;
    gp.release();
    return;
  }
  const uint8_t v = new_byte();
  (void)gp.fill(0, v, PAGE_SIZE);
  gp.release(Dirty::kYes);
  r->val[i] = v;
  r->paged_out[i] = 0;
  check_page(s_->parent, r, i, v, false, "parent after write through a pin held across fork");
  check_page(child, r, i, is_private(r->type->backing) ? old : v, false, "child after write through the parent's pin");
  child->exit();
}

void Worker::op_fork() {
  int err = 0;
  Process* c1 = s_->parent->fork(fmt::format("t{}-child1", id_), &err);
  if (!c1) {
    error(kFork, err);
    return;
  }
  Process* c2 = s_->parent->fork(fmt::format("t{}-child2", id_), &err);
  if (!c2) {
    error(kFork, err);
    c1->exit();
    return;
  }
  for (auto& rp : regions) {
    Region* r = rp.get();
    const uint64_t i = rnd(r->pages());
    const uint64_t a = r->addr.load(std::memory_order_relaxed) + i * PAGE_SIZE;
    const uint8_t old = r->val[i];
    const bool lazy = r->lazy[i];
    if (r->fork_mode == ForkMode::kDontfork) {
      uint8_t b;
      AccessResult res = c1->read(a, &b, 1);
      if (res.sig != Signal::kSigsegv)
        mismatch(fmt::format("MADV_DONTFORK {} at {:#x}: child read gave {} instead of SIGSEGV", r->type->name, a, signal_name(res.sig)));
      continue;
    }
    if (r->fork_mode == ForkMode::kWipeonfork) {
      check_page(c1, r, i, 0, false, "MADV_WIPEONFORK child");
      continue;
    }
    check_page(c1, r, i, old, lazy, "child after fork");
    if (r->ro) continue;
    const uint8_t v = new_byte();
    const InjectSnapshot inj = inject_snapshot();
    std::optional<EventTally> tally;
    if (is_hugetlb(r->type->backing) && is_private(r->type->backing)) tally.emplace();
    AccessResult res = c1->fill(a, v, PAGE_SIZE);
    if (!res.ok()) {
      if (injected_outcome(inj, "child write", res.sig) || swapin_outcome(r, i, "child write", res.sig) ||
          pool_empty_outcome(tally, "child write", res.sig))
        continue;
      mismatch(fmt::format("child write to {} at {:#x}: {}", r->type->name, a, signal_name(res.sig)));
      continue;
    }
    if (is_private(r->type->backing)) {
      check_page(c1, r, i, v, false, "child after its own write");
      check_page(c2, r, i, old, lazy, "sibling after the other child's write");
      check_page(s_->parent, r, i, old, lazy, "parent after a child's write");
    } else {
      r->val[i] = v;
      r->lazy[i] = 0;
      check_page(c2, r, i, v, false, "sibling after a shared write");
      check_page(s_->parent, r, i, v, false, "parent after a child's shared write");
    }
  }
  c1->exit();
  c2->exit();
}

void Worker::op_mprotect() {
  Region* r = pick_region();
  const uint64_t a = r->addr.load(std::memory_order_relaxed);
  const int ret = s_->parent->mprotect(a, r->type->len, r->ro ? PROT_READ | PROT_WRITE : PROT_READ);
  if (ret < 0) {
    error(kMprotect, ret);
    return;
  }
  r->ro = !r->ro;
  const uint64_t i = rnd(r->pages());
  check_page(s_->parent, r, i, r->val[i], r->lazy[i], "read after mprotect");
}

bool freeable(const Region& r) { return r.type->backing == Backing::kAnonPrivate; }

void Worker::op_madvise(Op op, int advice) {
  Region* r = pick_region(op == kFree ? freeable : nullptr);
  if (!r) return;
  uint64_t i = 0, n = r->pages();
  if (!is_hugetlb(r->type->backing)) {  // hugetlb takes whole huge pages
    i = rnd(r->pages());
    n = 1 + rnd(r->pages() - i);
  }
  // The mark's count is read before the MADV_PAGEOUT: a page can be stuck
  // from the moment reclaim has written it to swap, before the call
  // returns, by any thread's fault. A failure counted here that came before
  // the pageout only lets the tracker accept a SIGBUS it could not have
  // caused, never refuse one it did.
  const uint64_t swapin_failed = static_cast<uint64_t>(s_->sys->injected("swapin"));
  const int ret = s_->parent->madvise(r->addr.load(std::memory_order_relaxed) + i * PAGE_SIZE, n * PAGE_SIZE, advice);
  if (ret < 0) {
    error(op, ret);
    return;
  }
  for (uint64_t k = i; k < i + n; k++) {
    if (advice == MADV_DONTNEED && is_private(r->type->backing)) {
      r->val[k] = 0;
      r->lazy[k] = 0;
      r->paged_out[k] = 0;
    }
    if (advice == MADV_FREE && r->val[k]) r->lazy[k] = 1;
    // Anonymous memory and shmem go to swap (docs/NOTES.md, reclaim); the
    // ext4 class's page cache is not reclaimed.
  }
  // PAGEOUT is followed by a swap-in of one of the pages. A shmem page read
  // back with an injected read error is stuck as a private one is.
  const uint64_t k = i + rnd(n);
  const Backing b = r->type->backing;
  const bool swaps = advice == MADV_PAGEOUT &&
                     (b == Backing::kAnonPrivate || b == Backing::kAnonShared ||
                      (b == Backing::kFile && r->type->fs == FsClass::kShmem));
  if (swaps && b == Backing::kAnonPrivate && s_->cfg->race_swapin_failure) race_swapin_failure(r, k);
  // Reclaim takes whole folios: pages of a large folio outside the range go
  // too, so the mark covers the range widened to the type's alignment (the
  // largest folio the region can hold). The first mark since the page was
  // last written or zapped stays: a page stuck since then stays stuck.
  if (swaps) {
    const uint64_t per = r->type->align / PAGE_SIZE;
    for (uint64_t m = i / per * per; m < std::min(r->pages(), (i + n + per - 1) / per * per); m++)
      if (!r->paged_out[m]) r->paged_out[m] = 1 + swapin_failed;
  }
  check_page(s_->parent, r, k, r->val[k], r->lazy[k], kOpNames[op]);
}

// --race-swapin-failure: a fault on page i between the pageout and the
// tracker's mark, standing in for another thread's (a cross pin's GUP,
// khugepaged's swap-in before a collapse). Every swap-in read fails in that
// mode, so if the page went to swap the failure sticks to it, and the
// operation's own check of the page then meets the stuck folio. Nothing is
// checked here: the tracker learns of the failure only from the System's
// count, as it would of another thread's.
void Worker::race_swapin_failure(const Region* r, uint64_t i) {
  int64_t bad = -1;
  uint8_t found = 0;
  (void)s_->parent->read_expect(r->addr.load(std::memory_order_relaxed) + i * PAGE_SIZE, r->val[i], PAGE_SIZE, &bad,
                                &found);
}

void Worker::op_remap() {
  Region* r = pick_region();
  const int ret = s_->parent->munmap(r->addr.load(std::memory_order_relaxed), r->type->len);
  if (ret < 0) {
    error(kRemap, ret);
    return;
  }
  r->addr.store(0, std::memory_order_release);
  if (r->fd < 0) std::fill(r->val.begin(), r->val.end(), 0);  // a new anonymous object
  std::fill(r->lazy.begin(), r->lazy.end(), 0);
  std::fill(r->paged_out.begin(), r->paged_out.end(), 0);
  if (!map_region_retrying(r)) {
    mismatch(fmt::format("re-mmap of a {} region failed", r->type->name));
    s_->stop = true;
    return;
  }
  const uint64_t i = rnd(r->pages());
  check_page(s_->parent, r, i, r->val[i], false, "read after munmap and mmap");
}

void Worker::op_mremap() {
  Region* r = pick_region();
  std::unique_lock<PlacementMutex> placed(s_->placement);
  const long dst = reserve_aligned(s_->parent, r->type->len, r->type->align);
  if (dst < 0) {
    error(kMremap, dst);
    return;
  }
  const long ret = s_->parent->mremap(r->addr.load(std::memory_order_relaxed), r->type->len, r->type->len,
                                      MREMAP_MAYMOVE | MREMAP_FIXED, static_cast<uint64_t>(dst));
  if (ret < 0) {
    error(kMremap, ret);
    (void)s_->parent->munmap(static_cast<uint64_t>(dst), r->type->len);
    return;
  }
  placed.unlock();
  r->addr.store(static_cast<uint64_t>(ret), std::memory_order_release);
  const uint64_t i = rnd(r->pages());
  check_page(s_->parent, r, i, r->val[i], r->lazy[i], "read after mremap");
}

void Worker::op_variant() {
  const auto& vs = s_->cfg->variants;
  if (vs.empty()) return;
  const auto& [key, values] = vs[rnd(vs.size())];
  const int ret = s_->sys->tune(key, values[rnd(values.size())]);
  if (ret < 0) error(kVariant, ret);
}

void Worker::one_op() {
  const Op op = pick_op();
  ops[op].fetch_add(1, std::memory_order_relaxed);
  const uint64_t at = recent_at_.fetch_add(1, std::memory_order_relaxed) + 1;
  recent_[at % kRecent].store(op << 8 | 0xff, std::memory_order_relaxed);
  current.store(static_cast<int>(op), std::memory_order_relaxed);
  switch (op) {
    case kRead: op_read(); break;
    case kWrite: op_write(); break;
    case kPin: op_pin(); break;
    case kCrossPin: op_cross_pin(); break;
    case kPinFork: op_pin_fork(); break;
    case kFork: op_fork(); break;
    case kMprotect: op_mprotect(); break;
    case kDontneed: op_madvise(op, MADV_DONTNEED); break;
    case kPageout: op_madvise(op, MADV_PAGEOUT); break;
    case kFree: op_madvise(op, MADV_FREE); break;
    case kCold: op_madvise(op, MADV_COLD); break;
    case kCollapse: op_madvise(op, MADV_COLLAPSE); break;
    case kRemap: op_remap(); break;
    case kMremap: op_mremap(); break;
    case kVariant: op_variant(); break;
    case kNrOps: break;
  }
  current.store(-1, std::memory_order_relaxed);
  progress.fetch_add(1, std::memory_order_relaxed);
}

// Reading a page costs a fault and a scan of its bytes, and most pages of
// a short run were never touched: reading them all was most of a fuzz
// input's time. A page is read through the mapping when the tracker
// expects data of it (written, or lazily freed) or when anything maps it
// (a present entry of any level, a swap or migration entry, a marker: what
// it maps must read as the tracker says, zeros included). A file page that
// nothing maps and that should be zeros is read from the page cache
// instead (pread: no fault, and a hole allocates nothing). Not read at
// all: a private page that nothing maps and that the tracker expects to be
// zeros, since no entry is what a fault turns into zeros (a bug that left
// data there without an entry would go unseen), and likewise a page of an
// anonymous shared region with neither (it has no file to pread).
void Worker::verify_all(const char* when) {
  for (auto& r : regions) {
    const uint64_t base = r->addr.load(std::memory_order_relaxed);
    std::vector<uint8_t> mapped(r->pages(), 0);
    for (const PteDumpEntry& e : s_->parent->pagetable_dump(base, base + r->type->len)) {
      const uint64_t leaf = e.level == 3 ? PUD_SIZE : e.level == 2 ? PMD_SIZE : PAGE_SIZE;
      const uint64_t from = std::max(e.addr, base), to = std::min(e.addr + leaf, base + r->type->len);
      for (uint64_t a = from; a < to; a += PAGE_SIZE) mapped[(a - base) / PAGE_SIZE] = 1;
    }
    const auto to_read = [&](uint64_t i) { return r->val[i] || r->lazy[i] || mapped[i]; };
    for (uint64_t i = 0; i < r->pages();) {
      // A run of pages that hold one byte (zeros, unmapped, read from the
      // file): one read, as a program's verifying pass would make, instead
      // of a call per page.
      uint64_t end = i + 1;
      const bool read = to_read(i);
      if (!r->lazy[i])
        while (end < r->pages() && to_read(end) == read && !r->lazy[end] && r->val[end] == r->val[i]) end++;
      if (!read) {
        if (r->fd >= 0) check_file_pages(r.get(), i, end, when);
      } else if (r->lazy[i]) {
        check_page(s_->parent, r.get(), i, r->val[i], true, when);
      } else {
        check_run(r.get(), i, end, when);
      }
      i = end;
    }
  }
}

// In chunks of kFileChunk pages through one buffer the thread keeps: a
// buffer the size of the run (a whole unmapped 2 MiB hugetlb file) was a
// fresh mapping per call under ASan, zeroed, faulted in and unmapped again,
// and most of a short fuzz input's time (docs/NOTES.md, issue 32).
void Worker::check_file_pages(const Region* r, uint64_t i, uint64_t end, const char* when) {
  static const uint8_t kZeros[PAGE_SIZE] = {};
  static thread_local std::vector<uint8_t> buf(kFileChunk * PAGE_SIZE);
  for (uint64_t from = i; from < end; from += kFileChunk) {
    const uint64_t to = std::min(end, from + kFileChunk), bytes = (to - from) * PAGE_SIZE;
    const long n = s_->sys->file_pread(r->fd, from * PAGE_SIZE, buf.data(), bytes);
    bool zeros = n == static_cast<long>(bytes);
    // memcmp: a byte loop is a comparison callback per byte in the fuzz build.
    for (uint64_t off = 0; zeros && off < bytes; off += PAGE_SIZE) zeros = std::memcmp(&buf[off], kZeros, PAGE_SIZE) == 0;
    if (zeros) continue;
    for (uint64_t k = from; k < to; k++) check_file_page(r, k, when);
  }
}

void Worker::check_file_page(const Region* r, uint64_t i, const char* when) {
  static const uint8_t kZeros[PAGE_SIZE] = {};
  uint8_t buf[PAGE_SIZE];
  const long n = s_->sys->file_pread(r->fd, i * PAGE_SIZE, buf, PAGE_SIZE);
  // memcmp first: a byte loop here is one comparison callback per byte in
  // the fuzz build.
  if (n == static_cast<long>(PAGE_SIZE) && std::memcmp(buf, kZeros, PAGE_SIZE) == 0) return;
  const uint8_t* bad = n == static_cast<long>(PAGE_SIZE) ? std::find_if(buf, buf + PAGE_SIZE, [](uint8_t b) { return b != 0; }) : buf;
  mismatch(n != static_cast<long>(PAGE_SIZE)
               ? fmt::format("{}: pread of {} page {}: {}", when, r->type->name, i, n)
               : fmt::format("{}: {} page {} (unmapped) in the page cache: byte +{} is {:#04x}, expected 0x00", when,
                             r->type->name, i, bad - buf, *bad));
}

void Worker::teardown() {
  release_held();
  for (auto& r : regions) {
    (void)s_->parent->munmap(r->addr.load(std::memory_order_relaxed), r->type->len);
    if (r->fd >= 0) (void)s_->sys->close_file(r->fd);
  }
}

}  // namespace mmlab::stress
