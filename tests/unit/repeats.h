// Repeat counts under the sanitizers.
//
// The ThreadSanitizer and AddressSanitizer builds run the model 5-20 times
// slower than the release build. What they add is the memory and thread
// safety of every path the tests take, which one pass shows; a count whose
// point is statistical (the same result N times, nothing found in N runs)
// runs in full in the release build and a fifth of it under a sanitizer.
#pragma once

namespace mmlab::test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

constexpr int repeats(int full) { return kSanitized ? (full + 4) / 5 : full; }

}  // namespace mmlab::test
