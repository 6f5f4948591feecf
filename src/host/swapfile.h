// A swap device for one host-backend test: a swap file on the root file
// system, swapon'd for the test and swapoff'd and deleted afterwards (also
// from the interrupt handler in sysfs.cpp).
#pragma once

#include <cstdint>
#include <string>

namespace mmlab::host {

class HostSwap {
 public:
  HostSwap() = default;
  ~HostSwap() { remove(); }
  HostSwap(const HostSwap&) = delete;
  HostSwap& operator=(const HostSwap&) = delete;

  int add(uint64_t size, std::string* why);  // 0 or -errno
  void remove();

 private:
  std::string path_;
  bool on_ = false;
};

// For the interrupt handler (sysfs.cpp): the swap file to swapoff and delete.
void register_host_swapfile(const char* path);
void unregister_host_swapfile();

}  // namespace mmlab::host
