// The cost model's table and its prediction: counts x costs.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "cost/cost_terms.h"
#include "fmt/format.h"
#include "mmlab/cost.h"
#include "mmlab/system.h"

namespace mmlab::cost {
namespace {

constexpr TermDef kTerms[] = {
#define X(id, counter, unit, side, how, arch, meaning) {#id, counter, unit, Side::k##side, Calibration::k##how, arch, meaning},
    MMLAB_COST_TERMS(X)
#undef X
};

}  // namespace

std::span<const TermDef> cost_terms() { return kTerms; }

const TermDef* find_term(const std::string& id) {
  for (const TermDef& t : kTerms)
    if (id == t.id) return &t;
  return nullptr;
}

std::vector<double> term_counts(const std::map<std::string, int64_t>& counts) {
  std::vector<double> v;
  v.reserve(std::size(kTerms));
  for (const TermDef& t : kTerms) {
    auto it = counts.find(t.counter);
    // A counter that went down (a gauge) counts nothing.
    v.push_back(it == counts.end() ? 0.0 : static_cast<double>(std::max<int64_t>(it->second, 0)));
  }
  return v;
}

TallyPricer::TallyPricer(const host::CostProfile& p) {
  for (const TermDef& t : kTerms) {
    const host::TermCost* c = p.term(t.id);
    const int slot = EventTally::slot(t.counter);
    if (c && slot >= 0 && t.side != Side::kHarness && c->ns != 0) slots_.emplace_back(slot, c->ns);
  }
}

double TallyPricer::ns(const EventTally& t) const {
  double sum = 0;
  for (auto [slot, ns] : slots_) sum += static_cast<double>(t.at(slot)) * ns;
  return sum;
}

Prediction predict(const host::CostProfile& p, const std::map<std::string, int64_t>& counts) {
  Prediction r;
  const std::vector<double> n = term_counts(counts);
  for (size_t i = 0; i < std::size(kTerms); i++) {
    if (n[i] == 0) continue;
    const host::TermCost* c = p.term(kTerms[i].id);
    if (!c) {
      r.missing.push_back(kTerms[i].id);
      continue;
    }
    if (c->how == "not exercised") r.not_exercised.push_back(kTerms[i].id);
    const double ns = n[i] * c->ns;
    (kTerms[i].side == Side::kKernel ? r.kernel_ns : kTerms[i].side == Side::kUser ? r.user_ns : r.harness_ns) += ns;
    if (kTerms[i].side == Side::kHarness) continue;
    r.lo_ns += n[i] * c->lo;
    r.hi_ns += n[i] * c->hi;
    if (ns != 0) r.by_term.emplace_back(kTerms[i].id, ns);
  }
  return r;
}

std::string terms_table(const host::CostProfile& p) {
  if (p.terms.empty()) return "";
  std::string t = "| term | counter | unit | side | calibration | ns per unit | 95% interval |\n|---|---|---|---|---|---:|---|\n";
  for (const TermDef& d : kTerms) {
    const host::TermCost* c = p.term(d.id);
    if (!c) continue;
    t += fmt::format("| {} | {} | {} | {} | {} | {:.4g} | {:.4g}-{:.4g} |\n", d.id, d.counter, d.unit,
                     d.side == Side::kKernel ? "kernel" : d.side == Side::kUser ? "user" : "harness", c->how, c->ns, c->lo, c->hi);
  }
  t += fmt::format("\nfit: {} cases, condition number {:.3g}, in-sample |residual| median {:.1f}%, max {:.1f}%\n",
                   p.fit.cases, p.fit.condition_number, 100 * p.fit.residual_median, 100 * p.fit.residual_max);
  return t;
}

int override_terms(const std::vector<std::string>& sets, host::CostProfile* p, std::string* err) {
  for (const std::string& s : sets) {
    const auto eq = s.find('=');
    const std::string id = s.substr(0, eq);
    if (eq == std::string::npos || !find_term(id)) {
      *err = fmt::format("--set {}: expected TERM=NS with a term of the cost table", s);
      return -EINVAL;
    }
    char* end = nullptr;
    const double ns = std::strtod(s.c_str() + eq + 1, &end);
    if (end == s.c_str() + eq + 1 || *end || !(ns >= 0) || ns > 1e12) {
      *err = fmt::format("--set {}: expected a cost in ns from 0 to 1e12 after '='", s);
      return -EINVAL;
    }
    host::TermCost c{id, ns, ns, ns, "override"};
    bool found = false;
    for (auto& t : p->terms)
      if (t.id == id) t = c, found = true;
    if (!found) p->terms.push_back(c);
  }
  return 0;
}

bool find_matching_profile(const std::string& dir, host::CostProfile* out, std::string* path, std::string* why) {
  std::vector<std::string> files;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".json") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  const host::MachineInfo here = host::describe_this_machine();
  std::string seen;
  for (const std::string& f : files) {
    host::CostProfile p;
    std::string err;
    if (host::load_cost_profile(f, &p, &err) || p.terms.empty()) continue;
    const std::vector<std::string> d = host::cost_header_differences(p.machine, here);
    if (d.empty()) {
      *out = std::move(p);
      *path = f;
      return true;
    }
    seen += fmt::format("{}{} ({})", seen.empty() ? "" : "; ", p.name, d.front());
  }
  *why = seen.empty() ? "no profile in " + dir : "none of the profiles in " + dir + " is of this machine kind: " + seen;
  return false;
}

}  // namespace mmlab::cost
