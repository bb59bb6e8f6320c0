#include "kernels/cuda/sim/block_runner.h"

#include <link.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "kernels/cuda/sim/executor.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace octo::cuda_sim {

thread_local const ThreadInfo* tls_thread = nullptr;

namespace {

namespace ctx = boost::context;

// A GPU thread's own stack: kernels keep a few registers' worth of locals;
// AddressSanitizer's frames are several times larger.
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kFiberStackBytes = 512 * 1024;
#else
constexpr size_t kFiberStackBytes = 64 * 1024;
#endif

thread_local BlockRunner* tls_runner = nullptr;

// Thrown inside a GPU thread to end it: by Fail() in the thread that found
// an error, and in every other suspended thread when its block is abandoned.
struct KernelAbort {};

// Fiber stacks come from the runner's pool; the fiber never frees them.
struct PooledStack {
  ctx::stack_context allocate() { std::abort(); }
  void deallocate(ctx::stack_context&) noexcept {}
};

// AddressSanitizer must hear of every stack switch, or it reports the
// other stack's frames as overflows.
void StartSwitch(void** fake_stack, const void* bottom, size_t bytes) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_start_switch_fiber(fake_stack, bottom, bytes);
#endif
}
void FinishSwitch(void* fake_stack, const void** old_bottom, size_t* old_bytes) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(fake_stack, old_bottom, old_bytes);
#endif
}

const char* OpName(WarpOp op) {
  switch (op) {
    case WarpOp::kShflIdx: return "__shfl_sync";
    case WarpOp::kShflUp: return "__shfl_up_sync";
    case WarpOp::kShflDown: return "__shfl_down_sync";
    case WarpOp::kShflXor: return "__shfl_xor_sync";
    case WarpOp::kBallot: return "__ballot_sync/__any_sync/__all_sync";
    case WarpOp::kSync: return "__syncwarp";
  }
  return "a warp operation";
}

const char* BarrierName(BarrierKind kind) {
  switch (kind) {
    case BarrierKind::kSync: return "__syncthreads";
    case BarrierKind::kCount: return "__syncthreads_count";
    case BarrierKind::kAnd: return "__syncthreads_and";
    case BarrierKind::kOr: return "__syncthreads_or";
  }
  return "a barrier";
}

std::string Site(const std::source_location& site) {
  const char* file = site.file_name();
  const char* slash = std::strrchr(file, '/');
  return absl::StrFormat("%s:%u", slash != nullptr ? slash + 1 : file, site.line());
}

bool SameSite(const std::source_location& a, const std::source_location& b) {
  return a.line() == b.line() && a.column() == b.column() && std::strcmp(a.file_name(), b.file_name()) == 0;
}

// The zero-initialised thread-local bytes of the shared library holding
// `address`, as this host thread sees them: where `__shared__` variables
// live (device_api.h). Empty for the main program, whose thread-locals are
// not all shared memory.
struct TlsSpan {
  unsigned char* begin = nullptr;
  size_t bytes = 0;
};

TlsSpan ModuleSharedMemory(const void* address) {
  struct Query {
    uintptr_t address;
    TlsSpan span;
  } query{reinterpret_cast<uintptr_t>(address), {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* q = static_cast<Query*>(data);
        bool holds = false;
        const ElfW(Phdr)* tls = nullptr;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
          if (ph.p_type == PT_LOAD && q->address >= start && q->address < start + ph.p_memsz) holds = true;
          if (ph.p_type == PT_TLS) tls = &ph;
        }
        if (!holds) return 0;
        const bool main_program = info->dlpi_name == nullptr || info->dlpi_name[0] == '\0';
        if (!main_program && tls != nullptr && info->dlpi_tls_data != nullptr) {
          q->span.begin = static_cast<unsigned char*>(info->dlpi_tls_data) + tls->p_filesz;
          q->span.bytes = tls->p_memsz - tls->p_filesz;
        }
        return 1;
      },
      &query);
  return query.span;
}

}  // namespace

BlockRunner::BlockRunner() = default;

BlockRunner::~BlockRunner() {
  for (Stack& stack : stacks_) {
    if (stack.map == nullptr) continue;
#if defined(__SANITIZE_ADDRESS__)
    // Frames of the stack's last fiber may still be poisoned: clear them, or
    // the next mapping at this address inherits the poison.
    ASAN_UNPOISON_MEMORY_REGION(stack.bottom, stack.bytes);
#endif
    munmap(stack.map, stack.map_bytes);
  }
}

