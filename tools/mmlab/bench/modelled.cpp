#include "bench/modelled.h"

#include "bench/model_common.h"
#include "bench/suite.h"
#include "fmt/format.h"
#include "mmlab/types.h"

namespace mmlab::cli {
namespace {

void modelled_heading(const std::string& what, Report* rep) {
  rep->add(fmt::format("\n### modelled (profile {}): {}\n\n", rep->profile->name, what));
}

}  // namespace

void modelled_fault_in(uint64_t size, const std::vector<int64_t>& faults, Report* rep) {
  modelled_heading(fmt::format("fault-in of {} MiB = model faults x host first-touch ns/fault", size >> 20), rep);
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
  modelled_heading("CoW faults = model CoW copies x host ns/CoW fault", rep);
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

}  // namespace mmlab::cli
