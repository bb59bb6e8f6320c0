#include "tests/daemon/engine/reference_records.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"
#include "storage/decompose.h"
#include "tests/shared_data.h"

namespace octo::testing {

std::vector<ReferenceRecord> LoadReferenceRecords(const std::string& file) {
  std::vector<ReferenceRecord> records;
  std::ifstream in(SharedPath(file));
  EXPECT_TRUE(in.good()) << "cannot read " << file;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    ReferenceRecord r;
    r.model = j.at("model").get<std::string>();
    r.prompt = j.at("prompt").get<std::string>();
    r.prompt_tokens = j.at("prompt_tokens").get<std::vector<int32_t>>();
    r.tokens = j.at("tokens").get<std::vector<int32_t>>();
    r.text = j.at("text").get<std::string>();
    for (const auto& position : j.at("top5_logprobs")) {
      std::vector<std::pair<int32_t, double>> top;
      for (const auto& entry : position) top.emplace_back(entry.at(0).get<int32_t>(), entry.at(1).get<double>());
      r.top5.push_back(std::move(top));
    }
    records.push_back(std::move(r));
  }
  return records;
}

std::string DecomposedSharedModel(const std::string& model) {
  static std::map<std::string, std::string>* dirs = new std::map<std::string, std::string>();
  auto it = dirs->find(model);
  if (it != dirs->end()) return it->second;
  // One scratch root per process, removed at exit.
  static const std::filesystem::path* root = [] {
    auto* p = new std::filesystem::path(std::filesystem::path(::testing::TempDir()) /
                                        ("octo-ref-" + std::to_string(::getpid())));
    std::filesystem::create_directories(*p);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(std::filesystem::path(::testing::TempDir()) /
                                      ("octo-ref-" + std::to_string(::getpid())), ec);
    });
    return p;
  }();
  std::string name = model;
  for (char& ch : name) if (ch == '/') ch = '_';
  const std::string dir = (*root / name).string();
  auto result = Decompose(SharedPath("models/" + model), dir, DecomposeOptions{});
  EXPECT_TRUE(result.ok()) << model << ": " << result.status();
  (*dirs)[model] = dir;
  return dir;
}

}  // namespace octo::testing
