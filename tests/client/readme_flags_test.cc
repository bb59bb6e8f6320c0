// README.md names flags next to the program they belong to; every one must
// exist in that program's --help (for octo-ctl, its command's --help), so the
// README cannot drift from the binaries.
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/client/subprocess.h"

namespace octo::testing {
namespace {

const std::map<std::string, std::string>& Programs() {
  static const auto* programs = new std::map<std::string, std::string>{
      {"octod", OCTOD_PATH}, {"octo-gen", OCTO_GEN_PATH}, {"octo-ctl", OCTO_CTL_PATH}};
  return *programs;
}

// `program [command] --help`, cached.
const std::string& Help(const std::string& program, const std::string& command) {
  static auto* cache = new std::map<std::string, std::string>();
  const std::string key = program + " " + command;
  auto it = cache->find(key);
  if (it != cache->end()) return it->second;
  std::vector<std::string> argv = {Programs().at(program)};
  if (!command.empty()) argv.push_back(command);
  argv.push_back("--help");
  const RunResult r = RunCommand(argv);
  EXPECT_EQ(r.exit_code, 0) << key << " --help: " << r.err;
  std::string help = r.out;
  if (!command.empty()) help += Help(program, "");  // octo-ctl's connection flags sit on the top level
  return cache->emplace(key, help).first->second;
}

struct Mention {
  int line = 0;
  std::string program, command, flag;
};

// Each --flag on a README line, with the nearest program named to its left.
std::vector<Mention> FlagMentions() {
  std::ifstream in(std::string(OCTO_SOURCE_DIR) + "/README.md");
  EXPECT_TRUE(in.good()) << "cannot read README.md";
  const std::regex token(R"((octod|octo-gen|octo-ctl)(?![-\w])(\s+([a-z]+))?|(^|[\s`(\[])(--[a-z][a-z0-9-]*))");
  std::vector<Mention> mentions;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::string program, command;
    for (auto m = std::sregex_iterator(line.begin(), line.end(), token); m != std::sregex_iterator(); ++m) {
      if ((*m)[1].matched) {
        program = (*m)[1];
        command = program == "octo-ctl" && (*m)[3].matched ? std::string((*m)[3]) : "";
      } else if (!program.empty()) {
        mentions.push_back({number, program, command, (*m)[5]});
      }
    }
  }
  return mentions;
}

TEST(ReadmeFlagsTest, EveryFlagTheReadmeNamesExistsInItsProgramsHelp) {
  const std::vector<Mention> mentions = FlagMentions();
  ASSERT_GT(mentions.size(), 20u) << "the README names flags; the parser found few";
  for (const Mention& m : mentions) {
    const std::string& help = Help(m.program, m.command);
    const std::regex exact("(^|[\\s,])" + m.flag + "([\\s,=]|$)");
    EXPECT_TRUE(std::regex_search(help, exact))
        << "README.md:" << m.line << ": " << m.program << (m.command.empty() ? "" : " " + m.command) << " has no "
        << m.flag;
  }
}

}  // namespace
}  // namespace octo::testing
