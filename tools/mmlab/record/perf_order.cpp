// The replay order of a converted trace (perf_convert_internal.h): time
// order, but for the hard constraints of one mm that perf's cross-CPU
// timestamps can break.
#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>
#include <unordered_map>

#include "record/perf_convert_internal.h"

namespace mmlab::record {
namespace {

// A record's place: after the record it is tied to (anchor) and, among
// records tied to one anchor, in index order.
struct Key {
  uint64_t t = 0;
  size_t anchor = 0;
  uint32_t sub = 0;
  size_t own = 0;
  bool operator<(const Key& o) const { return std::tie(t, anchor, sub, own) < std::tie(o.t, o.anchor, o.sub, o.own); }
  bool operator==(const Key& o) const { return std::tie(t, anchor, sub, own) == std::tie(o.t, o.anchor, o.sub, o.own); }
};

Key natural(const std::vector<Record>& r, size_t i) { return Key{r[i].t_ns, i, 0, i}; }
Key after(const Key& a, size_t i) { return Key{a.t, a.anchor, a.sub + 1, i}; }

// The range a successful mapping call makes: false for any other record.
bool mapped_range(const Record& r, uint64_t* lo, uint64_t* hi) {
  if (r.ret < 0 && r.ret >= -4095) return false;
  switch (r.op) {
    case Op::kMmap: *lo = r.a, *hi = r.a + r.b; return true;
    case Op::kMremap: *lo = static_cast<uint64_t>(r.ret), *hi = *lo + r.c; return true;
    case Op::kBrk: *lo = r.b, *hi = r.a; return r.a > r.b;
    default: return false;
  }
}

// For each fault, the first mapping call of its mm by another task within
// the window after it that maps its address: the fault must follow it.
std::vector<size_t> mapping_anchors(const std::vector<Record>& r, const std::vector<int64_t>& mm) {
  const size_t none = r.size();
  std::vector<size_t> anchor(r.size(), none);
  std::unordered_map<int64_t, std::vector<size_t>> calls;  // mm -> mapping calls, in time order
  uint64_t lo = 0, hi = 0;
  for (size_t i = 0; i < r.size(); i++)
    if (mapped_range(r[i], &lo, &hi)) calls[mm[i]].push_back(i);
  for (size_t i = 0; i < r.size(); i++) {
    if (r[i].op != Op::kFault) continue;
    auto it = calls.find(mm[i]);
    if (it == calls.end()) continue;
    const auto& v = it->second;
    auto p = std::upper_bound(v.begin(), v.end(), r[i].t_ns, [&](uint64_t t, size_t j) { return t < r[j].t_ns; });
    for (; p != v.end() && r[*p].t_ns <= r[i].t_ns + kReorderWindowNs; ++p)
      if (r[*p].tid != r[i].tid && mapped_range(r[*p], &lo, &hi) && r[i].a >= lo && r[i].a < hi) {
        anchor[i] = *p;
        break;
      }
  }
  return anchor;
}

}  // namespace

void order_records(std::vector<Record>* recs, std::vector<int64_t>* mms, ConvertStats* stats) {
  std::vector<size_t> perm(recs->size());
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](size_t x, size_t y) { return (*recs)[x].t_ns < (*recs)[y].t_ns; });
  std::vector<Record> r(recs->size());
  std::vector<int64_t> mm(recs->size());
  for (size_t i = 0; i < perm.size(); i++) r[i] = (*recs)[perm[i]], mm[i] = (*mms)[perm[i]];
  const size_t n = r.size();
  std::unordered_map<uint32_t, size_t> fork_of;  // task -> its kFork record
  for (size_t i = 0; i < n; i++)
    if (r[i].op == Op::kFork && !fork_of.count(r[i].tid)) fork_of[r[i].tid] = i;
  const std::vector<size_t> anchor = mapping_anchors(r, mm);
  std::vector<Key> key(n);
  for (size_t i = 0; i < n; i++) key[i] = natural(r, i);
  // A moved record can move the records tied to it: repeat until nothing moves.
  for (int pass = 0; pass < 16; pass++) {
    bool changed = false;
    std::unordered_map<uint32_t, Key> last;  // task -> its latest record's key
    for (size_t i = 0; i < n; i++) {
      Key k = natural(r, i);
      const uint32_t tid = r[i].tid;
      if (r[i].op != Op::kFork) {
        auto f = fork_of.find(tid);
        if (f != fork_of.end() && !(key[f->second] < k)) k = after(key[f->second], i);
        if (anchor[i] < n && !(key[anchor[i]] < k)) k = after(key[anchor[i]], i);
        auto l = last.find(tid);
        if (l != last.end() && !(l->second < k)) k = Key{l->second.t, l->second.anchor, l->second.sub, i};
      }
      changed |= !(k == key[i]);
      key[i] = k;
      last[tid] = k;
    }
    if (!changed) break;
  }
  std::iota(perm.begin(), perm.end(), 0);
  std::sort(perm.begin(), perm.end(), [&](size_t x, size_t y) { return key[x] < key[y]; });
  for (size_t i = 0; i < n; i++) {
    (*recs)[i] = r[perm[i]];
    (*mms)[i] = mm[perm[i]];
    if (key[perm[i]] == natural(r, perm[i])) continue;
    (*recs)[i].t_ns = key[perm[i]].t;  // moved: the time of what it follows, so that time never runs back
    stats->reordered++;
  }
}

}  // namespace mmlab::record
