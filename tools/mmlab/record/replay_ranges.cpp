#include "record/replay_ranges.h"

namespace mmlab::record {

void RangeMap::clear(uint64_t start, uint64_t end) {
  if (start >= end) return;
  // A range that begins before `start` and reaches into it is cut there.
  auto it = m_.lower_bound(start);
  if (it != m_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.end > start) {
      const Range tail{prev->second.end, prev->second.kind};
      prev->second.end = start;
      if (tail.end > end) m_[end] = tail;
    }
  }
  it = m_.lower_bound(start);
  while (it != m_.end() && it->first < end) {
    const Range r = it->second;
    it = m_.erase(it);
    if (r.end > end) {
      m_[end] = r;
      break;
    }
  }
}

void RangeMap::set(uint64_t start, uint64_t end, RangeKind kind) {
  if (start >= end) return;
  clear(start, end);
  m_[start] = Range{end, kind};
}

const Range* RangeMap::find(uint64_t addr) const {
  auto it = m_.upper_bound(addr);
  if (it == m_.begin()) return nullptr;
  --it;
  return addr < it->second.end ? &it->second : nullptr;
}

void RangeMap::move(uint64_t from, uint64_t old_len, uint64_t to, uint64_t new_len, bool keep_old) {
  const Range* r = find(from);
  const RangeKind kind = r ? r->kind : RangeKind::kShared;
  if (!keep_old) clear(from, from + old_len);
  set(to, to + new_len, kind);
}

}  // namespace mmlab::record
