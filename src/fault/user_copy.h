// Copying user data between frames. User memory may be written by another
// thread of the process (or a device through a pin) while it is copied, as on
// real hardware; the copies use relaxed atomic word accesses so that such
// races are well-defined (and ThreadSanitizer-clean) without costing more
// than plain moves on x86-64.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

#include "mmlab/types.h"

namespace mmlab {

inline void user_memcpy(void* dst, const void* src, uint64_t len) {
  auto* d = static_cast<uint8_t*>(dst);
  auto* s = static_cast<uint8_t*>(const_cast<void*>(src));
  uint64_t i = 0;
  if ((reinterpret_cast<uintptr_t>(d) & 7) == 0 && (reinterpret_cast<uintptr_t>(s) & 7) == 0) {
    for (; i + 8 <= len; i += 8) {
      uint64_t v = std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(s + i)).load(std::memory_order_relaxed);
      std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(d + i)).store(v, std::memory_order_relaxed);
    }
  }
  for (; i < len; i++) {
    uint8_t v = std::atomic_ref<uint8_t>(s[i]).load(std::memory_order_relaxed);
    std::atomic_ref<uint8_t>(d[i]).store(v, std::memory_order_relaxed);
  }
}

inline void user_memset(void* dst, uint8_t byte, uint64_t len) {
  auto* d = static_cast<uint8_t*>(dst);
  uint64_t i = 0;
  uint64_t word = 0x0101010101010101ull * byte;
  if ((reinterpret_cast<uintptr_t>(d) & 7) == 0)
    for (; i + 8 <= len; i += 8) std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(d + i)).store(word, std::memory_order_relaxed);
  for (; i < len; i++) std::atomic_ref<uint8_t>(d[i]).store(byte, std::memory_order_relaxed);
}

// copy_user_highpage: the destination is a new, private frame.
inline void copy_user_page(void* dst, const void* src) { user_memcpy(dst, src, PAGE_SIZE); }

}  // namespace mmlab
