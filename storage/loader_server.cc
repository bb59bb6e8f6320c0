#include "storage/loader_server.h"

#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "storage/layer_file.h"
#include "storage/manifest.h"
#include "storage/ring.h"
#include "storage/status_macros.h"
#include "storage/xxhash64.h"

namespace octo {
namespace {

using ring::RingMessage;
using ring::SlotDescriptor;

// How often the idle loop checks that octod is still its parent, in case
// both the socket's end of file and the death signal were somehow missed.
constexpr int kParentCheckMillis = 1000;

// --- Parent death ------------------------------------------------------------
// Only these are touched by the signal handler (async-signal-safe: getppid,
// shm_unlink, _exit).
char g_ring_name[256];
std::atomic<int> g_octod_pid{0};
std::atomic<bool> g_remove_when_orphaned{false};

void OnParentDeathSignal(int) {
  // PR_SET_PDEATHSIG also fires when only the octod *thread* that spawned us
  // exits; then our parent is unchanged and nothing is wrong.
  if (::getppid() == g_octod_pid.load()) return;
  if (g_remove_when_orphaned.load()) ::shm_unlink(g_ring_name);
  ::_exit(0);
}

// The second line of defence behind the socket's end of file: a signal from
// the kernel when octod dies. SIGUSR2, not SIGTERM, so an ordinary SIGTERM
// still just ends the loader (octod, alive, removes the segment itself).
void ArmParentDeathSignal() {
  struct sigaction sa {};
  sa.sa_handler = OnParentDeathSignal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGUSR2, &sa, nullptr);
  ::prctl(PR_SET_PDEATHSIG, SIGUSR2);
}

bool OctodGone() { return ::getppid() != g_octod_pid.load(); }

// --- Control socket ----------------------------------------------------------

bool Send(int fd, ring::MessageType type, uint32_t slot, int64_t value, absl::string_view text) {
  RingMessage m{};
  m.type = type;
  m.slot = slot;
  m.value = value;
  if (!text.empty()) std::memcpy(m.text, text.data(), std::min(text.size(), sizeof(m.text) - 1));
  ssize_t n;
  do {
    n = ::send(fd, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  // A full socket holds completions octod has not read yet; it looks at the
  // slots themselves when it reads them, so this one is not needed.
  return n == static_cast<ssize_t>(sizeof(m)) || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
}

enum class Inbox { kEmpty, kStop, kGone };

// Reads every waiting message. Doorbells need no action: the slots are the truth.
Inbox DrainMessages(int fd) {
  while (true) {
    RingMessage m{};
    const ssize_t n = ::recv(fd, &m, sizeof(m), MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Inbox::kEmpty;
    if (n <= 0) return Inbox::kGone;  // end of file: octod closed its end or died
    if (m.type == ring::kStop) return Inbox::kStop;
  }
}

// --- Serving slots -----------------------------------------------------------

class Server {
 public:
  Server(const LoaderConfig& config, Ring& ring, const Manifest& manifest, LayerFileReader& reader)
      : config_(config), ring_(ring), manifest_(manifest), reader_(reader) {
    layers_.assign(manifest.config.n_layers, nullptr);
    for (uint32_t l = 0; l < layers_.size(); ++l) layers_[l] = manifest.Layer(l);
  }

  // Serves requests until octod stops or dies; the exit status.
  int Serve() {
    while (true) {
      for (int slot = NextRequested(); slot >= 0; slot = NextRequested()) {
        Load(static_cast<uint32_t>(slot));
        if (!Send(config_.control_fd, ring::kCompleted, slot, 0, reader_.io_mode())) return Orphaned();
        // Between files, so a stop or octod's death is not kept waiting
        // behind every request still queued.
        switch (DrainMessages(config_.control_fd)) {
          case Inbox::kEmpty: break;
          case Inbox::kStop: return 0;
          case Inbox::kGone: return Orphaned();
        }
      }
      pollfd pfd{config_.control_fd, POLLIN, 0};
      const int ready = ::poll(&pfd, 1, kParentCheckMillis);
      if (ready < 0 && errno != EINTR) return 1;
      if (ready == 0) {
        if (OctodGone()) return Orphaned();
        continue;
      }
      switch (DrainMessages(config_.control_fd)) {
        case Inbox::kEmpty: break;
        case Inbox::kStop: return 0;
        case Inbox::kGone: return Orphaned();
      }
    }
  }

 private:
  // octod is gone: nobody else will remove the segment's name.
  int Orphaned() {
    (void)Ring::Remove(ring_.name());
    return 0;
  }

  // The REQUESTED slot with the lowest sequence number, or -1.
  int NextRequested() const {
    int best = -1;
    uint64_t best_sequence = 0;
    for (uint32_t i = 0; i < ring_.slot_count(); ++i) {
      const SlotDescriptor& d = ring_.slot(i);
      if (d.state.load(std::memory_order_acquire) != ring::kRequested) continue;
      if (best < 0 || d.sequence < best_sequence) {
        best = static_cast<int>(i);
        best_sequence = d.sequence;
      }
    }
    return best;
  }

  void Load(uint32_t i) {
    SlotDescriptor& d = ring_.slot(i);
    uint32_t expected = ring::kRequested;
    if (!d.state.compare_exchange_strong(expected, ring::kLoading, std::memory_order_acq_rel)) return;
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<uint64_t> bytes = Read(d, ring_.slot_data(i));
    d.load_nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
    d.bytes = bytes.ok() ? *bytes : 0;
    d.status_code = static_cast<int32_t>(bytes.status().code());
    std::memset(d.message, 0, sizeof(d.message));
    const absl::string_view message = bytes.status().message();
    if (!message.empty()) std::memcpy(d.message, message.data(), std::min(message.size(), sizeof(d.message) - 1));
    // Publishes every field above (and the data area) to octod.
    d.state.store(bytes.ok() ? ring::kReady : ring::kFailed, std::memory_order_release);
  }

  // Reads what request `d` asks for into `data` (a slot holding an image of
  // the layer file: each part at its file offset) and checks it; the bytes read.
  absl::StatusOr<uint64_t> Read(const SlotDescriptor& d, uint8_t* data) {
    const uint32_t layer = d.layer;
    if (layer >= layers_.size() || layers_[layer] == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer ", layer, " is not in the model (it has layers 0..", layers_.size() - 1, ")"));
    }
    const ManifestFile& file = *layers_[layer];
    if (file.size > ring_.slot_bytes()) {
      return absl::InvalidArgumentError(absl::StrCat(file.name, " is ", file.size, " bytes; a ring slot holds ",
                                                     ring_.slot_bytes(), " (raise the slot size)"));
    }
    if (d.part != ring::kWholeFile && !file.experts.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(file.name, " has no expert blocks (format ",
                                                     manifest_.format_version, "): read it whole"));
    }
    switch (d.part) {
      case ring::kWholeFile:
        OCTO_RETURN_IF_ERROR(ReadPart(file, {0, file.size}, file.checksum, "", data));
        OCTO_RETURN_IF_ERROR(CheckHeader(file, data));
        return file.size;
      case ring::kDensePart: {
        const ByteRange dense = DenseRange(file);
        OCTO_RETURN_IF_ERROR(ReadPart(file, dense, file.experts->dense_checksum, "dense part: ", data));
        OCTO_RETURN_IF_ERROR(CheckHeader(file, data));
        return dense.bytes;
      }
      case ring::kExpertBlocks: {
        uint64_t bytes = 0;
        for (uint32_t e = 0; e < file.experts->count && e < ring::kMaxRingExperts; ++e) {
          if ((d.experts[e / 64] >> (e % 64) & 1) == 0) continue;
          const ByteRange range = ExpertRange(file, e);
          OCTO_RETURN_IF_ERROR(ReadPart(file, range, file.experts->checksums[e],
                                        absl::StrCat("expert ", e, " of layer ", layer, ": "), data));
          bytes += range.bytes;
        }
        return bytes;
      }
      default:
        return absl::InvalidArgumentError(absl::StrCat("request part ", d.part, " is unknown"));
    }
  }

  // Reads `range` of `file` to the same offset of `data` and checks it
  // against `checksum`; `what` names the part in the error.
  absl::Status ReadPart(const ManifestFile& file, ByteRange range, uint64_t checksum, absl::string_view what,
                        uint8_t* data) {
    OCTO_ASSIGN_OR_RETURN(uint64_t digest, reader_.ReadRange(config_.model_dir + "/" + file.name, file.size,
                                                             range.offset, {data + range.offset, range.bytes}));
    if (digest != checksum) {
      return absl::DataLossError(absl::StrCat(file.name, ": ", what, "checksum mismatch (read ",
                                              FormatChecksum(digest), ", the manifest says ", FormatChecksum(checksum),
                                              "); the file is damaged: run `octo-ctl verify`"));
    }
    return absl::OkStatus();
  }

  // The header page at the start of the slot names this layer's file.
  static absl::Status CheckHeader(const ManifestFile& file, const uint8_t* data) {
    absl::StatusOr<FileHeader> header = DecodeFileHeader({data, kHeaderBytes});
    if (!header.ok()) return Annotate(header.status(), file.name);
    if (header->kind != FileKind::kLayer || header->layer != file.layer) {
      return absl::DataLossError(absl::StrCat(file.name, ": its header says ", FileNameFor(header->kind, header->layer)));
    }
    return absl::OkStatus();
  }

  const LoaderConfig& config_;
  Ring& ring_;
  const Manifest& manifest_;
  LayerFileReader& reader_;
  std::vector<const ManifestFile*> layers_;  // by layer index
};

// Tells octod why we cannot start (best effort) and says it on stderr.
int StartFailed(const LoaderConfig& config, const absl::Status& status) {
  std::fprintf(stderr, "octo-loader: %s\n", std::string(status.message()).c_str());
  Send(config.control_fd, ring::kStartFailed, 0, static_cast<int64_t>(status.code()), std::string(status.message()));
  return 2;
}

}  // namespace

void AddLoaderFlags(CLI::App& app, LoaderConfig& config) {
  app.add_option("--ring", config.ring_name, "shared memory name of octod's ring")->required();
  app.add_option("--model-dir", config.model_dir, "layer directory (manifest.json + files)")->required();
  app.add_option("--fd", config.control_fd, "this process's end of octod's control socket")->required();
  app.add_option("--direct-io", config.direct_io, "read with O_DIRECT (true/false)");
  app.add_option("--queue-depth", config.queue_depth, "reads in flight per file")->check(CLI::Range(1u, kMaxReadQueueDepth));
  app.add_option_function<uint64_t>(
         "--chunk-kib", [&config](uint64_t kib) { config.chunk_bytes = kib * 1024; }, "bytes per read, KiB (multiple of 4)")
      ->check(CLI::Range(4, 1 << 20));
}

absl::StatusOr<std::unique_ptr<LayerFileReader>> MakeDirectLayerReader(const LoaderConfig& config) {
  DirectReaderOptions options;
  options.direct_io = config.direct_io;
  options.queue_depth = config.queue_depth;
  options.chunk_bytes = config.chunk_bytes;
  OCTO_ASSIGN_OR_RETURN(std::unique_ptr<DirectReader> reader, DirectReader::Create(options));
  return std::unique_ptr<LayerFileReader>(std::move(reader));
}

int RunLoader(const LoaderConfig& config, const ReaderFactory& make_reader) {
  g_octod_pid.store(::getppid());
  std::snprintf(g_ring_name, sizeof(g_ring_name), "%s", config.ring_name.c_str());
  ArmParentDeathSignal();

  absl::StatusOr<std::unique_ptr<Ring>> ring = Ring::Attach(config.ring_name);
  if (!ring.ok()) return StartFailed(config, ring.status());
  const int octod_pid = (*ring)->header().octod_pid;
  if (octod_pid != g_octod_pid.load()) {
    return StartFailed(config, absl::FailedPreconditionError(absl::StrCat(
                                   "ring ", config.ring_name, " belongs to pid ", octod_pid,
                                   ", not to this loader's parent (pid ", g_octod_pid.load(), ")")));
  }
  // From here the segment is ours to remove should octod die.
  g_remove_when_orphaned.store(true);
  if (OctodGone()) {
    (void)Ring::Remove(config.ring_name);
    return 0;
  }

  absl::StatusOr<Manifest> manifest = ReadManifest(config.model_dir);
  if (!manifest.ok()) return StartFailed(config, Annotate(manifest.status(), config.model_dir));
  absl::StatusOr<std::unique_ptr<LayerFileReader>> reader = make_reader(config);
  if (!reader.ok()) return StartFailed(config, reader.status());
  if (const ManifestFile* first = manifest->Layer(0); first != nullptr) {
    (void)(*reader)->Probe(config.model_dir + "/" + first->name);  // a missing file fails its own request later
  }

  (*ring)->header().loader_pid.store(::getpid(), std::memory_order_release);
  (*ring)->header().loader_starts.fetch_add(1, std::memory_order_acq_rel);
  if (!Send(config.control_fd, ring::kHello, 0, ::getpid(), (*reader)->io_mode())) {
    (void)Ring::Remove(config.ring_name);  // octod died before our hello
    return 0;
  }
  Server server(config, **ring, *manifest, **reader);
  return server.Serve();
}

}  // namespace octo
