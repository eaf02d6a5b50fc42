// The parts of a Trainer as rocksdcp::torch names them: the module's
// tensors, the optimizer's parameters with their fqns, and the fqns of
// everything saved (the grammar is in include/rocksdcp/torch.h). Save and
// Load both walk these, so the two can't name a thing differently.

#ifndef ROCKSDCP_SRC_TORCH_TRAINER_PARTS_H_
#define ROCKSDCP_SRC_TORCH_TRAINER_PARTS_H_

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <string>
#include <utility>
#include <vector>

#include "rocksdcp/status.h"
#include "rocksdcp/torch.h"
#include "torch/optimizer_kind.h"

namespace rocksdcp::torch {

// A module's parameters, then its buffers, as named_parameters() and
// named_buffers() list them (undefined ones left out, as state_dict()
// leaves None out). A tensor registered under two names (a tied weight)
// is listed under both; `first_name` is then false for the later ones.
struct ModuleTensor {
  std::string name;  // Without the prefix: "layers.0.weight".
  ::torch::Tensor tensor;
  bool is_parameter;
  bool first_name;
};
std::vector<ModuleTensor> ListModule(const ::torch::nn::Module& module);

// One parameter of an optimizer, under its first name in the module's
// named_parameters() order.
struct OptimizerParam {
  std::string fqn;  // Without any prefix: "layers.0.weight".
  ::torch::Tensor param;
  size_t group;  // Its param group's index.
};

// The optimizer's parameters, in param group order, each once: a
// parameter listed twice in one group is listed once. InvalidArgument
// names a parameter that is not the module's, one in two param groups, or
// a param group whose options are not `kind`'s.
Result<std::vector<OptimizerParam>> ListOptimizer(
    const ::torch::optim::Optimizer& optimizer, const OptimizerKind& kind,
    const std::vector<ModuleTensor>& module);

// The fqns of the grammar in torch.h.
std::string ModuleFqn(const TorchOptions& o, const std::string& name);
std::string StateFqn(const TorchOptions& o, const std::string& param,
                     const std::string& field);
std::string GroupFqn(const TorchOptions& o, const std::string& param,
                     const std::string& field);
std::string TrainerStepFqn(const TorchOptions& o);
std::string RngStateFqn(const TorchOptions& o);
std::string ExtraPrefix(const TorchOptions& o);

// Which part of a Trainer an fqn belongs to, by prefix; the trainer's and
// the optimizer's prefixes are tried before the module's, which may be "".
enum class Part { kModule, kOptimizer, kTrainer, kNone };
Part PartOf(const TorchOptions& o, const std::string& fqn);

// InvalidArgument unless the prefixes are as TorchOptions requires.
Status CheckPrefixes(const TorchOptions& o);

}  // namespace rocksdcp::torch

#endif  // ROCKSDCP_SRC_TORCH_TRAINER_PARTS_H_