BlockRunner* BlockRunner::Current() { return tls_runner; }

BlockRunner::Stack& BlockRunner::StackFor(int t) {
  if (stacks_.size() <= static_cast<size_t>(t)) stacks_.resize(t + 1);
  Stack& stack = stacks_[t];
  if (stack.map == nullptr) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    stack.map_bytes = kFiberStackBytes + page;
    stack.map = mmap(nullptr, stack.map_bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (stack.map == MAP_FAILED) {
      std::fprintf(stderr, "octo cuda_sim: cannot map a %zu-byte fiber stack: %s\n", stack.map_bytes,
                   std::strerror(errno));
      std::abort();
    }
    mprotect(stack.map, page, PROT_NONE);  // an overflow faults instead of corrupting
    stack.bottom = static_cast<unsigned char*>(stack.map) + page;
    stack.bytes = kFiberStackBytes;
  }
  return stack;
}

std::string BlockRunner::ThreadName(int t) const {
  const uint3& i = threads_[t].info.thread_idx;
  return absl::StrFormat("thread (%u,%u,%u)", i.x, i.y, i.z);
}

std::string BlockRunner::Describe(int t) const {
  const uint3& b = block_.block_idx;
  return absl::StrFormat("kernel %s, block (%u,%u,%u), %s", block_.kernel_name, b.x, b.y, b.z, ThreadName(t));
}

void BlockRunner::PoisonSharedMemory(const KernelLaunch& launch, unsigned char* dynamic_shared) {
  if (launch.shared_bytes > 0) std::memset(dynamic_shared, kSharedPoison, launch.shared_bytes);
  static thread_local std::unordered_map<const void*, TlsSpan> spans;  // per host thread
  auto [it, inserted] = spans.try_emplace(launch.kernel);
  if (inserted) it->second = ModuleSharedMemory(launch.kernel);
  if (it->second.bytes > 0) std::memset(it->second.begin, kSharedPoison, it->second.bytes);
}

std::string BlockRunner::Run(const KernelLaunch& launch, uint3 block_idx, unsigned char* dynamic_shared) {
  launch_ = &launch;
  block_ = BlockInfo{block_idx, launch.block, launch.grid, launch.name, dynamic_shared};
  n_threads_ = static_cast<int>(launch.block.x * launch.block.y * launch.block.z);
  threads_.clear();
  threads_.resize(n_threads_);
  ready_.assign(n_threads_, 0);
  ready_head_ = 0;
  ready_size_ = 0;
  const int n_warps = (n_threads_ + 31) / 32;
  groups_.resize(n_warps);
  for (WarpGroups& groups : groups_) groups.n = 0;
  exited_lanes_.assign(n_warps, 0);
  done_ = exited_ = barrier_count_ = 0;
  first_exited_ = barrier_first_ = -1;
  current_ = resumer_ = kLoop;
  error_.clear();
  aborting_ = false;
  for (int t = 0; t < n_threads_; ++t) {
    const unsigned x = launch.block.x, y = launch.block.y;
    threads_[t].info.thread_idx = uint3{t % x, (t / x) % y, t / (x * y)};
    threads_[t].info.block = &block_;
    MakeReady(t);
  }
  PoisonSharedMemory(launch, dynamic_shared);

  BlockRunner* const outer = tls_runner;
  tls_runner = this;
  // GPU threads hand control straight to one another (Yield); it comes back
  // here only when none can go on, or after an error.
  while (error_.empty() && ready_size_ > 0) SwitchTo(PopReady());
  if (error_.empty() && done_ < n_threads_) error_ = Stuck();
  UnwindSuspended();
  tls_runner = outer;
  return error_;
}

void BlockRunner::MakeReady(int t) {
  if (threads_[t].state != State::kUnstarted) threads_[t].state = State::kReady;
  size_t slot = ready_head_ + ready_size_;
  if (slot >= ready_.size()) slot -= ready_.size();
  ready_[slot] = t;
  ++ready_size_;
}

int BlockRunner::PopReady() {
  if (ready_size_ == 0) return kLoop;
  const int t = ready_[ready_head_];
  if (++ready_head_ == ready_.size()) ready_head_ = 0;
  --ready_size_;
  return t;
}

