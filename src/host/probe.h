// What this host's kernel can show, measured by experiment once per run.
// Kernels of the machines this project runs on are not upstream and differ
// from machine to machine (one boots with pvm_no_zero_page=1, one lacks
// CONFIG_MEM_SOFT_DIRTY, ...), so the host backend asks the kernel instead
// of assuming: an expectation whose meaning depends on a capability the
// host lacks is skipped with the probe's reason (docs/HOST.md lists which).
#pragma once

#include <array>
#include <string>
#include <vector>

namespace mmlab::host {

enum class Cap {
  kZeroPage,      // an anonymous read fault maps the shared zero page
  kHugeZeroPage,  // a read of a fresh MADV_HUGEPAGE 2M range maps the huge zero folio
  kSoftDirty,     // clear_refs 4 clears pagemap bit 55 and a write sets it again
  kZswapOff,      // swap-out reaches the swap device (zswap is disabled)
  kNoHostSwap,    // the host has no swap device of its own (/proc/swaps)
  kBlkdevSwap,    // a loop block device can be swapon'd and takes a 64K mTHP whole
  kFileSwap,      // a swap file can be swapon'd (and splits a large folio at swap-out)
  kIoUring,       // a ring can be made (io_uring fixed buffers: pin,fast,write,longterm)
  kHugetlb2M,     // the 2M hugetlb pool can be filled
  kHugetlb1G,     // the 1G hugetlb pool can be filled
  kZramSwap,      // a hot-added zram device (SWP_SYNCHRONOUS_IO) frees a 64K mTHP at swap-out and swaps it in whole
  kGuardRegions,  // MADV_GUARD_INSTALL works (v6.13) and pagemap shows PM_GUARD_REGION (v6.14)
  kReadOnlyThp,   // CONFIG_READ_ONLY_THP_FOR_FS: MADV_COLLAPSE of a read-only ext4 file mapping is not EINVAL
};
constexpr int kNumCaps = 13;

struct CapResult {
  bool have = false;
  bool faked = false;  // forced to "missing" (set_fake_probes): the experiment found it
  std::string detail;  // what the experiment showed
};

struct HostProbes {
  std::array<CapResult, kNumCaps> caps;
  std::vector<unsigned> mthp_kb;         // anonymous mTHP sizes: hugepages-<N>kB/enabled present
  std::vector<unsigned> mthp_other_kb;   // hugepages-<N>kB directories without it (shmem only)
  const CapResult& operator[](Cap c) const { return caps[static_cast<int>(c)]; }
  bool have(Cap c) const { return (*this)[c].have; }
  // "<name>: <detail>", the reason an expectation needing `c` is skipped.
  std::string reason(Cap c) const;
};

const char* cap_name(Cap c);  // zero_page, huge_zero_page, soft_dirty, ...

// The probes, measured on the first call and then cached for the process,
// with the forced answers applied. The caller holds the HostLock (the
// probes change THP settings and pools, and restore them). The runner's
// thread only.
HostProbes host_probes();

// Forces the named capabilities to "missing" on top of the measurements, so
// that the skip paths can be exercised on a host that has them: a comma
// list of cap names (or "all"); "" forces nothing. MMLAB_HOST_FAKE_PROBES
// in the environment is read on the first host_probes() call and added.
// 0, or -EINVAL with *why naming the unknown name.
[[nodiscard]] int set_fake_probes(const std::string& list, std::string* why);

// One "# host probe NAME: yes|no (DETAIL)" line per probe, then the mTHP sizes.
std::vector<std::string> host_probe_lines(const HostProbes& p);

}  // namespace mmlab::host
