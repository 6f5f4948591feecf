// The .mmtrace encoding (docs/RECORD.md, "The file format"). Little-endian
// base-128 varints throughout; signed values zigzag-encoded. A fault takes
// one head byte (its bits, and whether its task and CPU are the previous
// record's), the time since the previous record in microseconds, and the
// page's distance from that task's previous fault: three bytes for a
// sequential sweep. Other records carry their kind in the head byte's low
// five bits with the same two bits. A varint has no upper bound, so a long gap needs no
// escape: it only takes more bytes.
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <unordered_map>

#include "fmt/format.h"
#include "record/mmtrace.h"

namespace mmlab::record {
namespace {

constexpr char kMagic[8] = {'M', 'M', 'T', 'R', 'A', 'C', 'E', '\n'};
constexpr uint8_t kHeadFault = 0x80;
constexpr uint8_t kHeadSameTid = 0x40;
constexpr uint8_t kHeadSameCpu = 0x20;
constexpr uint8_t kHeadFaultBits = 0x0f;
constexpr uint64_t kNsPerUnit = 1000;  // record times are kept to the microsecond

// Which optional fields a non-fault record carries (one bit each).
enum FieldBit : uint8_t { kA = 1, kB = 2, kC = 4, kD = 8, kE = 16, kRet = 32, kFile = 64, kFlags = 128 };

uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
int64_t unzigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

class Writer {
 public:
  void byte(uint8_t b) { out_.push_back(static_cast<char>(b)); }
  void varint(uint64_t v) {
    while (v >= 0x80) {
      byte(static_cast<uint8_t>(v | 0x80));
      v >>= 7;
    }
    byte(static_cast<uint8_t>(v));
  }
  void svarint(int64_t v) { varint(zigzag(v)); }
  void str(const std::string& s) {
    varint(s.size());
    out_ += s;
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : in_(in) {}
  bool ok() const { return err_.empty(); }
  const std::string& error() const { return err_; }
  size_t left() const { return in_.size() - pos_; }
  bool at_end() const { return pos_ == in_.size(); }

  uint8_t byte() {
    if (!ok()) return 0;
    if (pos_ >= in_.size()) {
      fail("truncated");
      return 0;
    }
    return static_cast<uint8_t>(in_[pos_++]);
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (unsigned shift = 0; ok(); shift += 7) {
      const size_t at = pos_;
      const uint8_t b = byte();
      if (shift == 63 && b > 1) {
        pos_ = at;
        fail("a number longer than 64 bits");
        return 0;
      }
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    return 0;
  }
  int64_t svarint() { return unzigzag(varint()); }
  // A count of items that each take at least `min_bytes`: checked against
  // what is left before anything is sized from it.
  uint64_t count(size_t min_bytes, const char* what) {
    const uint64_t n = varint();
    if (ok() && n > left() / min_bytes) fail(fmt::format("{} count {} exceeds the file", what, n));
    return ok() ? n : 0;
  }
  std::string str() {
    const uint64_t n = count(1, "string length");
    if (!ok()) return {};
    std::string s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  void fail(const std::string& what) {
    if (ok()) err_ = fmt::format("byte {}: {}", pos_, what);
  }

 private:
  const std::string& in_;
  size_t pos_ = 0;
  std::string err_;
};

void put_header(Writer& w, const Trace& t) {
  const Header& h = t.header;
  for (char c : kMagic) w.byte(static_cast<uint8_t>(c));
  w.varint(h.version);
  w.varint(h.flags);
  w.varint(h.command.size());
  for (const std::string& a : h.command) w.str(a);
  w.str(h.host.release);
  w.str(h.host.arch);
  w.byte(h.host.zero_page ? 1 : 0);
  w.varint(h.host.thp.size());
  for (const auto& [k, v] : h.host.thp) {
    w.str(k);
    w.str(v);
  }
  w.svarint(h.host.fault_around_bytes);
  w.svarint(h.host.overcommit_memory);
  w.svarint(h.host.numa_balancing);
  w.svarint(h.host.pswpin);
  w.svarint(h.host.pswpout);
  w.varint(h.lost);
  w.svarint(h.minflt);
  w.svarint(h.majflt);
  w.varint(h.start_ns);
  w.varint(h.duration_ns);
}

void get_header(Reader& r, Trace* t) {
  Header& h = t->header;
  for (char c : kMagic)
    if (r.byte() != static_cast<uint8_t>(c)) {
      r.fail("not an .mmtrace file (bad magic)");
      return;
    }
  h.version = static_cast<uint32_t>(r.varint());
  if (r.ok() && h.version != kMmtraceVersion) {
    r.fail(fmt::format("format version {}; this build reads version {}", h.version, kMmtraceVersion));
    return;
  }
  h.flags = static_cast<uint32_t>(r.varint());
  for (uint64_t n = r.count(1, "command word"); n-- && r.ok();) h.command.push_back(r.str());
  h.host.release = r.str();
  h.host.arch = r.str();
  h.host.zero_page = r.byte() != 0;
  for (uint64_t n = r.count(2, "THP setting"); n-- && r.ok();) {
    std::string k = r.str();
    h.host.thp[k] = r.str();
  }
  h.host.fault_around_bytes = r.svarint();
  h.host.overcommit_memory = static_cast<int>(r.svarint());
  h.host.numa_balancing = static_cast<int>(r.svarint());
  h.host.pswpin = r.svarint();
  h.host.pswpout = r.svarint();
  h.lost = r.varint();
  h.minflt = r.svarint();
  h.majflt = r.svarint();
  h.start_ns = r.varint();
  h.duration_ns = r.varint();
}

void put_tables(Writer& w, const Trace& t) {
  w.varint(t.files.size());
  for (const FileEntry& f : t.files) {
    w.str(f.path);
    w.varint(f.dev);
    w.varint(f.ino);
    w.varint(f.size);
    w.byte(static_cast<uint8_t>(f.cls));
  }
  w.varint(t.comm.size());
  for (const auto& [tid, name] : t.comm) {
    w.varint(tid);
    w.str(name);
  }
}

void get_tables(Reader& r, Trace* t) {
  for (uint64_t n = r.count(5, "file"); n-- && r.ok();) {
    FileEntry f;
    f.path = r.str();
    f.dev = r.varint();
    f.ino = r.varint();
    f.size = r.varint();
    const uint8_t cls = r.byte();
    if (cls > static_cast<uint8_t>(FileClass::kHugetlb)) r.fail(fmt::format("file class {}", cls));
    f.cls = static_cast<FileClass>(cls);
    t->files.push_back(std::move(f));
  }
  for (uint64_t n = r.count(2, "command name"); n-- && r.ok();) {
    const uint64_t tid = r.varint();
    t->comm[static_cast<uint32_t>(tid)] = r.str();
  }
}

// What encoding a record depends on from the ones before it.
struct Context {
  uint32_t tid = 0;
  uint16_t cpu = 0;
  uint64_t t_units = 0;
  std::unordered_map<uint32_t, uint64_t> last_page;  // per task
  std::unordered_map<uint64_t, uint64_t> last_rss;   // per task and rss_stat member, in pages
};

// Every record's start: the head byte with the same-task and same-CPU
// bits, the task and CPU where they changed, the time delta.
void put_head(Writer& w, const Context& c, const Record& rec, uint8_t head, int64_t dt) {
  if (rec.tid == c.tid) head |= kHeadSameTid;
  if (rec.cpu == c.cpu) head |= kHeadSameCpu;
  w.byte(head);
  if (!(head & kHeadSameTid)) w.varint(rec.tid);
  if (!(head & kHeadSameCpu)) w.varint(rec.cpu);
  w.svarint(dt);
}

void put_fault(Writer& w, Context& c, const Record& rec, int64_t dt) {
  put_head(w, c, rec, kHeadFault | (rec.flags & kHeadFaultBits), dt);
  const uint64_t page = rec.a >> 12;
  uint64_t& last = c.last_page[rec.tid];
  w.svarint(static_cast<int64_t>(page - last));
  last = page;
}

// rss_stat's byte counts are whole pages: kept in pages, as the distance
// from the same task's previous reading of the same member.
constexpr unsigned kRssShift = 12;
constexpr uint8_t kHeadOpBits = 0x1f;
static_assert(kOpCount <= kHeadOpBits + 1, "a record kind must fit the head byte's low five bits");

uint64_t& last_rss(Context& c, const Record& rec) { return c.last_rss[(static_cast<uint64_t>(rec.tid) << 8) | (rec.c & 0xff)]; }

void put_other(Writer& w, Context& c, const Record& in, int64_t dt) {
  Record rec = in;
  if (rec.op == Op::kRss) {
    uint64_t& last = last_rss(c, rec);
    const uint64_t pages = rec.a >> kRssShift;
    rec.a = zigzag(static_cast<int64_t>(pages - last));
    last = pages;
  }
  put_head(w, c, rec, static_cast<uint8_t>(rec.op), dt);
  const uint8_t mask = (rec.a ? kA : 0) | (rec.b ? kB : 0) | (rec.c ? kC : 0) | (rec.d ? kD : 0) |
                       (rec.e ? kE : 0) | (rec.ret ? kRet : 0) | (rec.file >= 0 ? kFile : 0) |
                       (rec.flags ? kFlags : 0);
  w.byte(mask);
  for (auto [bit, v] : {std::pair{kA, rec.a}, {kB, rec.b}, {kC, rec.c}, {kD, rec.d}, {kE, rec.e}})
    if (mask & bit) w.varint(v);
  if (mask & kRet) w.svarint(rec.ret);
  if (mask & kFile) w.varint(static_cast<uint64_t>(rec.file));
  if (mask & kFlags) w.byte(rec.flags);
}

bool get_record(Reader& r, Context& c, Record* rec, size_t nfiles) {
  const uint8_t head = r.byte();
  if (head & kHeadFault) {
    rec->op = Op::kFault;
    rec->flags = head & kHeadFaultBits;
    rec->tid = (head & kHeadSameTid) ? c.tid : static_cast<uint32_t>(r.varint());
    rec->cpu = (head & kHeadSameCpu) ? c.cpu : static_cast<uint16_t>(r.varint());
  } else {
    if ((head & kHeadOpBits) >= kOpCount) {
      r.fail(fmt::format("record kind {}", head & kHeadOpBits));
      return false;
    }
    rec->op = static_cast<Op>(head & kHeadOpBits);
    rec->tid = (head & kHeadSameTid) ? c.tid : static_cast<uint32_t>(r.varint());
    rec->cpu = (head & kHeadSameCpu) ? c.cpu : static_cast<uint16_t>(r.varint());
  }
  c.t_units += static_cast<uint64_t>(r.svarint());
  rec->t_ns = c.t_units * kNsPerUnit;
  c.tid = rec->tid;
  c.cpu = rec->cpu;
  if (rec->op == Op::kFault) {
    uint64_t& last = c.last_page[rec->tid];
    last += static_cast<uint64_t>(r.svarint());
    rec->a = last << 12;
    return r.ok();
  }
  const uint8_t mask = r.byte();
  for (auto [bit, v] : {std::pair{kA, &rec->a}, {kB, &rec->b}, {kC, &rec->c}, {kD, &rec->d}, {kE, &rec->e}})
    if (mask & bit) *v = r.varint();
  if (mask & kRet) rec->ret = r.svarint();
  if (mask & kFile) {
    const uint64_t f = r.varint();
    if (r.ok() && f >= nfiles) r.fail(fmt::format("file index {} of {} files", f, nfiles));
    rec->file = static_cast<int32_t>(f);
  }
  if (mask & kFlags) rec->flags = r.byte();
  if (rec->op == Op::kRss) {
    uint64_t& last = last_rss(c, *rec);
    last += static_cast<uint64_t>(unzigzag(rec->a));
    rec->a = last << kRssShift;
  }
  return r.ok();
}

}  // namespace

std::string encode_mmtrace(const Trace& t) {
  Writer w;
  put_header(w, t);
  put_tables(w, t);
  w.varint(t.records.size());
  Context c;
  for (const Record& rec : t.records) {
    const uint64_t units = rec.t_ns / kNsPerUnit;
    const int64_t dt = static_cast<int64_t>(units - c.t_units);
    if (rec.op == Op::kFault) {
      put_fault(w, c, rec, dt);
    } else {
      put_other(w, c, rec, dt);
    }
    c.t_units = units;
    c.tid = rec.tid;
    c.cpu = rec.cpu;
  }
  return w.take();
}

int decode_mmtrace(const std::string& bytes, Trace* t, std::string* err) {
  *t = Trace{};
  Reader r(bytes);
  get_header(r, t);
  get_tables(r, t);
  const uint64_t n = r.count(3, "record");  // a fault takes at least three bytes
  if (r.ok()) t->records.reserve(n);
  Context c;
  for (uint64_t i = 0; i < n && r.ok(); i++) {
    Record rec;
    if (get_record(r, c, &rec, t->files.size())) t->records.push_back(rec);
  }
  if (r.ok() && !r.at_end()) r.fail("data after the last record");
  if (!r.ok()) {
    *err = r.error();
    return -1;
  }
  return 0;
}

int write_mmtrace(const std::string& path, const Trace& t, std::string* err) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    *err = fmt::format("{}: cannot create: {}", path, std::strerror(errno));
    return -1;
  }
  const std::string bytes = encode_mmtrace(t);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.flush()) {
    *err = fmt::format("{}: write failed: {}", path, std::strerror(errno));
    return -1;
  }
  return 0;
}

int read_mmtrace(const std::string& path, Trace* t, std::string* err) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *err = fmt::format("{}: cannot open: {}", path, std::strerror(errno));
    return -1;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (decode_mmtrace(ss.str(), t, err)) {
    *err = path + ": " + *err;
    return -1;
  }
  return 0;
}

}  // namespace mmlab::record
