// The parsed form of a .mms file: tests made of statements.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mmlab {

// ADDR: a region name plus an offset.
struct AddrExpr {
  std::string region;
  uint64_t offset = 0;
};

enum class Op {
  kSysfs, kTune, kProc, kFork, kExit, kFile, kSwap, kMmap, kMunmap, kMprotect, kMremap, kMadvise,
  kClearSoftDirty, kKhugepaged, kAdvance, kThpDisable, kUffdRegister, kUffdWp, kCountersReset, kWrite, kRead, kGup,
  kHandleWrite, kHandleRead, kUnpin, kDump,
  kExpectHandle, kExpectDump, kExpectMapped, kExpectOrder, kExpectExclusive, kExpectPinned, kExpectZero,
  kExpectSwapped, kExpectSame, kExpectRss, kExpectSysfs, kExpectVmstat, kExpectCounter, kCheck, kSkip, kXfail,
  kExpectSoftDirty, kExpectUffdWp, kExpectViolation,
};

// `when KEY=V1[,V2...]`: the statement runs only while the tune key has one
// of the values.
struct WhenCond {
  std::string key;
  std::vector<std::string> values;
};

struct Stmt {
  Op op;
  std::string file;
  int line = 0;
  std::string text;  // the source line, for diagnostics
  // Operands (which ones are used depends on op).
  std::string p, q, name, name2, str, str2;  // processes, bound names, paths/keys/values/kinds (swap: blkdev|file)
  AddrExpr addr, addr2;
  uint64_t size = 0, size2 = 0, n = 0;
  int64_t value = 0;  // expected numbers (may be negative errno)
  int byte = -1;      // BYTE, -1 if absent
  int prot = 0;
  bool flag = false;  // yes/no, shared, dirty, same
  bool has_to = false;
  unsigned gup_flags = 0;
  int gup_entry = 0;
  std::string fs;             // file: fs class
  unsigned hugetlb_shift = 0;  // 21 or 30
  std::string file_ref;       // mmap file=F
  uint64_t file_off = 0;
  uint64_t align = 0;
  int advice = 0;
  std::vector<WhenCond> when;  // all must hold
  // expect-error: the errno (negative) or signal name, and the statement.
  bool expect_error = false;
  int expect_errno = 0;
  std::string expect_signal;
};

struct TestCase {
  std::string name;
  std::string file;
  int line = 0, col = 0;  // of NAME in `test NAME`
  std::vector<Stmt> stmts;
};

struct ScenarioFileAst {
  std::string path;
  std::vector<Stmt> prelude;
  std::vector<TestCase> tests;
};

}  // namespace mmlab

namespace mmlab {
struct ScenarioProgram {
  std::vector<ScenarioFileAst> files;
};
}  // namespace mmlab
