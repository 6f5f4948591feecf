// System: one simulated machine (its Kernel and its processes).
#include <algorithm>
#include <cstdlib>
#include <iterator>

#include "sync/cpu.h"
#include "check/checker.h"
#include "mm/variants.h"
#include "fmt/format.h"
#include "gup/gup.h"
#include "khugepaged/khugepaged.h"
#include "mm/filemap.h"
#include "mm/huge_mm.h"
#include "mm/hugetlb.h"
#include "mm/kernel.h"
#include "mm/mm.h"
#include "mm/rmap.h"
#include "mm/shm.h"
#include "mm/swapfile.h"
#include "mmlab/system.h"
#include "mmlab/trace.h"
#include "pgtable/pgtable.h"
#include "phys/frame_store.h"
#include "tlb/tlb.h"

namespace mmlab {

namespace {

// Called on a folio's last reference, before its frames are freed.
bool on_folio_free(Kernel* k, Folio* f) {
  if (folio_test_hugetlb(f)) return free_huge_folio(k, f);  // back to its pool
  if (folio_test_large(f)) {
    folio_unqueue_deferred_split(f);
    if (folio_test_anon(f)) k->stats->count_mthp(folio_order(f), MthpStat::nr_anon, -1);
  }
  return false;  // the allocator takes the frames
}

}  // namespace

std::unique_ptr<System> System::create(const SystemConfig& cfg, int* err) {
  std::unique_ptr<System> sys(new System);
  // The clock first: every event of the System, its first allocations
  // included, carries it in the trace.
  sys->clock_ = std::make_unique<std::atomic<uint64_t>>(0);
  sys->trace_pid_ = trace::attach_system(sys->clock_.get());
  auto k = std::make_unique<Kernel>();
  k->stats = std::make_unique<Stats>();
  PhysConfig pc;
  pc.ram_bytes = cfg.ram_bytes;
  pc.movable_bytes = cfg.movable_bytes;
  pc.prefault = cfg.prefault;
  pc.host_thp = cfg.host_thp;
  int e = 0;
  k->phys = PhysMem::create(pc, k->stats.get(), &e);
  if (!k->phys) {
    if (err) *err = e ? e : -ENOMEM;
    return nullptr;
  }
  k->phys->owner = k.get();
  // The tables through which mm/ and fault/ reach the layers above them.
  k->gup_hooks = &kGupHooks;
  k->khugepaged_hooks = &kKhugepagedHooks;
  Kernel* kp = k.get();
  k->phys->set_folio_free_hook([kp](Folio* f) { return on_folio_free(kp, f); });
  sys->k_ = std::move(k);
  sys->khugepaged_ = std::make_unique<Khugepaged>(kp, sys->clock_.get());
  if (err) *err = 0;
  return sys;
}

System::~System() {
  if (khugepaged_) khugepaged_->stop_thread();
  if (k_ && k_->phys) inject_off_all();  // teardown runs without injected failures
  for (auto& p : procs_) p->exit();
  procs_.clear();
  if (k_ && k_->swap) (void)mmlab::swap_writeback_wait(k_.get());  // the I/O in flight ends before the frames go
  trace::detach_system(trace_pid_);
}

bool parse_probability(const std::string& text, double* out) {
  std::string t = text;
  double scale = 1;
  if (!t.empty() && t.back() == '%') {
    t.pop_back();
    scale = 100;
  }
  if (t.empty() || t == "." || t.find_first_not_of("0123456789.") != std::string::npos ||
      std::count(t.begin(), t.end(), '.') > 1)
    return false;
  const double v = std::strtod(t.c_str(), nullptr) / scale;
  if (!(v >= 0 && v <= 1)) return false;
  *out = v;
  return true;
}

static_assert(static_cast<int>(InjectSpec::Mode::kOff) == static_cast<int>(FaultSpec::Mode::kOff) &&
              static_cast<int>(InjectSpec::Mode::kTimes) == static_cast<int>(FaultSpec::Mode::kTimes) &&
              static_cast<int>(InjectSpec::Mode::kEvery) == static_cast<int>(FaultSpec::Mode::kEvery) &&
              static_cast<int>(InjectSpec::Mode::kProbability) == static_cast<int>(FaultSpec::Mode::kProbability));

int System::inject(const std::string& site, const InjectSpec& spec) {
  FaultSite s;
  if (!fault_site_from_name(site, &s)) return -EINVAL;
  FaultSpec f;
  f.mode = static_cast<FaultSpec::Mode>(spec.mode);
  f.order = spec.order;
  f.n = spec.n;
  f.probability = spec.probability;
  f.after = spec.after;
  return k_->phys->fault_injector().set(s, f);
}

void System::inject_off_all() { k_->phys->fault_injector().clear_all(); }

void System::inject_seed(uint64_t seed) { k_->phys->fault_injector().seed(seed); }

int64_t System::injected(const std::string& site) const {
  FaultSite s;
  if (!fault_site_from_name(site, &s)) return -1;
  return static_cast<int64_t>(k_->phys->fault_injector().injected(s));
}

uint64_t System::injected_on_this_thread() { return FaultInjector::injected_on_this_thread(); }

uint64_t System::injected_on_this_thread(const std::string& site) {
  FaultSite s;
  return fault_site_from_name(site, &s) ? FaultInjector::injected_on_this_thread(s) : 0;
}

std::vector<std::string> System::inject_sites() {
  std::vector<std::string> v;
  for (size_t i = 0; i < kNrFaultSites; i++) v.emplace_back(fault_site_name(static_cast<FaultSite>(i)));
  return v;
}

int System::migrate_this_thread(int cpu) { return mmlab::migrate_this_thread(cpu); }

Process* System::new_process(const std::string& name) {
  auto mm = mm_alloc(k_.get());
  if (!mm) return nullptr;
  return add_process(std::move(mm), name);
}

Process* System::add_process(std::unique_ptr<Mm> mm, const std::string& name) {
  const int id = mm->mm_id;
  std::string n = name.empty() ? fmt::format("p{}", id) : name;
  auto p = std::unique_ptr<Process>(new Process(this, std::move(mm), n, id));
  Process* raw = p.get();
  std::lock_guard<std::mutex> g(procs_lock_);
  procs_.push_back(std::move(p));
  return raw;
}

std::vector<Process*> System::processes() const {
  std::lock_guard<std::mutex> g(procs_lock_);
  std::vector<Process*> v;
  for (auto& p : procs_) v.push_back(p.get());
  return v;
}

size_t System::release_exited() {
  std::lock_guard<std::mutex> g(procs_lock_);
  const size_t before = procs_.size();
  std::erase_if(procs_, [](const std::unique_ptr<Process>& p) { return p->exited(); });
  return before - procs_.size();
}

int System::sysfs_write(const std::string& path, const std::string& value) {
  int r = hugetlb_sysfs_write(k_.get(), path, value);
  if (r != -ENOENT) return r;
  r = settings_write(k_->settings, path, value);
  if (!r) khugepaged_->sysfs_written(path);  // start_stop_khugepaged, the sleep stores' wakeup
  // A file with no store is mode 0444: kernfs refuses to open it for
  // writing, root included.
  std::string ignored;
  if (r == -ENOENT && sysfs_read(path, &ignored) == 0) return -EACCES;
  return r;
}

int System::sysfs_read(const std::string& path, std::string* value) const {
  // Per-size statistics: transparent_hugepage/hugepages-<N>kB/stats/<item>.
  const std::string pre = "transparent_hugepage/hugepages-";
  if (path.rfind(pre, 0) == 0) {
    auto kb_end = path.find("kB/stats/");
    if (kb_end != std::string::npos) {
      long kb = std::strtol(path.substr(pre.size(), kb_end - pre.size()).c_str(), nullptr, 10);
      for (unsigned o = 2; o <= PMD_ORDER; o++) {
        if (kb != static_cast<long>((PAGE_SIZE << o) / 1024)) continue;
        const std::string item = path.substr(kb_end + 9);
        // The collapse statistics come with the mTHP collapse series; the
        // write-fault ones with the mTHP CoW policies (a model extension:
        // the posting declares them without sysfs files).
        if (item.rfind("collapse_", 0) == 0 && !k_->settings.khugepaged_mthp.load()) return -ENOENT;
        if (item.rfind("wp_fault_", 0) == 0 && k_->settings.cow_policy.load() == CowPolicy::kBase) return -ENOENT;
        int64_t v = mthp_stat(o, item);
        if (v < 0) return -ENOENT;
        *value = std::to_string(v);
        return 0;
      }
      return -ENOENT;
    }
  }
  int r = hugetlb_sysfs_read(k_.get(), path, value);
  if (r != -ENOENT) return r;
  r = khugepaged_->sysfs_read(path, value);
  if (r != -ENOENT) return r;
  return settings_read(k_->settings, path, value);
}

uint64_t System::clock_ns() const { return clock_->load(); }
int System::advance_clock(uint64_t ns) { return khugepaged_->advance(ns); }
int System::run_khugepaged(unsigned full_scans) { return khugepaged_->run_full_scans(full_scans); }
int System::start_khugepaged_thread(uint64_t speedup) { return khugepaged_->start_thread(speedup); }
void System::stop_khugepaged_thread() { khugepaged_->stop_thread(); }
bool System::khugepaged_running() const { return khugepaged_->kthread_running(); }
void System::set_khugepaged_wake_cost(std::function<uint64_t(const KhugepagedWakeStats&)> cost_ns) {
  khugepaged_->set_wake_cost(std::move(cost_ns));
}
CollapseTiming System::collapse_timing() const { return khugepaged_->timing(); }
KhugepagedTiming System::khugepaged_timing() const { return khugepaged_->wake_timing(); }

int System::tune(const std::string& key, const std::string& value) { return tune_write(k_->settings, key, value); }
int System::tune_read(const std::string& key, std::string* value) const {
  return mmlab::tune_read(k_->settings, key, value);
}

int64_t System::vmstat(const std::string& name) const {
  VmStat s;
  if (!vmstat_from_name(name, &s)) return -1;
  return k_->stats->read(s);
}

int64_t System::counter(const std::string& name) const {
  Event e;
  if (event_from_name(name, &e)) return static_cast<int64_t>(k_->stats->read(e));
  OrderStat c;
  unsigned order;
  if (order_stat_from_name(name, &c, &order)) return static_cast<int64_t>(k_->stats->read_order(order, c));
  return -1;
}

std::map<std::string, int64_t> System::all_counters() const {
  std::map<std::string, int64_t> c;
  for (const std::string& n : counter_names()) c[n] = counter(n);
  for (unsigned i = 0; i < static_cast<unsigned>(VmStat::kNr); i++)
    c[vmstat_name(static_cast<VmStat>(i))] = k_->stats->read(static_cast<VmStat>(i));
  return c;
}

System::TlbOccupancy System::tlb_occupancy() const {
  const TlbReach l1 = tlb_reach(&k_->tlb, 1), l2 = tlb_reach(&k_->tlb, 2);
  return {l1.entries, l1.bytes, l2.entries, l2.bytes};
}

int64_t System::mthp_stat(unsigned order, const std::string& name) const {
  MthpStat s;
  if (!mthp_stat_from_name(name, &s)) return -1;
  return k_->stats->read_mthp(order, s);
}

EventTally::EventTally() : v_(Stats::kTallySlots) {
  int64_t* was = Stats::set_thread_tally(v_.data());
  VM_BUG_ON(was != nullptr, "a second EventTally opened on one thread");
}

EventTally::~EventTally() { Stats::set_thread_tally(nullptr); }

int EventTally::slot(const std::string& counter) { return Stats::tally_slot(counter); }

uint64_t host_memory_available() { return host_available_memory(); }

uint64_t system_max_ram_bytes() { return PhysMem::max_ram_bytes(); }

SystemHostMemory system_host_memory(uint64_t ram_bytes) {
  return {frame_store_cost_at_create(ram_bytes), frame_store_footprint(ram_bytes)};
}

std::vector<CounterInfo> counter_catalog() {
  std::vector<CounterInfo> v;
  for (unsigned i = 0; i < static_cast<unsigned>(Event::kNr); i++)
    v.push_back({event_name(static_cast<Event>(i)), "event", event_description(static_cast<Event>(i))});
  for (unsigned i = 0; i < static_cast<unsigned>(VmStat::kNr); i++)
    v.push_back({vmstat_name(static_cast<VmStat>(i)), "vmstat",
                 "the /proc/vmstat item of this name, counted where the kernel counts it"});
  for (unsigned i = 0; i < static_cast<unsigned>(MthpStat::kNr); i++)
    v.push_back({fmt::format("transparent_hugepage/hugepages-<size>kB/stats/{}", mthp_stat_name(static_cast<MthpStat>(i))),
                 "mthp", "the kernel's per-size mTHP statistic (Documentation/admin-guide/mm/transhuge.rst)"});
  for (unsigned i = 0; i < static_cast<unsigned>(OrderStat::kNr); i++)
    v.push_back({fmt::format("{}.order<N>", order_stat_name(static_cast<OrderStat>(i))), "per-order",
                 order_stat_description(static_cast<OrderStat>(i))});
  return v;
}

std::vector<std::string> counter_names() {
  std::vector<std::string> v;
  for (unsigned i = 0; i < static_cast<unsigned>(Event::kNr); i++) v.push_back(event_name(static_cast<Event>(i)));
  for (auto& n : order_stat_names()) v.push_back(n);
  return v;
}

void System::reset_counters() { k_->stats->reset_events(); }

std::string System::vmstat_text() const {
  // Formatted in place: a state snapshot (mmlab diff, run --states) reads
  // this after every statement.
  std::string out;
  out.reserve(static_cast<size_t>(VmStat::kNr) * 32);
  auto it = std::back_inserter(out);
  for (unsigned i = 0; i < static_cast<unsigned>(VmStat::kNr); i++)
    fmt::format_to(it, "{} {}\n", vmstat_name(static_cast<VmStat>(i)), k_->stats->read(static_cast<VmStat>(i)));
  fmt::format_to(it, "nr_free_pages {}\n", k_->phys->nr_free_pages());
  return out;
}

std::vector<std::string> System::kernel_log() const {
  MutexGuard g(&k_->warn_lock);
  return k_->kernel_log;
}

std::vector<std::string> System::warnings() const {
  MutexGuard g(&k_->warn_lock);
  return k_->warnings;
}

CheckReport check_system(const System& sys, const CheckerExtraRefs& extra_refs) {
  std::vector<CheckedMm> mms;
  for (Process* p : sys.processes()) mms.push_back({p->mm(), p->name(), p->pid()});
  return check_kernel(sys.kernel(), mms, extra_refs);
}

CheckReport System::check() const { return check_system(*this, CheckerExtraRefs{}); }

CheckReport System::check_with_refs(const std::map<uint64_t, long>& refs) const {
  return check_system(*this, [&](const Folio* f) -> long {
    auto it = refs.find(folio_pfn(f));
    return it == refs.end() ? 0 : it->second;
  });
}

uint64_t System::nr_free_pages() const { return k_->phys->nr_free_pages(); }

void System::set_data_timing(bool on) {
  k_->stats->reset_data_time();
  k_->stats->set_data_timing(on);
}

uint64_t System::data_time_ns(const std::string& mechanism) const {
  if (mechanism == "zero") return k_->stats->read_data_ns(DataTime::kZero);
  if (mechanism == "copy") return k_->stats->read_data_ns(DataTime::kCopy);
  if (mechanism == "user") return k_->stats->read_data_ns(DataTime::kUser);
  return 0;
}

FrameStoreInfo System::frame_store_info() const {
  const FrameStore& fs = k_->phys->frame_store();
  FrameStore::Residency r = fs.residency();
  return {fs.uses(), fs.thp_advised(), r.rss, r.anon_huge};
}
uint64_t System::nr_total_pages() const { return k_->phys->nr_frames(); }

// ---- files and swap: the system calls of mm/filemap.h and mm/swapfile.h ----

int System::create_file(uint64_t size, FsClass fs, unsigned hugetlb_shift, const std::string& name) {
  return memfd_create(k_.get(), size, fs, hugetlb_shift, name);
}
int System::create_tmpfs_file(uint64_t size, const std::string& huge, const std::string& name, bool noswap) {
  ShmemHuge h;
  if (huge == "always") h = ShmemHuge::kAlways;
  else if (huge == "within_size") h = ShmemHuge::kWithinSize;
  else if (huge == "advise") h = ShmemHuge::kAdvise;
  else if (huge == "never") h = ShmemHuge::kNever;
  else return -EINVAL;
  return tmpfs_create_file(k_.get(), size, static_cast<uint8_t>(h), noswap, name);
}
long System::file_pread(int fd, uint64_t off, void* buf, uint64_t len) {
  return ksys_pread64(k_.get(), fd, off, buf, len);
}
long System::file_pwrite(int fd, uint64_t off, const void* buf, uint64_t len) {
  return ksys_pwrite64(k_.get(), fd, off, buf, len);
}
int System::close_file(int fd) { return close_fd(k_.get(), fd); }
int System::file_reopen_read_only(int fd) { return mmlab::file_reopen_read_only(k_.get(), fd); }
int System::file_fadvise_dontneed(int fd) { return invalidate_mapping_pages(k_.get(), fd); }
int System::file_ftruncate(int fd, int64_t length) {
  return do_sys_ftruncate(k_.get(), fd, length);
}
int System::file_punch_hole(int fd, int64_t off, int64_t len) {
  constexpr int FALLOC_FL_KEEP_SIZE = 0x01, FALLOC_FL_PUNCH_HOLE = 0x02;
  return ksys_fallocate(k_.get(), fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len);
}
long System::shmget(uint64_t size, bool hugetlb) { return ksys_shmget(k_.get(), size, hugetlb ? kShmHugetlb : 0); }
int System::shmctl(int id, int cmd) { return ksys_shmctl(k_.get(), id, cmd); }
int System::add_swap(uint64_t bytes, SwapKind kind) { return swapon(k_.get(), bytes, kind); }

long System::swap_writeback_wait() { return mmlab::swap_writeback_wait(k_.get()); }

// The shrinkers the model has: the deferred-split queue's, shmem's huge
// folios past EOF (the superblock shrinker's free_cached_objects) and the
// swap cache's stand-in for LRU reclaim.
long System::run_shrinkers() {
  // A shrinker runs later than the swap writes started before it: they are done.
  (void)mmlab::swap_writeback_wait(k_.get());
  long split = deferred_split_scan(k_.get());
  split += shmem_unused_huge_shrink(k_.get());  // the tmpfs superblocks' shrinkers
  (void)shrink_swap_cache(k_.get());  // the answer counts split folios only
  return split;
}

}  // namespace mmlab
