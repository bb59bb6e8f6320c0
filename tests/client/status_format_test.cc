#include "client/status_format.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace octo {
namespace {

v1::GetStatusResponse Status(const std::string& states) {
  v1::GetStatusResponse status;
  status.set_version("1.2.3");
  status.set_backend("cpu (avx2, 2 threads)");
  v1::ModelInfo* model = status.mutable_model();
  model->set_name("Tiny");
  model->set_path("tiny");
  model->set_architecture("llama");
  model->set_n_layers(static_cast<uint32_t>(states.size()));
  for (size_t i = 0; i < states.size(); ++i) {
    v1::LayerStatus* layer = status.add_layers();
    layer->set_layer(static_cast<uint32_t>(i));
    layer->set_pinned(states[i] == 'P');
    layer->set_resident(states[i] != 'S');
    layer->set_tier(states[i] == 'S' ? "disk" : "host");
    layer->set_bytes(1 << 20);
    if (states[i] == 'S') {
      layer->set_loads(7);
      layer->set_load_wait_seconds(0.0025);
    }
    layer->set_compute_seconds(0.001);
  }
  v1::ResidencyStatus* residency = status.mutable_residency();
  residency->set_budget_bytes(3ull << 30);
  residency->set_held_bytes(1ull << 30);
  residency->set_auto_budget(true);
  status.set_kv_used_bytes(12ull << 20);
  status.set_kv_budget_bytes(1ull << 30);
  status.set_overlap(0.875);
  v1::SessionStatus* session = status.add_sessions();
  session->set_session_id("session-1");
  session->set_positions(120);
  session->set_context_length(4096);
  session->set_active(true);
  return status;
}

TEST(StatusFormatTest, ResidencyMapHasOneCharacterPerLayer) {
  EXPECT_EQ(ResidencyMap(Status("PRRSSP")), "PRRSSP");
  EXPECT_EQ(ResidencyMap(v1::GetStatusResponse()), "");
}

TEST(StatusFormatTest, TextShowsMapBudgetsLoaderSessionsAndLayerTimes) {
  const std::string text = FormatStatus(Status("PRSSP"));
  for (const char* expected : {"octod 1.2.3", "backend cpu (avx2, 2 threads)", "Tiny (tiny): llama, 5 layers",
                               "layer map   PRSSP", "held, peak", "budget 3.00 GiB (auto)",
                               "kv cache    12.0 MiB used of 1.00 GiB", "overlap 88%", "session-1", "120/4096",
                               "active", "LOAD ms", "WAIT ms"}) {
    EXPECT_NE(text.find(expected), std::string::npos) << "missing '" << expected << "' in\n" << text;
  }
  // The streamed layer's row: its tier, load count and wait time in ms.
  EXPECT_NE(text.find("      2  S      disk    1.00 MiB        7         -      2.50        1.00\n"),
            std::string::npos)
      << text;
  // No device: no VRAM lines, no copy columns.
  for (const char* absent : {"device ", "vram ", "h2d", "COPY"}) {
    EXPECT_EQ(text.find(absent), std::string::npos) << "unexpected '" << absent << "' in\n" << text;
  }
}

TEST(StatusFormatTest, DeviceBlockAndCopyColumnsWithADevice) {
  v1::GetStatusResponse status = Status("PVSH");
  status.set_backend("cuda (NVIDIA H100 80GB HBM3)");
  v1::LayerStatus* vram = status.mutable_layers(1);
  vram->set_tier("vram");
  v1::LayerStatus* host = status.mutable_layers(3);
  host->set_copies(40);
  host->set_copy_seconds(0.0125);
  host->set_copy_wait_seconds(0.0005);
  v1::DeviceStatus* device = status.mutable_residency()->mutable_device();
  device->set_present(true);
  device->set_name("NVIDIA H100 80GB HBM3");
  device->set_index(1);
  device->set_total_bytes(80ull << 30);
  device->set_free_bytes(6ull << 30);
  device->set_auto_budget(false);
  device->set_budget_bytes(60ull << 30);
  device->set_held_bytes(58ull << 30);
  device->set_peak_bytes(59ull << 30);
  device->set_device_layers(70);
  device->set_staging_buffers(3);
  device->set_staging_bytes(800ull << 20);
  device->set_global_bytes(1ull << 30);
  device->set_kv_bytes(2ull << 30);
  device->set_workspace_bytes(256ull << 20);
  device->set_copied_bytes(100ull << 30);
  device->set_h2d_gbps(53.66);
  device->set_overlap(0.9);
  device->set_timing_every(16);
  device->set_graph_captures(2);
  device->set_graph_replays(500);
  device->set_eager_stretches(7);
  device->set_programmatic_launches(true);
  device->set_weight_prefetch_bytes(4096);
  const std::string text = FormatStatus(status);
  for (const char* expected :
       {"device      cuda:1 NVIDIA H100 80GB HBM3; VRAM 80.0 GiB total, 6.00 GiB free\n",
        "vram        70 layers; held 58.0 GiB, peak 59.0 GiB, budget 60.0 GiB; staging 3 x 800.0 MiB\n",
        "            globals 1.00 GiB, kv cache 2.00 GiB, workspaces 256.0 MiB\n",
        "h2d copies  100.0 GiB at 53.7 GB/s, overlap 90%; times from one pass in 16\n",
        "graphs      500 stretches replayed as a CUDA graph, 2 captured, 7 launch by launch; kernels start behind "
        "their predecessor (programmatic launch), asking L2 for 4.00 KiB of each weight row first\n",
        "TIER",
        "COPY ms  COPY WAIT ms\n"}) {
    EXPECT_NE(text.find(expected), std::string::npos) << "missing '" << expected << "' in\n" << text;
  }
  // The host-tier layer: copied every pass, its copy and wait in ms.
  EXPECT_NE(text.find("      3  R      host    1.00 MiB        0         -         -        1.00"
                      "     12.50          0.50\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("      1  R      vram    1.00 MiB        0         -         -        1.00"
                      "         -             -\n"),
            std::string::npos)
      << text;

  device->set_auto_budget(true);
  EXPECT_NE(FormatResidency(status.residency()).find("budget 60.0 GiB (auto); staging"), std::string::npos)
      << FormatResidency(status.residency());
}

TEST(StatusFormatTest, ExpertsBlockWithSelectiveExperts) {
  v1::GetStatusResponse status = Status("PSSP");
  status.set_generated_tokens(100);
  v1::ExpertStatus* experts = status.mutable_residency()->mutable_experts();
  experts->set_present(true);
  experts->set_two_phase_layers(46);
  experts->set_cache_capacity_bytes(8ull << 30);
  experts->set_cache_held_bytes(7ull << 30);
  experts->set_cache_entries(812);
  experts->set_cache_hits(9000);
  experts->set_cache_misses(1000);
  experts->set_cache_evictions(120);
  experts->set_routed_from_disk(1000);
  experts->set_predicted(750);
  experts->set_whole_layer_reads(3);
  experts->set_dense_bytes_read(5ull << 30);
  experts->set_expert_bytes_read(20ull << 30);
  const std::string text = FormatStatus(status);
  // 25 GiB read over 100 generated tokens: 256 MiB a token.
  EXPECT_NE(text.find("experts     46 two-phase layers; cache 7.00 GiB held of 8.00 GiB, 812 entries\n"
                      "            9000 hits, 1000 misses (90.0% hit), 120 evictions; "
                      "prefetch hit 75.0% (750 of 1000 disk reads predicted)\n"
                      "            read dense 5.00 GiB, experts 20.0 GiB, 3 whole-layer reads; "
                      "256.0 MiB per token\n"),
            std::string::npos)
      << text;

  // No tokens yet, nothing read: rates and the per-token figure are left out.
  status.set_generated_tokens(0);
  v1::ExpertStatus fresh;
  fresh.set_present(true);
  fresh.set_two_phase_layers(2);
  *experts = fresh;
  const std::string before = FormatStatus(status);
  EXPECT_NE(before.find("0 hits, 0 misses (- hit), 0 evictions; prefetch hit - (0 of 0 disk reads predicted)\n"),
            std::string::npos)
      << before;
  EXPECT_EQ(before.find("per token"), std::string::npos) << before;
  // octo-ctl residency shows the block too, without the per-token figure.
  EXPECT_NE(FormatResidency(status.residency()).find("experts     2 two-phase layers"), std::string::npos);
}

TEST(StatusFormatTest, ExpertsLineForWholeLayerMoe) {
  v1::GetStatusResponse status = Status("PSP");
  status.mutable_residency()->mutable_experts()->set_not_selective("decomposed with format 1");
  const std::string text = FormatStatus(status);
  EXPECT_NE(text.find("experts     whole layers (decomposed with format 1)\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("two-phase"), std::string::npos) << text;
  // A dense model: no experts line at all.
  EXPECT_EQ(FormatStatus(Status("PSP")).find("experts"), std::string::npos);
}

TEST(StatusFormatTest, LongMapsWrap) {
  const std::string text = FormatStatus(Status(std::string(100, 'S')));
  EXPECT_NE(text.find("layer map   " + std::string(64, 'S') + "\n"), std::string::npos) << text;
  EXPECT_NE(text.find("            " + std::string(36, 'S') + "   (P pinned"), std::string::npos) << text;
}

TEST(StatusFormatTest, NoModel) {
  const std::string text = FormatStatus(v1::GetStatusResponse());
  EXPECT_NE(text.find("none loaded"), std::string::npos) << text;
  EXPECT_EQ(text.find("layers\n"), std::string::npos) << "no layer table without layers";
}

TEST(StatusFormatTest, JsonUsesProtoFieldNamesAndKeepsZeros) {
  const std::string text = ToJson(Status("PS"));
  SCOPED_TRACE(text);
  const nlohmann::json json = nlohmann::json::parse(text);
  EXPECT_EQ(json["version"], "1.2.3");
  EXPECT_EQ(json["layers"][1]["loads"], "7") << "uint64 is a string in proto3 JSON";
  EXPECT_EQ(json["layers"][0]["pinned"], true);
  EXPECT_EQ(json["residency"]["pin_first"], 0) << "zeros and false are present";
  EXPECT_EQ(json["residency"]["auto_budget"], true);
  EXPECT_FALSE(json.contains("loader")) << "an unset message is absent";
  EXPECT_EQ(json["model"]["n_layers"], 2);
}

TEST(StatusFormatTest, ModelsMarkTheLoadedOne) {
  v1::ListModelsResponse models;
  v1::ModelInfo* a = models.add_models();
  a->set_path("a");
  a->set_loaded(true);
  a->set_n_params(8030261248);
  a->set_quantization("Q4_K_M");
  models.add_models()->set_path("b");
  const std::string text = FormatModels(models);
  EXPECT_NE(text.find("PARAMS  QUANT"), std::string::npos) << text;
  EXPECT_NE(text.find("8.0B  Q4_K_M"), std::string::npos) << text;
  EXPECT_NE(text.find("* a "), std::string::npos) << text;
  EXPECT_NE(text.find("  b "), std::string::npos) << text;
  EXPECT_NE(FormatModels(v1::ListModelsResponse()).find("no model"), std::string::npos);
}

}  // namespace
}  // namespace octo
