// The engine of `mmlab stress` (docs/STRESS.md).
//
// Exactness: every region belongs to one worker thread, the only one that
// changes its content or layout (write, device write through its own R/W pin,
// DONTNEED, FREE, munmap, mremap, mprotect, writes in its own children).
// Other threads touch it only in ways that change no content: pins held for a
// while (cross pins), forks of the shared parent, khugepaged. So the tracker
// knows each page's content exactly, but for MADV_FREE'd pages, which read
// their old content or zeros until written.
#include "stress/stress.h"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "fmt/format.h"
#include "mmlab/gup.h"
#include "mmlab/system.h"
#include "mmlab/tune.h"

namespace mmlab::stress {
namespace {

enum Op : unsigned {
  kRead, kWrite, kPin, kCrossPin, kPinFork, kFork, kMprotect, kDontneed, kPageout, kFree, kCold,
  kCollapse, kRemap, kMremap, kVariant, kNrOps
};
const char* const kOpNames[kNrOps] = {"read",     "write",   "pin",     "cross-pin", "pin-fork",
                                      "fork",     "mprotect", "dontneed", "pageout",  "free",
                                      "cold",     "collapse", "remap",    "mremap",   "variant"};
const unsigned kDefaultWeight[kNrOps] = {20, 20, 12, 8, 3, 3, 4, 4, 4, 3, 2, 2, 3, 3, 2};
constexpr unsigned kCrossPinSlots = 4;  // cross pins a worker holds between operations

enum class Backing : uint8_t { kAnonPrivate, kAnonShared, kFile, kHugetlbPrivate, kHugetlbShared };

struct TypeInfo {
  std::string name;
  Backing backing;
  uint64_t len, align;
  FsClass fs = FsClass::kShmem;
  unsigned huge_shift = 0;  // hugetlb page shift
  bool thp_advise = false;
};

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

bool is_private(Backing b) { return b == Backing::kAnonPrivate || b == Backing::kHugetlbPrivate; }
bool is_hugetlb(Backing b) { return b == Backing::kHugetlbPrivate || b == Backing::kHugetlbShared; }

enum class ForkMode : uint8_t { kNormal, kDontfork, kWipeonfork };

// One region and what the tracker expects of it.
struct Region {
  const TypeInfo* type = nullptr;
  std::atomic<uint64_t> addr{0};  // read by other threads' cross pins
  int fd = -1;
  bool ro = false;
  ForkMode fork_mode = ForkMode::kNormal;
  std::vector<uint8_t> val;   // each page is filled with one byte value
  std::vector<uint8_t> lazy;  // MADV_FREE'd: reads val or zeros until written
  // MADV_PAGEOUT'd since the page was last written or zapped: 1 + the
  // System's count of injected swap-in failures at that MADV_PAGEOUT (0: not
  // paged out). A swap-in failure since then may have stuck to the page.
  std::vector<uint64_t> paged_out;
  uint64_t pages() const { return type->len / PAGE_SIZE; }
};

struct Shared;

class Worker {
 public:
  Worker(Shared* s, unsigned id, uint64_t seed) : s_(s), id_(id), rng_(seed) {}
  bool setup(std::string* err);
  void run() { one_op(); }
  void release_held() {
    for (auto& h : held_) h.release();
  }
  void teardown();
  void verify_all(const char* when);
  void plant_corruption();
  std::vector<std::unique_ptr<Region>> regions;
  uint64_t ops[kNrOps] = {};
  std::map<std::string, uint64_t> errors;
  uint64_t quota = 0, done = 0;
  bool choices_spent() const;
  std::atomic<uint64_t> progress{0};   // operations finished, for the watchdog
  std::atomic<int> current{-1};        // the operation in progress (-1: none)

