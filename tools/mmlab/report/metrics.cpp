#include "report/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "fmt/format.h"
#include "report/statistics.h"

namespace mmlab::cli {

size_t MetricSet::index(std::string_view key) const {
  for (size_t i = 0; i < defs_->size(); i++)
    if (key == (*defs_)[i].key) return i;
  // A key the table does not declare is the tool's own bug, never input.
  std::fprintf(stderr, "mmlab: metric '%.*s' is not in its table\n", static_cast<int>(key.size()), key.data());
  std::abort();
}

void MetricSet::set(std::string_view key, double v) {
  Value& x = values_[index(key)];
  x.set = true;
  x.v = v;
  runs_ = std::max(runs_, 1u);
}

void MetricSet::set_text(std::string_view key, std::string v) {
  Value& x = values_[index(key)];
  x.set = true;
  x.text = std::move(v);
  runs_ = std::max(runs_, 1u);
}

void MetricSet::add_samples(std::string_view key, const std::vector<double>& v) {
  Value& x = values_[index(key)];
  x.set = true;
  x.samples.insert(x.samples.end(), v.begin(), v.end());
  runs_ = std::max(runs_, 1u);
}

void MetricSet::merge(const MetricSet& run) {
  for (size_t i = 0; i < values_.size(); i++) {
    const Value& r = run.values_[i];
    Value& x = values_[i];
    if (!r.set) continue;
    const bool first = !x.set;
    x.set = true;
    switch ((*defs_)[i].merge) {
      case Merge::kSum:
      case Merge::kMean: x.v += r.v; break;
      case Merge::kMax: x.v = first ? r.v : std::max(x.v, r.v); break;
      case Merge::kFirst:
        if (first) x.v = r.v, x.text = r.text;
        break;
      case Merge::kSamples: x.samples.insert(x.samples.end(), r.samples.begin(), r.samples.end()); break;
    }
  }
  runs_ += run.runs_;
}

bool MetricSet::has(std::string_view key) const {
  const size_t i = index(key);
  return (*defs_)[i].derive ? true : values_[i].set;
}

double MetricSet::value(std::string_view key) const {
  const size_t i = index(key);
  const MetricDef& d = (*defs_)[i];
  if (d.derive) return d.derive(*this);
  const Value& x = values_[i];
  if (d.merge == Merge::kSamples) return static_cast<double>(x.samples.size());
  return d.merge == Merge::kMean && runs_ > 1 ? x.v / runs_ : x.v;
}

const std::string& MetricSet::text(std::string_view key) const { return values_[index(key)].text; }

const std::vector<double>& MetricSet::samples(std::string_view key) const { return values_[index(key)].samples; }

std::string quantile_name(double q) { return q >= 1 ? "max" : fmt::format("p{}", q * 100); }

namespace {

// A number as JSON: null for NaN, an integer where a count is whole.
nlohmann::ordered_json number_json(const MetricDef& d, double v) {
  if (std::isnan(v)) return nullptr;
  if (d.unit == Unit::kFlag) return v != 0;
  if ((d.unit == Unit::kCount || d.unit == Unit::kBytes) && v == std::floor(v) && std::fabs(v) < 9e15)
    return static_cast<int64_t>(v);
  return v;
}

nlohmann::ordered_json value_json(const MetricSet& m, const MetricDef& d) {
  if (d.unit == Unit::kText) return m.text(d.key);
  if (d.merge != Merge::kSamples) return number_json(d, m.value(d.key));
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (double q : d.quantiles) j[quantile_name(q)] = quantile_of(m.samples(d.key), q);
  return j;
}

}  // namespace

nlohmann::ordered_json MetricSet::json() const {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const MetricDef& d : *defs_) {
    if (!d.json || !has(d.key)) continue;
    nlohmann::ordered_json* at = &out;
    std::string_view key = d.key;
    for (size_t dot; (dot = key.find('.')) != std::string_view::npos; key.remove_prefix(dot + 1))
      at = &(*at)[std::string(key.substr(0, dot))];
    (*at)[std::string(key)] = value_json(*this, d);
  }
  return out;
}

