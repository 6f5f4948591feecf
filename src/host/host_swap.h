// A swap device for one host-backend test, of the kind the scenario names:
// a block device (a loop device over a sparse image in /var/tmp, SWP_BLKDEV:
// it takes a large folio whole; not SWP_SYNCHRONOUS_IO, so writes are
// asynchronous and swap-in stays order 0, as in the model), a swap file in
// /var/tmp (a large folio is split before it is swapped out), or zram (a
// device hot-added for the test, SWP_BLKDEV | SWP_SYNCHRONOUS_IO: written
// and freed in one pass, mTHP swap-in). swapon'd with the highest priority so
// that a swap device the host has of its own takes nothing while the test
// runs; swapoff'd and deleted when the test ends, also from the interrupt
// handler and the crash journal in sysfs.cpp.
#pragma once

#include <cstdint>
#include <string>

namespace mmlab::host {

enum class HostSwapKind { kBlkdev, kFile, kZram };

class HostSwap {
 public:
  HostSwap() = default;
  ~HostSwap() { remove(); }
  HostSwap(const HostSwap&) = delete;
  HostSwap& operator=(const HostSwap&) = delete;

  // 0, or -errno with *why (nothing is left behind).
  [[nodiscard]] int add(uint64_t size, HostSwapKind kind, std::string* why);
  void remove();
  bool on() const { return on_; }
  // The device swapon was given: /dev/loopN or the file.
  const std::string& device() const { return dev_; }

 private:
  int add_blkdev(uint64_t size, std::string* why);
  int add_file(uint64_t size, std::string* why);
  int add_zram(uint64_t size, std::string* why);
  std::string dev_, image_;  // image_: the loop device's backing file
  bool on_ = false;
};

// For the interrupt handler and the journal (sysfs.cpp): what to swapoff
// and what to delete. For a swap file both are the file; for a loop device
// the device and its image (the loop device clears itself when swapoff
// closes it: LO_FLAGS_AUTOCLEAR); for zram the device and no image (it is
// reset and hot-removed: undo_zram).
void register_host_swap(const char* dev, const char* image);
void unregister_host_swap();
// Resets and hot-removes a zram device this backend hot-added (/dev/zramN),
// after swapoff. Async-signal-safe (the interrupt handler calls it).
void undo_zram(const char* dev);
// Whether the kernel can hot-add zram devices (/sys/class/zram-control).
bool zram_available();

}  // namespace mmlab::host
