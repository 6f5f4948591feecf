// GUP and its handles: `P gup H ADDR NPAGES FLAGS`, `H write|read OFFSET
// SIZE BYTE`, `unpin H [dirty]`, and `P dump D ADDR SIZE` (the range
// walked as a core dump does, with get_dump_page()).
#include "mmlab/gup.h"
#include "mmlab/system.h"
#include "scenario/parse_internal.h"

namespace mmlab::parser {
namespace {

void parse_gup_flags(LineParser& lp, stmt::Gup* g) {
  std::string flags = lp.word("FLAGS (a comma list: get or pin, [fast|fast-only|unlocked], write, force, longterm, nofault, split-pmd)");
  bool get = false, pin = false, fast = false, fast_only = false, unlocked = false;
  size_t pos = 0;
  while (pos <= flags.size()) {
    size_t c = flags.find(',', pos);
    if (c == std::string::npos) c = flags.size();
    std::string f = flags.substr(pos, c - pos);
    if (f == "get") get = true;
    else if (f == "pin") pin = true;
    else if (f == "fast") fast = true;
    else if (f == "fast-only") fast_only = true;
    else if (f == "unlocked") unlocked = true;
    else if (f == "write") g->gup_flags |= foll::WRITE;
    else if (f == "force") g->gup_flags |= foll::FORCE;
    else if (f == "longterm") g->gup_flags |= foll::LONGTERM;
    else if (f == "nofault") g->gup_flags |= foll::NOFAULT;
    else if (f == "split-pmd") g->gup_flags |= foll::SPLIT_PMD;
    else {
      lp.back();
      lp.fail("a GUP flag (get, pin, fast, fast-only, unlocked, write, force, longterm, nofault, split-pmd), not '" + f + "'");
    }
    pos = c + 1;
  }
  if (get == pin || fast + fast_only + unlocked > 1 || (pin && fast_only)) {
    lp.back();
    lp.fail(get == pin ? "FLAGS naming exactly one of 'get' and 'pin'" : "FLAGS naming one entry point");
  }
  g->entry = get ? (fast ? GupEntry::kGetUserPagesFast : fast_only ? GupEntry::kGetUserPagesFastOnly
                                                        : unlocked ? GupEntry::kGetUserPagesUnlocked
                                                                   : GupEntry::kGetUserPages)
                 : (fast ? GupEntry::kPinUserPagesFast : unlocked ? GupEntry::kPinUserPagesUnlocked : GupEntry::kPinUserPages);
}

}  // namespace

StmtBody parse_gup(LineParser& lp, const std::string& who) {
  stmt::Gup g;
  g.proc = who;
  g.handle = subject_name(lp, "a GUP handle");
  g.addr = lp.addr();
  g.nr_pages = lp.number("NPAGES");
  // No range of a 47-bit user address space holds more pages; a larger
  // count is a typo, and would not fit the pages array of any caller.
  if (g.nr_pages > kMaxGupPages)
    lp.back(), lp.fail("NPAGES up to " + std::to_string(kMaxGupPages) + " (the pages of a 128 TiB user address space)");
  lp.in_user_space(g.addr, g.nr_pages * PAGE_SIZE, "NPAGES that keep");
  parse_gup_flags(lp, &g);
  return g;
}

StmtBody parse_handle_access(LineParser& lp, const std::string& handle, bool write) {
  const uint64_t off = lp.number("an OFFSET");
  const uint64_t size = lp.number("a SIZE");
  const auto byte = static_cast<uint8_t>(lp.byte());
  if (write) return stmt::HandleWrite{handle, off, size, byte};
  return stmt::HandleRead{handle, off, size, byte};
}

StmtBody parse_vm_read(LineParser& lp, const std::string& who) {
  stmt::VmRead v;
  v.proc = who;
  v.target = lp.name();
  v.remote = lp.range(&v.size);
  v.local = lp.addr();
  lp.in_user_space(v.local, v.size, "a SIZE that keeps LOCAL");
  return v;
}

StmtBody parse_unpin(LineParser& lp, const std::string&) {
  stmt::Unpin u{lp.name()};
  u.dirty = lp.accept("dirty");
  return u;
}

StmtBody parse_dump(LineParser& lp, const std::string& who) {
  stmt::Dump d;
  d.proc = who;
  d.dump = lp.name();
  d.addr = lp.range(&d.size);
  return d;
}

}  // namespace mmlab::parser
