// `mmlab record`: a program's memory-management behaviour, captured with
// perf and converted into a .mmtrace (docs/RECORD.md).
//
// Exit status: 0 written, 1 the recording, the conversion or the write
// failed (records lost without --force among them), 2 usage, 4 this host
// cannot record (not root, no tracefs, not x86-64, no perf): ctest treats 4
// as a skip.
#include <sys/wait.h>

#include <cstdio>

#include "cli/commands.h"
#include "fmt/format.h"
#include "mmlab/input_file.h"
#include "record/record.h"

namespace mmlab::cli {
namespace {

constexpr int kExitCannotRecord = 4;

struct RecordCli {
  record::RecordOptions o;
  std::string out = "trace.mmtrace";
  std::string from_script;
};

// What the trace holds, and how it compares with the kernel's own count.
void print_summary(const record::Trace& t, const record::ConvertStats& s) {
  uint64_t n[record::kOpCount] = {};
  uint64_t wr = 0, rd = 0, present_wr = 0, kernel = 0, repeats = 0;
  record::KernelRepeats detector;
  for (const record::Record& r : t.records) {
    n[static_cast<int>(r.op)]++;
    if (r.op != record::Op::kFault) continue;
    repeats += detector.repeat(r);
    const bool w = r.flags & record::kFaultWrite, p = r.flags & record::kFaultPresent;
    kernel += (r.flags & record::kFaultKernel) != 0;
    wr += w && !p;
    rd += !w && !p;
    present_wr += w && p;
  }
  std::printf("records %zu: faults %llu (first-touch write %llu, read %llu; present write %llu; kernel-mode %llu)\n",
              t.records.size(), static_cast<unsigned long long>(n[0]), static_cast<unsigned long long>(wr),
              static_cast<unsigned long long>(rd), static_cast<unsigned long long>(present_wr), static_cast<unsigned long long>(kernel));
  std::printf("tasks: fork %llu, exec %llu, exit %llu; mapping calls: mmap %llu, munmap %llu, mremap %llu, mprotect %llu, "
              "madvise %llu, brk %llu; layout %llu; files %zu\n",
              static_cast<unsigned long long>(n[1]), static_cast<unsigned long long>(n[2]), static_cast<unsigned long long>(n[3]),
              static_cast<unsigned long long>(n[4]), static_cast<unsigned long long>(n[5]), static_cast<unsigned long long>(n[6]),
              static_cast<unsigned long long>(n[7]), static_cast<unsigned long long>(n[8]), static_cast<unsigned long long>(n[9]),
              static_cast<unsigned long long>(n[14]), t.files.size());
  std::printf("lost %llu; dropped: %llu before the first exec, %llu kernel addresses, %llu MMAP2 of brk/mprotect/mremap; "
              "reordered %llu; calls not converted %llu\n",
              static_cast<unsigned long long>(t.header.lost), static_cast<unsigned long long>(s.dropped_no_mm),
              static_cast<unsigned long long>(s.dropped_kernel_addr), static_cast<unsigned long long>(s.mmap2_dropped),
              static_cast<unsigned long long>(s.reordered), static_cast<unsigned long long>(s.unconverted_calls));
  if (t.header.minflt >= 0) {
    const int64_t kernel_count = t.header.minflt + std::max<int64_t>(t.header.majflt, 0);
    const int64_t handled = static_cast<int64_t>(n[0] - repeats);
    std::printf("kernel minflt+majflt %lld (counted from the first exec on), traced %llu (difference %lld); "
                "less %llu repeated kernel-mode attempts, which the kernel does not count: %lld (difference %lld)\n",
                static_cast<long long>(kernel_count), static_cast<unsigned long long>(n[0]),
                static_cast<long long>(kernel_count - static_cast<int64_t>(n[0])),
                static_cast<unsigned long long>(repeats), static_cast<long long>(handled),
                static_cast<long long>(kernel_count - handled));
  }
}

int convert_saved(const RecordCli& c, record::Trace* t, record::ConvertStats* s) {
  std::string text, err;
  if (read_input_file(c.from_script, 16ull << 30, &text, &err)) {
    std::fprintf(stderr, "mmlab record: --from-script %s: cannot read it: %s\n", c.from_script.c_str(), err.c_str());
    return 2;
  }
  if (record::convert_perf_script(text, t, s, &err)) {
    std::fprintf(stderr, "mmlab record: %s: %s\n", c.from_script.c_str(), err.c_str());
    return 1;
  }
  return 0;
}

int run_record(RecordCli& c) {
  if (c.from_script.empty() && c.o.command.empty() == (c.o.pid == 0)) {
    std::fprintf(stderr, "mmlab record: name a program after -- or a process with -p PID (one of the two)\n");
    return 2;
  }
  record::Trace t;
  record::ConvertStats stats;
  std::string err;
  if (!c.from_script.empty()) {
    if (int e = convert_saved(c, &t, &stats)) return e;
  } else {
    if (!record::record_available(c.o, &err)) {
      std::fprintf(stderr, "mmlab record: cannot record on this host: %s\n", err.c_str());
      return kExitCannotRecord;
    }
    record::RecordResult res;
    const int e = record::record_program(c.o, &t, &res, &err);
    if (!res.perf_stderr.empty()) std::fprintf(stderr, "%s", res.perf_stderr.c_str());
    if (e) {
      std::fprintf(stderr, "mmlab record: %s\n", err.c_str());
      return 1;
    }
    stats = res.stats;
    if (!c.o.pid && !(WIFEXITED(res.child_status) && WEXITSTATUS(res.child_status) == 0))
      std::fprintf(stderr, "mmlab record: note: the program ended with status %#x\n", res.child_status);
  }
  print_summary(t, stats);
  if (record::write_mmtrace(c.out, t, &err)) {
    std::fprintf(stderr, "mmlab record: --out %s: %s\n", c.out.c_str(), err.c_str());
    return 1;
  }
  std::printf("trace: %s\n", c.out.c_str());
  return 0;
}

}  // namespace

void add_record(CLI::App& app) {
  auto c = std::make_shared<RecordCli>();
  auto* sub = app.add_subcommand("record",
                                 "capture a program's page faults, mapping calls and tasks with perf into a .mmtrace "
                                 "(root, x86-64; exit 4 where this host cannot record)");
  sub->add_option("--out", c->out, "the trace file (default trace.mmtrace)");
  sub->add_flag("--keep-thp", c->o.keep_thp, "launch mode: leave THP on (the trace is then for fidelity only)");
  sub->add_flag("--rss", c->o.rss, "also record kmem:rss_stat");
  sub->add_flag("--force", c->o.force, "keep a capture that lost records (marked in the trace)");
  sub->add_option("-p,--pid", c->o.pid, "record a running process until it exits or ^C")->check(CLI::Range(1, 1 << 30));
  sub->add_option("--keep-script", c->o.keep_script, "also write perf script's text, with the measured header, to this file");
  sub->add_option("--from-script", c->from_script, "convert a text --keep-script wrote, instead of recording (any machine)");
  sub->add_option("--perf", c->o.perf, "the perf program (default: perf on $PATH)");
  sub->add_option("command", c->o.command, "the program and its arguments, after --");
  register_action(sub, [c] { return run_record(*c); });
}

}  // namespace mmlab::cli
