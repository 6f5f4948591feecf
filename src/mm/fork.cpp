// PLACEHOLDER until fork lands (owner: fork layer).
#include "mm/internal.h"
#include "mmlab/system.h"

namespace mmlab {

Process* Process::fork(const std::string&) { return nullptr; }

}  // namespace mmlab
