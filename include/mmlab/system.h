// mmlab's public API: a simulated machine (System) and its user processes
// (Process). The CLI, the scenario interpreter and the tests use nothing else.
//
// Every call returns the kernel's result: an address or a count, 0, or a
// negative errno; a CPU access returns the signal the kernel would deliver.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "mmlab/tune.h"
#include "mmlab/check.h"
#include "mmlab/types.h"

namespace mmlab {

struct Kernel;
struct Mm;
struct TaskStruct;
class Process;
class Khugepaged;

// Every name System::counter() knows: the event counters and the per-order
// `cow.<item>.order<N>` ones.
std::vector<std::string> counter_names();

// Every counter and statistic a System reports, with where it is read and
// what it counts (`mmlab counters`).
struct CounterInfo {
  std::string name;     // as System::counter(), vmstat_text() or the sysfs file names it
  std::string kind;     // "event" (the model's), "vmstat", "mthp" (per size), "cow" (per order)
  std::string meaning;
};
std::vector<CounterInfo> counter_catalog();

// The counters one thread moves while an EventTally is open on it, apart
// from the System-wide sums: what one operation did, to price it with the
// cost model (cow-bench's modelled latency of each write). One is open per
// thread at a time (opening a second is a bug); it counts in whatever
// System the thread works in. A counter that is not an event, a vmstat
// item or a per-order item has no slot.
class EventTally {
 public:
  EventTally();   // opens on the calling thread
  ~EventTally();  // closes
  EventTally(const EventTally&) = delete;
  EventTally& operator=(const EventTally&) = delete;
  // A System::counter() or vmstat name's slot, or -1.
  static int slot(const std::string& counter);
  // What the counter of `slot` moved by since the tally opened.
  int64_t at(int slot) const { return v_[static_cast<size_t>(slot)]; }

 private:
  std::vector<int64_t> v_;
};

// The host's available memory (MemAvailable), or 0 if unknown: what a
// caller checks a size taken from its input against before it touches that
// much of a frame store.
uint64_t host_memory_available();

// The most simulated RAM a System can have (SystemConfig::ram_bytes): its
// memmap must fit the frame store's memmap window (4 TiB less 4 MiB).
// System::create refuses more with -EINVAL; a caller checks its input here
// first to say so.
uint64_t system_max_ram_bytes();

// The one estimate of a System's host memory, which every option that
// sizes a System checks before one is made: what making it takes (its
// memmap's free-list heads: about 2.3 GiB per TiB of RAM, whatever then
// runs on it) and what it may come to use if every frame is touched (the
// frames and their memmap).
struct SystemHostMemory {
  uint64_t at_create = 0;
  uint64_t at_most = 0;
};
SystemHostMemory system_host_memory(uint64_t ram_bytes);

// The host memory behind a System's RAM (frame stores are recycled across
// Systems of one process; see src/phys/frame_store.h).
struct FrameStoreInfo {
  uint64_t uses = 0;            // Systems this store has served, this one included (1: fresh host memory)
  bool thp_advised = false;     // MADV_HUGEPAGE in force on it
  uint64_t rss = 0, anon_huge = 0;  // host resident bytes, and how many in host huge pages
};

struct SystemConfig {
  uint64_t ram_bytes = 4ull << 30;  // simulated RAM (default 4 GiB, touched lazily)
  uint64_t movable_bytes = 0;       // ZONE_MOVABLE share (top of RAM); default none
  bool prefault = false;            // touch the frame store up front (once per recycled store; benchmarks)
  HostThp host_thp = HostThp::kDefault;  // frame store: the host's default (no advice), MADV_HUGEPAGE or MADV_NOHUGEPAGE
};



// Fault injection at a named site (System::inject; the sites and their
// meaning: `mmlab counters`, `inject.<site>`, and the language reference).
struct InjectSpec {
  enum class Mode : uint8_t { kOff, kTimes, kEvery, kProbability };
  Mode mode = Mode::kOff;
  int order = -1;          // only calls for this folio order count; -1: every order
  uint64_t n = 0;          // kTimes: fail the next n calls; kEvery: every n-th call
  double probability = 0;  // kProbability: each call fails with this probability
  uint64_t after = 0;      // the first `after` matching calls pass
};

// A probability as text: a fraction in [0, 1] ("0.01") or a percentage
// ("1%"). false for anything else.
bool parse_probability(const std::string& text, double* out);

// The size fields ("NAME: N kB") the model's /proc/PID/smaps shows for each
// VMA (Rss, Anonymous, LazyFree, AnonHugePages, Swap, ...) and those its
// /proc/PID/status shows (VmRSS, RssAnon, VmPTE, VmSwap, ...): what
// `expect P smaps|status` may name.
bool smaps_field_known(const std::string& name);
bool status_field_known(const std::string& name);

class System {
 public:
  // nullptr (and *err = -errno) when the host cannot provide the frame store.
  static std::unique_ptr<System> create(const SystemConfig& cfg = {}, int* err = nullptr);
  ~System();
  System(const System&) = delete;
  System& operator=(const System&) = delete;

