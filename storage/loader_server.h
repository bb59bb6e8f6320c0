// The octo-loader process's body: attach to octod's staging ring, then serve
// every requested slot (read the layer file, check its checksum, mark the
// slot READY or FAILED) until octod says stop or dies. Protocol:
// storage/RING.md.
//
// octo-loader (loader_main.cc) runs it with a DirectReader; tests run it with
// a reader that injects faults (same loop, same process boundary).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "storage/direct_reader.h"

namespace CLI {
class App;
}

namespace octo {

struct LoaderConfig {
  std::string ring_name;     // POSIX shm name, "/octo-ring-..."
  std::string model_dir;     // layer directory: manifest.json + files
  int control_fd = -1;       // our end of octod's SOCK_SEQPACKET socket pair
  bool direct_io = true;
  uint32_t queue_depth = 8;  // reads in flight per file
  uint64_t chunk_bytes = kDefaultReadChunkBytes;
};

// Adds --ring, --model-dir, --fd, --direct-io, --queue-depth, --chunk-kib.
void AddLoaderFlags(CLI::App& app, LoaderConfig& config);

// Builds the reader the loader reads with, from the config.
using ReaderFactory = std::function<absl::StatusOr<std::unique_ptr<LayerFileReader>>(const LoaderConfig&)>;

// The real one: DirectReader with the config's options. (RunLoader probes
// it on a layer file before saying hello, so a file system without O_DIRECT
// shows in the io mode from the start.)
absl::StatusOr<std::unique_ptr<LayerFileReader>> MakeDirectLayerReader(const LoaderConfig& config);

// Runs the loader; returns the process exit status: 0 after octod's stop or
// death (in the latter case the segment's name is removed first), 2 when it
// could not start (bad ring, bad manifest: octod gets a kStartFailed message
// and the reason goes to stderr), 1 on a broken control socket.
int RunLoader(const LoaderConfig& config, const ReaderFactory& make_reader);

}  // namespace octo
