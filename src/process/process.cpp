// Process: the system calls of one user process, on its Mm. Each call that
// may fault runs with the process as `current` (fault/current.h), so that
// mm_account_fault counts its faults to it.
#include "fault/current.h"
#include "mm/filemap.h"
#include "mm/fork.h"
#include "mm/kernel.h"
#include "mm/madvise.h"
#include "mm/mlock.h"
#include "mm/mseal.h"
#include "mm/shm.h"
#include "mm/mm.h"
#include "mm/mmap.h"
#include "mm/mprotect.h"
#include "mm/mremap.h"
#include "mm/userfaultfd.h"
#include "mmlab/system.h"
#include "pgtable/pgtable.h"
#include "process/process_internal.h"

namespace mmlab {

Process::Process(System* sys, std::unique_ptr<Mm> mm, std::string name, int pid)
    : sys_(sys), mm_(std::move(mm)), task_(std::make_unique<TaskStruct>()), name_(std::move(name)), pid_(pid) {}

Process::~Process() { exit(); }

// Every system call below enters the kernel once (the cost model's
// per-call term), whatever it then does.
Mm* Process::syscall_mm() const {
  if (mm_) mm_->stats->count(Event::mm_syscall);
  return mm_.get();
}

long Process::mmap(uint64_t addr, uint64_t len, int prot, int flags, uint64_t off) {
  CurrentTask cur(task());  // MAP_POPULATE, MAP_LOCKED, mlockall(MCL_FUTURE)
  if (!syscall_mm()) return -ESRCH;
  if (off & ~PAGE_MASK) return -EINVAL;
  return do_mmap(mm_.get(), addr, len, prot, flags, off >> PAGE_SHIFT);
}

int Process::munmap(uint64_t addr, uint64_t len) { return syscall_mm() ? do_munmap(mm_.get(), addr, len) : -ESRCH; }
int Process::mprotect(uint64_t addr, uint64_t len, int prot) {
  CurrentTask cur(task());  // a VM_LOCKED range made writable is populated
  return syscall_mm() ? do_mprotect(mm_.get(), addr, len, prot) : -ESRCH;
}
long Process::mremap(uint64_t addr, uint64_t old_len, uint64_t new_len, int flags, uint64_t new_addr) {
  CurrentTask cur(task());  // a VM_LOCKED VMA's new part is populated
  return syscall_mm() ? do_mremap(mm_.get(), addr, old_len, new_len, flags, new_addr) : -ESRCH;
}
int Process::madvise(uint64_t addr, uint64_t len, int advice) {
  CurrentTask cur(task());  // MADV_POPULATE_READ/WRITE
  return syscall_mm() ? do_madvise(mm_.get(), addr, len, advice) : -ESRCH;
}

int Process::mlock2(uint64_t addr, uint64_t len, int flags) {
  CurrentTask cur(task());
  return syscall_mm() ? do_mlock2(mm_.get(), addr, len, flags) : -ESRCH;
}
int Process::munlock(uint64_t addr, uint64_t len) { return syscall_mm() ? do_munlock(mm_.get(), addr, len) : -ESRCH; }
int Process::mlockall(int flags) {
  CurrentTask cur(task());
  return syscall_mm() ? do_mlockall(mm_.get(), flags) : -ESRCH;
}
int Process::munlockall() { return syscall_mm() ? do_munlockall(mm_.get()) : -ESRCH; }
int Process::mseal(uint64_t addr, uint64_t len, unsigned long flags) {
  return syscall_mm() ? do_mseal(mm_.get(), addr, len, flags) : -ESRCH;
}
long Process::shmat(int id, bool ro) {
  CurrentTask cur(task());
  return syscall_mm() ? do_shmat(mm_.get(), id, ro ? kShmRdonly : 0) : -ESRCH;
}
int Process::shmdt(uint64_t addr) {
  CurrentTask cur(task());
  return syscall_mm() ? ksys_shmdt(mm_.get(), addr) : -ESRCH;
}

int Process::prctl_set_thp_disable(bool disable, unsigned long flags) {
  return syscall_mm() ? mmlab::prctl_set_thp_disable(mm_.get(), disable, flags) : -ESRCH;
}
int Process::uffd_register(uint64_t addr, uint64_t len, unsigned modes) {
  if (!syscall_mm()) return -ESRCH;
  if (!modes || (modes & ~(kUffdMissing | kUffdWp))) return -EINVAL;
  vm_flags_t f = ((modes & kUffdMissing) ? VM_UFFD_MISSING : 0) | ((modes & kUffdWp) ? VM_UFFD_WP : 0);
  return userfaultfd_register(mm_.get(), addr, len, f);
}
int Process::uffd_writeprotect(uint64_t addr, uint64_t len, bool wp) {
  return syscall_mm() ? mwriteprotect_range(mm_.get(), addr, len, wp) : -ESRCH;
}

void Process::exit() {
  if (!mm_) return;
  mmput(mm_.get());
  mm_.reset();
}

uint64_t Process::min_flt() const { return task_->min_flt.load(std::memory_order_relaxed); }
uint64_t Process::maj_flt() const { return task_->maj_flt.load(std::memory_order_relaxed); }

AccessResult Process::read(uint64_t addr, void* buf, uint64_t len) {
  CurrentTask cur(task());
  if (!mm_) return {Signal::kSigsegv, addr};
  return user_read(mm_.get(), addr, buf, len);
}
AccessResult Process::write(uint64_t addr, const void* buf, uint64_t len) {
  CurrentTask cur(task());
  if (!mm_) return {Signal::kSigsegv, addr};
  return user_write(mm_.get(), addr, buf, len);
}
AccessResult Process::fill(uint64_t addr, uint8_t byte, uint64_t len) {
  CurrentTask cur(task());
  if (!mm_) return {Signal::kSigsegv, addr};
  return user_fill(mm_.get(), addr, byte, len);
}
AccessResult Process::read_expect(uint64_t addr, uint8_t byte, uint64_t len, int64_t* first_mismatch, uint8_t* found) {
  CurrentTask cur(task());
  if (!mm_) return {Signal::kSigsegv, addr};
  return user_read_expect(mm_.get(), addr, byte, len, first_mismatch, found);
}

long Process::rss_anon() const { return mm_ ? mm_->get_mm_counter(MM_ANONPAGES) * static_cast<long>(PAGE_SIZE) : 0; }
long Process::rss_file() const { return mm_ ? mm_->get_mm_counter(MM_FILEPAGES) * static_cast<long>(PAGE_SIZE) : 0; }
long Process::rss_shmem() const { return mm_ ? mm_->get_mm_counter(MM_SHMEMPAGES) * static_cast<long>(PAGE_SIZE) : 0; }
long Process::locked_vm() const { return mm_ ? static_cast<long>(mm_locked_bytes(mm_.get())) : 0; }
long Process::pgtables_bytes() const { return mm_ ? mm_->pgtables_bytes.load() : 0; }

std::string Process::smaps() const { return mm_ ? proc_smaps(mm_.get()) : ""; }
long Process::pss() const { return mm_ ? static_cast<long>(proc_pss(mm_.get())) : 0; }
std::string Process::status_rss() const { return mm_ ? proc_status_rss(mm_.get()) : ""; }

std::vector<PteDumpEntry> Process::pagetable_dump(uint64_t start, uint64_t end) const {
  return mm_ ? ptdump_entries(mm_.get(), start, end) : std::vector<PteDumpEntry>{};
}
PageInfo Process::page_info(uint64_t addr) const { return mm_ ? page_info_at(mm_.get(), addr) : PageInfo{}; }
std::vector<std::pair<PteDumpEntry, PageInfo>> Process::leaf_infos() const {
  return mm_ ? leaf_infos_of(mm_.get()) : std::vector<std::pair<PteDumpEntry, PageInfo>>{};
}
std::string Process::folio_dump(uint64_t addr) const { return mm_ ? folio_dump_at(mm_.get(), addr) : ""; }
std::string Process::pagetable_dump_text(uint64_t start, uint64_t end) const {
  return mm_ ? ptdump_text(mm_.get(), start, end) : "";
}

// kernel_clone(), the address-space part (copy_mm), and the child Process
// registered with the System as new_process() does.
Process* Process::fork(const std::string& child_name, int* err) {
  int ret = -ESRCH;
  std::unique_ptr<Mm> mm = syscall_mm() ? dup_mm(mm_.get(), &ret) : nullptr;
  if (err) *err = ret;
  if (!mm) return nullptr;
  return sys_->add_process(std::move(mm), child_name);
}

long Process::mmap_file(uint64_t addr, uint64_t len, int prot, int flags, int fd, uint64_t off) {
  CurrentTask cur(task());
  return syscall_mm() ? ksys_mmap_pgoff(mm_.get(), addr, len, prot, flags, fd, off) : -ESRCH;
}

void Process::clear_soft_dirty() {
  if (mm_) clear_refs_soft_dirty(mm_.get());
}

}  // namespace mmlab
