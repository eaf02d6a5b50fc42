// What rocksdcp::torch knows of each LibTorch optimizer it saves: its
// hyperparameters (the fields of its options) and its per-parameter state
// (the tensors and step of its ParamState), as tables that the save and
// load code walk, so that no kind needs code of its own.

#ifndef ROCKSDCP_SRC_TORCH_OPTIMIZER_KIND_H_
#define ROCKSDCP_SRC_TORCH_OPTIMIZER_KIND_H_

#include <torch/optim/optimizer.h>

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "rocksdcp/status.h"

namespace rocksdcp::torch {

// One hyperparameter, saved as <optim>param_groups.<fqn>.<name>: a 0-d
// float64 tensor, or bool.
struct HyperField {
  const char* name;
  bool is_bool;
  // Its value in a param group's options (1 or 0 for a bool).
  double (*get)(const ::torch::optim::OptimizerOptions&);
  // Sets it; null for a field that is no option of LibTorch's but tells
  // two kinds apart (decoupled_weight_decay: Adam false, AdamW true). Such
  // a field is optional in a checkpoint (older PyTorch lacks it); when
  // present, it must equal get().
  void (*set)(::torch::optim::OptimizerOptions&, double);
};

// One tensor of a parameter's state, saved as
// <optim>state.<fqn>.<name>, shaped like the parameter.
struct StateField {
  const char* name;
  // The hyperparameter that makes it exist (amsgrad for max_exp_avg_sq):
  // the optimizer keeps it iff that is nonzero. Null: it always exists.
  const char* exists_if;
  ::torch::Tensor& (*ref)(::torch::optim::OptimizerParamState&);
};

struct OptimizerKind {
  // LibTorch's class name: "Adam", "AdamW", "SGD", "RMSprop", "Adagrad".
  const char* name;
  std::vector<HyperField> hyper;
  std::vector<StateField> state;
  // The parameter's step count, for kinds that keep one (saved as
  // <optim>state.<fqn>.step, a 0-d float32 tensor); null for SGD.
  int64_t& (*step)(::torch::optim::OptimizerParamState&);
  // True if every parameter has state from the optimizer's construction
  // on (Adagrad), so a checkpoint must hold state for each. Otherwise a
  // parameter's state appears at its first step with a gradient.
  bool state_from_start;
  bool (*is)(const ::torch::optim::Optimizer&);
  bool (*options_are)(const ::torch::optim::OptimizerOptions&);
  // A ParamState with no tensors set and step 0.
  std::unique_ptr<::torch::optim::OptimizerParamState> (*new_state)();

  const HyperField* FindHyper(const std::string& name) const;
  const StateField* FindState(const std::string& name) const;
};

// Every kind rocksdcp::torch saves.
const std::vector<OptimizerKind>& AllKinds();

// The kind of `optimizer` (a subclass counts as its base), or NotSupported
// naming what it is.
Result<const OptimizerKind*> KindOf(
    const ::torch::optim::Optimizer& optimizer);

// The key of Optimizer::state(), the map LibTorch's optimizers file a
// parameter's state in: the parameter's TensorImpl address, printed as a
// std::string in LibTorch 1.13, the address itself (void*) in LibTorch 2.x.
// Taken from the map's type, so that the adapter follows the LibTorch it is
// built against.
using StateKey = std::remove_cvref_t<
    decltype(std::declval<const ::torch::optim::Optimizer&>().state())>::key_type;

// The key `param`'s state is filed under.
StateKey StateKeyOf(const ::torch::Tensor& param);

}  // namespace rocksdcp::torch

#endif  // ROCKSDCP_SRC_TORCH_OPTIMIZER_KIND_H_
