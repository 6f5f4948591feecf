#include "scenario/host_pages.h"

#include <algorithm>

#include "mmlab/types.h"

namespace mmlab {

void HostPages::map(uint64_t start, uint64_t len, HostRangeKind kind) {
  unmap(start, len);
  if (len) ranges_[start] = Range{start + len, kind};
}

void HostPages::unmap(uint64_t start, uint64_t len) {
  const uint64_t end = start + len;
  clear(start, len, 0xff);
  auto it = ranges_.lower_bound(start);
  if (it != ranges_.begin() && std::prev(it)->second.end > start) --it;
  while (it != ranges_.end() && it->first < end) {
    const uint64_t from = it->first;
    const Range r = it->second;
    it = ranges_.erase(it);
    if (from < start) ranges_[from] = Range{start, r.kind};
    if (r.end > end) it = ranges_.emplace(end, Range{r.end, r.kind}).first;
  }
}

void HostPages::remap(uint64_t old_start, uint64_t old_len, uint64_t new_start, uint64_t new_len) {
  HostRangeKind kind = HostRangeKind::kOther;
  auto it = ranges_.upper_bound(old_start);
  if (it != ranges_.begin() && std::prev(it)->second.end > old_start) kind = std::prev(it)->second.kind;
  if (new_start == old_start) {  // in place: shrunk or grown at the end
    if (new_len < old_len) unmap(old_start + new_len, old_len - new_len);
    if (new_len > old_len) map(old_start + old_len, new_len - old_len, kind);
    return;
  }
  // Moved: what the pages were moves with them.
  std::vector<std::pair<uint64_t, Taint>> moved;
  const uint64_t kept_end = old_start + std::min(old_len, new_len);
  split_at(old_start);
  split_at(kept_end);
  for (auto t = taint_.lower_bound(old_start); t != taint_.end() && t->first < kept_end; ++t)
    moved.push_back({t->first - old_start + new_start, Taint{t->second.end - old_start + new_start, t->second.bits}});
  unmap(old_start, old_len);
  map(new_start, new_len, kind);
  for (auto& [a, t] : moved) set(a, t.end - a, t.bits);
}

void HostPages::split_at(uint64_t addr) {
  auto it = taint_.upper_bound(addr);
  if (it == taint_.begin()) return;
  --it;
  if (it->first < addr && it->second.end > addr) {
    taint_.emplace(addr, Taint{it->second.end, it->second.bits});
    it->second.end = addr;
  }
}

template <class F>
void HostPages::apply(uint64_t start, uint64_t end, F fn) {
  if (start >= end) return;
  split_at(start);
  split_at(end);
  auto it = taint_.lower_bound(start);
  for (uint64_t cur = start; cur < end;) {
    if (it != taint_.end() && it->first == cur) {
      cur = it->second.end;
      it->second.bits = fn(it->second.bits);
      it = it->second.bits ? std::next(it) : taint_.erase(it);
    } else {
      const uint64_t gap_end = it != taint_.end() && it->first < end ? it->first : end;
      if (uint8_t b = fn(0)) taint_.emplace_hint(it, cur, Taint{gap_end, b});
      cur = gap_end;
    }
  }
  // Neighbours with the same bits become one, so that page-by-page updates stay compact.
  auto m = taint_.lower_bound(start);
  if (m != taint_.begin()) --m;
  while (m != taint_.end() && m->first <= end) {
    auto next = std::next(m);
    if (next != taint_.end() && next->first == m->second.end && next->second.bits == m->second.bits) {
      m->second.end = next->second.end;
      taint_.erase(next);
    } else {
      m = next;
    }
  }
}

void HostPages::set(uint64_t start, uint64_t len, uint8_t bits) {
  apply(start & PAGE_MASK, round_up(start + len, PAGE_SIZE), [bits](uint8_t b) { return static_cast<uint8_t>(b | bits); });
}

void HostPages::clear(uint64_t start, uint64_t len, uint8_t bits) {
  apply(start & PAGE_MASK, round_up(start + len, PAGE_SIZE), [bits](uint8_t b) { return static_cast<uint8_t>(b & ~bits); });
}

void HostPages::add_where(uint64_t start, uint64_t len, uint8_t if_any, uint8_t bits) {
  apply(start & PAGE_MASK, round_up(start + len, PAGE_SIZE),
        [=](uint8_t b) { return static_cast<uint8_t>(b & if_any ? b | bits : b); });
}

uint8_t HostPages::at(uint64_t addr) const { return in(addr, 1); }

uint8_t HostPages::in(uint64_t start, uint64_t len) const {
  const uint64_t from = start & PAGE_MASK, to = round_up(start + len, PAGE_SIZE);
  uint8_t bits = 0;
  auto it = taint_.upper_bound(from);
  if (it != taint_.begin()) --it;
  for (; it != taint_.end() && it->first < to; ++it)
    if (it->second.end > from) bits |= it->second.bits;
  return bits;
}

uint8_t HostPages::any() const {
  uint8_t bits = 0;
  for (auto& [a, t] : taint_) bits |= t.bits;
  return bits;
}

std::vector<std::pair<uint64_t, uint64_t>> HostPages::pieces(uint64_t start, uint64_t len,
                                                             std::optional<HostRangeKind> kind) const {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  const uint64_t end = start + len;
  auto it = ranges_.upper_bound(start);
  if (it != ranges_.begin()) --it;
  for (; it != ranges_.end() && it->first < end; ++it) {
    if (it->second.end <= start || (kind && it->second.kind != *kind)) continue;
    out.push_back({std::max(start, it->first), std::min(end, it->second.end)});
  }
  return out;
}

}  // namespace mmlab
