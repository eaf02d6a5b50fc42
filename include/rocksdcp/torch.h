// rocksdcp::torch: a LibTorch trainer's module, optimizer and trainer state
// saved into and loaded from rocksdcp, with no glue.
//
// Built only when CMake finds LibTorch (target rocksdcp::torch, a library of
// its own, so that rocksdcp itself never depends on Torch). This header
// declares LibTorch's types and does not include LibTorch's headers: include
// <torch/torch.h> (or the parts you use) yourself.
//
// What is saved, under which fqns. The names are those PyTorch's distributed
// checkpoint gives the same state in Python, so one checkpoint serves both:
//
//   <model>NAME              every parameter and buffer of the module, NAME
//                            as Python's module.state_dict() names it
//                            ("layers.0.weight", "bn.running_mean",
//                            "bn.num_batches_tracked"); a parameter shared by
//                            two modules is saved under both names, as
//                            state_dict() does.
//   <optim>state.P.S         the optimizer's state S of parameter P, keyed by
//                            P's first name in named_parameters() order,
//                            never by address: "exp_avg", "exp_avg_sq",
//                            "max_exp_avg_sq" (Adam, AdamW), "momentum_buffer"
//                            (SGD), "square_avg", "momentum_buffer",
//                            "grad_avg" (RMSprop), "sum" (Adagrad), as
//                            tensors shaped like P; and "step" as a 0-d
//                            float32 tensor, as Python keeps it (LibTorch
//                            keeps an int64).
//   <optim>param_groups.P.K  hyperparameter K of P's param group: every key
//                            Python's optimizer of the kind has (torch 2.x),
//                            each as rocksdcp's Python planner saves its
//                            value. LibTorch's option fields as 0-d float64
//                            or bool tensors ("lr", "eps", "weight_decay",
//                            "amsgrad", ...), and Adam's and AdamW's "betas"
//                            as one 1-d float64 tensor of 2 (Python's
//                            tuple). Adam and AdamW also record
//                            "decoupled_weight_decay" (false and true), as
//                            Python's Adam does, so that one never loads as
//                            the other. The options Python's optimizers have
//                            and LibTorch's lack, as LibTorch behaves:
//                            "maximize", "capturable", "differentiable"
//                            false, as 0-d bool tensors, and "foreach",
//                            "fused" None, as bytes "rocksdcp-json:null"
//                            (rocksdcp's plain-data encoding), each for the
//                            kinds whose Python optimizer has it.
//   <trainer>step            TrainerState::step, a 0-d int64 tensor.
//   <trainer>rng_state       the CPU generator's state, a uint8 tensor: what
//                            Python's torch.get_rng_state() returns.
//   <trainer>extra.KEY       TrainerState::extra[KEY], bytes.
//
// <model>, <optim> and <trainer> are TorchOptions' prefixes ("model.",
// "optim.", "trainer." by default). Nothing is pickled: Python reads every
// item without unpickling.
//
// Python. These are the names torch 2.x's DCP gives
// get_state_dict(model, optimizer, options=StateDictOptions(
// flatten_optimizer_state_dict=True)) saved as {"model": ..., "optim": ...}
// (a Python module with the same attributes names its parameters as
// LibTorch's does). With rocksdcp.torch.DefaultSavePlanner and
// DefaultLoadPlanner, such a checkpoint loads into LibTorch, and LibTorch's
// into torch 2.x's set_state_dict. Load takes each hyperparameter in any
// encoding that planner gives Python's value: a number as a float64,
// float32 or int64 (Python's int 0) tensor, a bool as a bool tensor or
// rocksdcp-json true/false; betas also as "betas.0" and "betas.1", as
// rocksdcp saved it before. The keys only Python has are optional: foreach
// and fused (None, true or false: they pick one of Python's
// implementations) are ignored; maximize, capturable and differentiable
// must be false, else InvalidArgument names the fqn and what LibTorch's
// optimizers lack. A hyperparameter that torch's own DefaultSavePlanner
// saved (a pickle) is InvalidArgument naming its fqn: save with
// rocksdcp.torch.DefaultSavePlanner.
//
// Example: a trainer that resumes, then saves every 100 steps.
//   auto model = std::make_shared<Net>();
//   torch::optim::AdamW adamw(model->parameters());
//   rocksdcp::torch::TrainerState trainer;
//   rocksdcp::torch::Trainer parts{model.get(), &adamw, &trainer};
//   ROCKSDCP_ASSIGN_OR_RETURN(auto store, rocksdcp::Store::Open(dir));
//   ROCKSDCP_ASSIGN_OR_RETURN(auto reader, store->NewReader());
//   ROCKSDCP_RETURN_IF_ERROR(rocksdcp::torch::Load(
//       parts, *reader, {.checkpoint_id = "step-100"}));
//   ... train; trainer.step = step ...
//   ROCKSDCP_ASSIGN_OR_RETURN(auto writer, store->NewWriter());
//   ROCKSDCP_RETURN_IF_ERROR(rocksdcp::torch::Save(
//       parts, *writer, {.checkpoint_id = "step-200"}).status());
// For a save in the background, hand MakeStateDict(parts)'s dict() to an
// AsyncCheckpointer (async_checkpoint.h).
//
// Tensors: CPU tensors of every LibTorch dtype rocksdcp has (every one but
// the quantized ones), with any strides. A tensor on another device, a
// sparse, quantized or lazily conjugated tensor is refused with an error
// naming its fqn. Nothing is copied: a save reads the module's and
// optimizer's memory in place, and a load writes into it in place.
//
// Errors before bytes. Load first reads the checkpoint's metadata and its
// small items (hyperparameters, steps, trainer state), and checks all of it
// against the module and optimizer: missing and unexpected fqns, shapes,
// dtypes, the optimizer's kind, its hyperparameters' values and its param
// group layout. Every mismatch is
// reported in one error naming each fqn, and then nothing has changed: no
// byte of the module or optimizer was written. Only then are the tensors
// read. If that later read fails (a corrupt piece, a disk error), the error
// says so and the module and optimizer are in between: each tensor holds
// the checkpoint's values, its old values, or a mix of both; optimizer
// state that the load created for a fresh optimizer is removed again, and
// no hyperparameter, step, RNG state or TrainerState is changed. Load a
// good checkpoint into them before training on.
//
// Note: this is namespace rocksdcp::torch. In code that says `using
// namespace rocksdcp;`, write LibTorch's namespace as ::torch.
//
// Thread safety: the functions are reentrant. A Save or Load reads or
// writes the module's and optimizer's tensors: don't train on them
// meanwhile. LibTorch's default CPU generator is process-wide: Load sets it.

