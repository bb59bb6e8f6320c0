// What every Octo program's command line does alike (octod, octo-loader,
// octo-gen, octo-ctl, octo-make-model):
//   --version prints "<program> <version>";
//   --help shows each option's default;
//   a misspelled flag or subcommand is named with the closest ones
//   ("unknown flag --temprature; did you mean --temperature?");
//   exit codes: 0 ok, 1 an error, 2 a usage error (130 after Ctrl-C where a
//   command can be cancelled).
#pragma once

#include <optional>
#include <string>

#include "CLI/CLI.hpp"

namespace octo {

inline constexpr char kOctoVersion[] = "0.1.0";

// Call right after constructing `app`, before adding options: --version,
// defaults in --help.
void UseOctoConventions(CLI::App& app, const std::string& program);

// Parses the command line. nullopt: go on; otherwise the exit code, the
// message printed (0 after --help or --version, 2 for a usage error).
std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv);

// The usage error for `args` (argv without the program): an unknown
// subcommand or flag with the closest names; "" when none is found (the
// parser's own message stands then).
std::string ExplainUsageError(CLI::App& app, const std::vector<std::string>& args);

}  // namespace octo
