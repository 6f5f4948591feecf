#include "build_info.h"
#include "mmlab/types.h"

namespace mmlab {

const char* build_description() { return MMLAB_BUILD_DESC; }
const char* build_commit() { return MMLAB_GIT_COMMIT; }
bool build_is_instrumented() {
#if defined(MMLAB_INSTRUMENTED_BUILD)
  return true;
#else
  return false;
#endif
}

}  // namespace mmlab