#ifndef ROCKSDCP_TORCH_H_
#define ROCKSDCP_TORCH_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "rocksdcp/checkpoint.h"
#include "rocksdcp/metadata.h"
#include "rocksdcp/state_dict.h"
#include "rocksdcp/status.h"
#include "rocksdcp/storage.h"
#include "rocksdcp/tensor.h"

// LibTorch's types, declared as LibTorch defines them, 1.13 (Debian's) and
// 2.x (the one inside PyPI's torch wheel) alike.
namespace at {
class Tensor;
}  // namespace at
namespace c10 {
enum class ScalarType : int8_t;
}  // namespace c10
namespace torch::nn {
class Module;
}  // namespace torch::nn
namespace torch::optim {
class Optimizer;
}  // namespace torch::optim

namespace rocksdcp::torch {

// ---- Tensors ----

// rocksdcp's dtype of a LibTorch scalar type: every one rocksdcp has a
// dtype for (ComplexHalf is kComplex32). InvalidArgument names the others:
// the quantized ones, and LibTorch 2.x's bit and sub-byte types.
Result<DType> DTypeOf(c10::ScalarType type);

// LibTorch's scalar type of a dtype. InvalidArgument for the dtypes the
// LibTorch it was built against lacks (1.13: the float8 family, uint16,
// uint32, uint64; 2.7 and later: none).
Result<c10::ScalarType> ScalarTypeOf(DType dtype);

// A view of `tensor`'s own memory, its sizes and strides as they are (a
// transposed or sliced tensor is viewed as is), to save from. The tensor
// must be defined, on the CPU, strided (not sparse or mkldnn), not
// quantized, and without a lazy conjugate or negative bit; otherwise
// InvalidArgument names `fqn` and says what is wrong.
// REQUIRES: `tensor`'s storage outlives the view.
Result<TensorView> ViewOf(const at::Tensor& tensor, std::string_view fqn);

// ViewOf, to load into: also refuses a tensor whose elements overlap in
// memory (a stride of 0, as expand() makes), since one element could not
// hold two loaded values.
Result<TensorView> MutableViewOf(const at::Tensor& tensor,
                                 std::string_view fqn);

// ---- A trainer's state ----

// What a trainer keeps beside its module and optimizer.
struct TrainerState {
  // The training step (or any counter), saved as <trainer>step.
  int64_t step = 0;
  // The trainer's own bytes (a data loader's position, a config), saved as
  // byte items <trainer>extra.KEY. Load replaces the map with every such
  // item of the checkpoint.
  std::map<std::string, std::string> extra;
};

// The objects a save reads and a load writes. Only `module` is required.
struct Trainer {
  // Its parameters and buffers.
  ::torch::nn::Module* module = nullptr;
  // Its per-parameter state and param groups, when set: Adam, AdamW, SGD,
  // RMSprop or Adagrad (or a subclass of one), over parameters of `module`.
  // Other kinds are NotSupported.
  ::torch::optim::Optimizer* optimizer = nullptr;
  // The step, the extra bytes and, with TorchOptions::rng_state, the CPU
  // generator's state, when set.
  TrainerState* state = nullptr;
};

struct TorchOptions {
  // ---- Behavior ----