  // A new process with an empty address space. The System owns it until exit.
  Process* new_process(const std::string& name = "");
  // The simulated CPU the calling thread's model calls run on from now: `cpu`
  // if no other live thread holds it. Returns the CPU the thread is on.
  static int migrate_this_thread(int cpu);
  std::vector<Process*> processes() const;
  // Frees the processes that have exited, as a parent's wait() releases a
  // task: pointers to them become invalid. Their number. A System that
  // runs many programs one after another (a fuzzer's) keeps its list, and
  // what walks it, from growing.
  size_t release_exited();

  // /sys/kernel/mm/<path> (e.g. "transparent_hugepage/enabled"): 0 or -EINVAL/-ENOENT.
  int sysfs_write(const std::string& path, const std::string& value);
  int sysfs_read(const std::string& path, std::string* value) const;
  // Model variants with no sysfs file (gup.walk, cow.policy, ...).
  int tune(const std::string& key, const std::string& value);
  int tune_read(const std::string& key, std::string* value) const;

  // /proc/vmstat item, an event counter ("gup.descents") or an mTHP statistic.
  int64_t vmstat(const std::string& name) const;  // -1 if unknown
  int64_t counter(const std::string& name) const;  // -1 if unknown
  // Every counter() name and every /proc/vmstat item with its value: what
  // the cost model (include/mmlab/cost.h) multiplies, as a difference of two.
  std::map<std::string, int64_t> all_counters() const;
  // The TLB model's entries in use, summed over the simulated CPUs, per
  // level (L1 dTLB, L2), and the bytes they translate (the TLB's reach).
  // All zero with `tune tlb.geometry off`.
  struct TlbOccupancy {
    uint64_t l1_entries = 0, l1_bytes = 0, l2_entries = 0, l2_bytes = 0;
  };
  TlbOccupancy tlb_occupancy() const;
  int64_t mthp_stat(unsigned order, const std::string& name) const;  // -1 if unknown
  void reset_counters();
  std::string vmstat_text() const;  // /proc/vmstat format

  // ---- fault injection ----
  // Arm (or, with Mode::kOff, disarm) a site: 0, or -EINVAL for an unknown
  // site or a spec out of range. Arm only while no thread of the System runs.
  int inject(const std::string& site, const InjectSpec& spec);
  void inject_off_all();
  // The seed of the probability draws (1 by default).
  void inject_seed(uint64_t seed);
  // Failures injected at a site since the System was made; -1 if unknown.
  int64_t injected(const std::string& site) const;
  static std::vector<std::string> inject_sites();
  // Failures injected into calls the calling thread made, in any System:
  // a caller's way to tell its own injected failure from a real one.
  static uint64_t injected_on_this_thread();
  // The same at one site (0 for an unknown one): which site failed a call
  // tells which outcome the failure can explain.
  static uint64_t injected_on_this_thread(const std::string& site);

  // ---- files (memfd/tmpfs, hugetlbfs, ext4-class): fds are small integers ----
  // A file of `size` bytes, fully allocated (its page cache populated, zeroed).
  // hugetlb_shift 21 or 30 makes a hugetlbfs file (fs must be kHugetlbfs or
  // kShmem, which then means hugetlbfs). Returns the fd or -errno.
  int create_file(uint64_t size, FsClass fs = FsClass::kShmem, unsigned hugetlb_shift = 0,
                  const std::string& name = "");
  // A linked file of `size` bytes, fully allocated, on a tmpfs mounted with
  // huge=`huge` (always, within_size, advise, never): the mount's huge=
  // governs its THPs, not the per-size controls. Returns the fd or -errno
  // (-EINVAL for another value). `noswap`: the tmpfs is mounted noswap, so
  // reclaim leaves the file's pages mapped and resident.
  int create_tmpfs_file(uint64_t size, const std::string& huge, const std::string& name = "", bool noswap = false);
  // pread/pwrite on the file (through its page cache); bytes or -errno.
  long file_pread(int fd, uint64_t off, void* buf, uint64_t len);
  long file_pwrite(int fd, uint64_t off, const void* buf, uint64_t len);
  int close_file(int fd);
  // The file was written through this fd, which is now closed and the file
  // opened again O_RDONLY on the same number: nobody has it open for write
  // (inode_is_open_for_write() false), MAP_SHARED mappings of it are
  // read-only for good, pwrite/fallocate are EBADF and ftruncate EINVAL.
  // Before any mapping of it (else -EBUSY: a mapping's struct file stays
  // open for write). 0 or -errno.
  int file_reopen_read_only(int fd);
  // posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) of a regular (ext4-class)
  // file: its clean folios nobody maps leave the page cache, as after
  // drop_caches. -EINVAL for shmem and hugetlbfs. 0 or -errno.
  int file_fadvise_dontneed(int fd);  // drop the System's reference; mappings keep the file alive
  // ftruncate(fd, length): the file shrinks or grows; what lies past the new
  // end is unmapped from every process (private copies too) and freed.
  // 0 or -errno. hugetlbfs files: -ENOSYS (their truncation is not modelled).
  int file_ftruncate(int fd, int64_t length);
  // fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len): the
  // range becomes a hole (unmapped from every process, private copies kept;
  // partial pages zeroed). 0 or -errno; hugetlbfs files: -ENOSYS.
  int file_punch_hole(int fd, int64_t off, int64_t len);

