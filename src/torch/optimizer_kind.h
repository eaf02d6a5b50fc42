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

// What a hyperparameter is to rocksdcp::torch: how it is saved, and what
// Load does with it.
enum class HyperRole {
  // A field of LibTorch's options: saved, required in a checkpoint, set by
  // Load.
  kOption,
  // No option of LibTorch's, but it tells two kinds apart
  // (decoupled_weight_decay: Adam false, AdamW true). Saved; optional in a
  // checkpoint (older PyTorch lacks it); when present it must equal get().
  kKindMark,
  // An option of Python's optimizer that LibTorch's lacks, and behaves as
  // if false (maximize, capturable, differentiable). Saved false, so that
  // Python's optimizer finds every key it has; optional in a checkpoint;
  // when present it must be false (`why` says why).
  kPythonFalse,
  // Python's choice of an implementation (foreach, fused): None, True or
  // False, which compute the same. Saved as None; optional in a
  // checkpoint, and ignored.
  kPythonImpl,
};

// How a hyperparameter is saved, in the encodings of rocksdcp's Python
// planner (python/rocksdcp/torch/_planners.py).
enum class HyperType {
  kFloat64,      // A 0-d float64 tensor: a Python float.
  kBool,         // A 0-d bool tensor: a Python bool.
  kFloat64Pair,  // A 1-d float64 tensor of 2: a tuple of two floats (betas).
  kNone,         // Bytes "rocksdcp-json:null": Python's None.
};

// A hyperparameter's value: one number (1 or 0 for a bool), or two for a
// pair.
using HyperNumbers = std::vector<double>;

// rocksdcp's encoding of plain data (python/rocksdcp/torch/_plain.py): the
// marker, and None.
inline constexpr char kPlainPrefix[] = "rocksdcp-json:";
inline constexpr char kPlainNone[] = "rocksdcp-json:null";

// One hyperparameter, saved as <optim>param_groups.<fqn>.<name>.
struct HyperField {
  const char* name;
  HyperRole role;
  HyperType type;
  // Its value in a param group's options; a kKindMark or kPythonFalse
  // ignores them. Null for kPythonImpl.
  HyperNumbers (*get)(const ::torch::optim::OptimizerOptions&);
  // Sets it: kOption only, else null.
  void (*set)(::torch::optim::OptimizerOptions&, const HyperNumbers&);
  // kPythonFalse: why LibTorch's optimizer can't have it true.
  const char* why = nullptr;

  // How many numbers its value has: 2 for a pair, else 1.
  size_t Count() const { return type == HyperType::kFloat64Pair ? 2 : 1; }
  // A pair was saved as two 0-d float64 items before rocksdcp saved it as
  // one, as Python does: NAME.0 and NAME.1. Load still reads them.
  std::string LegacyElement(size_t i) const {
    return std::string(name) + "." + std::to_string(i);
  }
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
  // The field a checkpoint's param_groups name holds: FindHyper, or the
  // pair whose legacy element it is ("betas.0").
  const HyperField* FindSaved(const std::string& name) const;
};

// Every kind rocksdcp::torch saves.
const std::vector<OptimizerKind>& AllKinds();

// The kind of `optimizer` (a subclass counts as its base), or NotSupported
// naming what it is.
Result<const OptimizerKind*> KindOf(const ::torch::optim::Optimizer& optimizer);

// The key of Optimizer::state(), the map LibTorch's optimizers file a
// parameter's state in: the parameter's TensorImpl address, printed as a
// std::string in LibTorch 1.13, the address itself (void*) in LibTorch 2.x.
// Taken from the map's type, so that the adapter follows the LibTorch it is
// built against.
using StateKey = std::remove_cvref_t<
    decltype(std::declval<const ::torch::optim::Optimizer&>()
                 .state())>::key_type;

// The key `param`'s state is filed under.
StateKey StateKeyOf(const ::torch::Tensor& param);

}  // namespace rocksdcp::torch

#endif  // ROCKSDCP_SRC_TORCH_OPTIMIZER_KIND_H_
