// octo-loader-faulty: octo-loader's own loop (RunLoader) with its reads going
// through a FaultyReadQueue, so LayerStream tests can inject short, slow and
// failing reads across the real process boundary. Takes octo-loader's flags
// plus the fault flags below (LayerStreamOptions::loader_args).
#include "CLI/CLI.hpp"
#include "storage/loader_server.h"
#include "tests/storage/loader_test_util.h"

int main(int argc, char** argv) {
  octo::LoaderConfig config;
  octo::testing::ReadFaults faults;
  int delay_ms = 0;
  CLI::App app{"octo-loader with injected read faults (tests only)"};
  octo::AddLoaderFlags(app, config);
  app.add_flag("--short-reads", faults.short_reads, "report fewer bytes than read");
  app.add_option("--page-multiples", faults.page_multiples, "short counts in whole pages (true/false)");
  app.add_option("--delay-ms", delay_ms, "delay added to every read");
  app.add_option("--fail-path", faults.fail_path, "fail reads of files whose path contains this");
  app.add_option("--fail-errno", faults.fail_errno, "errno of those failures");
  app.add_option("--fail-after", faults.fail_after, "good reads of such files before they fail");
  app.add_flag("--refuse-direct", faults.refuse_direct, "EINVAL for reads through O_DIRECT descriptors");
  app.add_option("--seed", faults.seed, "random seed for short reads");
  CLI11_PARSE(app, argc, argv);
  faults.delay = absl::Milliseconds(delay_ms);

  return octo::RunLoader(config, [&](const octo::LoaderConfig& c)
                                     -> absl::StatusOr<std::unique_ptr<octo::LayerFileReader>> {
    octo::DirectReaderOptions options{.direct_io = c.direct_io, .queue_depth = c.queue_depth, .chunk_bytes = c.chunk_bytes};
    auto queue = std::make_unique<octo::testing::FaultyReadQueue>(octo::MakeBestReadQueue(c.queue_depth), faults);
    auto reader = octo::DirectReader::Create(options, std::move(queue));
    if (!reader.ok()) return reader.status();
    return std::unique_ptr<octo::LayerFileReader>(std::move(reader).value());
  });
}