 private:
  void one_op();
  Op pick_op();
  Region* pick_region(bool (*eligible)(const Region&) = nullptr);
  uint8_t new_byte() { return static_cast<uint8_t>(1 + next() % 255); }
  uint64_t rnd(uint64_t n) { return n ? next() % n : 0; }
  // The next choice: the random stream, or Config::choices two bytes at a
  // time (zeros once they have run out).
  uint64_t next();
  void error(Op op, long ret) { errors[fmt::format("{}: {}", kOpNames[op], errno_name(static_cast<int>(-ret)))]++; }
  void mismatch(const std::string& what);
  // Whether a call this thread made since `before` (a value of
  // System::injected_on_this_thread()) was failed by injection; if so the
  // failure is an expected outcome, counted as "OP: injected SIG".
  bool injected_outcome(uint64_t before, const char* what, Signal sig);
  // A SIGBUS at page i of r that a failed swap-in explains: it was paged out
  // and a swap-in failure was injected (on any thread, or in khugepaged)
  // since. The unread folio stays in the swap cache and fails every fault
  // on the page, in every process sharing the swap entry, until the entry
  // goes (docs/STRESS.md). Counted as "OP: injected swap-in SIGBUS".
  bool swapin_outcome(const Region* r, uint64_t i, const char* what, Signal sig);
  bool map_region(Region* r);
  bool map_region_retrying(Region* r);
  void apply_fork_mode(Region* r);
  // Check page i of r as process p sees it: expected `want` (or zeros if lazy).
  void check_page(Process* p, Region* r, uint64_t i, uint8_t want, bool lazy, const char* what);
  void op_read();
  void op_write();
  void op_pin();
  void op_cross_pin();
  void op_pin_fork();
  void op_fork();
  void op_mprotect();
  void op_madvise(Op op, int advice);
  void race_swapin_failure(const Region* r, uint64_t i);
  void op_remap();
  void op_mremap();
  void op_variant();