  // ---- System V shared memory (mm/shm.h) ----
  // shmget(IPC_PRIVATE, size, IPC_CREAT | 0600 [| SHM_HUGETLB]): the id or -errno.
  long shmget(uint64_t size, bool hugetlb = false);
  // shmctl(id, cmd, NULL) for IPC_RMID (0), SHM_LOCK (11) and SHM_UNLOCK (12): 0 or -errno.
  int shmctl(int id, int cmd);

  // ---- swap ----
  // Add an in-memory swap device of `bytes` (none by default). 0 or -errno.
  int add_swap(uint64_t bytes, SwapKind kind = SwapKind::kBlkdev);
  // Wait for the swap writes in flight (to a block device or a swap file,
  // which write asynchronously; zram's are done when reclaim returns): the
  // written folios stay in the swap cache, and those nothing needs any more
  // leave it. Returns how many writes completed.
  long swap_writeback_wait();
  // Run the model's shrinkers once (the deferred-split queue); returns the
  // number of folios split. Nothing splits behind a caller's back otherwise.
  // The swap writes in flight complete first.
  long run_shrinkers();

  // ---- time and khugepaged ----
  // The virtual clock, in ns since the System was made. Nothing but
  // khugepaged's schedule lives on it.
  uint64_t clock_ns() const;
  // Move the clock by ns, running the khugepaged wakes that fall due (each
  // costs no time unless a cost function is set; a sleep follows each).
  // 0, -EBUSY while the khugepaged thread runs, -ELOOP if wakes would come
  // without end (scan_sleep_millisecs 0 and wakes that cost nothing).
  int advance_clock(uint64_t ns);
  // Run khugepaged until every registered mm has had n more full scans (the
  // clock moves over the sleeps between wakes). Returns at once when the
  // khugepaged thread is not running (no THP size it serves is enabled) or
  // no mm is registered. 0 or -ELOOP.
  int run_khugepaged(unsigned full_scans);
  // khugepaged's wakes on a thread (and simulated CPU) of their own,
  // concurrently with the caller's threads; run_khugepaged() then waits for
  // that thread. speedup 0: back to back, the clock jumping over the sleeps.
  // speedup N: paced, each sleep lasting 1/N of its virtual length in host
  // time and each wake's host time charged to the clock, so that khugepaged
  // wakes beside a short workload as it would beside a long one. -EBUSY if
  // it runs already.
  int start_khugepaged_thread(uint64_t speedup = 0);
  void stop_khugepaged_thread();
  bool khugepaged_running() const;  // the khugepaged kthread exists
  void set_khugepaged_wake_cost(std::function<uint64_t(const KhugepagedWakeStats&)> cost_ns);
  CollapseTiming collapse_timing() const;
  KhugepagedTiming khugepaged_timing() const;

  // Violations the model recorded and went on from instead of aborting:
  // under `cow.policy rfc`, what the posting does that would corrupt the
  // kernel, and its VM_WARN_ON_FOLIO sites (docs/NOTES.md). Empty otherwise.
  std::vector<std::string> warnings() const;
  // What the model's kernel logged (pr_warn_once and the like), in order.
  std::vector<std::string> kernel_log() const;

  // The invariant checker over the whole system.
  // With processes gone, it also proves that nothing leaked.
  CheckReport check() const;
  // The same, telling the checker about references that no page table shows
  // (what GUP callers hold): head pfn of the folio -> references held.
  CheckReport check_with_refs(const std::map<uint64_t, long>& extra_refs_by_head_pfn) const;

