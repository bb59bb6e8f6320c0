// Several models at once: which loaded model a request runs on, room for
// one more (idle models unloaded, least recently used first), keep_alive
// running out, and unloading by name.
#include <algorithm>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/core/model_name.h"
#include "daemon/core/runtime_impl.h"
#include "storage/bounded_json.h"
#include "storage/byte_size.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

// How often an expired model still in use is looked at again.
constexpr auto kBusyExpiryRecheck = std::chrono::milliseconds(100);
// The longest a model no session holds may take to be let go of (a pass
// ending, a status report, a request between finding it and queueing).
constexpr auto kIdleWait = std::chrono::seconds(2);

}  // namespace

bool RuntimeImpl::Idle(const ModelSlot& slot) { return slot.model.use_count() == 1; }

bool RuntimeImpl::InUse(const ModelSlot& slot) const {
  return std::any_of(sessions_.begin(), sessions_.end(),
                     [&](const auto& entry) { return entry.second->model == slot.model; });
}

bool RuntimeImpl::WaitUntilIdle(const std::string& name, std::unique_lock<std::mutex>& lock) {
  const auto deadline = Clock::now() + kIdleWait;
  while (true) {
    auto it = models_.find(name);
    if (it == models_.end() || InUse(it->second)) return false;
    if (Idle(it->second)) return true;
    if (Clock::now() >= deadline) return false;
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    lock.lock();
  }
}

std::shared_ptr<LoadedModel> RuntimeImpl::DefaultModel() const {
  const ModelSlot* newest = nullptr;
  for (const auto& [name, slot] : models_) {
    if (newest == nullptr || slot.order > newest->order) newest = &slot;
  }
  return newest != nullptr ? newest->model : nullptr;
}

std::shared_ptr<LoadedModel> RuntimeImpl::model() const {
  std::lock_guard<std::mutex> lock(mu_);
  return DefaultModel();
}

RuntimeImpl::ModelSlot* RuntimeImpl::SlotOf(const LoadedModel& model) {
  auto it = models_.find(model.summary().path);
  return it != models_.end() && it->second.model.get() == &model ? &it->second : nullptr;
}

std::string RuntimeImpl::LoadedNames() const {
  std::vector<std::string> names;
  for (const auto& [name, slot] : models_) names.push_back(name);
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

size_t RuntimeImpl::JobsOn(const LoadedModel& model) const {
  return std::count_if(jobs_.begin(), jobs_.end(),
                       [&](const std::shared_ptr<Job>& job) { return job->session().model.get() == &model; });
}

absl::StatusOr<std::shared_ptr<LoadedModel>> RuntimeImpl::ModelFor(const std::string& requested, bool load,
                                                                   const std::optional<absl::Duration>& keep_alive,
                                                                   bool* loaded_now) {
  const std::string name = CanonicalModelName(requested);
  if (loaded_now != nullptr) *loaded_now = false;
  for (int attempt = 0; attempt < 2; ++attempt) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return absl::UnavailableError("octod is shutting down");
      std::shared_ptr<LoadedModel> found = name.empty() ? DefaultModel() : nullptr;
      if (auto it = models_.find(name); it != models_.end()) found = it->second.model;
      if (found != nullptr) {
        ModelSlot& slot = *SlotOf(*found);
        slot.last_used = Clock::now();
        if (keep_alive.has_value() && slot.keep_alive != *keep_alive) {
          slot.keep_alive = *keep_alive;
          keep_alive_changed_ = true;
          work_cv_.notify_all();
        }
        return found;
      }
      if (name.empty()) return absl::FailedPreconditionError("no model is loaded (octo-ctl load NAME)");
      if (!load) {
        return absl::FailedPreconditionError(
            absl::StrCat("model ", QuotePrefix(requested), " is not loaded (loaded: ", LoadedNames(), ")"));
      }
    }
    if (attempt == 0) {
      OCTO_RETURN_IF_ERROR(LoadModel(name, {}).status());
      if (loaded_now != nullptr) *loaded_now = true;
    }
  }
  return absl::UnavailableError(
      absl::StrCat("model '", name, "' was unloaded again to make room for another; send the request again"));
}

