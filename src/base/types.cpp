// Names of signals and errno values, as the kernel's headers spell them, for
// reports and for the scenario language's ERRNO tokens.
#include "mmlab/types.h"

#include <cstring>

namespace mmlab {
namespace {

struct ErrnoName {
  int err;
  const char* name;
};

// One entry per value: aliases (EWOULDBLOCK, ENOTSUP, EDEADLOCK) are left out
// so that errno_name() and errno_from_name() are inverses.
constexpr ErrnoName kErrnoNames[] = {
    {EPERM, "EPERM"},           {ENOENT, "ENOENT"},       {ESRCH, "ESRCH"},
    {EINTR, "EINTR"},           {EIO, "EIO"},             {ENXIO, "ENXIO"},
    {E2BIG, "E2BIG"},           {EBADF, "EBADF"},         {EAGAIN, "EAGAIN"},
    {ENOMEM, "ENOMEM"},         {EACCES, "EACCES"},       {EFAULT, "EFAULT"},
    {EBUSY, "EBUSY"},           {EEXIST, "EEXIST"},       {ENODEV, "ENODEV"},
    {EINVAL, "EINVAL"},         {ETXTBSY, "ETXTBSY"},     {EFBIG, "EFBIG"},
    {ENOSPC, "ENOSPC"},         {EMLINK, "EMLINK"},       {ERANGE, "ERANGE"},
    {EDEADLK, "EDEADLK"},       {ENOSYS, "ENOSYS"},       {EOVERFLOW, "EOVERFLOW"},
    {EOPNOTSUPP, "EOPNOTSUPP"}, {ETIMEDOUT, "ETIMEDOUT"}, {EREMOTEIO, "EREMOTEIO"},
    {EHWPOISON, "EHWPOISON"},   {ELOOP, "ELOOP"},
};

}  // namespace

const char* signal_name(Signal s) {
  switch (s) {
    case Signal::kNone: return "none";
    case Signal::kSigsegv: return "SIGSEGV";
    case Signal::kSigbus: return "SIGBUS";
    case Signal::kSigkill: return "SIGKILL";
  }
  return "SIG?";
}

const char* errno_name(int err) {
  // Compare in the negative range: -INT_MIN does not exist.
  const int neg = err > 0 ? -err : err;
  for (const ErrnoName& e : kErrnoNames)
    if (-e.err == neg) return e.name;
  return "E?";
}

int errno_from_name(const char* name) {
  if (name == nullptr) return 0;
  for (const ErrnoName& e : kErrnoNames)
    if (std::strcmp(e.name, name) == 0) return e.err;
  return 0;
}

// ---- file-system classes ----

const char* fs_class_name(FsClass c) {
  static const char* n[] = {"shmem", "hugetlbfs", "ext4", "xfs", "btrfs"};
  return n[static_cast<int>(c)];
}

bool fs_class_from_name(const std::string& name, FsClass* out) {
  for (int i = 0; i < 5; i++)
    if (name == fs_class_name(static_cast<FsClass>(i))) {
      *out = static_cast<FsClass>(i);
      return true;
    }
  return false;
}

}  // namespace mmlab
