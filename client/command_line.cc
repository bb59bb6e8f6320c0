#include "client/command_line.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "storage/closest_names.h"

namespace octo {
namespace {

// The option of `app` (or, with fallthrough, its parents) named `name` ("-n", "--temp").
const CLI::Option* FindOption(const CLI::App* app, const std::string& name) {
  for (; app != nullptr; app = app->get_parent()) {
    for (const CLI::Option* option : app->get_options()) {
      if (option->check_name(name)) return option;
    }
  }
  return nullptr;
}

// The long flags closest to `name`, one per option ("--temperature", not
// also its alias "--temp").
std::vector<std::string> ClosestFlags(const std::string& name, const CLI::App* app) {
  std::vector<std::string> names;
  std::vector<const CLI::Option*> owners;
  for (; app != nullptr; app = app->get_parent()) {
    for (const CLI::Option* option : app->get_options()) {
      for (const std::string& lname : option->get_lnames()) {
        names.push_back("--" + lname);
        owners.push_back(option);
      }
    }
  }
  std::vector<std::string> close;
  std::vector<const CLI::Option*> seen;
  for (const std::string& candidate : ClosestNames(name, names, names.size())) {
    const CLI::Option* owner = owners[std::find(names.begin(), names.end(), candidate) - names.begin()];
    if (std::find(seen.begin(), seen.end(), owner) != seen.end()) continue;
    seen.push_back(owner);
    close.push_back(candidate);
    if (close.size() == 3) break;
  }
  return close;
}

}  // namespace

void UseOctoConventions(CLI::App& app, const std::string& program) {
  app.set_version_flag("--version", absl::StrCat(program, " ", kOctoVersion));
  app.option_defaults()->always_capture_default();
}

std::string ExplainUsageError(CLI::App& app, const std::vector<std::string>& args) {
  std::vector<std::string> commands;
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) commands.push_back(sub->get_name());
  const CLI::App* command = &app;
  bool takes_value = false;  // the previous token was an option expecting a value
  for (const std::string& arg : args) {
    if (takes_value) {
      takes_value = false;
      continue;
    }
    if (arg == "--") break;
    if (absl::StartsWith(arg, "-") && arg.size() > 1) {
      const std::string name = arg.substr(0, arg.find('='));
      const CLI::Option* option = FindOption(command, name);
      if (option == nullptr) {
        std::string text = absl::StrCat("unknown flag ", name);
        const std::vector<std::string> close = ClosestFlags(name, command);
        if (!close.empty()) absl::StrAppend(&text, "; did you mean ", absl::StrJoin(close, " or "), "?");
        return text;
      }
      takes_value = arg.find('=') == std::string::npos && option->get_expected_min() > 0;
      continue;
    }
    if (command == &app && !commands.empty()) {
      const CLI::App* sub = nullptr;
      for (const CLI::App* candidate : app.get_subcommands([](CLI::App*) { return true; })) {
        if (candidate->check_name(arg)) sub = candidate;
      }
      if (sub == nullptr) {
        return absl::StrCat("unknown command '", arg, "'", DidYouMean(ClosestNames(arg, commands)),
                            " (commands: ", absl::StrJoin(commands, ", "), ")");
      }
      command = sub;
    }
  }
  if (command == &app && !commands.empty() && app.get_require_subcommand_min() > 0) {
    return absl::StrCat("give a command: ", absl::StrJoin(commands, ", "));
  }
  return "";
}

std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(error);
    std::vector<std::string> args(argv + 1, argv + argc);
    std::string message = ExplainUsageError(app, args);
    if (message.empty()) message = error.what();
    std::string program = argv[0];
    program = program.substr(program.rfind('/') + 1);
    std::fprintf(stderr, "%s: %s\nRun %s --help for usage.\n", program.c_str(), message.c_str(), program.c_str());
    return 2;
  }
}

}  // namespace octo
