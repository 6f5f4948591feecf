// The smallest program on the installed library: a private anonymous
// mapping written, then fork, then a write in the child that must not reach
// the parent (copy-on-write); the invariant checker and the frame count close
// it. Exit status 0 when the model behaves as the kernel does.
#include <cstdio>

#include "mmlab/system.h"

int main() {
  mmlab::SystemConfig cfg;
  cfg.ram_bytes = 64ull << 20;
  int err = 0;
  auto sys = mmlab::System::create(cfg, &err);
  if (!sys) {
    std::fprintf(stderr, "System::create: %d\n", err);
    return 1;
  }
  const uint64_t free_at_start = sys->nr_free_pages();
  mmlab::Process* parent = sys->new_process("parent");
  const long addr = parent->mmap(0, 1 << 20, mmlab::PROT_READ | mmlab::PROT_WRITE,
                                 mmlab::MAP_PRIVATE | mmlab::MAP_ANONYMOUS);
  if (addr < 0 || !parent->fill(addr, 0x5a, 4096).ok()) return 1;
  mmlab::Process* child = parent->fork();
  if (!child || !child->fill(addr, 0xa5, 4096).ok()) return 1;
  uint8_t seen = 0;
  if (!parent->read(addr, &seen, 1).ok()) return 1;
  std::printf("parent reads %#x after the child's write\n", seen);
  child->exit();
  parent->exit();
  const mmlab::CheckReport report = sys->check();
  if (!report.ok()) {
    std::fprintf(stderr, "%s\n", report.to_string().c_str());
    return 1;
  }
  return seen == 0x5a && sys->nr_free_pages() == free_at_start ? 0 : 1;
}