void BlockRunner::Start(int t) {
  Stack& stack = StackFor(t);
  ctx::stack_context sctx;
  sctx.size = stack.bytes;
  sctx.sp = static_cast<unsigned char*>(stack.bottom) + stack.bytes;
  threads_[t].fiber = ctx::fiber(std::allocator_arg, ctx::preallocated(sctx.sp, sctx.size, sctx), PooledStack{},
                                 [this, t](ctx::fiber&& from) {
                                   Arrived(nullptr, std::move(from));
                                   ThreadBody(t);
                                   // After an error, back to Run(); else on to the next thread.
                                   const int next = aborting_ || !error_.empty() ? kLoop : PopReady();
                                   return Depart(next, nullptr);
                                 });
}

ctx::fiber BlockRunner::Depart(int next, void** fake_stack) {
  resumer_ = current_;
  current_ = next;
  if (next == kLoop) {
    tls_thread = nullptr;
    StartSwitch(fake_stack, loop_stack_bottom_, loop_stack_bytes_);
    return std::move(loop_);
  }
  Thread& thread = threads_[next];
  if (thread.state == State::kUnstarted) Start(next);
  thread.state = State::kRunning;
  tls_thread = &thread.info;
  const Stack& stack = stacks_[next];
  StartSwitch(fake_stack, stack.bottom, stack.bytes);
  return std::move(thread.fiber);
}

void BlockRunner::Arrived(void* fake_stack, ctx::fiber&& from) {
  const void* bottom = nullptr;
  size_t bytes = 0;
  FinishSwitch(fake_stack, &bottom, &bytes);
  // Keep the continuation of whoever switched here, where it will be resumed from.
  if (resumer_ == kLoop) {
    loop_ = std::move(from);
    if (bottom != nullptr) {
      loop_stack_bottom_ = bottom;
      loop_stack_bytes_ = bytes;
    }
  } else {
    threads_[resumer_].fiber = std::move(from);
  }
}

void BlockRunner::SwitchTo(int next) {
  void** fake_stack = current_ == kLoop ? &loop_fake_stack_ : &threads_[current_].asan_fake_stack;
  ctx::fiber target = Depart(next, fake_stack);
  ctx::fiber from = std::move(target).resume();
  Arrived(*fake_stack, std::move(from));
}

void BlockRunner::ThreadBody(int t) {
  bool ended = false;
  try {
    launch_->invoke(launch_->packed.get());
    ended = true;
  } catch (const KernelAbort&) {
    // Fail() recorded the error, or the block is being abandoned.
  }
  if (ended && !threads_[t].info.grid_started && error_.empty()) {
    error_ = absl::StrFormat("%s ended without calling GridStart(): every kernel begins with it (common.cuh)",
                             Describe(t));
  }
  if (ended && !aborting_) OnExit(t);
  threads_[t].state = State::kDone;
  ++done_;
}

void BlockRunner::Yield() {
  SwitchTo(PopReady());
  if (aborting_) throw KernelAbort{};
}

void BlockRunner::UnwindSuspended() {
  aborting_ = true;
  for (int t = 0; t < n_threads_; ++t) {
    if (threads_[t].fiber) SwitchTo(t);
  }
}

void BlockRunner::Fail(const std::string& what) {
  if (error_.empty()) error_ = what;
  throw KernelAbort{};
}

void BlockRunner::OnExit(int t) {
  threads_[t].copies.Finish();
  ++exited_;
  if (first_exited_ < 0) first_exited_ = t;
  const int warp = t / 32, lane = t % 32;
  exited_lanes_[warp] |= 1u << lane;
  if (!error_.empty()) return;
  if (barrier_count_ > 0) {
    error_ = absl::StrFormat(
        "%s ended while %d thread(s) wait for it at %s (%s), %s among them: every thread of a block must reach "
        "every barrier",
        Describe(t), barrier_count_, BarrierName(barrier_kind_), Site(barrier_site_), ThreadName(barrier_first_));
    return;
  }
  for (int g = 0; g < groups_[warp].n; ++g) {
    const WarpGroup& group = groups_[warp].group[g];
    if ((group.mask >> lane & 1) && !(group.arrived >> lane & 1)) {
      const int waiting = warp * 32 + std::countr_zero(group.arrived);
      error_ = absl::StrFormat("%s (lane %d) ended while lanes of its warp wait for it at %s (%s) with mask 0x%08x",
                               Describe(t), lane, OpName(group.op), Site(threads_[waiting].site), group.mask);
      return;
    }
  }
}

