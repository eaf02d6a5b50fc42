// What rocksdcp::torch's Load checks before it writes a byte: the
// checkpoint's metadata against the trainer (missing and unexpected fqns,
// dtypes, shapes, the optimizer's kind), then the values of its small items
// (hyperparameters and the encodings Python saves them in, param group
// layout, conditional state, steps, RNG state). Each check returns every
// problem it finds, one line each, so that one error can name them all.

#ifndef ROCKSDCP_SRC_TORCH_LOAD_CHECK_H_
#define ROCKSDCP_SRC_TORCH_LOAD_CHECK_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rocksdcp/metadata.h"
#include "rocksdcp/state_dict.h"
#include "rocksdcp/status.h"
#include "rocksdcp/torch.h"
#include "torch/optimizer_kind.h"
#include "torch/trainer_parts.h"

namespace rocksdcp::torch {

// What the trainer takes from one item of the checkpoint.
struct Expected {
  bool is_bytes = false;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> size;
  // A missing required item is a problem; a missing optional one is not
  // read (optimizer state, which a parameter gets at its first step).
  bool required = true;
  // A hyperparameter (or a legacy element of a pair): then dtype and size
  // are how rocksdcp saves it, and the checkpoint may hold any encoding
  // Python's planners give it (a float64, float32 or int64 number, bytes),
  // which CheckValues reads. Its presence is checked per field
  // (CheckMetadata), so `required` is false.
  const HyperField* hyper = nullptr;
};

// The trainer as Load sees it.
struct LoadTarget {
  Trainer trainer;
  TorchOptions options;
  bool allow_partial_load = false;
  std::vector<ModuleTensor> module;
  // With an optimizer:
  const OptimizerKind* kind = nullptr;
  std::vector<OptimizerParam> params;
  // Every fqn the trainer may read, and what it must be.
  std::map<std::string, Expected> expected;
};

// Lists the trainer's parts and what each expects. InvalidArgument names a
// tensor that can't be loaded into (ViewOf, MutableViewOf), or what
// ListOptimizer refuses.
Result<LoadTarget> MakeLoadTarget(const Trainer& trainer,
                                  const TorchOptions& options,
                                  bool allow_partial_load);

// The metadata's mismatches with `target`.
std::vector<std::string> CheckMetadata(const LoadTarget& target,
                                       const Metadata& metadata);

// The small items phase 1 read: hyperparameters, steps, the trainer's
// step, RNG state and extras.
struct SmallItems {
  // The tensors, by fqn.
  std::map<std::string, ::torch::Tensor> tensors;
  // What phase 1 loads into: views of `tensors`, and the byte items
  // (hyperparameters saved as bytes, the trainer's extras).
  StateDict dict;
};

// The mismatches the small items' values show: hyperparameters that are
// pickles or not the values LibTorch's optimizer can take (maximize true,
// ...), param groups that the checkpoint splits, an Adam checkpoint for
// AdamW (or the other way), conditional state (max_exp_avg_sq without
// amsgrad...), steps that are no whole number, an RNG state that LibTorch
// refuses.
std::vector<std::string> CheckValues(const LoadTarget& target,
                                     const Metadata& metadata,
                                     const SmallItems& small);

// The value of hyperparameter `field` of `param` as the checkpoint holds
// it, in whichever encoding; nullopt when it is absent or not a value of
// `field`'s type (CheckValues reports it).
std::optional<HyperNumbers> HyperValue(const LoadTarget& target,
                                       const SmallItems& small,
                                       const std::string& param,
                                       const HyperField& field);

// True if the checkpoint holds state (any tensor or step) of `param`.
bool HasState(const LoadTarget& target, const Metadata& metadata,
              const std::string& param);

// The error for `problems`: NotFound when every one is a missing item,
// else InvalidArgument.
Status Mismatch(const std::vector<std::string>& problems);

}  // namespace rocksdcp::torch

#endif  // ROCKSDCP_SRC_TORCH_LOAD_CHECK_H_
