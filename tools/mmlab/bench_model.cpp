// The `mmlab bench` suites that measure the model's own costs:
//   fault   fault-in of a region with 4K, 64K and 2M folios, split into the
//           zeroing (beside a native memset of the same bytes) and the
//           bookkeeping per fault (allocation, walk, rmap, LRU, statistics)
//   fork    fork of a populated region, then CoW faults: the copy (beside a
//           native memcpy) and the bookkeeping per CoW fault
//   data    bulk loads and stores through the CPU model on pre-faulted pages,
//           on the plain and on the atomic path, beside native passes
//   collapse MADV_COLLAPSE: time per 2M, the copy's share, mmap_lock
//           write-hold time, bytes copied
//   corpus  a fixed subset of the selftest replays on the model and on this
//           machine's kernel (root), and their ratio
// Every System here gets a frame store recycled from a discarded warm-up
// round of the same case (host THP advised), and every timed region counts
// the host faults it took: a row where the host had to provide memory is
// marked, since its time would be the host's first touch, not the model.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <sstream>
#include <thread>

#include "bench_report.h"
#include "fmt/format.h"
#include "gup_bench.h"
#include "mmlab/scenario.h"
#include "mmlab/system.h"

// Host headers last: <sys/mman.h> defines PROT_*/MAP_*/MADV_* as macros, and
// include/mmlab/types.h declares the model's constants under the same names
// (with the same values).
#include <sys/mman.h>

#ifndef MMLAB_SOURCE_DIR
#define MMLAB_SOURCE_DIR "."
#endif

namespace mmlab::cli {

uint64_t folio_bytes_of(const std::string& label) {
  uint64_t n = std::strtoull(label.c_str(), nullptr, 10);
  return label.find('M') != std::string::npos ? n << 20 : n << 10;
}

const char* const kFrameStorePreparation =
    "recycled: every case runs once untimed first, so its timed rounds reuse that round's frame store (the same "
    "frames: allocation is deterministic); MADV_HUGEPAGE on the store; host faults counted per timed region";

void Report::add(const std::string& s) {
  text += s;
  std::fputs(s.c_str(), stdout);
  std::fflush(stdout);
}

void progress(const std::string& what) {
  if (isatty(STDOUT_FILENO)) {
    std::fprintf(stderr, "\r\033[K  running %s ...", what.c_str());
    std::fflush(stderr);
  }
}

void progress_done() {
  if (isatty(STDOUT_FILENO)) std::fprintf(stderr, "\r\033[K");
}

std::string first_touch_note(long host_faults, uint64_t pages) {
  if (pages == 0 || static_cast<uint64_t>(host_faults) * 100 <= pages) return "";
  return " (host first touch: not the model's time)";
}

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct FolioCase {
  const char* name;
  const char* sysfs_dir;  // hugepages-<N>kB to set to always, or nullptr for base pages
};
const FolioCase kCases[] = {{"4K", nullptr}, {"64K", "hugepages-64kB"}, {"2M", "hugepages-2048kB"}};

std::unique_ptr<System> bench_system(uint64_t ram, const FolioCase& c, int* err) {
  SystemConfig cfg;
  cfg.ram_bytes = round_up(ram, 4ull << 20);
  cfg.host_thp = 1;
  auto sys = System::create(cfg, err);
  if (!sys) return nullptr;
  if (c.sysfs_dir) sys->sysfs_write(std::string("transparent_hugepage/") + c.sysfs_dir + "/enabled", "always");
  if (c.sysfs_dir && std::string(c.sysfs_dir) != "hugepages-2048kB")
    sys->sysfs_write("transparent_hugepage/hugepages-2048kB/enabled", "never");
  return sys;
}

// A native buffer for the reference passes, touched before any timed pass.
class NativeBuffer {
 public:
  explicit NativeBuffer(uint64_t len) : len_(len) {
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    p_ = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
    if (p_) {
      madvise(p_, len, 14 /* MADV_HUGEPAGE, as the frame store */);
      std::memset(p_, 0x11, len);
    }
  }
  ~NativeBuffer() {
    if (p_) munmap(p_, len_);
  }
  NativeBuffer(const NativeBuffer&) = delete;
  NativeBuffer& operator=(const NativeBuffer&) = delete;
  uint8_t* data() const { return p_; }
  uint64_t size() const { return len_; }