int BlockRunner::Barrier(BarrierKind kind, int predicate, std::source_location site) {
  RequireGridStarted(BarrierName(kind), site);
  const int self = current_;
  if (exited_ > 0) {
    Fail(absl::StrFormat(
        "%s reached %s (%s), which %s never will: it has ended. Every thread of a block must reach every barrier",
        Describe(self), BarrierName(kind), Site(site), ThreadName(first_exited_)));
  }
  if (barrier_count_ > 0 && (kind != barrier_kind_ || !SameSite(site, barrier_site_))) {
    Fail(absl::StrFormat("%s waits at %s (%s) while %s waits at %s (%s): threads of one block at different barriers",
                         Describe(self), BarrierName(kind), Site(site), ThreadName(barrier_first_),
                         BarrierName(barrier_kind_), Site(barrier_site_)));
  }
  if (barrier_count_ == 0) {
    barrier_site_ = site;
    barrier_kind_ = kind;
    barrier_first_ = self;
    barrier_acc_ = kind == BarrierKind::kAnd ? 1 : 0;
  }
  switch (kind) {
    case BarrierKind::kSync: break;
    case BarrierKind::kCount: barrier_acc_ += predicate != 0; break;
    case BarrierKind::kAnd: barrier_acc_ &= predicate != 0; break;
    case BarrierKind::kOr: barrier_acc_ |= predicate != 0; break;
  }
  ++barrier_count_;
  threads_[self].site = site;
  if (barrier_count_ == n_threads_) {
    // Everyone is here: release the others; this thread goes on at once.
    barrier_result_ = barrier_acc_;
    barrier_count_ = 0;
    for (int t = 0; t < n_threads_; ++t) {
      if (threads_[t].state == State::kAtBarrier) MakeReady(t);
    }
    return barrier_result_;
  }
  threads_[self].state = State::kAtBarrier;
  Yield();
  return barrier_result_;
}

uint64_t BlockRunner::Warp(WarpOp op, unsigned mask, uint64_t value, int param, int width,
                           std::source_location site) {
  RequireGridStarted(OpName(op), site);
  const int self = current_;
  const int warp = self / 32, lane = self % 32;
  const int lanes = n_threads_ - warp * 32 < 32 ? n_threads_ - warp * 32 : 32;
  const unsigned present = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
  if (!(mask >> lane & 1)) {
    Fail(absl::StrFormat("%s calls %s (%s) with mask 0x%08x, which leaves out its own lane %d", Describe(self),
                         OpName(op), Site(site), mask, lane));
  }
  if ((mask & ~present) != 0) {
    Fail(absl::StrFormat(
        "%s calls %s (%s) with mask 0x%08x, which names lane %d: absent, warp %d of this %d-thread block has %d lane(s)",
        Describe(self), OpName(op), Site(site), mask, std::countr_zero(mask & ~present), warp, n_threads_, lanes));
  }
  if ((mask & exited_lanes_[warp]) != 0) {
    Fail(absl::StrFormat("%s calls %s (%s) with mask 0x%08x, which names lane %d: it has ended", Describe(self),
                         OpName(op), Site(site), mask, std::countr_zero(mask & exited_lanes_[warp])));
  }
  if (width < 1 || width > 32 || (width & (width - 1)) != 0) {
    Fail(absl::StrFormat("%s calls %s (%s) with width %d: not a power of two in [1, 32]", Describe(self),
                         OpName(op), Site(site), width));
  }
  Thread& me = threads_[self];
  me.op = op;
  me.mask = mask;
  me.value = value;
  me.param = param;
  me.width = width;
  me.site = site;

  WarpGroups& groups = groups_[warp];
  int g = 0;
  while (g < groups.n && groups.group[g].mask != mask) ++g;
  if (g == groups.n) groups.group[groups.n++] = WarpGroup{mask, 0, op};
  WarpGroup& group = groups.group[g];
  if (group.op != op) {
    const int other = warp * 32 + std::countr_zero(group.arrived);
    Fail(absl::StrFormat("%s calls %s (%s) while %s, under the same mask 0x%08x, waits at %s (%s)", Describe(self),
                         OpName(op), Site(site), ThreadName(other), mask, OpName(group.op),
                         Site(threads_[other].site)));
  }
  group.arrived |= 1u << lane;
  if (group.arrived == mask) {
    const WarpGroup complete = group;
    group = groups.group[--groups.n];  // the last takes its place
    CompleteWarpGroup(warp, complete);
    return me.result;
  }
  me.state = State::kAtWarp;
  Yield();
  return me.result;
}

