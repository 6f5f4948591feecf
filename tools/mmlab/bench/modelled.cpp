#include "bench/modelled.h"

#include <cmath>

#include "bench/model_common.h"
#include "bench/suite.h"
#include "fmt/format.h"
#include "mmlab/cost.h"
#include "mmlab/types.h"

namespace mmlab::cli {
namespace {

void modelled_heading(const std::string& what, Report* rep) {
  rep->add(fmt::format("\n### modelled (profile {}): {}\n\n", rep->profile->name, what));
}

// One row per folio case: the kernel's and the program's modelled time of
// the counted part, and its change against the first case (4K). A profile
// without the cost model's terms (format 1) has nothing to multiply.
void modelled_rows(const char* what, const std::vector<std::map<std::string, int64_t>>& counts, double per_pages,
                   nlohmann::ordered_json* j, Report* rep) {
  if (rep->profile->terms.empty()) {
    rep->add("the profile has no cost-model terms (format 1): run `mmlab calibrate` again\n");
    return;
  }
  rep->add(fmt::format("| folio | {} kernel ms | program ms | band (terms' 95%) ms | ns per 4K page | vs 4K |\n"
                       "|---|---:|---:|---|---:|---:|\n",
                       what));
  double first = 0;
  for (size_t i = 0; i < std::size(kCases) && i < counts.size(); i++) {
    const cost::Prediction pr = cost::predict(*rep->profile, counts[i]);
    if (i == 0) first = pr.program_ns();
    const double vs = first > 0 ? (pr.program_ns() / first - 1) * 100 : 0;
    rep->add(fmt::format("| {} | {:.3f} | {:.3f} | {:.3f}-{:.3f} | {:.1f} | {:+.1f}% |\n", kCases[i].name, pr.kernel_ns / 1e6,
                         pr.user_ns / 1e6, pr.lo_ns / 1e6, pr.hi_ns / 1e6, pr.program_ns() / per_pages, vs));
    auto& row = (*j)[kCases[i].name];
    row["kernel_ms"] = pr.kernel_ns / 1e6;
    row["user_ms"] = pr.user_ns / 1e6;
    row["band_ms"] = {pr.lo_ns / 1e6, pr.hi_ns / 1e6};
    row["vs_4k_pct"] = vs;
    row["missing_terms"] = pr.missing;
  }
}

}  // namespace

void modelled_fault_in(uint64_t size, const std::vector<std::map<std::string, int64_t>>& counts, Report* rep) {
  modelled_heading(fmt::format("fault-in of {} MiB, one byte written per 4K page", size >> 20), rep);
  modelled_rows("fault-in", counts, static_cast<double>(size / PAGE_SIZE), &rep->json["modelled"]["fault"], rep);
}

void modelled_fork(uint64_t size, const std::vector<std::map<std::string, int64_t>>& fork_counts,
                   const std::vector<std::map<std::string, int64_t>>& cow_counts, Report* rep) {
  modelled_heading(fmt::format("fork of a populated {} MiB", size >> 20), rep);
  modelled_rows("fork", fork_counts, static_cast<double>(size / PAGE_SIZE), &rep->json["modelled"]["fork"], rep);
  modelled_heading("the CoW writes after the fork (one byte per 4K page)", rep);
  double pages = 1;
  if (!cow_counts.empty()) {
    auto it = cow_counts.front().find("fault.wp_copy");
    pages = it != cow_counts.front().end() && it->second > 0 ? static_cast<double>(it->second) : 1;
  }
  modelled_rows("CoW", cow_counts, pages, &rep->json["modelled"]["cow_after_fork"], rep);
}

void modelled_pins(const std::vector<PinRow>& rows, const std::string& key, Report* rep) {
  modelled_heading("long-term pin = pages x host io_uring buffer (un)registration ns/page at the row's folio size "
                   "(pin_user_pages_fast(FOLL_WRITE | FOLL_LONGTERM))", rep);
  rep->add("| case | pages | host register ns/page | host buffer MiB | modelled get us | host unregister ns/page | modelled put us |\n"
           "|---|---:|---:|---:|---:|---:|---:|\n");
  bool extrapolated = false;
  for (auto& r : rows) {
    const host::PinCost* pc = rep->profile->pin_cost(folio_bytes_of(r.folio));
    auto& j = rep->json["modelled"][key][r.label];
    j["pages"] = r.pages;
    if (!pc) {
      rep->add(fmt::format("| {} | {} | n/a | n/a | n/a | n/a | n/a |\n", r.label, r.pages));
      j["modelled_get_us"] = nullptr;
      continue;
    }
    double pages = static_cast<double>(r.pages);
    bool other_size = r.pages * PAGE_SIZE != pc->bytes;  // scaled linearly from the host's buffer
    extrapolated |= other_size;
    rep->add(fmt::format("| {} | {} | {:.2f} | {}{} | {:.1f} | {:.2f} | {:.1f} |\n", r.label, r.pages, pc->register_ns_per_4k,
                         pc->bytes >> 20, other_size ? " *" : "", pages * pc->register_ns_per_4k / 1e3,
                         pc->unregister_ns_per_4k, pages * pc->unregister_ns_per_4k / 1e3));
    j["extrapolated"] = other_size;
    j["host_register_ns_per_page"] = pc->register_ns_per_4k;
    j["host_unregister_ns_per_page"] = pc->unregister_ns_per_4k;
    j["host_buffer_bytes"] = pc->bytes;
    j["modelled_get_us"] = pages * pc->register_ns_per_4k / 1e3;
    j["modelled_put_us"] = pages * pc->unregister_ns_per_4k / 1e3;
  }
  if (extrapolated)
    rep->add("\n\\* the host measured another size: scaled linearly, but the host's cost per page grows with the buffer\n");
}

void modelled_gup(const std::vector<ModelledGup>& rows, const std::string& key, Report* rep) {
  if (rep->profile->terms.empty()) return;
  modelled_heading("each row's gup_test round (get and put) = its counts x the profile's costs", rep);
  rep->add("| case | variant | modelled us | vs the row's base | the posting | terms without a calibrated cost |\n"
           "|---|---|---:|---:|---:|---|\n");
  // On a host kernel without the series every page costs one walk, one grab
  // and one pin: if the fit could not tell those apart, what a variant
  // saves by walking or grabbing less is unknown, and no ratio is shown.
  bool identifiable = true;
  for (const char* id : {"gup_walk", "gup_grab", "gup_pin_page"}) {
    const host::TermCost* t = rep->profile->term(id);
    identifiable &= t && t->how == "fit" && t->ns > 0;
  }
  double base_us = 0;
  for (const ModelledGup& r : rows) {
    const cost::Prediction pr = cost::predict(*rep->profile, r.counts);
    const double us = pr.program_ns() / 1e3;
    if (r.is_base) base_us = us;
    std::string unc;
    for (auto& t : pr.not_exercised) unc += (unc.empty() ? "" : ", ") + t;
    for (auto& t : pr.missing) unc += (unc.empty() ? "" : ", ") + t;
    const double ratio = us > 0 ? base_us / us : 0;
    rep->add(fmt::format("| {} | {} | {} | {} | {} | {} |\n", r.row, r.variant,
                         r.is_base || identifiable ? fmt::format("{:.1f}", us) : std::string("n/i"),
                         r.is_base ? std::string("1.00x (base)") : identifiable ? fmt::format("{:.2f}x", ratio) : std::string("n/i"),
                         std::isnan(r.published_speedup) || r.is_base ? std::string("-") : fmt::format("{:.2f}x", r.published_speedup),
                         unc.empty() ? "-" : unc));
    rep->json["modelled"][key][r.row][r.variant] = {{"us", us}, {"vs_base", r.is_base ? nlohmann::ordered_json(1.0) : identifiable ? nlohmann::ordered_json(ratio) : nlohmann::ordered_json()}};
  }
  rep->add("\nModelled, not measured: the GUP terms (walks, grabs, pins) are fitted on process_vm_readv of 4K and 2M "
           "mappings on the host (the slow path the host kernel has, without the series) and on MADV_POPULATE_READ of "
           "populated 4K and 2M mappings (the same walks, with no grab and no pin); the batched and unified walks "
           "would be extrapolated from them (fewer walks and grabs, each at the legacy cost). The ratio is the base's "
           "modelled time over the variant's.");
  if (!identifiable)
    rep->add(" n/i: not identifiable with this profile: in its calibration cases every page cost one walk, one grab "
             "and one pin (a profile made before the populate cases), so the fit could not split a page's cost between "
             "them (the profile's terms table says which merged), and "
             "what a variant saves by walking or grabbing less is unknown. The modelled time of a row's base, whose "
             "counts move together as the host's do, stands.");
  rep->add("\n");
}

}  // namespace mmlab::cli