 private:
  uint64_t len_;
  uint8_t* p_;
};

// The native verifying pass: memcmp against a block of the byte, as the
// model's plain path does.
int64_t native_find_not(const uint8_t* p, uint8_t byte, uint64_t len) {
  alignas(64) static thread_local uint8_t pattern[4096];
  std::memset(pattern, byte, sizeof pattern);
  for (uint64_t off = 0; off < len; off += sizeof pattern) {
    const uint64_t n = std::min<uint64_t>(sizeof pattern, len - off);
    if (std::memcmp(p + off, pattern, n) != 0) return static_cast<int64_t>(off);
  }
  return -1;
}

template <typename F>
double time_median(long repeats, F&& f) {
  std::vector<double> t;
  for (long r = 0; r < repeats; r++) {
    const auto t0 = Clock::now();
    f(r);
    t.push_back(seconds_since(t0));
  }
  return median_of(t);
}

// ---- modelled time: the model's counts times a host cost profile ----

void modelled_fault_in(uint64_t size, const std::vector<int64_t>& faults, Report* rep) {
  rep->add(fmt::format("\n### modelled (profile {}): fault-in of {} MiB = model faults x host first-touch ns/fault\n\n",
                       rep->profile->name, size >> 20));
  rep->add("| folio | model faults | host ns/fault | modelled ms | modelled ns/page |\n|---|---:|---:|---:|---:|\n");
  for (size_t i = 0; i < std::size(kCases); i++) {
    const host::FaultCost* fc = rep->profile->fault_cost(folio_bytes_of(kCases[i].name));
    auto& j = rep->json["modelled"]["fault"][kCases[i].name];
    j["faults"] = faults[i];
    if (!fc) {
      rep->add(fmt::format("| {} | {} | n/a | n/a | n/a |\n", kCases[i].name, faults[i]));
      j["modelled_s"] = nullptr;
      continue;
    }
    double ns = static_cast<double>(faults[i]) * fc->ns_per_fault;
    rep->add(fmt::format("| {} | {} | {:.0f} | {:.2f} | {:.1f} |\n", kCases[i].name, faults[i], fc->ns_per_fault, ns / 1e6,
                         ns / static_cast<double>(size / PAGE_SIZE)));
    j["host_ns_per_fault"] = fc->ns_per_fault;
    j["modelled_s"] = ns / 1e9;
  }
}

void modelled_cow(const std::vector<int64_t>& copies, Report* rep) {
  rep->add(fmt::format("\n### modelled (profile {}): CoW faults = model CoW copies x host ns/CoW fault\n\n", rep->profile->name));
  rep->add("| folio | model CoW faults | host ns/CoW fault | modelled ms |\n|---|---:|---:|---:|\n");
  for (size_t i = 0; i < std::size(kCases); i++) {
    const host::FaultCost* fc = rep->profile->fault_cost(folio_bytes_of(kCases[i].name));
    auto& j = rep->json["modelled"]["fork"][kCases[i].name];
    j["cow_faults"] = copies[i];
    if (!fc) {
      rep->add(fmt::format("| {} | {} | n/a | n/a |\n", kCases[i].name, copies[i]));
      j["modelled_cow_s"] = nullptr;
      continue;
    }
    double ns = static_cast<double>(copies[i]) * fc->cow_ns_per_fault;
    rep->add(fmt::format("| {} | {} | {:.0f} | {:.2f} |\n", kCases[i].name, copies[i], fc->cow_ns_per_fault, ns / 1e6));
    j["host_ns_per_cow_fault"] = fc->cow_ns_per_fault;
    j["modelled_cow_s"] = ns / 1e9;
  }
}

// ---- fault-in ----

struct FaultSample {
  double seconds = 0;  // the fault-in loop
  double zero_ns = 0;  // of which zeroing (a run with data timing on)
  long pgtables_bytes = 0;
  int64_t faults = 0;
  long host_faults = 0;
  FrameStoreInfo store;
};

// What the host gave the frame store (how the report says which backing it had).
std::string store_text(const FrameStoreInfo& fs) {
  return fmt::format("frame store of the last run: served {} Systems, {} MiB resident, {} MiB of it in host huge pages{}",
                     fs.uses, fs.rss >> 20, fs.anon_huge >> 20, fs.thp_advised ? " (MADV_HUGEPAGE)" : "");
}

// First touch of every page of `size`: one byte written per base page.
FaultSample fault_in_once(const FolioCase& c, uint64_t size, bool time_data, int* err) {
  auto sys = bench_system(size + (256ull << 20), c, err);
  if (!sys) return {};
  Process* p = sys->new_process("bench");
  long raw = p->mmap(0, size + PMD_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  if (raw < 0) {
    *err = static_cast<int>(raw);
    return {};
  }
  uint64_t addr = round_up(static_cast<uint64_t>(raw), PMD_SIZE);
  if (c.sysfs_dir) (void)p->madvise(addr, size, MADV_HUGEPAGE);
  int64_t faults0 = sys->vmstat("pgfault");
  sys->set_data_timing(time_data);
  const long hf0 = host_faults_now();
  const auto t0 = Clock::now();
  for (uint64_t off = 0; off < size; off += PAGE_SIZE) {
    uint8_t b = 1;
    if (!p->write(addr + off, &b, 1).ok()) {
      *err = -EFAULT;
      return {};
    }
  }
  FaultSample s;
  s.seconds = seconds_since(t0);
  s.host_faults = host_faults_now() - hf0;
  s.zero_ns = static_cast<double>(sys->data_time_ns("zero"));
  s.pgtables_bytes = p->pgtables_bytes();
  s.faults = sys->vmstat("pgfault") - faults0;
  s.store = sys->frame_store_info();
  p->exit();
  return s;
}

}  // namespace

int suite_fault(const BenchOptions& o, Report* rep) {
  const uint64_t size = (o.size_mb ? o.size_mb : (o.quick ? 256 : 1024)) << 20;
  const long repeats = o.repeats ? o.repeats : (o.quick ? 3 : 5);
  NativeBuffer native(size);
  if (!native.data()) {
    std::fprintf(stderr, "mmlab bench: fault: no native buffer of %llu MiB\n", static_cast<unsigned long long>(size >> 20));
    return 1;
  }
  std::vector<std::vector<FaultSample>> samples(std::size(kCases));
  std::vector<std::vector<double>> memset_s(std::size(kCases));
  for (long r = -1; r < repeats; r++) {  // round -1: the warm-up, discarded
    for (size_t i = 0; i < std::size(kCases); i++) {  // variants interleaved per repeat
      progress(fmt::format("fault-in {} ({}/{})", kCases[i].name, r + 1, repeats));
      int err = 0;
      FaultSample s = fault_in_once(kCases[i], size, false, &err);
      FaultSample z = err ? FaultSample{} : fault_in_once(kCases[i], size, true, &err);
      if (err) {
        progress_done();
        std::fprintf(stderr, "mmlab bench: fault-in %s failed: %s\n", kCases[i].name, errno_name(err));
        return 1;
      }
      s.zero_ns = z.zero_ns;
      if (r >= 0) samples[i].push_back(s);
    }
    // Native: the same bytes, one memset per folio, as the kernel zeroes them.
    for (size_t i = 0; i < std::size(kCases); i++) {
      const uint64_t chunk = folio_bytes_of(kCases[i].name);
      const auto t0 = Clock::now();
      for (uint64_t off = 0; off < size; off += chunk) std::memset(native.data() + off, 0, chunk);
      if (r >= 0) memset_s[i].push_back(seconds_since(t0));
    }
  }
  progress_done();
  const double pages = static_cast<double>(size / PAGE_SIZE);
  rep->add(fmt::format("\n## fault-in: first touch of every page of {} MiB (median of {} runs; per-frame metadata {} bytes)\n\n",
                       size >> 20, repeats, 64));
  rep->add("Zeroing is timed inside the model in a second run of each case; bookkeeping = the rest of the fault-in "
           "loop per fault (allocation, walk, rmap, LRU, statistics, the CPU model's access). Native memset: the same "
           "bytes, one call per folio, on a buffer touched before.\n\n");
  rep->add("| folio | median ms | ns/page | vs 4K | faults | zeroing ns/page | native memset ns/page | zeroing vs memset | "
           "bookkeeping ns/fault | host faults | page tables |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  double base = 0;
  for (size_t i = 0; i < std::size(kCases); i++) {
    std::vector<double> t, z, hf;
    for (auto& s : samples[i]) {
      t.push_back(s.seconds);
      z.push_back(s.zero_ns);
      hf.push_back(static_cast<double>(s.host_faults));
    }
    const double m = median_of(t), mz = median_of(z);
    const double native_ns_page = median_of(memset_s[i]) * 1e9 / pages;
    const int64_t faults = samples[i].back().faults;
    if (i == 0) base = m;
    const double zero_page = mz / pages;
    const double book = faults ? (m * 1e9 - mz) / static_cast<double>(faults) : 0;
    const long host = static_cast<long>(median_of(hf));
    rep->add(fmt::format("| {} | {:.2f} | {:.1f} | {:.2f}x | {} | {:.1f} | {:.1f} | {:.2f}x | {:.0f} | {}{} | {} KiB |\n",
                         kCases[i].name, m * 1e3, m * 1e9 / pages, base / m, faults, zero_page, native_ns_page,
                         native_ns_page > 0 ? zero_page / native_ns_page : 0.0, book, host,
                         first_touch_note(host, size / PAGE_SIZE), samples[i].back().pgtables_bytes / 1024));
    rep->json["fault"][kCases[i].name] = {{"median_s", m},
                                          {"samples", t},
                                          {"faults", faults},
                                          {"zero_ns", mz},
                                          {"native_memset_ns_per_page", native_ns_page},
                                          {"bookkeeping_ns_per_fault", book},
                                          {"host_faults", host},
                                          {"pgtables_bytes", samples[i].back().pgtables_bytes}};
  }
  rep->add("\n" + store_text(samples.back().back().store) + "\n");
  if (rep->profile) {
    std::vector<int64_t> faults;
    for (auto& s : samples) faults.push_back(s.back().faults);
    modelled_fault_in(size, faults, rep);
  }
  return 0;
}

// ---- fork and CoW faults ----

namespace {

struct ForkSample {
  double fork_s = 0, cow_s = 0, copy_ns = 0;
  int64_t pte_batches = 0, wp_copies = 0;
  long host_faults = 0;
};

// Populate `size` with folios of one size, fork, then write one byte into
// every page of the first cow_bytes of the parent: every write is a CoW fault
// that copies 4K.
ForkSample fork_once(const FolioCase& c, uint64_t size, uint64_t cow_bytes, bool time_data, int* err) {
  auto sys = bench_system(size * 3 + (256ull << 20), c, err);
  if (!sys) return {};
  Process* p = sys->new_process("parent");
  long raw = p->mmap(0, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  if (raw < 0) {
    *err = static_cast<int>(raw);
    return {};
  }
  uint64_t addr = static_cast<uint64_t>(raw);
  if (c.sysfs_dir) (void)p->madvise(addr, size, MADV_HUGEPAGE);
  if (p->madvise(addr, size, MADV_POPULATE_WRITE)) {
    *err = -ENOMEM;
    return {};
  }
  ForkSample s;
  sys->reset_counters();
  auto t0 = Clock::now();
  Process* child = p->fork("child");
  s.fork_s = seconds_since(t0);
  if (!child) {
    *err = -ENOMEM;
    return {};
  }
  s.pte_batches = sys->counter("fork.pte_batches");
  sys->reset_counters();
  sys->set_data_timing(time_data);
  const long hf0 = host_faults_now();
  t0 = Clock::now();
  for (uint64_t off = 0; off < cow_bytes; off += PAGE_SIZE) {
    uint8_t b = 2;
    if (!p->write(addr + off, &b, 1).ok()) {
      *err = -EFAULT;
      return {};
    }
  }
  s.cow_s = seconds_since(t0);
  s.host_faults = host_faults_now() - hf0;
  s.copy_ns = static_cast<double>(sys->data_time_ns("copy"));
  s.wp_copies = sys->counter("fault.wp_copy");
  child->exit();
  p->exit();
  return s;
}

}  // namespace

int suite_fork(const BenchOptions& o, Report* rep) {
  const uint64_t size = (o.size_mb ? o.size_mb : (o.quick ? 128 : 1024)) << 20;
  const uint64_t cow_bytes = std::min<uint64_t>(size, 64ull << 20);
  const long repeats = o.repeats ? o.repeats : (o.quick ? 3 : 5);
  NativeBuffer src(cow_bytes), dst(cow_bytes);
  if (!src.data() || !dst.data()) return 1;
  std::vector<std::vector<ForkSample>> samples(std::size(kCases));
  std::vector<double> memcpy_s;
  for (long r = -1; r < repeats; r++) {  // round -1: the warm-up, discarded
    for (size_t i = 0; i < std::size(kCases); i++) {
      progress(fmt::format("fork {} ({}/{})", kCases[i].name, r + 1, repeats));
      int err = 0;
      ForkSample s = fork_once(kCases[i], size, cow_bytes, false, &err);
      ForkSample c = err ? ForkSample{} : fork_once(kCases[i], size, cow_bytes, true, &err);
      if (err) {
        progress_done();
        std::fprintf(stderr, "mmlab bench: fork %s failed: %s\n", kCases[i].name, errno_name(err));
        return 1;
      }
      s.copy_ns = c.copy_ns;
      if (r >= 0) samples[i].push_back(s);
    }
    const auto t0 = Clock::now();  // native: the same bytes, 4 KiB per call, as the CoW faults copy them
    for (uint64_t off = 0; off < cow_bytes; off += PAGE_SIZE) std::memcpy(dst.data() + off, src.data() + off, PAGE_SIZE);
    if (r >= 0) memcpy_s.push_back(seconds_since(t0));
  }
  progress_done();
  const double native_ns_page = median_of(memcpy_s) * 1e9 / static_cast<double>(cow_bytes / PAGE_SIZE);
  rep->add(fmt::format("\n## fork of {} MiB of anonymous memory, then CoW write faults on the first {} MiB (median of {} runs; cow.policy base)\n\n",
                       size >> 20, cow_bytes >> 20, repeats));
  rep->add("The copy is timed inside the model in a second run of each case; bookkeeping = the rest of the CoW loop "
           "per fault. Native memcpy: the same bytes, 4 KiB per call, between buffers touched before.\n\n");
  rep->add("| folio | fork ms | fork vs 4K | PTE batches | CoW faults | ns per CoW fault | copy ns/fault | native memcpy ns/4K | "
           "copy vs memcpy | bookkeeping ns/CoW fault | host faults |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  double base = 0;
  for (size_t i = 0; i < std::size(kCases); i++) {
    std::vector<double> f, c, cp, hf;
    for (auto& s : samples[i]) {
      f.push_back(s.fork_s);
      c.push_back(s.wp_copies ? s.cow_s * 1e9 / static_cast<double>(s.wp_copies) : 0);
      cp.push_back(s.wp_copies ? s.copy_ns / static_cast<double>(s.wp_copies) : 0);
      hf.push_back(static_cast<double>(s.host_faults));
    }
    const double mf = median_of(f), mc = median_of(c), mcp = median_of(cp);
    if (i == 0) base = mf;
    const long host = static_cast<long>(median_of(hf));
    rep->add(fmt::format("| {} | {:.2f} | {:.2f}x | {} | {} | {:.0f} | {:.0f} | {:.0f} | {:.2f}x | {:.0f} | {}{} |\n",
                         kCases[i].name, mf * 1e3, base / mf, samples[i].back().pte_batches, samples[i].back().wp_copies, mc,
                         mcp, native_ns_page, native_ns_page > 0 ? mcp / native_ns_page : 0.0, mc - mcp, host,
                         first_touch_note(host, cow_bytes / PAGE_SIZE)));
    rep->json["fork"][kCases[i].name] = {{"fork_s", f},
                                         {"cow_ns_per_fault", c},
                                         {"copy_ns_per_fault", cp},
                                         {"native_memcpy_ns_per_4k", native_ns_page},
                                         {"bookkeeping_ns_per_cow_fault", mc - mcp},
                                         {"host_faults", host},
                                         {"pte_batches", samples[i].back().pte_batches},
                                         {"wp_copies", samples[i].back().wp_copies}};
  }
  if (rep->profile) {
    std::vector<int64_t> copies;
    for (auto& s : samples) copies.push_back(s.back().wp_copies);
    modelled_cow(copies, rep);
  }
  return 0;
}

// ---- bulk data through the CPU model ----

namespace {

struct DataRow {
  std::string folio, path, op;
  double model_s = 0, native_s = 0;
  long host_faults = 0;
};

// The CPU model's passes over a pre-faulted region: fill (memset through the
// page tables), verifying read, write from and read into a user buffer.
int data_passes(const FolioCase& c, uint64_t size, long repeats, NativeBuffer& nat, NativeBuffer& user,
                std::vector<DataRow>* rows, FrameStoreInfo* store) {
  int err = 0;
  auto sys = bench_system(size + (256ull << 20), c, &err);
  if (!sys) return err;
  Process* p = sys->new_process("bench");
  long raw = p->mmap(0, size + PMD_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  if (raw < 0) return static_cast<int>(raw);
  const uint64_t addr = round_up(static_cast<uint64_t>(raw), PMD_SIZE);
  if (c.sysfs_dir) (void)p->madvise(addr, size, MADV_HUGEPAGE);
  if (p->madvise(addr, size, MADV_POPULATE_WRITE)) return -ENOMEM;
  bool ok = true;
  auto fill = [&](long r) { ok &= p->fill(addr, static_cast<uint8_t>(r + 3), size).ok(); };
  auto verify = [&](long r) {
    int64_t bad = 0;
    uint8_t found = 0;
    ok &= p->read_expect(addr, static_cast<uint8_t>(r + 3), size, &bad, &found).ok() && bad < 0;
  };
  auto write = [&](long) { ok &= p->write(addr, user.data(), size).ok(); };
  auto read = [&](long) { ok &= p->read(addr, user.data(), size).ok(); };
  // Native: the same bytes, the same operations, on recycled memory.
  auto nfill = [&](long r) { std::memset(nat.data(), static_cast<int>(r + 3), size); };
  auto nverify = [&](long) {
    if (nat.data()[0] != 0x5c) std::memset(nat.data(), 0x5c, size);  // the warm-up call: the bytes it expects
    ok &= native_find_not(nat.data(), 0x5c, size) < 0;
  };
  auto ncopy_in = [&](long) { std::memcpy(nat.data(), user.data(), size); };
  auto ncopy_out = [&](long) { std::memcpy(user.data(), nat.data(), size); };
  for (const char* path : {"plain", "atomic"}) {
    if (std::string(path) == "atomic") {
      // A second thread moving bytes switches the System to atomic words.
      std::thread t([&] {
        uint8_t b;
        ok &= p->read(addr, &b, 1).ok();
      });
      t.join();
    }
    struct Op {
      const char* name;
      std::function<void(long)> model, native;
    } ops[] = {{"fill (write BYTE)", fill, nfill}, {"verifying read", verify, nverify},
               {"write from a buffer", write, ncopy_in}, {"read into a buffer", read, ncopy_out}};
    for (auto& op : ops) {
      if (std::string(op.name) == "verifying read") fill(0);  // the bytes the warm-up pass expects
      op.model(0);                                               // warm-up, discarded (and the native one)
      op.native(0);
      DataRow row{c.name, path, op.name};
      const bool verifying = std::string(op.name) == "verifying read";
      std::vector<double> t;
      const long hf0 = host_faults_now();
      for (long r = 0; r < repeats; r++) {
        if (verifying) fill(r);  // untimed: the bytes the pass expects
        const auto t0 = Clock::now();
        op.model(r);
        t.push_back(seconds_since(t0));
      }
      row.host_faults = host_faults_now() - hf0;
      row.model_s = median_of(t);
      row.native_s = time_median(repeats, op.native);
      rows->push_back(row);
    }
  }
  *store = sys->frame_store_info();
  p->exit();
  return ok ? 0 : -EFAULT;
}

}  // namespace

int suite_data(const BenchOptions& o, Report* rep) {
  const uint64_t size = (o.size_mb ? o.size_mb : (o.quick ? 64 : 256)) << 20;
  const long repeats = o.repeats ? o.repeats : (o.quick ? 3 : 7);
  NativeBuffer nat(size), user(size);
  if (!nat.data() || !user.data()) return 1;
  std::vector<DataRow> rows;
  FrameStoreInfo store;
  for (const FolioCase& c : {kCases[0], kCases[2]}) {
    progress(fmt::format("data {}", c.name));
    if (int e = data_passes(c, size, repeats, nat, user, &rows, &store)) {
      progress_done();
      std::fprintf(stderr, "mmlab bench: data %s: %s\n", c.name, errno_name(e));
      return 1;
    }
  }
  progress_done();
  rep->add(fmt::format("\n## bulk data through the CPU model: {} MiB pre-faulted, median of {} passes, beside the same "
                       "native pass on a touched buffer\n\n",
                       size >> 20, repeats));
  rep->add("plain: memcpy/memset and a memcmp-class scan (one thread uses the System); atomic: relaxed 8-byte words "
           "(after a second thread moved bytes). A verifying read compares every byte with the expected one; its native "
           "pass is memcmp against a 4 KiB block of that byte.\n\n");
  rep->add("| folio | path | pass | model ms | model GB/s | native ms | native GB/s | model / native bandwidth | host faults |\n"
           "|---|---|---|---:|---:|---:|---:|---:|---:|\n");
  const double gb = static_cast<double>(size) / 1e9;
  for (auto& r : rows) {
    rep->add(fmt::format("| {} | {} | {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.0f}% | {}{} |\n", r.folio, r.path, r.op,
                         r.model_s * 1e3, gb / r.model_s, r.native_s * 1e3, gb / r.native_s, 100 * r.native_s / r.model_s,
                         r.host_faults, first_touch_note(r.host_faults, size / PAGE_SIZE)));
    rep->json["data"][r.folio][r.path][r.op] = {
        {"model_s", r.model_s}, {"native_s", r.native_s}, {"bytes", size}, {"host_faults", r.host_faults}};
  }
  rep->add("\n" + store_text(store) + "\n");
  return 0;
}

// ---- MADV_COLLAPSE (khugepaged's collapse_huge_page) ----

namespace {

struct CollapseSample {
  double us_per_2m = 0, copy_share = 0, write_hold_us = 0;
  int64_t bytes_copied = 0, collapses = 0;
};

// Fault `size` in with folios of one size, then MADV_COLLAPSE it one PMD at
// a time. The System's collapse timing splits collapse_huge_page() into its
// mmap_lock write-held part and the copy.
CollapseSample collapse_once(const FolioCase& c, uint64_t size, int* err) {
  SystemConfig cfg;
  cfg.ram_bytes = round_up(size * 2 + (256ull << 20), 4ull << 20);
  cfg.host_thp = 1;
  auto sys = System::create(cfg, err);
  if (!sys) return {};
  if (c.sysfs_dir) sys->sysfs_write(std::string("transparent_hugepage/") + c.sysfs_dir + "/enabled", "always");
  Process* p = sys->new_process("bench");
  long raw = p->mmap(0, size + PMD_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  if (raw < 0) {
    *err = static_cast<int>(raw);
    return {};
  }
  const uint64_t addr = round_up(static_cast<uint64_t>(raw), PMD_SIZE);
  if (p->madvise(addr, size, MADV_POPULATE_WRITE)) {
    *err = -ENOMEM;
    return {};
  }
  sys->reset_counters();
  const CollapseTiming t0 = sys->collapse_timing();
  const auto w0 = std::chrono::steady_clock::now();
  for (uint64_t off = 0; off < size; off += PMD_SIZE) {
    if (int r = p->madvise(addr + off, PMD_SIZE, MADV_COLLAPSE)) {
      *err = r;
      return {};
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  const CollapseTiming t1 = sys->collapse_timing();
  CollapseSample s;
  s.collapses = static_cast<int64_t>(t1.collapsed - t0.collapsed);
  s.us_per_2m = wall * 1e6 / static_cast<double>(size / PMD_SIZE);
  const double total = static_cast<double>(t1.total_ns - t0.total_ns);
  s.copy_share = total > 0 ? static_cast<double>(t1.copy_ns - t0.copy_ns) / total : 0;
  const uint64_t locked = t1.write_locked - t0.write_locked;
  s.write_hold_us = locked ? static_cast<double>(t1.mmap_write_ns - t0.mmap_write_ns) / 1e3 / static_cast<double>(locked) : 0;
  s.bytes_copied = sys->counter("collapse.bytes_copied");
  p->exit();
  return s;
}

}  // namespace

int suite_collapse(const BenchOptions& o, Report* rep) {
  const uint64_t size = (o.size_mb ? o.size_mb : (o.quick ? 64 : 256)) << 20;
  const long repeats = o.repeats ? o.repeats : (o.quick ? 3 : 5);
  const FolioCase cases[] = {kCases[0], kCases[1]};  // 4K pages and 64K mTHPs
  std::vector<std::vector<CollapseSample>> samples(std::size(cases));
  for (long r = -1; r < repeats; r++) {  // round -1: the warm-up, discarded
    for (size_t i = 0; i < std::size(cases); i++) {  // the cases interleaved per repeat
      progress(fmt::format("collapse {} ({}/{})", cases[i].name, r + 1, repeats));
      int err = 0;
      CollapseSample s = collapse_once(cases[i], size, &err);
      if (err) {
        progress_done();
        std::fprintf(stderr, "mmlab bench: collapse of %s folios failed: %s\n", cases[i].name, errno_name(err));
        return 1;
      }
      if (r >= 0) samples[i].push_back(s);
    }
  }
  progress_done();
  rep->add(fmt::format("\n## MADV_COLLAPSE of {} MiB, one 2M range per call (median of {} runs)\n\n", size >> 20, repeats));
  rep->add("| source folios | us per 2M | copy share | mmap_lock write-held per collapse (us) | bytes copied | collapses |\n"
           "|---|---:|---:|---:|---:|---:|\n");
  for (size_t i = 0; i < std::size(cases); i++) {
    std::vector<double> us, share, hold;
    for (auto& s : samples[i]) {
      us.push_back(s.us_per_2m);
      share.push_back(s.copy_share);
      hold.push_back(s.write_hold_us);
    }
    const CollapseSample& last = samples[i].back();
    rep->add(fmt::format("| {} | {:.1f} | {:.0f}% | {:.1f} | {} | {} |\n", cases[i].name, median_of(us), median_of(share) * 100,
                         median_of(hold), last.bytes_copied, last.collapses));
    rep->json["collapse"][cases[i].name] = {{"us_per_2m", us}, {"copy_share", share}, {"write_hold_us", hold},
                                            {"bytes_copied", last.bytes_copied}, {"collapses", last.collapses}};
  }
  return 0;
}

// ---- the corpus on both backends ----

int suite_corpus(const BenchOptions& o, Report* rep) {
  const std::string file = o.corpus.empty() ? std::string(MMLAB_SOURCE_DIR) + "/tests/scenarios/cow.mms" : o.corpus;
  const std::string filter = "cow-anon-basic-*";
  std::string err;
  auto prog = scenario_parse({file}, &err);
  if (!prog) {
    std::fprintf(stderr, "mmlab bench: corpus: %s\n", err.c_str());
    return 1;
  }
  ScenarioOptions so;
  so.filter = filter;
  std::ostringstream sink;
  progress("corpus: model (warm-up)");
  scenario_run(*prog, so, sink);  // the frame store, recycled for the timed run
  progress("corpus: model");
  const long hf0 = host_faults_now();
  const auto t0 = Clock::now();
  std::vector<ScenarioResult> model = scenario_run(*prog, so, sink);
  const double model_total = seconds_since(t0);
  const long model_hf = host_faults_now() - hf0;
  std::string why;
  std::vector<ScenarioResult> host;
  if (scenario_host_available(&why)) {
    progress("corpus: host");
    so.backend = Backend::kHost;
    host = scenario_run(*prog, so, sink);
  }
  progress_done();
  rep->add(fmt::format("\n## corpus: {} tests of {} ({}) on the model and on this machine's kernel\n\n",
                       model.size(), file.substr(file.rfind('/') + 1), filter));
  // The tests both backends ran (the host skips what it has no pages or interface for).
  double model_both = 0, host_both = 0;
  int both = 0, model_ran = 0;
  for (size_t i = 0; i < model.size(); i++) {
    if (model[i].outcome == Outcome::kSkip) continue;
    model_ran++;
    if (host.empty() || host[i].outcome == Outcome::kSkip) continue;
    both++;
    model_both += model[i].seconds;
    host_both += host[i].seconds;
  }
  rep->add("| backend | tests run | total s | ms/test |\n|---|---:|---:|---:|\n");
  rep->add(fmt::format("| model | {} | {:.3f} | {:.2f} |\n", model_ran, model_total, model_total * 1e3 / std::max(1, model_ran)));
  rep->json["corpus"] = {{"file", file}, {"filter", filter}, {"model_s", model_total}, {"model_tests", model_ran},
                         {"model_host_faults", model_hf}};
  if (host.empty()) {
    rep->add(fmt::format("| host | skipped: {} | | |\n", why));
    rep->json["corpus"]["host"] = {{"skipped", why}};
    return 0;
  }
  rep->add(fmt::format("| host | {} | {:.3f} | {:.2f} |\n", both, host_both, host_both * 1e3 / std::max(1, both)));
  rep->add(fmt::format("\nOn the {} tests both ran: model {:.3f} s, host {:.3f} s: the model is {:.1f}x {} than the host kernel.\n",
                       both, model_both, host_both, model_both > 0 ? std::max(host_both / model_both, model_both / host_both) : 0.0,
                       host_both >= model_both ? "faster" : "slower"));
  rep->json["corpus"]["host"] = {{"tests", both}, {"host_s", host_both}, {"model_s_same_tests", model_both}};
  return 0;
}

}  // namespace mmlab::cli
