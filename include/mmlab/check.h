// mmlab's public API: what the invariant checker reports (System::check()).
#pragma once

#include <string>
#include <vector>

namespace mmlab {

// One finding of the invariant checker.
struct Violation {
  std::string invariant;  // named after the VM_WARN_ON_FOLIO site it stands for
  std::string where;      // process/address/level where it was found
  std::string dump;       // dump_page()-style dump of the folio or table
};

struct CheckReport {
  std::vector<Violation> violations;
  bool ok() const { return violations.empty(); }
  std::string to_string() const;
};

}  // namespace mmlab
