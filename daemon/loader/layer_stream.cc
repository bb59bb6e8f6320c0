// LayerStream over the shared-memory ring and an octo-loader child.
//
// Tickets: the cyclic order is unrolled into an endless sequence, ticket t
// being layer order[t % n]. Acquire expects ticket `next_ticket_`; the
// non-held slots should hold the window [next_ticket_, next_ticket_ + free)
// where free = slots - held. Reconcile() frees slots outside the window and
// requests the tickets in it that no slot holds, lowest first, so one
// function handles refills, cycle restarts, a new order and failed loads.
#include "daemon/loader/layer_stream.h"

#include <array>
#include <cstring>
#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "daemon/loader/loader_process.h"
#include "daemon/loader/stop_signal.h"
#include "storage/direct_reader.h"
#include "storage/layer_file.h"
#include "storage/ring.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

using ring::SlotDescriptor;

constexpr uint64_t kNoTicket = ~uint64_t{0};
// Acquire looks at the ring at least this often, messages or not.
constexpr absl::Duration kWaitSlice = absl::Seconds(1);

class RingLayerStream final : public LayerStream {
 public:
  std::pair<const void*, size_t> slot_memory() const override {
    return {ring_->slot_data(0), static_cast<size_t>(ring_->slot_count()) * ring_->slot_bytes()};
  }

  RingLayerStream(const LayerStreamOptions& options, std::unique_ptr<Ring> ring)
      : options_(options), ring_(std::move(ring)), slots_(ring_->slot_count()) {}

  ~RingLayerStream() override {
    loader_.reset();  // stops it: nothing writes into the ring after this
    ring_.reset();    // unmaps and removes the segment's name
  }

  // Spawns a loader on the ring and publishes it in the stats.
  absl::Status StartLoader() {
    LoaderSpawnOptions spawn;
    spawn.loader_path = options_.loader_path;
    spawn.ring_name = ring_->name();
    spawn.model_dir = options_.model_dir;
    spawn.direct_io = options_.direct_io;
    spawn.queue_depth = options_.queue_depth;
    spawn.extra_args = options_.loader_args;
    OCTO_ASSIGN_OR_RETURN(loader_, LoaderProcess::Spawn(spawn));
    progress_at_ = absl::Now();  // a new loader gets a whole stall timeout for what is outstanding
    absl::MutexLock lock(&stats_mu_);
    stats_.running = true;
    stats_.pid = loader_->pid();
    stats_.io_mode = loader_->io_mode();
    return absl::OkStatus();
  }