  Shared* s_;
  unsigned id_;
  std::mt19937_64 rng_;
  size_t choice_at_ = 0;
  GupPages held_[kCrossPinSlots];  // cross pins held between operations
};

struct Shared {
  const Config* cfg;
  std::unique_ptr<System> sys;
  Process* parent = nullptr;
  std::vector<const TypeInfo*> types;
  std::vector<std::unique_ptr<Worker>> workers;
  std::vector<unsigned> mix_cdf;  // cumulative weights by Op
  bool khugepaged = false;
  std::chrono::steady_clock::time_point start;
  std::atomic<bool> stop{false};
  std::mutex mu;  // guards the result's vectors below
  // Held by a thread from taking a range from the kernel's placement until
  // it no longer needs to clean a failed attempt up: a failed mremap (or
  // MAP_FIXED mmap) may have unmapped the thread's reservation already, and
  // unmapping that range again must not hit another thread's new mapping
  // placed into the hole meanwhile.
  std::mutex placement;
  Result* res;
  uint64_t mismatches_kept = 0;
};

constexpr uint64_t kMaxMismatchesKept = 20;

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

bool Worker::injected_outcome(uint64_t before, const char* what, Signal sig) {
  if (System::injected_on_this_thread() == before) return false;
  errors[fmt::format("{}: injected {}", what, signal_name(sig))]++;
  return true;
}

bool Worker::swapin_outcome(const Region* r, uint64_t i, const char* what, Signal sig) {
  if (sig != Signal::kSigbus || !r->paged_out[i]) return false;
  if (static_cast<uint64_t>(s_->sys->injected("swapin")) < r->paged_out[i]) return false;
  errors[fmt::format("{}: injected swap-in SIGBUS", what)]++;
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
  std::lock_guard<std::mutex> placed(s_->placement);
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

bool Worker::setup(std::string* err) {
  for (const TypeInfo* t : s_->types) {
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
  return c.empty() ? nullptr : c[rnd(c.size())];
}

void Worker::check_page(Process* p, Region* r, uint64_t i, uint8_t want, bool lazy, const char* what) {
  const uint64_t a = r->addr.load(std::memory_order_relaxed) + i * PAGE_SIZE;
  int64_t bad = -1;
  uint8_t found = 0;
  const uint64_t inj = System::injected_on_this_thread();
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
    const uint64_t inj = System::injected_on_this_thread();
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
    const uint64_t inj = System::injected_on_this_thread();
    AccessResult res = c1->fill(a, v, PAGE_SIZE);
    if (!res.ok()) {
      if (injected_outcome(inj, "child write", res.sig) || swapin_outcome(r, i, "child write", res.sig)) continue;
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
    // Only private anonymous memory goes to swap (docs/NOTES.md, reclaim).
  }
  // PAGEOUT is followed by a swap-in of one of the pages.
  const uint64_t k = i + rnd(n);
  const bool swaps = advice == MADV_PAGEOUT && r->type->backing == Backing::kAnonPrivate;
  if (swaps && s_->cfg->race_swapin_failure) race_swapin_failure(r, k);
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
  std::unique_lock<std::mutex> placed(s_->placement);
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
  ops[op]++;
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

void Worker::verify_all(const char* when) {
  for (auto& r : regions)
    for (uint64_t i = 0; i < r->pages(); i++) check_page(s_->parent, r.get(), i, r->val[i], r->lazy[i], when);
}

void Worker::teardown() {
  release_held();
  for (auto& r : regions) {
    (void)s_->parent->munmap(r->addr.load(std::memory_order_relaxed), r->type->len);
    if (r->fd >= 0) (void)s_->sys->close_file(r->fd);
  }
}

// The stop-the-world point: every worker has released its cross pins and
// waits; khugepaged stops while the checker runs.
void quiesce_and_check(Shared* s) {
  if (s->khugepaged) s->sys->stop_khugepaged_thread();
  // An injected folio_trylock failure has no holder to look at the folio
  // again when it unlocks (the model's substitute for reclaim noticing it):
  // a swap-cache folio whose last swap PTE went stays in the swap cache, as
  // in the kernel until reclaim. Run the model's reclaim stand-in first,
  // with folio_trylock not failing: the stand-in tries once, where the
  // kernel's reclaim would come back. Re-arming restarts the site's call
  // numbers, so a new seed keeps its decisions from repeating.
  if (s->cfg->inject_rate > 0) {
    (void)s->sys->inject("folio_trylock", InjectSpec{});
    (void)s->sys->run_shrinkers();
    s->sys->inject_seed(s->cfg->seed + s->res->checks + 1);
    (void)s->sys->inject("folio_trylock", InjectSpec{.mode = InjectSpec::Mode::kProbability, .probability = s->cfg->inject_rate});
  }
  CheckReport rep = s->sys->check();
  {
    std::lock_guard<std::mutex> g(s->mu);
    s->res->checks++;
    for (const Violation& v : rep.violations)
      s->res->violations.push_back(fmt::format("{} at {}\n{}", v.invariant, v.where, v.dump));
  }
  bool all_done = true;
  for (auto& w : s->workers) all_done &= (w->quota && w->done >= w->quota) || w->choices_spent();
  const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - s->start).count();
  if (all_done || (s->cfg->seconds > 0 && el >= s->cfg->seconds) || !rep.ok()) s->stop = true;
  if (s->khugepaged && !s->stop) (void)s->sys->start_khugepaged_thread();
}

struct Completion {
  Shared* s;
  void operator()() noexcept { quiesce_and_check(s); }
};

int set_up_system(Shared* s, std::string* err) {
  const Config& cfg = *s->cfg;
  SystemConfig sc;
  sc.ram_bytes = cfg.ram;
  // FOLL_LONGTERM pins migrate their pages out of ZONE_MOVABLE.
  sc.movable_bytes = cfg.movable < 0 ? round_down(cfg.ram / 4, 4ull << 20) : static_cast<uint64_t>(cfg.movable);
  int e = 0;
  s->sys = System::create(sc, &e);
  if (!s->sys) {
    *err = fmt::format("System::create: {}", errno_name(-e));
    return -1;
  }
  System* sys = s->sys.get();
  (void)sys->sysfs_write("transparent_hugepage/enabled", "always");
  for (unsigned order = 2; order <= 8; order++)
    (void)sys->sysfs_write(fmt::format("transparent_hugepage/hugepages-{}kB/enabled", 4u << order), "always");
  (void)sys->sysfs_write("transparent_hugepage/khugepaged/scan_sleep_millisecs", "0");
  (void)sys->sysfs_write("transparent_hugepage/khugepaged/alloc_sleep_millisecs", "0");
  // Swap on a block device (large folios swap out whole) and on a file
  // (split first): the block device is small so that swap spills to the file.
  if (int r = cfg.swap_blkdev ? sys->add_swap(16ull << 20, SwapKind::kBlkdev) : 0; r < 0) {
    *err = fmt::format("swap on a block device: {}", errno_name(-r));
    return -1;
  }
  if (int r = cfg.swap_file ? sys->add_swap(cfg.ram / 8, SwapKind::kFile) : 0; r < 0) {
    *err = fmt::format("swap on a file: {}", errno_name(-r));
    return -1;
  }
  return 0;
}

// A hugetlb pool for a type: each thread's region, a copy for a pinned
// page across fork and one for a child's write, and slack for remaps.
bool set_up_hugetlb(Shared* s, const TypeInfo& t, unsigned per_thread, std::string* why) {
  const std::string path = t.huge_shift == PUD_SHIFT ? "hugepages/hugepages-1048576kB/nr_hugepages"
                                                     : "hugepages/hugepages-2048kB/nr_hugepages";
  std::string cur;
  (void)s->sys->sysfs_read(path, &cur);
  const long want = std::stol(cur.empty() ? "0" : cur) + static_cast<long>(per_thread * s->cfg->threads);
  (void)s->sys->sysfs_write(path, std::to_string(want));
  (void)s->sys->sysfs_read(path, &cur);
  if (std::stol(cur.empty() ? "0" : cur) < want) {
    *why = fmt::format("the hugetlb pool got {} of {} pages (--ram {}M)", cur, want, s->cfg->ram >> 20);
    return false;
  }
  return true;
}

}  // namespace

std::vector<std::string> op_kinds() { return {std::begin(kOpNames), std::end(kOpNames)}; }

// Every site, swapin included (the tracker accepts the SIGBUS a failed
// swap-in leaves on a paged-out page: Worker::swapin_outcome).
std::vector<std::string> inject_sites() { return System::inject_sites(); }

std::vector<std::string> type_names() {
  std::vector<std::string> v;
  for (const TypeInfo& t : all_types()) v.push_back(t.name);
  return v;
}

uint64_t Result::total_ops() const {
  uint64_t n = 0;
  for (const auto& [k, v] : ops) n += v;
  return n;
}

bool run(const Config& cfg, Result* out, std::string* err) {
  static const std::vector<TypeInfo> types = all_types();
  Shared s;
  s.cfg = &cfg;
  s.res = out;
  if (set_up_system(&s, err) < 0) return false;
  for (const TypeInfo& t : types) {
    if (std::find(cfg.types.begin(), cfg.types.end(), t.name) == cfg.types.end()) {
      out->not_run[t.name] = "not in --types";
      continue;
    }
    std::string why;
    if (is_hugetlb(t.backing)) {
      // 2M: also one page per cross-pin slot: a held pin keeps a page that
      // its owner zapped out of the pool, and the owner's next fault needs
      // another (the kernel's too: the restored reservation is not a page).
      const unsigned per_thread = t.huge_shift == PUD_SHIFT ? 3 : 4 + kCrossPinSlots;
      if (!set_up_hugetlb(&s, t, per_thread, &why)) {
        out->not_run[t.name] = why;
        continue;
      }
    }
    s.types.push_back(&t);
  }
  if (s.types.empty()) {
    *err = "no memory type to run";
    return false;
  }
  if (!cfg.choices.empty() && (cfg.threads != 1 || cfg.khugepaged_thread)) {
    *err = "choices from bytes need one thread and no khugepaged thread";
    return false;
  }
  unsigned cum = 0;
  for (unsigned op = 0; op < kNrOps; op++) {
    auto it = cfg.mix.find(kOpNames[op]);
    cum += it == cfg.mix.end() ? kDefaultWeight[op] : it->second;
    s.mix_cdf.push_back(cum);
  }
  if (cum == 0) {
    *err = "--mix gives every operation weight 0";
    return false;
  }
  s.parent = s.sys->new_process("stress");
  for (unsigned t = 0; t < cfg.threads; t++) {
    s.workers.push_back(std::make_unique<Worker>(&s, t, cfg.seed * 1000003 + t));
    if (cfg.ops) s.workers.back()->quota = cfg.ops / cfg.threads + (t < cfg.ops % cfg.threads ? 1 : 0);
  }
  for (auto& w : s.workers)
    if (!w->setup(err)) return false;
  if (cfg.inject_rate > 0) {
    s.sys->inject_seed(cfg.seed);
    for (const std::string& site : inject_sites()) {
      InjectSpec spec{.mode = InjectSpec::Mode::kProbability, .probability = cfg.inject_rate};
      if (int r = s.sys->inject(site, spec); r < 0) {
        *err = fmt::format("inject {}: {}", site, errno_name(-r));
        return false;
      }
    }
  }
  if (cfg.race_swapin_failure) {
    if (int r = s.sys->inject("swapin", InjectSpec{.mode = InjectSpec::Mode::kProbability, .probability = 1}); r < 0) {
      *err = fmt::format("inject swapin: {}", errno_name(-r));
      return false;
    }
  }
  s.khugepaged = cfg.khugepaged_thread && s.sys->start_khugepaged_thread() == 0;
  if (!cfg.khugepaged_thread) out->not_run["khugepaged"] = "no khugepaged thread (choices from bytes)";
  else if (!s.khugepaged) out->not_run["khugepaged"] = "the khugepaged thread did not start";
  s.start = std::chrono::steady_clock::now();

  std::barrier<Completion> barrier(static_cast<std::ptrdiff_t>(cfg.threads), Completion{&s});
  std::vector<std::thread> threads;
  for (auto& wp : s.workers) {
    Worker* w = wp.get();
    threads.emplace_back([&s, w, &barrier] {
      while (!s.stop.load()) {
        for (uint64_t k = 0; k < s.cfg->check_every && !(w->quota && w->done >= w->quota) && !w->choices_spent();
             k++, w->done++) {
          w->run();
        }
        w->release_held();
        barrier.arrive_and_wait();
      }
    });
  }
  // A thread that makes no progress for kHangSeconds is a hang in the
  // model: report where each thread is and end the process (the stuck
  // thread cannot be unwound).
  // The workers' end wakes it at once (a short run must not wait out its second).
  bool finished = false;
  std::mutex finished_mu;
  std::condition_variable finished_cv;
  std::thread watchdog([&] {
    constexpr int kHangSeconds = 60;
    std::vector<uint64_t> last(s.workers.size(), 0);
    std::vector<int> still(s.workers.size(), 0);
    for (;;) {
      {
        std::unique_lock<std::mutex> g(finished_mu);
        if (finished_cv.wait_for(g, std::chrono::seconds(1), [&] { return finished; })) break;
      }
      for (size_t t = 0; t < s.workers.size(); t++) {
        Worker* w = s.workers[t].get();
        const uint64_t p = w->progress.load(std::memory_order_relaxed);
        const int cur = w->current.load(std::memory_order_relaxed);
        still[t] = (p == last[t] && cur >= 0) ? still[t] + 1 : 0;
        last[t] = p;
        if (still[t] < kHangSeconds) continue;
        std::fprintf(stdout, "HANG: thread %zu made no progress for %d s in operation '%s' (after %llu operations)\n", t,
                     kHangSeconds, kOpNames[cur], static_cast<unsigned long long>(p));
        if (s.cfg->on_hang) s.cfg->on_hang();
        std::fflush(stdout);
        std::_Exit(1);
      }
    }
  });
  for (auto& t : threads) t.join();
  {
    std::lock_guard<std::mutex> g(finished_mu);
    finished = true;
  }
  finished_cv.notify_one();
  watchdog.join();
  out->elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - s.start).count();
  if (s.khugepaged) s.sys->stop_khugepaged_thread();

  // The final sweep and the teardown run without injected failures.
  const bool injecting = cfg.inject_rate > 0 || cfg.race_swapin_failure;
  for (const std::string& site : System::inject_sites())
    if (int64_t n = s.sys->injected(site); injecting && n >= 0) out->injected[site] = static_cast<uint64_t>(n);
  s.sys->inject_off_all();
  if (cfg.plant_corruption) s.workers[0]->plant_corruption();
  for (auto& w : s.workers) w->verify_all("final sweep");
  for (unsigned op = 0; op < kNrOps; op++) {
    uint64_t n = 0;
    for (auto& w : s.workers) n += w->ops[op];
    out->ops[kOpNames[op]] = n;
  }
  for (auto& w : s.workers)
    for (const auto& [k, v] : w->errors) out->errors[k] += v;
  std::string v;
  if (s.sys->sysfs_read("transparent_hugepage/khugepaged/full_scans", &v) == 0) out->khugepaged_full_scans = std::stol(v);
  if (s.sys->sysfs_read("transparent_hugepage/khugepaged/pages_collapsed", &v) == 0) out->khugepaged_collapsed = std::stol(v);
  for (const char* st : {"pswpin", "pswpout", "thp_fault_alloc", "thp_collapse_alloc", "pgmigrate_success"})
    out->stats[st] = s.sys->vmstat(st);
  for (unsigned order = 2; order <= 9; order++) {
    out->stats[fmt::format("mthp.order{}.anon_fault_alloc", order)] = s.sys->mthp_stat(order, "anon_fault_alloc");
    out->stats[fmt::format("mthp.order{}.swpout", order)] = s.sys->mthp_stat(order, "swpout");
  }
  for (const std::string& w : s.sys->warnings()) out->violations.push_back("model warning: " + w);

  // The end: everything unmapped and exited, the pools emptied; the checker
  // then proves that no frame or page-table page is left in use.
  for (auto& w : s.workers) w->teardown();
  s.parent->exit();
  (void)s.sys->sysfs_write("hugepages/hugepages-2048kB/nr_hugepages", "0");
  (void)s.sys->sysfs_write("hugepages/hugepages-1048576kB/nr_hugepages", "0");
  (void)s.sys->run_shrinkers();
  CheckReport end = s.sys->check();
  for (const Violation& x : end.violations) out->violations.push_back(fmt::format("at the end: {} at {}\n{}", x.invariant, x.where, x.dump));
  out->checks++;
  // The kernel's own frames stay: the zero page, and the huge zero folio
  // once made (the kernel frees it only under memory pressure).
  const uint64_t kernel_frames = 1 + (s.sys->vmstat("thp_zero_page_alloc") > 0 ? HPAGE_PMD_NR : 0);
  const uint64_t in_use = s.sys->nr_total_pages() - s.sys->nr_free_pages();
  out->frames_leaked = in_use > kernel_frames ? in_use - kernel_frames : 0;
  return true;
}

}  // namespace mmlab::stress
