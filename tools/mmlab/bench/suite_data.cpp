// The data suite: bulk loads and stores through the CPU model on
// pre-faulted pages, on the plain and on the atomic path, beside native passes.
#include <cstring>
#include <functional>
#include <thread>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/gup_table.h"
#include "bench/model_common.h"
#include "bench/modelled.h"
#include "report/report.h"
#include "report/statistics.h"
#include "bench/suite.h"
#include "fmt/format.h"
#include "bench/gup_bench.h"
#include "mmlab/system.h"

// Host headers last: <sys/mman.h> defines PROT_*/MAP_*/MADV_* as macros, and
// include/mmlab/types.h declares the model's constants under the same names
// (with the same values).
#include <sys/mman.h>

namespace mmlab::cli {

namespace {

struct DataRow {
  std::string folio, path, op;
  std::vector<double> model_s, native_s;  // per repeat, the two alternated
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
      DataRow row{c.name, path, op.name, {}, {}, 0};
      const bool verifying = std::string(op.name) == "verifying read";
      // The model's pass and the native one alternate, so that a round's
      // disturbance falls on both (the ratio's interval is paired over them).
      for (long r = 0; r < repeats; r++) {
        if (verifying) fill(r);  // untimed: the bytes the pass expects
        const long hf0 = host_faults_now();
        auto t0 = Clock::now();
        op.model(r);
        row.model_s.push_back(seconds_since(t0));
        row.host_faults += host_faults_now() - hf0;
        t0 = Clock::now();
        op.native(r);
        row.native_s.push_back(seconds_since(t0));
      }
      rows->push_back(row);
    }
  }
  *store = sys->frame_store_info();
  p->exit();
  return ok ? 0 : -EFAULT;
}

}  // namespace

namespace {
uint64_t data_size(const BenchOptions& o) { return (o.size_mb ? o.size_mb : (o.quick ? 64 : 256)) << 20; }
}  // namespace

// Two native buffers of the region beside one System with it pre-faulted.
static HostNeed need_data(const BenchOptions& o) { return {2 * data_size(o) + model_host_need(data_size(o)), data_size(o) >> 20}; }

static int suite_data(const BenchOptions& o, Report* rep) {
  const uint64_t size = data_size(o);
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
  rep->add("model / native bandwidth: the ratio of median times (native over model), with its 95% bootstrap interval, "
           "paired over the repeats (each runs the model's pass, then the native one).\n\n");
  rep->add("| folio | path | pass | model ms | model GB/s | native ms | native GB/s | model / native bandwidth (95% CI) | host faults |\n"
           "|---|---|---|---:|---:|---:|---:|---:|---:|\n");
  const double gb = static_cast<double>(size) / 1e9;
  // The plot: per pass, each folio size and path's bandwidth against the
  // native pass's (the dashed line at 1 is native: no baseline series).
  Plot plot;
  plot.file = "data";
  plot.title = fmt::format("data: bulk passes through the CPU model over {} MiB, {} repeats", size >> 20, repeats);
  plot.xlabel = "pass";
  plot.ylabel = "model / native bandwidth (median ratio; bars: IQR)";
  plot.ratio = true;
  plot.first_is_baseline = false;
  for (auto& r : rows) {
    auto cat = std::find(plot.categories.begin(), plot.categories.end(), r.op);
    if (cat == plot.categories.end()) cat = plot.categories.insert(cat, r.op);
    const std::string title = r.folio + " " + r.path;
    auto sr = std::find_if(plot.series.begin(), plot.series.end(), [&](const PlotSeries& x) { return x.title == title; });
    if (sr == plot.series.end()) sr = plot.series.insert(sr, {title, {}});
    sr->points.push_back(speedup_point(static_cast<double>(cat - plot.categories.begin()), r.native_s, r.model_s));
  }
  rep->plots.push_back(plot);
  bool above_native = false;
  for (auto& r : rows) {
    const double model_s = median_of(r.model_s), native_s = median_of(r.native_s);
    const RatioCi bw = median_ratio_ci(r.native_s, r.model_s);  // native time over model time
    above_native |= bw.valid && bw.lo > 1.0;
    rep->add(fmt::format("| {} | {} | {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {} | {}{} |\n", r.folio, r.path, r.op,
                         model_s * 1e3, gb / model_s, native_s * 1e3, gb / native_s, percent_ci_text(bw), r.host_faults,
                         first_touch_note(r.host_faults, size / PAGE_SIZE)));
    rep->json["data"][r.folio][r.path][r.op] = {{"model_s", model_s},
                                                {"native_s", native_s},
                                                {"model_samples_s", r.model_s},
                                                {"native_samples_s", r.native_s},
                                                {"model_vs_native_bandwidth", bw.ratio},
                                                {"model_vs_native_bandwidth_ci95", ci_json(bw)},
                                                {"bytes", size},
                                                {"host_faults", r.host_faults}};
  }
  if (above_native)
    rep->add(fmt::format(
        "\nA copy above 100% is no model faster than the machine: the native copy is one memcpy of all {} MiB, which "
        "glibc makes with non-temporal stores above its threshold (a fraction of the last-level cache), while the "
        "model copies leaf by leaf with ordinary stores (8-byte words on the atomic path), which this CPU runs faster "
        "at this size. Two copy loops are compared there, not the model against a bound.\n",
        size >> 20));
  rep->add("\n" + store_text(store) + "\n");
  return 0;
}

extern const BenchSuite kBenchSuite_data = {
    .name = "data",
    .summary = "bulk loads and stores through the CPU model beside native passes",
    .need = need_data,
    .run = suite_data};

}  // namespace mmlab::cli
