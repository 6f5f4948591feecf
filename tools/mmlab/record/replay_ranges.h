// The mappings of one replayed address space, as far as the replay needs
// them: which addresses are mapped, and whether by a private anonymous
// mapping (where the fidelity check compares first touches and CoW faults
// exactly). The model has the real VMAs; this is the replay's own view,
// kept from the recorded calls so that a fault can be classified the way
// the recording host saw it.
#pragma once

#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "record/mmtrace.h"

namespace mmlab::record {

// kFilePrivate: a private file mapping (written pages are CoW copies of
// the page cache); kShared: any MAP_SHARED mapping.
enum class RangeKind : uint8_t { kAnonPrivate, kFilePrivate, kShared };

struct Range {
  uint64_t end = 0;
  RangeKind kind = RangeKind::kShared;
};

class RangeMap {
 public:
  // [start, end) becomes `kind`, replacing what was there.
  void set(uint64_t start, uint64_t end, RangeKind kind);
  void clear(uint64_t start, uint64_t end);
  // The range holding addr, or nullptr.
  const Range* find(uint64_t addr) const;
  // mremap: [from, from+old_len) moves to [to, to+new_len); the old range
  // stays mapped (empty) with keep_old (MREMAP_DONTUNMAP).
  void move(uint64_t from, uint64_t old_len, uint64_t to, uint64_t new_len, bool keep_old);

 private:
  std::map<uint64_t, Range> m_;  // by start; the ranges never overlap
};

// The pages an exec made present without a fault the trace could see: the
// new stack's argument and environment pages, which the kernel writes
// through GUP. Such a page is first seen in the exec's lineage (the mm and
// every mm forked from it) by a fault on a present page, outside every
// mapping the lineage's own calls made and every file mapping (a page
// there may be present through fault-around): in exec's anonymous layout
// (the stack), or in nothing the trace shows. Keyed by the index of the kExec record; each
// list from the highest page down.
std::unordered_map<size_t, std::vector<uint64_t>> exec_stack_pages(const Trace& t);

}  // namespace mmlab::record
