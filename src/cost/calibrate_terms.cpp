// `mmlab calibrate`'s terms: the calibration cases run on the host (CPU
// time) and on the model (counts), the measured data terms, and the fit.
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <ostream>
#include <random>

#include "cost/cost_terms.h"
#include "fmt/format.h"
#include "mmlab/cost.h"
#include "mmlab/scenario.h"

namespace mmlab::cost {
namespace {

std::vector<ScenarioResult> run_once(const ScenarioProgram& prog, const RunCasesOptions& o, Backend b) {
  ScenarioOptions so;
  so.filter = o.filter;
  so.backend = b;
  so.cost_sample = true;
  std::ostream none(nullptr);
  return scenario_run(prog, so, none);
}

}  // namespace

double case_median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double speed_reference_ns() {
  timespec t0{}, t1{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
  constexpr size_t kBytes = 16ull << 20;
  void* p = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p != MAP_FAILED) {
    ::madvise(p, kBytes, MADV_NOHUGEPAGE);
    for (size_t off = 0; off < kBytes; off += 4096) static_cast<volatile char*>(p)[off] = 1;
    for (int i = 0; i < 2000; i++) ::madvise(p, 4096, MADV_NORMAL);
    ::munmap(p, kBytes);
  }
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
  return static_cast<double>(t1.tv_sec - t0.tv_sec) * 1e9 + static_cast<double>(t1.tv_nsec - t0.tv_nsec);
}

namespace {

auto parse_cases(const RunCasesOptions& o, std::string* err) {
  auto prog = scenario_parse({o.file}, err);
  if (prog && scenario_count_tests(*prog, o.filter) == 0) {
    *err = fmt::format("{}: no case matches '{}'", o.file, o.filter);
    prog.reset();
  }
  return prog;
}

void model_counts(const ScenarioProgram& prog, const RunCasesOptions& o, std::vector<CaseRun>* out) {
  if (o.progress) o.progress("model");
  std::vector<ScenarioResult> model = run_once(prog, o, Backend::kModel);
  out->clear();
  for (const ScenarioResult& r : model) {
    CaseRun c;
    c.name = r.name;
    c.counts = r.cost_counts;
    // Not a model counter: one per case, the host measurement's intercept.
    c.counts["harness.case"] = 1;
    if (r.outcome != Outcome::kPass) c.skipped = fmt::format("the model's run ended {}", outcome_name(r.outcome));
    else if (r.cost_counts.empty()) c.skipped = "no `counters reset` starts its measured part";
    out->push_back(std::move(c));
  }
}

}  // namespace

int model_case_counts(const RunCasesOptions& o, std::vector<CaseRun>* out, std::string* err) {
  auto prog = parse_cases(o, err);
  if (!prog) return -EINVAL;
  model_counts(*prog, o, out);
  return 0;
}

int run_cases(const RunCasesOptions& o, std::vector<CaseRun>* out, double* reference_ns, std::string* err) {
  auto prog = parse_cases(o, err);
  if (!prog) return -EINVAL;
  std::string why;
  if (!scenario_host_available(&why)) {
    *err = "the host backend is not available here: " + why;
    return -EPERM;
  }
  model_counts(*prog, o, out);
  // The first host run warms the hypervisor's backing of guest memory and
  // the page cache of the tool itself; it is not kept.
  std::vector<double> refs;
  for (int run = 0; run <= o.runs; run++) {
    if (o.progress) o.progress(run == 0 ? std::string("host warm-up") : fmt::format("host run {}/{}", run, o.runs));
    std::vector<ScenarioResult> host = run_once(*prog, o, Backend::kHost);
    for (size_t i = 0; i < host.size() && i < out->size(); i++) {
      CaseRun& c = (*out)[i];
      const ScenarioResult& r = host[i];
      if (!c.skipped.empty()) continue;
      if (r.outcome != Outcome::kPass || r.cpu_ns < 0) {
        c.skipped = r.outcome == Outcome::kSkip ? "host: " + r.reason
                                                : fmt::format("the host's run ended {}", outcome_name(r.outcome));
        c.host_ns.clear();
        continue;
      }
      if (run > 0) c.host_ns.push_back(static_cast<double>(r.cpu_ns));
    }
    if (run > 0) refs.push_back(speed_reference_ns());
  }
  *reference_ns = case_median(refs);
  return 0;
}

// ---- the measured terms ----

namespace {

void zero_block(void* dst, size_t n) {
#if defined(__x86_64__)
  asm volatile("rep stosb" : "+D"(dst), "+c"(n) : "a"(0) : "memory");
#else
  std::memset(dst, 0, n);
#endif
}

void copy_block(void* dst, const void* src, size_t n) {
#if defined(__x86_64__)
  asm volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
#else
  std::memcpy(dst, src, n);
#endif
}

// ns per byte to zero (src == nullptr) or copy blocks of `block` bytes, in a
// shuffled order over buffers larger than the last-level cache: the
// allocator hands out folios anywhere, so one block's neighbour is not the
// next one cleared. The median of 5 passes.
double data_ns_per_byte(uint8_t* dst, const uint8_t* src, size_t bytes, size_t block) {
  std::vector<size_t> order(bytes / block);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(block);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<double> passes;
  for (int pass = 0; pass < 5; pass++) {
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t i : order) {
      if (src) copy_block(dst + i * block, src + i * block, block);
      else zero_block(dst + i * block, block);
    }
    passes.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
                     static_cast<double>(order.size() * block));
  }
  return case_median(passes);
}

}  // namespace