  uint64_t nr_free_pages() const;
  uint64_t nr_total_pages() const;

  // Benchmarks: time the model spends moving bytes, per mechanism: "zero"
  // (new folios), "copy" (CoW, fork, migration, swap I/O), "user" (CPU
  // loads/stores, device access, file I/O); counted only while enabled.
  void set_data_timing(bool on);
  uint64_t data_time_ns(const std::string& mechanism) const;  // 0 if unknown
  FrameStoreInfo frame_store_info() const;
  Kernel* kernel() const { return k_.get(); }  // for the layers below the API and white-box tests

 private:
  System() = default;
  friend class Process;
  std::unique_ptr<Kernel> k_;
  // Registers a new process; fork() may run on several threads at once.
  Process* add_process(std::unique_ptr<Mm> mm, const std::string& name);
  std::vector<std::unique_ptr<Process>> procs_;  // under procs_lock_ once threads run
  // std::mutex, not the model's Mutex: a public header cannot include src/
  // (a leaf lock of the facade, never nested with the model's locks).
  mutable std::mutex procs_lock_;
  std::unique_ptr<std::atomic<uint64_t>> clock_;  // virtual ns
  uint32_t trace_pid_ = 0;                         // its process in the trace (0: none)
  std::unique_ptr<Khugepaged> khugepaged_;
};

// Flags describing one present entry in a page-table dump.
struct PteDumpEntry {
  uint64_t addr;
  int level;          // 1 = PTE, 2 = PMD leaf, 3 = PUD leaf
  uint64_t pfn;
  uint64_t bits;      // raw entry
  int folio_order;    // -1 for the zero page / special entries
  bool swap;          // a swap-format entry
};

// What maps one user address (for expectations and tools).
struct PageInfo {
  int level = 0;            // 0 none, 1 PTE, 2 PMD leaf, 3 PUD leaf
  bool swap = false;        // a swap-format entry (swap or migration, or a PTE marker)
  bool guard = false;       // a guard marker (MADV_GUARD_INSTALL)
  bool zero = false;        // the shared zero page or the huge zero folio
  uint64_t pfn = 0;         // the frame of this address (not the leaf's head)
  int order = -1;           // order of the folio (0 for the 4K zero page, 9 for the huge zero folio)
  bool writable = false, dirty = false, young = false, soft_dirty = false, uffd_wp = false;
  bool anon = false;
  bool anon_exclusive = false;  // PageAnonExclusive (the head page for PMD/PUD leaves)
  bool maybe_pinned = false;    // folio_maybe_dma_pinned
  int refcount = 0, mapcount = 0, pincount = 0;
  bool folio_dirty = false, referenced = false, active = false, lru = false;  // folio flags (LRU state)
};

class Process {
 public:
  ~Process();
  const std::string& name() const { return name_; }
  int pid() const { return pid_; }

  // System calls. mmap returns the address or -errno.
  long mmap(uint64_t addr, uint64_t len, int prot, int flags, uint64_t off = 0);
  int munmap(uint64_t addr, uint64_t len);
  int mprotect(uint64_t addr, uint64_t len, int prot);
  long mremap(uint64_t addr, uint64_t old_len, uint64_t new_len, int flags, uint64_t new_addr = 0);
  int madvise(uint64_t addr, uint64_t len, int advice);
  // mlock2 (flags 0 is mlock, or MLOCK_ONFAULT), munlock, mlockall (MCL_*)
  // and munlockall. 0 or -errno. The model has CAP_IPC_LOCK: no RLIMIT_MEMLOCK.
  int mlock2(uint64_t addr, uint64_t len, int flags = 0);
  int munlock(uint64_t addr, uint64_t len);
  int mlockall(int flags);
  int munlockall();
  // mseal(addr, len, flags): seal the VMAs of the range (flags must be 0).
  // 0 or -errno (docs/scenario-language.md: what a seal refuses).
  int mseal(uint64_t addr, uint64_t len, unsigned long flags = 0);
  // shmat(id, NULL, ro ? SHM_RDONLY : 0): the address or -errno; shmdt(addr): 0 or -errno.
  long shmat(int id, bool ro = false);
  int shmdt(uint64_t addr);
  // Tear the address space down; the Process object stays (as a zombie) until the System ends.
  void exit();
  bool exited() const { return mm_ == nullptr; }
  // mmap of a file (fd from System::create_file) at byte offset `off`.
  long mmap_file(uint64_t addr, uint64_t len, int prot, int flags, int fd, uint64_t off = 0);
  // fork(): a child with a copy of this address space (copy_page_range
  // semantics). nullptr if it failed, with *err (when given) -ENOMEM (memory
  // ran out), -EHWPOISON (a machine check copying a page the parent may have
  // pinned) or -ESRCH (this process exited); *err is 0 on success.
  Process* fork(const std::string& child_name = "", int* err = nullptr);
  // Writing 4 to /proc/PID/clear_refs: clear soft-dirty bits and write-protect.
  void clear_soft_dirty();
  // prctl(PR_SET_THP_DISABLE, disable, flags): flags 0 or
  // PR_THP_DISABLE_EXCEPT_ADVISED (only when disabling). 0 or -EINVAL.
  static constexpr unsigned long PR_THP_DISABLE_EXCEPT_ADVISED = 1ul << 1;
  int prctl_set_thp_disable(bool disable, unsigned long flags = 0);
  // userfaultfd on [addr, addr + len): UFFDIO_REGISTER with the modes
  // (kUffdMissing, kUffdWp), and UFFDIO_WRITEPROTECT. Nobody reads the
  // model's userfaultfd: a fault that would be delivered to it ends with
  // SIGBUS, as UFFD_FEATURE_SIGBUS makes it end. 0 or -errno.
  static constexpr unsigned kUffdMissing = 1u << 0, kUffdWp = 1u << 1;
  int uffd_register(uint64_t addr, uint64_t len, unsigned modes);
  int uffd_writeprotect(uint64_t addr, uint64_t len, bool wp);

