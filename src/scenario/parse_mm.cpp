// The mm system calls of a process: `P mmap`, `munmap`, `mprotect`,
// `mremap`, `madvise`, `mlock`, `munlock`, `mlockall`, `munlockall`,
// `clear-soft-dirty` (clear_refs),
// `thp-disable` (prctl), `userfaultfd` and `uffd-wp`.
#include <algorithm>

#include "fmt/format.h"
#include "mmlab/system.h"
#include "scenario/parse_internal.h"

namespace mmlab::parser {

// P mmap R SIZE PROT private|shared [file=F[+OFF]] [hugetlb=2M|1G]
//   [align=SIZE | at=ADDR | fixed=ADDR | noreplace=ADDR] [populate] [locked] [noreserve]
StmtBody parse_mmap(LineParser& lp, const std::string& who) {
  stmt::Mmap m;
  m.proc = who;
  m.region = lp.name();
  m.size = lp.size();
  m.prot = lp.prot();
  std::string vis = lp.word("private or shared");
  if (vis != "private" && vis != "shared") lp.fail("private or shared");
  m.shared = vis == "shared";
  while (!lp.done()) {
    std::string opt = lp.peek()->s;
    if (opt.rfind("file=", 0) == 0) {
      std::string ref = opt.substr(5);
      auto plus = ref.find('+');
      m.file = ref.substr(0, plus);
      if (!LineParser::is_name(m.file)) lp.fail("file=F[+OFFSET]");
      if (plus != std::string::npos && !lp.checked_number(ref.substr(plus + 1), &m.file_off)) lp.fail("file=F[+OFFSET]");
    } else if (opt == "populate" || opt == "locked" || opt == "noreserve") {
      const int flag = opt == "populate" ? MAP_POPULATE : opt == "locked" ? MAP_LOCKED : MAP_NORESERVE;
      if (m.map_flags & flag) lp.fail(opt + " once");
      m.map_flags |= flag;
    } else if (opt == "hugetlb=2M" || opt == "hugetlb=1G") {
      m.hugetlb_shift = opt == "hugetlb=2M" ? 21 : 30;
    } else if (opt.rfind("align=", 0) == 0) {
      if (!lp.checked_number(opt.substr(6), &m.align) || !m.align || (m.align & (m.align - 1)) || m.align % 4096)
        lp.fail("align=SIZE (a power of two, at least 4K)");
    } else if (opt.rfind("at=", 0) == 0 || opt.rfind("fixed=", 0) == 0 || opt.rfind("noreplace=", 0) == 0) {
      const size_t eq = opt.find('=');
      const std::string kind = opt.substr(0, eq);
      if (m.place != stmt::Mmap::Place::kAny) lp.fail("one of at=, fixed= and noreplace=");
      m.place = kind == "at" ? stmt::Mmap::Place::kHint
                : kind == "fixed" ? stmt::Mmap::Place::kFixed
                                  : stmt::Mmap::Place::kNoReplace;
      LineParser sub("", 0, {{opt.substr(eq + 1), lp.peek()->col + static_cast<int>(eq) + 1}});
      try {
        m.place_addr = sub.addr();
      } catch (const ParseFail&) {
        lp.fail(fmt::format("{}=ADDR (R or R+SIZE, the offset below TASK_SIZE {:#x}), not '{}'", kind, TASK_SIZE, opt));
      }
      if (m.size > TASK_SIZE - m.place_addr.offset)
        lp.fail(fmt::format("{}=ADDR that keeps SIZE below TASK_SIZE ({:#x}), not '{}'", kind, TASK_SIZE, opt));
    } else {
      lp.fail("file=F[+OFFSET], hugetlb=2M|1G, align=SIZE, at=ADDR, fixed=ADDR, noreplace=ADDR, populate, locked or noreserve");
    }
    lp.word("");
  }
  if (m.place != stmt::Mmap::Place::kAny && m.align) lp.fail("align= or a placement (at=, fixed=, noreplace=), not both");
  return m;
}

// P shmat R S [ro]
StmtBody parse_shmat(LineParser& lp, const std::string& who) {
  stmt::Shmat a;
  a.proc = who;
  a.region = lp.name();
  a.seg = lp.name();
  if (!lp.done()) {
    lp.keyword("ro");
    a.read_only = true;
  }
  lp.end();
  return a;
}

// P shmdt ADDR
StmtBody parse_shmdt(LineParser& lp, const std::string& who) {
  stmt::Shmdt d;
  d.proc = who;
  d.addr = lp.addr();
  lp.end();
  return d;
}

StmtBody parse_munmap(LineParser& lp, const std::string& who) {
  stmt::Munmap m;
  m.proc = who;
  m.addr = lp.range(&m.size);
  return m;
}

StmtBody parse_mprotect(LineParser& lp, const std::string& who) {
  stmt::Mprotect m;
  m.proc = who;
  m.addr = lp.range(&m.size);
  m.prot = lp.prot();
  return m;
}

// P mremap ADDR OLD NEW R [to=ADDR] [dontunmap]
StmtBody parse_mremap(LineParser& lp, const std::string& who) {
  stmt::Mremap m;
  m.proc = who;
  m.addr = lp.range(&m.old_size);
  m.new_size = lp.size();
  m.region = lp.name();
  while (!lp.done()) {
    std::string opt = lp.peek()->s;
    if (opt == "dontunmap" && !m.dontunmap) {
      m.dontunmap = true;
    } else if (opt.rfind("to=", 0) == 0 && !m.to) {
      LineParser sub("", 0, {{opt.substr(3), lp.peek()->col + 3}});
      try {
        m.to = sub.addr();
      } catch (const ParseFail&) {
        lp.fail(fmt::format("to=ADDR (R or R+SIZE, the offset below TASK_SIZE {:#x}), not '{}'", TASK_SIZE, opt));
      }
      if (m.new_size > TASK_SIZE - m.to->offset)
        lp.fail(fmt::format("to=ADDR that keeps NEW below TASK_SIZE ({:#x}), not '{}'", TASK_SIZE, opt));
    } else {
      lp.fail("to=ADDR or dontunmap (each once)");
    }
    lp.word("");
  }
  return m;
}

// P mlock ADDR SIZE [onfault]: mlock(2), or mlock2(MLOCK_ONFAULT).
StmtBody parse_mlock(LineParser& lp, const std::string& who) {
  stmt::Mlock m;
  m.proc = who;
  m.addr = lp.range(&m.size);
  m.onfault = lp.accept("onfault");
  return m;
}

StmtBody parse_munlock(LineParser& lp, const std::string& who) {
  stmt::Mlock m;
  m.proc = who;
  m.addr = lp.range(&m.size);
  m.unlock = true;
  return m;
}

// P mlockall FLAGS: current, future and onfault joined by commas (the
// kernel refuses onfault alone: a test may ask for that to see EINVAL).
StmtBody parse_mlockall(LineParser& lp, const std::string& who) {
  stmt::Mlockall m;
  m.proc = who;
  const std::string flags = lp.word("FLAGS (current, future, onfault, joined by commas)");
  for (size_t at = 0; at <= flags.size();) {
    const size_t comma = std::min(flags.find(',', at), flags.size());
    const std::string f = flags.substr(at, comma - at);
    const int bit = f == "current" ? MCL_CURRENT : f == "future" ? MCL_FUTURE : f == "onfault" ? MCL_ONFAULT : 0;
    if (!bit || (m.flags & bit)) lp.back(), lp.fail("FLAGS (current, future, onfault, each once, joined by commas)");
    m.flags |= bit;
    at = comma + 1;
  }
  return m;
}

StmtBody parse_munlockall(LineParser&, const std::string& who) { return stmt::Mlockall{who, 0}; }

// P mseal ADDR SIZE: mseal(2) with flags 0.
StmtBody parse_mseal(LineParser& lp, const std::string& who) {
  stmt::Mseal m;
  m.proc = who;
  m.addr = lp.range(&m.size);
  return m;
}

namespace {

// MADV_WILLNEED's uapi value; include/mmlab/types.h does not name it yet
// (adding it there rebuilds everything), nor does mm/madvise.cpp export it.
constexpr int kMadvWillneed = 3;

// The ADVICE words and their uapi values, in the order the error lists them.
constexpr std::pair<const char*, int> kAdvice[] = {
    {"hugepage", MADV_HUGEPAGE},
    {"nohugepage", MADV_NOHUGEPAGE},
    {"dontneed", MADV_DONTNEED},
    {"collapse", MADV_COLLAPSE},
    {"populate_read", MADV_POPULATE_READ},
    {"populate_write", MADV_POPULATE_WRITE},
    {"dontfork", MADV_DONTFORK},
    {"dofork", MADV_DOFORK},
    {"wipeonfork", MADV_WIPEONFORK},
    {"keeponfork", MADV_KEEPONFORK},
    {"pageout", MADV_PAGEOUT},
    {"cold", MADV_COLD},
    {"free", MADV_FREE},
    {"dontneed_locked", MADV_DONTNEED_LOCKED},
    {"guard_install", MADV_GUARD_INSTALL},
    {"guard_remove", MADV_GUARD_REMOVE},
    {"remove", MADV_REMOVE},
    {"willneed", kMadvWillneed},
};

}  // namespace

const char* advice_word(int advice) {
  for (auto& [n, v] : kAdvice)
    if (v == advice) return n;
  return nullptr;
}

namespace {

int advice_from(const std::string& s) {
  for (auto& [n, v] : kAdvice)
    if (s == n) return v;
  return -1;
}

std::string advice_names() {
  std::string out;
  for (auto& [n, v] : kAdvice) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

}  // namespace

StmtBody parse_madvise(LineParser& lp, const std::string& who) {
  stmt::Madvise m;
  m.proc = who;
  m.addr = lp.range(&m.size);
  m.advice_name = lp.word("an ADVICE");
  m.advice = advice_from(m.advice_name);
  if (m.advice < 0)
    lp.fail("an ADVICE (" + advice_names() + ")");
  return m;
}

StmtBody parse_clear_soft_dirty(LineParser&, const std::string& who) { return stmt::ClearSoftDirty{who}; }

// prctl(PR_SET_THP_DISABLE)
StmtBody parse_thp_disable(LineParser& lp, const std::string& who) {
  stmt::ThpDisable t{who, lp.yes_no()};
  t.except_advised = lp.accept("except-advised");
  return t;
}

// UFFDIO_REGISTER
StmtBody parse_userfaultfd(LineParser& lp, const std::string& who) {
  stmt::UffdRegister u;
  u.proc = who;
  u.addr = lp.range(&u.size);
  std::string modes = lp.word("MODES (missing, wp or missing,wp)");
  if (modes == "missing") u.missing = true;
  else if (modes == "wp") u.wp = true;
  else if (modes == "missing,wp" || modes == "wp,missing") u.missing = u.wp = true;
  else lp.back(), lp.fail("MODES (missing, wp or missing,wp)");
  return u;
}

// UFFDIO_WRITEPROTECT
StmtBody parse_uffd_wp(LineParser& lp, const std::string& who) {
  stmt::UffdWp u;
  u.proc = who;
  u.addr = lp.range(&u.size);
  std::string on = lp.word("on or off");
  if (on != "on" && on != "off") lp.back(), lp.fail("on or off");
  u.on = on == "on";
  return u;
}

}  // namespace mmlab::parser

namespace mmlab {
const char* scenario_advice_word(int advice) { return parser::advice_word(advice); }
}  // namespace mmlab