  void SetOrder(std::vector<uint32_t> order) override {
    order_ = std::move(order);
    next_ticket_ = 0;
    for (uint32_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].use != Use::kHeld) slots_[i].ticket = kNoTicket;  // freed by Reconcile or on completion
    }
    Reconcile();
  }

  absl::StatusOr<StreamedLayer> Acquire(uint32_t layer) override {
    const absl::Time start = absl::Now();
    OCTO_RETURN_IF_ERROR(broken_);
    if (order_.empty()) return absl::FailedPreconditionError("no streamed layers: SetOrder first");
    // The first ticket from next_ticket_ on that is `layer`: skipping ahead
    // restarts the cycle there and keeps the slots already loaded after it.
    const uint64_t n = order_.size();
    uint64_t skip = 0;
    while (skip < n && order_[(next_ticket_ + skip) % n] != layer) ++skip;
    if (skip == n) return absl::InvalidArgumentError(absl::StrCat("layer ", layer, " is not streamed"));
    next_ticket_ += skip;
    if (HeldCount() == slots_.size()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "all ", slots_.size(), " ring slots are held; Release a layer before acquiring layer ", layer));
    }
    uint32_t stalls = 0;
    while (true) {
      CollectCompletions();
      Reconcile();
      for (uint32_t i = 0; i < slots_.size(); ++i) {
        Slot& s = slots_[i];
        if (s.use != Use::kDone || s.ticket != next_ticket_) continue;
        const SlotDescriptor& d = ring_->slot(i);
        if (d.state.load(std::memory_order_acquire) == ring::kFailed) {
          absl::Status failed = LoadError(d);
          SetFree(i);  // the next Acquire of this layer reads it again
          return failed;
        }
        s.use = Use::kHeld;
        ++next_ticket_;
        Reconcile();  // start reading the next layer before the caller computes on this one
        StreamedLayer out;
        out.data = ring_->slot_data(i);
        out.size = d.bytes;
        out.load_seconds = static_cast<double>(d.load_nanos) * 1e-9;
        out.wait_seconds = absl::ToDoubleSeconds(absl::Now() - start);
        return out;
      }
      OCTO_RETURN_IF_ERROR(WaitForLoader(layer, stalls));
    }
  }

  void Release(uint32_t layer) override {
    int oldest = -1;
    for (uint32_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].use == Use::kHeld && slots_[i].layer == layer &&
          (oldest < 0 || slots_[i].ticket < slots_[oldest].ticket)) {
        oldest = static_cast<int>(i);
      }
    }
    if (oldest < 0) return;
    if (Any(slots_[oldest].in_flight)) {
      slots_[oldest] = Loading(kNoTicket, layer);  // the loader is on it; freed when it completes
    } else {
      SetFree(static_cast<uint32_t>(oldest));
    }
    CollectCompletions();
    Reconcile();
  }

  void SetTwoPhase(std::vector<bool> by_layer) override { two_phase_ = std::move(by_layer); }

  absl::Status FetchExperts(uint32_t layer, const std::vector<uint32_t>& experts, bool wait) override {
    OCTO_RETURN_IF_ERROR(broken_);
    if (!IsTwoPhase(layer)) return absl::OkStatus();
    const int i = HeldSlot(layer);
    if (i < 0) return absl::FailedPreconditionError(absl::StrCat("layer ", layer, " is not held: Acquire it first"));
    for (uint32_t e : experts) {
      if (e >= ring::kMaxRingExperts) return absl::InvalidArgumentError(absl::StrCat("expert ", e, " is out of range"));
    }
    uint32_t stalls = 0;
    while (true) {
      CollectCompletions();
      Slot& slot = slots_[i];
      ExpertMask missing{};
      bool all_in = true;
      for (uint32_t e : experts) {
        if (Test(slot.have, e)) continue;
        all_in = false;
        if (Test(slot.failed, e)) {
          if (!wait) continue;  // a prefetch leaves the failure to the fetch that needs it
          absl::Status error = slot.error;
          slot.failed = {};  // the next fetch of these experts reads them again
          return error;
        }
        if (!Test(slot.in_flight, e)) Set(missing, e);
      }
      if (all_in) return absl::OkStatus();
      // One request per slot at a time: the rest goes when this one is done.
      if (Any(missing) && !Any(slot.in_flight)) {
        if (!Outstanding()) progress_at_ = absl::Now();
        SlotDescriptor& d = ring_->slot(i);
        d.part = ring::kExpertBlocks;
        std::memcpy(d.experts, missing.data(), sizeof(d.experts));
        d.sequence = next_urgent_sequence_++;  // before every prefetch of a later layer's dense part
        slot.in_flight = missing;
        d.state.store(ring::kRequested, std::memory_order_release);
        if (loader_ != nullptr && !loader_->Notify()) loader_dead_ = true;
      }
      if (!wait) return absl::OkStatus();
      OCTO_RETURN_IF_ERROR(WaitForLoader(layer, stalls));
    }
  }

  void MarkExpertsPresent(uint32_t layer, const std::vector<uint32_t>& experts) override {
    const int i = HeldSlot(layer);
    if (i < 0) return;
    for (uint32_t e : experts) {
      if (e < ring::kMaxRingExperts) Set(slots_[i].have, e);
    }
  }

  LoaderStats stats() const override {
    absl::MutexLock lock(&stats_mu_);
    return stats_;
  }

 private:
  // Our view of a slot; the ring's state says the rest.
  enum class Use {
    kFree,     // FREE in the ring
    kLoading,  // REQUESTED or LOADING
    kDone,     // READY or FAILED, not yet handed out
    kHeld,     // READY and handed to the caller until Release
  };
  using ExpertMask = std::array<uint64_t, ring::kMaxRingExperts / 64>;
  struct Slot {
    Use use = Use::kFree;
    uint64_t ticket = kNoTicket;  // kNoTicket while loading: stale, freed when it completes
    uint32_t layer = 0;
    // A held two-phase layer: expert blocks in the slot, and asked for.
    ExpertMask have{}, in_flight{};
    ExpertMask failed{};  // asked for and failed: `error` says why
    absl::Status error;
  };
  static Slot Loading(uint64_t ticket, uint32_t layer) {
    Slot s;
    s.use = Use::kLoading;
    s.ticket = ticket;
    s.layer = layer;
    return s;
  }
  static bool Test(const ExpertMask& m, uint32_t e) { return (m[e / 64] >> (e % 64) & 1) != 0; }
  static void Set(ExpertMask& m, uint32_t e) { m[e / 64] |= uint64_t{1} << (e % 64); }
  static void Clear(ExpertMask& m, uint32_t e) { m[e / 64] &= ~(uint64_t{1} << (e % 64)); }
  static bool Any(const ExpertMask& m) {
    for (uint64_t w : m) if (w != 0) return true;
    return false;
  }

  uint32_t HeldCount() const {
    uint32_t held = 0;
    for (const Slot& s : slots_) held += s.use == Use::kHeld;
    return held;
  }

  // Whether the loader has work it has not finished: reads of the window,
  // or expert blocks of a held layer.
  bool Outstanding() const {
    for (const Slot& s : slots_) {
      if (s.use == Use::kLoading || (s.use == Use::kHeld && Any(s.in_flight))) return true;
    }
    return false;
  }

  absl::Duration StallTimeout() const {
    if (options_.stall_timeout > absl::ZeroDuration()) return options_.stall_timeout;
    return absl::Seconds(static_cast<double>(ring_->slot_bytes()) / kLoaderFloorBytesPerSecond) +
           kLoaderStallMargin;
  }

  static absl::Status LoadError(const SlotDescriptor& d) {
    const int code = d.status_code;
    const auto status_code = code > 0 && code <= static_cast<int>(absl::StatusCode::kUnauthenticated)
                                 ? static_cast<absl::StatusCode>(code)
                                 : absl::StatusCode::kUnknown;
    return absl::Status(status_code, std::string(d.message, strnlen(d.message, sizeof(d.message))));
  }

  void SetFree(uint32_t i) {
    ring_->slot(i).state.store(ring::kFree, std::memory_order_release);
    slots_[i] = Slot{};
  }

  // kLoading slots the loader has finished become kDone (stale ones free).
  void CollectCompletions() {
    if (loader_ != nullptr) {
      if (!loader_->Drain()) loader_dead_ = true;
      absl::MutexLock lock(&stats_mu_);
      stats_.io_mode = loader_->io_mode();
    }
    for (uint32_t i = 0; i < slots_.size(); ++i) {
      const bool expert_read = slots_[i].use == Use::kHeld && Any(slots_[i].in_flight);
      if (slots_[i].use != Use::kLoading && !expert_read) continue;
      const SlotDescriptor& d = ring_->slot(i);
      const uint32_t state = d.state.load(std::memory_order_acquire);
      if (state != ring::kReady && state != ring::kFailed) continue;
      progress_at_ = absl::Now();
      {
        absl::MutexLock lock(&stats_mu_);
        stats_.bytes_read += d.bytes;
        stats_.read_seconds += static_cast<double>(d.load_nanos) * 1e-9;
        if (state == ring::kFailed && d.status_code == static_cast<int>(absl::StatusCode::kDataLoss)) {
          ++stats_.checksum_failures;
        }
      }
      if (expert_read) {
        Slot& slot = slots_[i];
        for (size_t w = 0; w < slot.in_flight.size(); ++w) {
          (state == ring::kReady ? slot.have : slot.failed)[w] |= slot.in_flight[w];
          slot.in_flight[w] = 0;
        }
        if (state == ring::kFailed) slot.error = LoadError(d);
        // The slot's dense part and earlier blocks are intact: it is the
        // caller's again, READY for the next request (RING.md).
        ring_->slot(i).state.store(ring::kReady, std::memory_order_release);
        continue;
      }
      slots_[i].use = Use::kDone;
      if (slots_[i].ticket == kNoTicket) SetFree(i);
    }
  }

  int HeldSlot(uint32_t layer) const {
    for (uint32_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].use == Use::kHeld && slots_[i].layer == layer) return static_cast<int>(i);
    }
    return -1;
  }

  bool IsTwoPhase(uint32_t layer) const { return layer < two_phase_.size() && two_phase_[layer]; }

  // Frees slots outside the window, requests the window's missing tickets.
  void Reconcile() {
    const uint64_t window = slots_.size() - HeldCount();
    auto wanted = [&](uint64_t t) { return !order_.empty() && t >= next_ticket_ && t < next_ticket_ + window; };
    for (uint32_t i = 0; i < slots_.size(); ++i) {
      Slot& s = slots_[i];
      if (s.use == Use::kHeld || s.use == Use::kFree || wanted(s.ticket)) continue;
      if (s.use == Use::kDone) {
        SetFree(i);
      } else {
        s.ticket = kNoTicket;  // the loader is on it; freed when it completes
      }
    }
    bool requested = false;
    const bool was_outstanding = Outstanding();
    for (uint64_t t = next_ticket_; wanted(t); ++t) {
      bool held_by_a_slot = false;
      int free_slot = -1;
      for (uint32_t i = 0; i < slots_.size(); ++i) {
        if (slots_[i].use != Use::kHeld && slots_[i].ticket == t) held_by_a_slot = true;
        if (slots_[i].use == Use::kFree && free_slot < 0) free_slot = static_cast<int>(i);
      }
      if (held_by_a_slot) continue;
      if (free_slot < 0) break;
      Request(static_cast<uint32_t>(free_slot), t);
      requested = true;
    }
    if (requested && !was_outstanding) progress_at_ = absl::Now();
    if (requested && loader_ != nullptr && !loader_->Notify()) loader_dead_ = true;
  }

  void Request(uint32_t i, uint64_t ticket) {
    SlotDescriptor& d = ring_->slot(i);
    const uint32_t layer = order_[ticket % order_.size()];
    d.layer = layer;
    d.part = IsTwoPhase(layer) ? ring::kDensePart : ring::kWholeFile;
    std::memset(d.experts, 0, sizeof(d.experts));
    d.sequence = kPrefetchSequences + next_sequence_++;
    d.state.store(ring::kRequested, std::memory_order_release);  // publishes layer and sequence
    slots_[i] = Loading(ticket, layer);
  }

  // Waits (a slice) for the loader to finish something. Restarts it if it
  // died, or if it is alive but outstanding requests have seen no completion
  // for the stall timeout; the kMaxLoaderStalls-th stall of one wait
  // (`stalls`, the caller's count) fails it, naming `layer`'s file.
  absl::Status WaitForLoader(uint32_t layer, uint32_t& stalls) {
    const int stop_fd = options_.stop != nullptr ? options_.stop->fd() : -1;
    if (options_.stop != nullptr && options_.stop->raised()) return Stopped(layer);
    const absl::Duration timeout = StallTimeout();
    if (loader_dead_ || loader_ == nullptr) return RestartLoader("");
    switch (loader_->Wait(std::min(kWaitSlice, timeout / 4), stop_fd)) {
      case LoaderProcess::Event::kStopped: return Stopped(layer);
      case LoaderProcess::Event::kDied: return RestartLoader("");
      case LoaderProcess::Event::kTimeout:
      case LoaderProcess::Event::kCompleted: break;
    }
    const absl::Duration waited = absl::Now() - progress_at_;
    if (!Outstanding() || waited < timeout) return absl::OkStatus();
    ++stalls;
    {
      absl::MutexLock lock(&stats_mu_);
      ++stats_.stalls;
    }
    const std::string file = FileNameFor(FileKind::kLayer, layer);
    const std::string why = absl::StrCat("made no progress for ", absl::FormatDuration(absl::Trunc(waited, absl::Milliseconds(100))),
                                         " (", file, " was wanted)");
    OCTO_RETURN_IF_ERROR(RestartLoader(why));
    if (stalls < kMaxLoaderStalls) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat(
        file, ": octo-loader made no progress reading it for ", absl::FormatDuration(absl::Trunc(waited, absl::Seconds(1))),
        ", ", stalls, " times in a row (killed and restarted each time; the stall timeout is ",
        absl::FormatDuration(timeout), "): is the disk or file system stuck?"));
  }

  absl::Status Stopped(uint32_t layer) const {
    return absl::CancelledError(absl::StrCat("octod is shutting down (while waiting for layer ", layer, ")"));
  }

  // `stalled`: why a live loader is killed ("made no progress for 12s");
  // empty for one that died.
  absl::Status RestartLoader(absl::string_view stalled) {
    std::string how = "could not be started";
    if (loader_ != nullptr) {
      const std::string ended = loader_->KillAndReap();
      how = stalled.empty() ? ended : absl::StrCat(stalled, "; killed");
    }
    loader_.reset();
    loader_dead_ = false;
    {
      absl::MutexLock lock(&stats_mu_);
      stats_.running = false;
    }
    // The dead loader can write no more: what it was loading goes to the next one.
    for (uint32_t i = 0; i < slots_.size(); ++i) {
      uint32_t loading = ring::kLoading;
      ring_->slot(i).state.compare_exchange_strong(loading, ring::kRequested, std::memory_order_acq_rel);
    }
    while (true) {
      const absl::Time now = absl::Now();
      restart_times_.push_back(now);
      while (!restart_times_.empty() && restart_times_.front() < now - options_.restart_window) {
        restart_times_.pop_front();
      }
      if (restart_times_.size() > options_.max_restarts) {
        broken_ = absl::UnavailableError(absl::StrCat("octo-loader ", how, "; it was restarted ",
                                                      options_.max_restarts, " times within ",
                                                      absl::FormatDuration(options_.restart_window), ", giving up"));
        return broken_;
      }
      {
        absl::MutexLock lock(&stats_mu_);
        ++stats_.restarts;
      }
      absl::Status started = StartLoader();
      if (started.ok()) break;
      how = std::string(started.message());
    }
    if (!loader_->Notify()) loader_dead_ = true;
    return absl::OkStatus();
  }

  const LayerStreamOptions options_;
  std::unique_ptr<Ring> ring_;
  std::unique_ptr<LoaderProcess> loader_;
  bool loader_dead_ = false;  // a send or receive found it gone
  std::vector<Slot> slots_;
  std::vector<uint32_t> order_;
  uint64_t next_ticket_ = 0;
  // The loader serves the lowest sequence first: expert reads, which a pass
  // waits on now, before the dense parts and whole layers read ahead.
  static constexpr uint64_t kPrefetchSequences = uint64_t{1} << 62;
  uint64_t next_sequence_ = 1;         // + kPrefetchSequences: the window's reads
  uint64_t next_urgent_sequence_ = 1;  // expert reads
  std::vector<bool> two_phase_;        // by layer
  std::deque<absl::Time> restart_times_;
  absl::Time progress_at_;  // the last completion, or when the loader last had nothing to do
  absl::Status broken_;  // UNAVAILABLE for good once restarts ran out

  mutable absl::Mutex stats_mu_;
  LoaderStats stats_ ABSL_GUARDED_BY(stats_mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<LayerStream>> LayerStream::Start(const LayerStreamOptions& options) {
  if (options.loader_path.empty()) return absl::InvalidArgumentError("loader_path is empty");
  if (options.model_dir.empty()) return absl::InvalidArgumentError("model_dir is empty");
  if (options.slots < 1 || options.slots > ring::kMaxRingSlots) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring slots ", options.slots, " is outside 1..", ring::kMaxRingSlots));
  }
  if (options.slot_bytes == 0 || options.slot_bytes > ring::kMaxSlotBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("slot_bytes ", options.slot_bytes, " is outside 1..", ring::kMaxSlotBytes));
  }
  if (options.queue_depth < 1 || options.queue_depth > kMaxReadQueueDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("queue_depth ", options.queue_depth, " is outside 1..", kMaxReadQueueDepth));
  }
  Ring::RemoveOrphans();
  OCTO_ASSIGN_OR_RETURN(std::unique_ptr<Ring> ring,
                        Ring::Create(Ring::UniqueName(), options.slots, ring::RoundUpToPage(options.slot_bytes)));
  auto stream = std::make_unique<RingLayerStream>(options, std::move(ring));
  OCTO_RETURN_IF_ERROR(stream->StartLoader());
  return std::unique_ptr<LayerStream>(std::move(stream));
}

}  // namespace octo