  // The process's CPU: loads and stores that walk the page tables, fault as
  // needed and move real bytes. The result names the signal, if any.
  AccessResult read(uint64_t addr, void* buf, uint64_t len);
  AccessResult write(uint64_t addr, const void* buf, uint64_t len);
  AccessResult fill(uint64_t addr, uint8_t byte, uint64_t len);  // memset through the page tables
  // Load the range and report the first byte that differs from `byte` (offset, or -1).
  AccessResult read_expect(uint64_t addr, uint8_t byte, uint64_t len, int64_t* first_mismatch, uint8_t* found);

  // Views in the kernel's own formats.
  std::string smaps() const;        // /proc/PID/smaps
  std::string status_rss() const;   // /proc/PID/status RssAnon/RssFile/RssShmem lines
  std::vector<PteDumpEntry> pagetable_dump(uint64_t start = 0, uint64_t end = ~0ull) const;
  std::string pagetable_dump_text(uint64_t start = 0, uint64_t end = ~0ull) const;
  PageInfo page_info(uint64_t addr) const;
  // Every leaf entry (as pagetable_dump() lists them) with what page_info()
  // says of the entry's first address, from one walk: a state snapshot
  // after every statement (mmlab diff, run --states) walked the tables once
  // per entry through page_info().
  std::vector<std::pair<PteDumpEntry, PageInfo>> leaf_infos() const;
  std::string folio_dump(uint64_t addr) const;  // dump_page() of the folio mapped at addr ("" if none)
  long rss_anon() const;   // bytes
  // The sum of smaps' Pss lines (bytes), computed as the kernel's smaps does
  // in the model's mapcount mode (CONFIG_PAGE_MAPCOUNT: each page's share is
  // 1/its mapcount); each page table locked while it is read, so it may run
  // beside this process's faults. 0 once exited.
  long pss() const;
  long rss_file() const;
  long rss_shmem() const;
  long pgtables_bytes() const;
  long locked_vm() const;  // bytes: /proc/PID/status VmLck (the VM_LOCKED VMAs)
  // The task's fault counts, getrusage's ru_minflt and ru_majflt: the faults
  // completed for this process's own calls (its loads and stores, and the
  // faults its system calls and GUP calls take, in whatever address space),
  // each once however often it was retried; a retried one is major, as the
  // kernel counts it (mm_account_fault). A fork's child starts at 0; the
  // counts stay readable after exit().
  uint64_t min_flt() const;
  uint64_t maj_flt() const;

  Mm* mm() const { return mm_.get(); }  // for the layers below the API and white-box tests
  TaskStruct* task() const { return task_.get(); }  // likewise: its `current` (fault/current.h)
  System* system() const { return sys_; }

 private:
  friend class System;
  Process(System* sys, std::unique_ptr<Mm> mm, std::string name, int pid);
  Mm* syscall_mm() const;  // the mm, with the system call counted (mm.syscall); nullptr once exited
  System* sys_;
  std::unique_ptr<Mm> mm_;
  std::unique_ptr<TaskStruct> task_;
  std::string name_;
  int pid_;
};

}  // namespace mmlab
