#include "record/replay_ranges.h"

#include <algorithm>
#include <functional>
#include <unordered_set>

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

namespace {
struct Lineage {
  RangeMap known;  // every range the lineage's own calls mapped, and exec's file mappings
  std::unordered_set<uint64_t> seen;
  std::vector<uint64_t> pages;
};
}  // namespace

std::unordered_map<size_t, std::vector<uint64_t>> exec_stack_pages(const Trace& t) {
  constexpr uint64_t kPageMask = ~0xfffull;
  std::vector<Lineage> lineages;
  std::unordered_map<uint32_t, size_t> of;  // tid -> lineage
  std::unordered_map<size_t, size_t> exec_index;
  for (size_t i = 0; i < t.records.size(); i++) {
    const Record& r = t.records[i];
    if (r.op == Op::kExec) {
      of[r.tid] = lineages.size();
      exec_index[lineages.size()] = i;
      lineages.emplace_back();
      continue;
    }
    auto it = of.find(r.op == Op::kFork ? static_cast<uint32_t>(r.a) : r.tid);
    if (it == of.end()) continue;
    Lineage& l = lineages[it->second];
    const bool failed = r.ret < 0 && r.ret > -4096;
    if (r.op == Op::kFork) {
      of[r.tid] = it->second;
    } else if ((r.op == Op::kMmap && !failed) || (r.op == Op::kLayout && r.file >= 0)) {
      l.known.set(r.a & kPageMask, r.a + r.b, RangeKind::kShared);
    } else if (r.op == Op::kMremap && !failed) {
      l.known.set(static_cast<uint64_t>(r.ret), static_cast<uint64_t>(r.ret) + r.c, RangeKind::kShared);
    } else if (r.op == Op::kBrk && r.b && r.a > r.b) {
      l.known.set(r.b & kPageMask, r.a, RangeKind::kShared);
    } else if (r.op == Op::kFault) {
      const uint64_t page = r.a & kPageMask;
      if (l.seen.insert(page).second && (r.flags & kFaultPresent) && !l.known.find(page)) l.pages.push_back(page);
    }
  }
  std::unordered_map<size_t, std::vector<uint64_t>> out;
  for (size_t k = 0; k < lineages.size(); k++) {
    if (lineages[k].pages.empty()) continue;
    std::vector<uint64_t>& v = out[exec_index[k]] = std::move(lineages[k].pages);
    std::sort(v.begin(), v.end(), std::greater<uint64_t>());
  }
  return out;
}

}  // namespace mmlab::record