absl::StatusOr<ModelSummary> RuntimeImpl::AcquireModel(const std::string& name, bool* loaded_now) {
  OCTO_ASSIGN_OR_RETURN(std::shared_ptr<LoadedModel> m, ModelFor(name, /*load=*/true, std::nullopt, loaded_now));
  std::lock_guard<std::mutex> lock(mu_);
  return Summary(*m);
}

absl::Status RuntimeImpl::SetKeepAlive(const std::string& requested, absl::Duration keep_alive) {
  if (keep_alive < absl::ZeroDuration()) return absl::InvalidArgumentError("keep_alive must not be negative");
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(CanonicalModelName(requested));
  if (it == models_.end()) {
    return absl::NotFoundError(
        absl::StrCat("model ", QuotePrefix(requested), " is not loaded (loaded: ", LoadedNames(), ")"));
  }
  it->second.keep_alive = keep_alive;
  keep_alive_changed_ = true;
  work_cv_.notify_all();
  return absl::OkStatus();
}

void RuntimeImpl::Release(ModelSlot& slot) {
  slot.model.reset();
  slot.draft.reset();
}

RuntimeImpl::ModelSlot RuntimeImpl::TakeModel(const std::string& name) {
  auto it = models_.find(name);
  ModelSlot slot = std::move(it->second);
  models_.erase(it);
  // Its sessions cannot continue on another model.
  for (auto s = sessions_.begin(); s != sessions_.end();) {
    s = s->second->model == slot.model && !s->second->busy ? sessions_.erase(s) : std::next(s);
  }
  DropDrafts(name);
  return slot;
}

RuntimeImpl::Clock::time_point RuntimeImpl::UnloadExpiredModels() {
  std::vector<ModelSlot> expired;  // freed outside mu_
  Clock::time_point next = Clock::time_point::max();
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = Clock::now();
    std::vector<std::string> names;
    for (const auto& [name, slot] : models_) {
      if (slot.keep_alive == absl::InfiniteDuration()) continue;
      const absl::Duration idle = absl::FromChrono(now - slot.last_used);
      if (idle < slot.keep_alive) {
        // At most an hour ahead: a later look computes the rest.
        next = std::min(next, now + absl::ToChronoNanoseconds(std::min(slot.keep_alive - idle, absl::Hours(1))));
      } else if (Idle(slot)) {
        names.push_back(name);
      } else {
        next = std::min(next, now + kBusyExpiryRecheck);  // unloaded once its last holder lets go
      }
    }
    for (const std::string& name : names) {
      Log(absl::StrCat("unloading ", name, ": idle for its keep_alive (", absl::FormatDuration(models_[name].keep_alive),
                       ")"));
      expired.push_back(TakeModel(name));
    }
  }
  return next;
}

