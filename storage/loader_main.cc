// octo-loader: octod's reader process. octod spawns it with the name of the
// staging ring it created, the model directory and its end of the control
// socket; it reads the layer files octod requests into ring slots with
// O_DIRECT and checks each file's checksum. See storage/RING.md.
//
//   octo-loader --ring /octo-ring-123-0 --model-dir DIR --fd 3
//               [--direct-io true] [--queue-depth 8] [--chunk-kib 1024]
//
// Not meant to be run by hand: it exits as soon as its parent is not the
// process that created the ring.
#include "CLI/CLI.hpp"
#include "client/command_line.h"
#include "storage/loader_server.h"

int main(int argc, char** argv) {
  octo::LoaderConfig config;
  CLI::App app{"octo-loader: reads layer files into octod's staging ring"};
  octo::UseOctoConventions(app, "octo-loader");
  octo::AddLoaderFlags(app, config);
  if (const std::optional<int> exit_code = octo::ParseCommandLine(app, argc, argv)) return *exit_code;
  return octo::RunLoader(config, octo::MakeDirectLayerReader);
}
