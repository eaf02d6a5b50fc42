#include "torch/trainer_parts.h"

#include <map>
#include <unordered_map>
#include <unordered_set>

#include "util/text.h"

namespace rocksdcp::torch {

using util::Quote;
using util::ShapeString;

std::vector<ModuleTensor> ListModule(const ::torch::nn::Module& module) {
  std::vector<ModuleTensor> out;
  std::unordered_set<const c10::TensorImpl*> seen;
  auto add = [&](const auto& named, bool is_parameter) {
    for (const auto& item : named) {
      const ::torch::Tensor& t = item.value();
      if (!t.defined()) continue;
      const bool first = seen.insert(t.unsafeGetTensorImpl()).second;
      out.push_back({item.key(), t, is_parameter, first});
    }
  };
  add(module.named_parameters(/*recurse=*/true), true);
  add(module.named_buffers(/*recurse=*/true), false);
  return out;
}

Result<std::vector<OptimizerParam>> ListOptimizer(
    const ::torch::optim::Optimizer& optimizer, const OptimizerKind& kind,
    const std::vector<ModuleTensor>& module) {
  std::unordered_map<const c10::TensorImpl*, const std::string*> names;
  for (const ModuleTensor& m : module) {
    if (m.is_parameter && m.first_name) {
      names.emplace(m.tensor.unsafeGetTensorImpl(), &m.name);
    }
  }
  std::vector<OptimizerParam> out;
  std::unordered_map<const c10::TensorImpl*, size_t> group_of;
  const auto& groups = optimizer.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    if (!groups[g].has_options() || !kind.options_are(groups[g].options())) {
      return Status::InvalidArgument(
          "param group " + std::to_string(g) + " of the " + kind.name +
          " optimizer has no " + kind.name + " options");
    }
    const std::vector<::torch::Tensor>& params = groups[g].params();
    for (size_t i = 0; i < params.size(); ++i) {
      const c10::TensorImpl* impl = params[i].unsafeGetTensorImpl();
      auto name = names.find(impl);
      if (name == names.end()) {
        return Status::InvalidArgument(
            "parameter " + std::to_string(i) + " of param group " +
            std::to_string(g) + " of the optimizer (shape " +
            ShapeString(params[i].sizes().vec()) +
            ") is not a parameter of the module, so it has no name to "
            "save its state under");
      }
      auto [it, fresh] = group_of.emplace(impl, g);
      if (!fresh) {
        if (it->second == g) continue;  // Listed twice in one group.
        return Status::InvalidArgument(
            "parameter " + Quote(*name->second) + " is in param groups " +
            std::to_string(it->second) + " and " + std::to_string(g) +
            " of the optimizer; a parameter belongs to one group");
      }
      out.push_back({*name->second, params[i], g});
    }
  }
  return out;
}

std::string ModuleFqn(const TorchOptions& o, const std::string& name) {
  return o.model_prefix + name;
}
std::string StateFqn(const TorchOptions& o, const std::string& param,
                     const std::string& field) {
  return o.optimizer_prefix + "state." + param + "." + field;
}
std::string GroupFqn(const TorchOptions& o, const std::string& param,
                     const std::string& field) {
  return o.optimizer_prefix + "param_groups." + param + "." + field;
}
std::string TrainerStepFqn(const TorchOptions& o) {
  return o.trainer_prefix + "step";
}
std::string RngStateFqn(const TorchOptions& o) {
  return o.trainer_prefix + "rng_state";
}
std::string ExtraPrefix(const TorchOptions& o) {
  return o.trainer_prefix + "extra.";
}

Part PartOf(const TorchOptions& o, const std::string& fqn) {
  auto starts = [&](const std::string& p) { return fqn.rfind(p, 0) == 0; };
  if (starts(o.trainer_prefix)) return Part::kTrainer;
  if (starts(o.optimizer_prefix)) return Part::kOptimizer;
  if (starts(o.model_prefix)) return Part::kModule;
  return Part::kNone;
}

Status CheckPrefixes(const TorchOptions& o) {
  if (o.optimizer_prefix.empty() || o.trainer_prefix.empty()) {
    return Status::InvalidArgument(
        "TorchOptions: optimizer_prefix and trainer_prefix must not be "
        "empty");
  }
  const std::pair<const char*, const std::string*> prefixes[] = {
      {"model_prefix", &o.model_prefix},
      {"optimizer_prefix", &o.optimizer_prefix},
      {"trainer_prefix", &o.trainer_prefix}};
  for (const auto& [a_name, a] : prefixes) {
    for (const auto& [b_name, b] : prefixes) {
      if (a != b && !a->empty() && b->rfind(*a, 0) == 0) {
        return Status::InvalidArgument(
            std::string("TorchOptions: ") + b_name + " " + Quote(*b) +
            " starts with " + a_name + " " + Quote(*a) +
            ", so their fqns could not be told apart");
      }
    }
  }
  return Status::OK();
}

}  // namespace rocksdcp::torch