void measure_data_terms(host::CostProfile* p) {
  constexpr size_t kBytes = 256ull << 20;
  auto* dst = static_cast<uint8_t*>(::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  auto* src = static_cast<uint8_t*>(::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (dst == MAP_FAILED || src == MAP_FAILED) {
    p->notes.push_back("the data terms were not measured: no 512 MiB of memory for the buffers");
    if (dst != MAP_FAILED) ::munmap(dst, kBytes);
    if (src != MAP_FAILED) ::munmap(src, kBytes);
    return;
  }
  std::memset(dst, 1, kBytes);  // fault both in first: the timing is of the stores only
  std::memset(src, 2, kBytes);
  for (const TermDef& t : cost_terms()) {
    if (t.how != Calibration::kMeasured) continue;
    const std::string c = t.counter;
    const unsigned order = static_cast<unsigned>(c.back() - '0');
    const bool copy = c.rfind("data.copied", 0) == 0;
    const double ns = data_ns_per_byte(dst, copy ? src : nullptr, kBytes, 4096ull << order);
    p->terms.push_back({t.id, ns, ns, ns, "measured"});
  }
  ::munmap(dst, kBytes);
  ::munmap(src, kBytes);
}

// ---- the fit ----

namespace {

struct Design {
  std::vector<size_t> fit_terms;  // indexes into cost_terms()
  std::vector<std::string> how;   // per term: "" (fitted), "not exercised", "merged into X"
};

// Which terms the fit can tell apart: a term no case counts is not
// exercised; a term whose column (scaled) lies in the span of the terms
// kept before it is merged into those. Gram-Schmidt, the most specific terms
// first (counted by the fewest cases): a general count that is the sum of
// specific ones (lru.add = anonymous faults + CoW copies + collapses) then
// merges into them, and each specific mechanism keeps its own cost.
Design plan_design(const std::vector<std::vector<double>>& n, const std::vector<double>& w) {
  const auto terms = cost_terms();
  Design d;
  d.how.assign(terms.size(), "");
  std::vector<std::vector<double>> basis;  // orthonormal
  std::vector<size_t> basis_term;
  std::vector<size_t> order;
  std::vector<int> rows_counting(terms.size(), 0);
  for (size_t j = 0; j < terms.size(); j++) {
    for (const auto& row : n) rows_counting[j] += row[j] != 0;
    if (terms[j].how == Calibration::kFit) order.push_back(j);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rows_counting[a] < rows_counting[b]; });
  for (size_t j : order) {
    std::vector<double> col(n.size());
    double nrm = 0;
    for (size_t i = 0; i < n.size(); i++) {
      col[i] = n[i][j] * w[i];
      nrm += col[i] * col[i];
    }
    if (nrm == 0) {
      d.how[j] = "not exercised";
      continue;
    }
    nrm = std::sqrt(nrm);
    for (double& v : col) v /= nrm;
    std::vector<std::string> into;
    for (size_t b = 0; b < basis.size(); b++) {
      double dot = 0;
      for (size_t i = 0; i < col.size(); i++) dot += basis[b][i] * col[i];
      if (std::abs(dot) > 0.1) into.push_back(terms[basis_term[b]].id);
      for (size_t i = 0; i < col.size(); i++) col[i] -= dot * basis[b][i];
    }
    double rest = 0;
    for (double v : col) rest += v * v;
    rest = std::sqrt(rest);
    if (rest < 1e-3) {
      std::string s;
      for (auto& t : into) s += (s.empty() ? "" : "+") + t;
      d.how[j] = "merged into " + s;
      continue;
    }
    for (double& v : col) v /= rest;
    basis.push_back(col);
    basis_term.push_back(j);
    d.fit_terms.push_back(j);
  }
  std::sort(d.fit_terms.begin(), d.fit_terms.end());
  return d;
}

// The fitted costs (ns per count) of d.fit_terms for the times left once
// the measured terms are taken out, every row weighted by w.
std::vector<double> solve(const Design& d, const std::vector<std::vector<double>>& n, const std::vector<double>& y_rest,
                          const std::vector<double>& w) {
  const size_t rows = n.size(), cols = d.fit_terms.size();
  std::vector<double> a(rows * cols), b(rows), scale(cols, 0.0);
  for (size_t j = 0; j < cols; j++) {
    for (size_t i = 0; i < rows; i++) scale[j] += std::pow(n[i][d.fit_terms[j]] * w[i], 2);
    scale[j] = std::sqrt(scale[j]);
  }
  for (size_t i = 0; i < rows; i++) {
    b[i] = y_rest[i] * w[i];
    for (size_t j = 0; j < cols; j++) a[i * cols + j] = n[i][d.fit_terms[j]] * w[i] / scale[j];
  }
  std::vector<double> x = nnls(a, rows, cols, b);
  for (size_t j = 0; j < cols; j++) x[j] /= scale[j];
  return x;
}

}  // namespace

void fit_terms(const std::vector<CaseRun>& cases, host::CostProfile* p) {
  const auto terms = cost_terms();
  std::vector<const CaseRun*> used;
  for (const CaseRun& c : cases)
    if (c.skipped.empty() && !c.host_ns.empty()) used.push_back(&c);
  std::vector<std::vector<double>> n;
  std::vector<double> y, w;
  for (const CaseRun* c : used) {
    n.push_back(term_counts(c->counts));
    y.push_back(case_median(c->host_ns));
    // Relative error, and a noisy case counts for less: the weight is one
    // over the case's median times its spread (median absolute deviation
    // over the median, at least 3%).
    std::vector<double> dev;
    for (double v : c->host_ns) dev.push_back(std::abs(v - y.back()));
    w.push_back(1.0 / (y.back() * std::max(0.03, case_median(dev) / y.back())));
  }
  // The measured terms are known: the fit explains what is left.
  auto rest_of = [&](const std::vector<double>& yy) {
    std::vector<double> r = yy;
    for (size_t i = 0; i < n.size(); i++)
      for (size_t j = 0; j < terms.size(); j++)
        if (terms[j].how == Calibration::kMeasured)
          if (const host::TermCost* t = p->term(terms[j].id)) r[i] -= n[i][j] * t->ns;
    return r;
  };
  const Design d = plan_design(n, w);
  const std::vector<double> x = used.empty() ? std::vector<double>{} : solve(d, n, rest_of(y), w);

  // 95% intervals: refit on bootstrap resamples of each case's runs.
  std::vector<std::vector<double>> boot(d.fit_terms.size());
  std::mt19937_64 rng(12345);
  for (int b = 0; b < 200 && !used.empty(); b++) {
    std::vector<double> yb;
    for (const CaseRun* c : used) {
      std::vector<double> s;
      std::uniform_int_distribution<size_t> pick(0, c->host_ns.size() - 1);
      for (size_t k = 0; k < c->host_ns.size(); k++) s.push_back(c->host_ns[pick(rng)]);
      yb.push_back(case_median(s));
    }
    std::vector<double> xb = solve(d, n, rest_of(yb), w);
    for (size_t j = 0; j < xb.size(); j++) boot[j].push_back(xb[j]);
  }

  for (size_t j = 0; j < terms.size(); j++) {
    if (terms[j].how != Calibration::kFit) continue;
    host::TermCost t{terms[j].id, 0, 0, 0, d.how[j].empty() ? "fit" : d.how[j]};
    auto it = std::find(d.fit_terms.begin(), d.fit_terms.end(), j);
    if (it != d.fit_terms.end()) {
      const size_t k = static_cast<size_t>(it - d.fit_terms.begin());
      t.ns = x[k];
      std::vector<double>& bs = boot[k];
      std::sort(bs.begin(), bs.end());
      if (!bs.empty()) {
        t.lo = bs[bs.size() * 25 / 1000];
        t.hi = bs[std::min(bs.size() - 1, bs.size() * 975 / 1000)];
      }
    }
    p->terms.push_back(t);
  }

  // The fit's quality: the design's condition number and the in-sample
  // relative residuals.
  std::vector<double> a(n.size() * d.fit_terms.size());
  for (size_t i = 0; i < n.size(); i++)
    for (size_t k = 0; k < d.fit_terms.size(); k++) a[i * d.fit_terms.size() + k] = n[i][d.fit_terms[k]] * w[i];
  p->fit.cases = static_cast<int>(used.size());
  p->fit.condition_number = condition_number(a, n.size(), d.fit_terms.size());
  std::vector<double> res;
  for (const CaseRun* c : used) {
    const double pr = predict(*p, c->counts).total_ns(), y = case_median(c->host_ns);
    res.push_back(std::abs(pr - y) / y);
    p->fit.per_case.push_back({c->name, y, pr, c->host_ns});
  }
  p->fit.residual_median = case_median(res);
  p->fit.residual_max = res.empty() ? 0 : *std::max_element(res.begin(), res.end());
}

int refit_terms(const RunCasesOptions& o, host::CostProfile* p, std::vector<std::string>* notes, std::string* err) {
  std::map<std::string, std::vector<double>> stored;
  for (const host::CaseFit& c : p->fit.per_case)
    if (!c.host_runs_ns.empty()) stored[c.name] = c.host_runs_ns;
  if (stored.empty()) {
    *err = fmt::format("profile {} stores no runs per case (calibrated before format 3): calibrate again", p->name);
    return -ENODATA;
  }
  std::vector<CaseRun> cases;
  if (int e = model_case_counts(o, &cases, err)) return e;
  for (CaseRun& c : cases) {
    auto it = stored.find(c.name);
    if (it == stored.end()) {
      if (c.skipped.empty()) c.skipped = "the profile stores no runs of it";
    } else {
      c.host_ns = it->second;
    }
    if (!c.skipped.empty()) notes->push_back(fmt::format("calibration case {} not used: {}", c.name, c.skipped));
  }
  // The fitted terms are fitted again; the measured ones stay as measured.
  std::erase_if(p->terms, [](const host::TermCost& t) {
    const TermDef* d = find_term(t.id);
    return !d || d->how == Calibration::kFit;
  });
  const double reference_ns = p->fit.reference_ns;
  p->fit = {};
  p->fit.reference_ns = reference_ns;
  fit_terms(cases, p);
  return 0;
}

}  // namespace mmlab::cost