  // Prefixes of the module's, the optimizer's and the trainer's fqns. The
  // defaults match PyTorch's dcp.save({"model": ..., "optim": ...}), which
  // flattens nested dicts with dots. A module prefix of "" gives exactly
  // module.state_dict()'s names; then no module fqn may start with the
  // other prefixes. The optimizer's and trainer's prefixes must not be
  // empty, and no prefix may start another.
  // Default: "model.", "optim.", "trainer."
  std::string model_prefix = "model.";
  std::string optimizer_prefix = "optim.";
  std::string trainer_prefix = "trainer.";

  // With Trainer::state set, save the CPU generator's state
  // (at::detail::getDefaultCPUGenerator(), which dropout, randn and
  // randperm draw from) and restore it on load, so that a resumed run
  // draws the same numbers. A load then requires it in the checkpoint.
  // Default: true
  bool rng_state = true;
};

// The state dict of a Trainer, to hand to Save() of checkpoint.h or to an
// AsyncCheckpointer: views of the module's and optimizer's tensors, and
// the small tensors it owns (each step as float32, the hyperparameters, the
// trainer's step and RNG state, taken when it was made).
//
// REQUIRES: the module and optimizer outlive it, and are not stepped
// while a save reads it: an AsyncCheckpointer's Save returns once it has
// copied it. Not thread-safe; movable, not copyable.
class TorchStateDict {
 public:
  TorchStateDict(TorchStateDict&&) noexcept;
  TorchStateDict& operator=(TorchStateDict&&) noexcept;
  ~TorchStateDict();

  const StateDict& dict() const;

 private:
  friend Result<TorchStateDict> MakeStateDict(const Trainer&,
                                              const TorchOptions&);
  struct Rep;
  explicit TorchStateDict(std::unique_ptr<Rep> rep);
  std::unique_ptr<Rep> rep_;
};

// The state dict of `trainer`, named as the header comment says.
// InvalidArgument names the fqn of a tensor that can't be saved, an
// optimizer parameter that is not a parameter of the module, a parameter
// in two param groups, a step that float32 can't hold exactly (over 2^24),
// or prefixes that clash.
Result<TorchStateDict> MakeStateDict(const Trainer& trainer,
                                     const TorchOptions& options = {});

// Saves `trainer` as checkpoint save_options.checkpoint_id: MakeStateDict,
// then Save() of checkpoint.h.
Result<Metadata> Save(const Trainer& trainer, StorageWriter& writer,
                      const SaveOptions& save_options,
                      const TorchOptions& options = {});

// Loads checkpoint load_options.checkpoint_id into `trainer`, in place and
// under a NoGradGuard: the module's tensors, the optimizer's state (created
// for a parameter that has none yet, as a fresh optimizer's first step
// would; removed for a parameter that has none in the checkpoint, as
// Python's load_state_dict does), its param groups' hyperparameters, and
// the trainer state. Two phases, each a Load() of checkpoint.h: first the
// metadata and the small items, checked against `trainer` (see "Errors
// before bytes" above); then the tensors, if the checkpoint is still the
// same save (else Aborted: it was overwritten meanwhile, and nothing was
// written). load_options.planner must be null. With
// load_options.allow_partial_load, module fqns the checkpoint lacks are
// skipped rather than reported.
Status Load(const Trainer& trainer, StorageReader& reader,
            const LoadOptions& load_options, const TorchOptions& options = {});

}  // namespace rocksdcp::torch

#endif  // ROCKSDCP_TORCH_H_