namespace {

int decimals_of(const MetricDef& d) {
  if (d.decimals >= 0) return d.decimals;
  switch (d.unit) {
    case Unit::kBytes:
    case Unit::kPerThousand: return 1;
    case Unit::kUs:
    case Unit::kMs:
    case Unit::kSeconds:
    case Unit::kMiBSeconds: return 2;
    default: return 0;
  }
}

// A value in a table's unit: bytes as MiB.
std::string cell(const MetricDef& d, double v) {
  if (std::isnan(v)) return "n/a";
  if (d.unit == Unit::kBytes) v /= 1 << 20;
  return fmt::format("{:.{}f}", v, decimals_of(d));
}

bool shown(const MetricDef& d, const std::string& table, const std::set<std::string>& groups) {
  return d.header && table == d.table && (!*d.group || groups.count(d.group));
}

bool valid(const MetricSet& m, const MetricDef& d) { return !d.valid_if || m.value(d.valid_if) != 0; }

std::string header_of(const MetricDef& d, double q) {
  std::string h = d.header;
  if (auto at = h.find("{q}"); at != std::string::npos) h.replace(at, 3, quantile_name(q));
  return h;
}

std::string vs_base_cell(const MetricRow& r, const MetricRow* base, const MetricDef& d) {
  if (!base || !base->m || !r.m->has(d.key) || !base->m->has(d.key)) return "-";
  if (&r == base) return "base";
  const double b = base->m->value(d.key);
  return b > 0 ? fmt::format("{:+.1f}%", 100 * (r.m->value(d.key) / b - 1)) : "-";
}

std::string row_cells(const std::vector<const MetricDef*>& cols, const MetricRow& r, const MetricRow* base) {
  std::string s;
  for (const MetricDef* d : cols) {
    const bool ok = r.m->has(d->key) && valid(*r.m, *d);
    if (d->merge == Merge::kSamples) {
      for (double q : d->quantiles)
        s += ok && !r.m->samples(d->key).empty() ? " " + cell(*d, quantile_of(r.m->samples(d->key), q)) + " |" : " - |";
    } else {
      s += ok ? " " + cell(*d, r.m->value(d->key)) + " |" : " - |";
    }
    if (d->vs_base) s += " " + vs_base_cell(r, base, *d) + " |";
  }
  return s;
}

}  // namespace

std::string metric_table(const std::vector<MetricDef>& defs, const std::string& table, const std::set<std::string>& groups,
                         const std::vector<MetricRow>& rows, const std::string& base) {
  std::vector<const MetricDef*> cols;
  std::string head = "| column |", rule = "|---|";
  for (const MetricDef& d : defs) {
    if (!shown(d, table, groups)) continue;
    cols.push_back(&d);
    const std::vector<double> one = {0};
    for (double q : d.merge == Merge::kSamples ? d.quantiles : one) {
      head += " " + header_of(d, q) + " |";
      rule += "---:|";
    }
    if (d.vs_base) head += " vs base |", rule += "---:|";
  }
  const MetricRow* base_row = nullptr;
  for (const MetricRow& r : rows)
    if (r.name == base) base_row = &r;
  std::string out = head + "\n" + rule + "\n";
  for (const MetricRow& r : rows)
    out += r.m ? "| " + r.name + " |" + row_cells(cols, r, base_row) + "\n" : "| " + r.name + " | not run: " + r.not_run + " |\n";
  return out;
}

Plot metric_plot(const std::vector<MetricDef>& defs, std::string_view key, const std::vector<MetricRow>& rows,
                 const std::string& file, const std::string& title) {
  const MetricDef* d = nullptr;
  for (const MetricDef& x : defs)
    if (key == x.key) d = &x;
  Plot p;
  p.file = file;
  p.title = title;
  if (!d) return p;
  const double k = d->unit == Unit::kBytes ? 1.0 / (1 << 20) : 1;
  p.ylabel = d->what;
  if (d->merge == Merge::kSamples) {
    p.lines = true;
    p.xlabel = "percentile";
    for (size_t i = 0; i < d->quantiles.size(); i++) p.xtics.push_back({static_cast<double>(i), quantile_name(d->quantiles[i])});
    for (const MetricRow& r : rows) {
      if (!r.m || r.m->samples(d->key).empty()) continue;
      PlotSeries s{r.name, {}};
      for (size_t i = 0; i < d->quantiles.size(); i++) {
        const double y = quantile_of(r.m->samples(d->key), d->quantiles[i]) * k;
        s.points.push_back({static_cast<double>(i), y, y, y});
      }
      p.series.push_back(s);
    }
    return p;
  }
  p.categories = {title};
  for (const MetricRow& r : rows) {
    if (!r.m || !r.m->has(d->key)) continue;
    const double y = r.m->value(d->key) * k;
    p.series.push_back({r.name, {{0, y, y, y}}});
  }
  return p;
}

}  // namespace mmlab::cli