absl::Status RuntimeImpl::MakeModelRoom(const std::string& name, const std::vector<uint64_t>& layer_bytes,
                                        ResidencySettings& residency, VramSettings& vram,
                                        std::vector<ModelSlot>* evicted) {
  while (true) {
    ModelSlot victim;
    {
      std::unique_lock<std::mutex> lock(mu_);
      uint64_t others_host = 0, others_vram = 0;
      for (const auto& [other, slot] : models_) {
        others_host += slot.model->residency().Report().held_bytes;
        others_vram += slot.model->device_held_bytes();
      }
      std::string why;
      ResidencySettings host = residency;
      VramSettings device = vram;
      if (models_.size() >= options_.max_loaded_models) {
        why = absl::StrCat(models_.size(), " models are loaded, max_loaded_models");
      } else if (!models_.empty()) {
        // The layer budget is shared: this model gets what the others leave.
        const uint64_t total = configured_residency_.budget();
        const uint64_t left = total > others_host ? total - others_host : 0;
        (host.auto_budget ? host.auto_budget_bytes : host.budget_bytes) = std::min(host.budget(), left);
        if (left == 0) {
          why = absl::StrCat("the loaded models hold the whole layer budget (", FormatByteSize(total), ")");
        } else if (absl::StatusOr<LayerPlan> plan = PlanLayers(layer_bytes, host); !plan.ok()) {
          if (!absl::IsResourceExhausted(plan.status())) return plan.status();
          why = absl::StrCat("the loaded models leave ", FormatByteSize(left), " of the layer budget: ",
                             plan.status().message());
        }
        if (why.empty() && !device.auto_budget && others_vram > 0) {
          const uint64_t total_vram = configured_vram_.budget_bytes;
          const uint64_t left_vram = total_vram > others_vram ? total_vram - others_vram : 0;
          device.budget_bytes = std::min(device.budget_bytes, left_vram);
          if (left_vram == 0) {
            why = absl::StrCat("the loaded models hold the whole VRAM budget (", FormatByteSize(total_vram), ")");
          }
        }
      }
      if (why.empty()) {
        residency = host;
        vram = device;
        return absl::OkStatus();
      }
      // The least recently used model no session holds.
      const ModelSlot* lru = nullptr;
      for (const auto& [other, slot] : models_) {
        if (!InUse(slot) && (lru == nullptr || slot.last_used < lru->last_used)) lru = &slot;
      }
      const std::string lru_name = lru != nullptr ? lru->from.name : "";
      if (lru == nullptr || !WaitUntilIdle(lru_name, lock)) {
        return absl::UnavailableError(absl::StrCat("no room for model '", name, "': ", why, "; the loaded models (",
                                                   LoadedNames(),
                                                   ") are all in use: send the request again when one is idle"));
      }
      Log(absl::StrCat("unloading ", lru_name, " (least recently used) to make room for ", name, ": ", why));
      victim = TakeModel(lru_name);
    }
    // Its memory goes now, before the next look; where it came from stays,
    // to load it again if this load fails.
    Release(victim);
    evicted->push_back(std::move(victim));
  }
}

void RuntimeImpl::DropDrafts(const std::string& target) {
  std::lock_guard<std::mutex> lock(drafts_mu_);
  const std::string prefix = DraftKey(target, "");
  for (auto it = drafts_.begin(); it != drafts_.end();) {
    it = it->first.starts_with(prefix) ? drafts_.erase(it) : std::next(it);
  }
}

std::string RuntimeImpl::DraftKey(const std::string& target, const std::string& draft) {
  return absl::StrCat(target, "\x1f", draft);
}

absl::Status RuntimeImpl::UnloadModel(const std::string& requested) {
  std::lock_guard<std::mutex> load(load_mu_);
  ModelSlot slot;
  std::string name = CanonicalModelName(requested);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (models_.empty()) return absl::FailedPreconditionError("no model is loaded");
    if (name.empty()) {
      if (models_.size() > 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(models_.size(), " models are loaded (", LoadedNames(), "): name the one to unload"));
      }
      name = models_.begin()->first;
    }
    auto it = models_.find(name);
    if (it == models_.end()) {
      return absl::NotFoundError(
          absl::StrCat("model ", QuotePrefix(requested), " is not loaded (loaded: ", LoadedNames(), ")"));
    }
    if (const size_t jobs = JobsOn(*it->second.model); jobs > 0) {
      return absl::FailedPreconditionError(absl::StrCat(jobs, " generations are running on ", name));
    }
    slot = TakeModel(name);
  }
  Release(slot);  // stops its loader and frees its memory, outside mu_
  Log(absl::StrCat("model unloaded: ", name));
  return absl::OkStatus();
}

}  // namespace octo
