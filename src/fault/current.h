// The part of struct task_struct (include/linux/sched.h) the fault path
// writes: a task's fault counts, which getrusage(2) reports as ru_minflt and
// ru_majflt (and /proc/PID/stat as minflt and majflt), and `current`, the
// task the calling thread works for.
#pragma once

#include <atomic>
#include <cstdint>

namespace mmlab {

// min_flt and maj_flt of a task. mm_account_fault (fault/memory.cpp) counts
// each completed, successful fault to current: one that handle_mm_fault
// finished without VM_FAULT_RETRY or an error, major when the handler said
// VM_FAULT_MAJOR or the fault had been retried (FAULT_FLAG_TRIED). A fork's
// child starts at zero (copy_process).
struct TaskStruct {
  std::atomic<uint64_t> min_flt{0};
  std::atomic<uint64_t> maj_flt{0};
};

// current (get_current()): the task this thread runs for, or nullptr when
// it runs for none (a kernel thread, or a test calling the fault path
// directly): faults then count to no task.
TaskStruct* get_current();

// Makes t current for a scope (the Process API's calls open one). Inside a
// call already running for a task the outer task stays current: a GUP that
// process_vm_readv does on the target's mm runs for the reader, and its
// faults count to the reader, as the kernel counts GUP's faults to current
// whatever mm they are in.
class CurrentTask {
 public:
  explicit CurrentTask(TaskStruct* t);
  ~CurrentTask();
  CurrentTask(const CurrentTask&) = delete;
  CurrentTask& operator=(const CurrentTask&) = delete;

 private:
  TaskStruct* prev_;
};

}  // namespace mmlab