void BlockRunner::CompleteWarpGroup(int warp, const WarpGroup& group) {
  const int base_thread = warp * 32;
  uint64_t ballot = 0;
  for (int lane = 0; lane < 32; ++lane) {
    if ((group.mask >> lane & 1) && threads_[base_thread + lane].value != 0) ballot |= 1ull << lane;
  }
  for (int lane = 0; lane < 32; ++lane) {
    if (!(group.mask >> lane & 1)) continue;
    Thread& t = threads_[base_thread + lane];
    const int w = t.width;
    const int segment = lane & ~(w - 1);
    int src = lane;
    switch (group.op) {
      case WarpOp::kShflIdx: src = segment + (t.param & (w - 1)); break;
      case WarpOp::kShflUp: src = lane - t.param >= segment ? lane - t.param : lane; break;
      case WarpOp::kShflDown: src = lane + t.param < segment + w ? lane + t.param : lane; break;
      case WarpOp::kShflXor: src = (lane ^ t.param) < segment + w ? lane ^ t.param : lane; break;
      case WarpOp::kBallot: t.result = ballot; break;
      case WarpOp::kSync: t.result = 0; break;
    }
    if (group.op == WarpOp::kBallot || group.op == WarpOp::kSync) continue;
    if (src < 0 || src > 31 || !(group.mask >> src & 1)) {
      Fail(absl::StrFormat("%s: lane %d's %s (%s) reads lane %d, which is not in the mask 0x%08x", Describe(current_),
                           lane, OpName(group.op), Site(t.site), src, group.mask));
    }
    t.result = threads_[base_thread + src].value;
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int t = base_thread + lane;
    if ((group.mask >> lane & 1) && t != current_) MakeReady(t);
  }
}

std::string BlockRunner::Stuck() const {
  int at_barrier = -1, at_warp = -1;
  for (int t = 0; t < n_threads_; ++t) {
    if (threads_[t].state == State::kAtBarrier && at_barrier < 0) at_barrier = t;
    if (threads_[t].state == State::kAtWarp && at_warp < 0) at_warp = t;
  }
  if (at_barrier >= 0 && at_warp >= 0) {
    return absl::StrFormat(
        "%s waits at %s (%s) while %s waits at %s (%s) for its warp: a barrier not every thread of the block reaches",
        Describe(at_barrier), BarrierName(barrier_kind_), Site(barrier_site_), ThreadName(at_warp),
        OpName(threads_[at_warp].op), Site(threads_[at_warp].site));
  }
  if (at_warp >= 0) {
    const Thread& waiter = threads_[at_warp];
    const int warp = at_warp / 32;
    for (int g = 0; g < groups_[warp].n; ++g) {
      const WarpGroup& group = groups_[warp].group[g];
      if (group.mask != waiter.mask) continue;
      const int missing = warp * 32 + std::countr_zero(group.mask & ~group.arrived);
      const Thread& other = threads_[missing];
      return absl::StrFormat(
          "%s waits at %s (%s) with mask 0x%08x for lane %d, which waits at %s (%s) with mask 0x%08x: the lanes of a "
          "warp operation must pass the same mask",
          Describe(at_warp), OpName(waiter.op), Site(waiter.site), waiter.mask, missing % 32, OpName(other.op),
          Site(other.site), other.mask);
    }
  }
  return absl::StrFormat("kernel %s, block (%u,%u,%u): %d of %d threads can no longer move", block_.kernel_name,
                         block_.block_idx.x, block_.block_idx.y, block_.block_idx.z, n_threads_ - done_, n_threads_);
}

// --- The calls device_api.h makes ---------------------------------------------

namespace {
BlockRunner& RunnerOrDie(const char* what) {
  BlockRunner* runner = BlockRunner::Current();
  if (runner == nullptr || tls_thread == nullptr) {
    std::fprintf(stderr, "octo cuda_sim: %s called outside a kernel\n", what);
    std::abort();
  }
  return *runner;
}
}  // namespace

