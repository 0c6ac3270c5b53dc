// fiber.hpp — the context switch under cuda_host's fibers (a block's threads). glibc's swapcontext saves
// and restores the signal mask at every switch: two system calls, and with them 60 % of the emulated
// kernels' time (perf on test_nn_ops_cuda_host: __swapcontext 26 %, the kernel's entry and
// rt_sigprocmask 35 %). On x86-64 a switch here is what the SysV ABI says a callee keeps — rbx, rbp,
// r12-r15, the stack pointer, MXCSR's and the x87 control word — and nothing else. Elsewhere, and under
// ThreadSanitizer and MemorySanitizer (which know swapcontext and not this), it is ucontext as before.
// Under AddressSanitizer each switch tells ASan which stack runs (__sanitizer_start/finish_switch_fiber),
// so that its stack checks and fake stacks follow the fibers.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_MEMORY__)
#define CUDA_HOST_FIBER_UCONTEXT 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define CUDA_HOST_FIBER_UCONTEXT 1
#endif
#endif
#if !defined(CUDA_HOST_FIBER_UCONTEXT) && !(defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)))
#define CUDA_HOST_FIBER_UCONTEXT 1
#endif

#if defined(__SANITIZE_ADDRESS__)
#define CUDA_HOST_FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUDA_HOST_FIBER_ASAN 1
#endif
#endif

#if defined(CUDA_HOST_FIBER_UCONTEXT)
#include <ucontext.h>
#elif defined(CUDA_HOST_FIBER_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif

namespace cuda_host::fiber {

/// A fiber, or the thread's own stack (the scheduler) while a fiber runs.
struct Context {
#if defined(CUDA_HOST_FIBER_UCONTEXT)
  ucontext_t uc{};
#else
  void* sp = nullptr;  // where its registers were saved when it last switched away
#endif
  const void* stack = nullptr;  // its stack's lowest byte and size (a scheduler's: learnt at its first switch)
  std::size_t stack_size = 0;
  void* fake_stack = nullptr;  // ASan's fake stack, kept while switched away
  void (*entry)() = nullptr;
  Context* link = nullptr;  // resumed when entry returns
};

#if !defined(CUDA_HOST_FIBER_UCONTEXT)
namespace detail {

// switch_stack(&from->sp, to->sp): saves the callee-saved state on the current stack, leaves its address in
// *from, and returns on `to`'s stack as `to` last called it (or into first_run for a new fiber).
[[gnu::naked, gnu::noinline]] inline void switch_stack(void** /*from*/, void* /*to*/) {
  asm volatile(
      "pushq %rbp\n\t"
      "pushq %rbx\n\t"
      "pushq %r12\n\t"
      "pushq %r13\n\t"
      "pushq %r14\n\t"
      "pushq %r15\n\t"
      "subq $8, %rsp\n\t"
      "stmxcsr (%rsp)\n\t"
      "fnstcw 4(%rsp)\n\t"
      "movq %rsp, (%rdi)\n\t"
      "movq %rsi, %rsp\n\t"
      "ldmxcsr (%rsp)\n\t"
      "fldcw 4(%rsp)\n\t"
      "addq $8, %rsp\n\t"
      "popq %r15\n\t"
      "popq %r14\n\t"
      "popq %r13\n\t"
      "popq %r12\n\t"
      "popq %rbx\n\t"
      "popq %rbp\n\t"
      "ret\n\t");
}

// Where a new fiber's first switch returns to: r12 holds the function, r13 its Context; the stack is
// 16-byte aligned here, as a call needs.
[[gnu::naked, gnu::noinline]] inline void first_run() {
  asm volatile(
      "movq %r13, %rdi\n\t"
      "callq *%r12\n\t"
      "ud2\n\t");
}

inline Context*& switching_from() {  // for ASan: the context a switch left, told its stack's bounds
  static thread_local Context* from = nullptr;
  return from;
}

inline void arrived(Context& self) {
#if defined(CUDA_HOST_FIBER_ASAN)
  const void* bottom = nullptr;
  std::size_t size = 0;
  __sanitizer_finish_switch_fiber(self.fake_stack, &bottom, &size);
  switching_from()->stack = bottom;
  switching_from()->stack_size = size;
#else
  (void)self;
#endif
}

inline void leave(Context& from, Context& to, bool for_good) {
#if defined(CUDA_HOST_FIBER_ASAN)
  switching_from() = &from;
  __sanitizer_start_switch_fiber(for_good ? nullptr : &from.fake_stack, to.stack, to.stack_size);
#else
  (void)to;
  (void)for_good;
  (void)from;
#endif
}

[[noreturn]] inline void run(Context* self) {
  arrived(*self);
  self->entry();
  leave(*self, *self->link, true);
  switch_stack(&self->sp, self->link->sp);
  __builtin_unreachable();
}

}  // namespace detail
#endif

/// Prepares c to run entry() on [stack, stack + size) at its first switch_to, then resume link.
inline void start(Context& c, char* stack, std::size_t size, void (*entry)(), Context& link) {
  c.stack = stack;
  c.stack_size = size;
  c.fake_stack = nullptr;
  c.entry = entry;
  c.link = &link;
#if defined(CUDA_HOST_FIBER_UCONTEXT)
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = size;
  c.uc.uc_link = &link.uc;
  makecontext(&c.uc, entry, 0);
#else
  // The frame switch_stack pops: MXCSR and the x87 control word (the thread's own), r15, r14, r13 =
  // &c, r12 = run, rbx, rbp, then the return address first_run, above which the stack is 16-byte aligned.
  const auto top = (reinterpret_cast<std::uintptr_t>(stack) + size) & ~std::uintptr_t{15};
  auto* frame = reinterpret_cast<std::uint64_t*>(top) - 8;
  std::uint32_t mxcsr = 0;
  std::uint16_t fpu_control = 0;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpu_control));
  frame[0] = mxcsr | (std::uint64_t{fpu_control} << 32);
  frame[1] = 0;                                        // r15
  frame[2] = 0;                                        // r14
  frame[3] = reinterpret_cast<std::uint64_t>(&c);      // r13
  frame[4] = reinterpret_cast<std::uint64_t>(&detail::run);  // r12
  frame[5] = 0;                                        // rbx
  frame[6] = 0;                                        // rbp
  frame[7] = reinterpret_cast<std::uint64_t>(&detail::first_run);
  c.sp = frame;
#endif
}

/// Suspends `from` (the running context) and runs `to` until something switches back.
inline void switch_to(Context& from, Context& to) {
#if defined(CUDA_HOST_FIBER_UCONTEXT)
  swapcontext(&from.uc, &to.uc);
#else
  detail::leave(from, to, false);
  detail::switch_stack(&from.sp, to.sp);
  detail::arrived(from);
#endif
}

}  // namespace cuda_host::fiber
