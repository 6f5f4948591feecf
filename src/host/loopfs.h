// File systems the host lacks, made for the run: an xfs or btrfs on a loop
// device over a sparse image in /var/tmp, so that `file F SIZE fs=xfs`
// tests what a real xfs does (gup_longterm.c's point: a writable long-term
// pin of a shared mapping of such a file must fail). Mounted on first use,
// unmounted (the loop device clears itself) and deleted when the run's
// HostLock is released, by the interrupt handler, or by the next run's
// journal replay.
#pragma once

#include <string>

namespace mmlab::host {

// A writable directory on a fresh `fs_class` file system, or "" with *why.
std::string loopfs_dir(const std::string& fs_class, std::string* why);
// A writable directory on a tmpfs mounted for the run with huge=`huge`,
// and noswap if asked (one per combination), or "" with *why. Unmounted by loopfs_teardown().
std::string tmpfs_dir(const std::string& huge, bool noswap, std::string* why);
// Unmounts and deletes every loop file system (and tmpfs) made by this process.
void loopfs_teardown();

}  // namespace mmlab::host