int BlockBarrier(BarrierKind kind, int predicate, std::source_location site) {
  return RunnerOrDie(BarrierName(kind)).Barrier(kind, predicate, site);
}

uint64_t WarpCollective(WarpOp op, unsigned mask, uint64_t value, int param, int width, std::source_location site) {
  return RunnerOrDie(OpName(op)).Warp(op, mask, value, param, width, site);
}

std::string RunningThreadName() {
  const BlockInfo& b = *tls_thread->block;
  return absl::StrFormat("kernel %s, block (%u,%u,%u), thread (%u,%u,%u)", b.kernel_name, b.block_idx.x,
                         b.block_idx.y, b.block_idx.z, tls_thread->thread_idx.x, tls_thread->thread_idx.y,
                         tls_thread->thread_idx.z);
}

void GridStart() { RunnerOrDie("GridStart").MarkGridStarted(); }

void BeginPrefetch() { RunnerOrDie("GridStartAfter").MarkPrefetching(); }

void BlockRunner::RequireGridStarted(const char* what, std::source_location site) {
  if (threads_[current_].info.grid_started) [[likely]] return;
  Fail(absl::StrFormat("%s: %s at %s before GridStart(): before it a kernel only reads its index and prefetches "
                       "(common.cuh: GridStartAfter)",
                       RunningThreadName(), what, Site(site)));
}

namespace {
// Read without the lock by every prefetch: the kernels' threads take it
// only while a test records.
std::atomic<bool> recording_prefetches{false};
std::mutex prefetch_mutex;
std::vector<Prefetch>* recorded_prefetches = new std::vector<Prefetch>;  // guarded by it; never destroyed (threads at exit)
}  // namespace

void PrefetchL2(const void* p, size_t bytes, std::source_location site) {
  BlockRunner& runner = RunnerOrDie("PrefetchL2");
  if (!Executor::Get().memory().IsDeviceRange(p, bytes)) {
    runner.Fail(absl::StrFormat("%s: PrefetchL2 of %zu bytes at %p at %s: not inside one device allocation",
                                RunningThreadName(), bytes, p, Site(site)));
  }
  if (!recording_prefetches.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(prefetch_mutex);
  recorded_prefetches->push_back(Prefetch{p, bytes, !tls_thread->grid_started});
}

void RecordPrefetches(bool on) { recording_prefetches.store(on, std::memory_order_release); }

std::vector<Prefetch> TakePrefetches() {
  std::lock_guard<std::mutex> lock(prefetch_mutex);
  std::vector<Prefetch> taken;
  taken.swap(*recorded_prefetches);
  return taken;
}

void BeforeGridStart() {
  BlockRunner& runner = RunnerOrDie("threadIdx");
  runner.Fail(absl::StrFormat(
      "%s reads threadIdx, blockIdx, blockDim or gridDim before GridStart(): a kernel's first statement must be "
      "GridStart() (common.cuh), before it touches anything its predecessor may write",
      RunningThreadName()));
}

void Trap(std::source_location site) {
  BlockRunner& runner = RunnerOrDie("__trap");
  runner.Fail(absl::StrFormat("%s: __trap() at %s", RunningThreadName(), Site(site)));
}

void AsyncCopy(void* dst, const void* src, size_t bytes, size_t zero_fill, std::source_location site) {
  BlockRunner& runner = RunnerOrDie("__pipeline_memcpy_async");
  runner.RequireGridStarted("__pipeline_memcpy_async", site);
  const bool aligned = reinterpret_cast<uintptr_t>(dst) % bytes == 0 && reinterpret_cast<uintptr_t>(src) % bytes == 0;
  if ((bytes != 4 && bytes != 8 && bytes != 16) || zero_fill > bytes || !aligned) {
    runner.Fail(absl::StrFormat("%s: __pipeline_memcpy_async of %zu bytes (%zu zero-filled) from %p to %p at %s: the "
                                "size must be 4, 8 or 16, both addresses aligned to it",
                                RunningThreadName(), bytes, zero_fill, src, dst, Site(site)));
  }
  runner.Copies().Copy(dst, src, bytes, zero_fill);
}

void AsyncCommit() { RunnerOrDie("__pipeline_commit").Copies().Commit(); }

void AsyncWait(size_t prior) { RunnerOrDie("__pipeline_wait_prior").Copies().Wait(prior); }

}  // namespace octo::cuda_sim
