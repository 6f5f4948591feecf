#include "mm/file.h"

#include "fault/hugetlb.h"

namespace mmlab {

File::File() = default;
File::~File() = default;

}  // namespace mmlab
