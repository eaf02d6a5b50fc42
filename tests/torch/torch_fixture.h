// The LibTorch adapter's tests: a fresh Store per test (StoreTest), helpers
// that save and load a Trainer through rocksdcp::torch, and small real
// modules.

#ifndef ROCKSDCP_TESTS_TORCH_TORCH_FIXTURE_H_
#define ROCKSDCP_TESTS_TORCH_TORCH_FIXTURE_H_

#include <torch/torch.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "rocksdb/store_fixture.h"
#include "rocksdcp/torch.h"

// Outside namespace rocksdcp: LibTorch's macros (TORCH_MODULE) name
// `torch::` unqualified, which inside rocksdcp is rocksdcp::torch.
namespace rocksdcp_test_models {

// Linear layers in a Sequential, a BatchNorm and a dropout: the names
// Python's nn.Module gives the same architecture are "layers.0.weight",
// "bn.running_mean", "bn.num_batches_tracked", ...
struct NetImpl : ::torch::nn::Module {
  explicit NetImpl(int64_t width = 8, int64_t depth = 2);
  ::torch::Tensor forward(::torch::Tensor x);

  ::torch::nn::Sequential layers;
  ::torch::nn::BatchNorm1d bn;
  ::torch::nn::Dropout dropout;
  ::torch::nn::Linear head;
};
TORCH_MODULE(Net);

}  // namespace rocksdcp_test_models

namespace rocksdcp::testing {

using rocksdcp_test_models::Net;

// One training step of `net` with `optimizer` on data drawn from `seed`.
void TrainStep(Net& net, ::torch::optim::Optimizer& optimizer, uint64_t seed);

// Equal dtype, shape and bytes: NaNs and -0.0 compare as stored.
::testing::AssertionResult BitEqual(const ::torch::Tensor& a,
                                    const ::torch::Tensor& b);

// The module's tensors, by name, equal bit for bit in both.
::testing::AssertionResult SameModuleState(const ::torch::nn::Module& a,
                                           const ::torch::nn::Module& b);

class TorchStoreTest : public StoreTest {
 protected:
  Result<Metadata> SaveTrainer(const torch::Trainer& trainer,
                               const std::string& id,
                               const torch::TorchOptions& options = {});
  Status LoadTrainer(const torch::Trainer& trainer, const std::string& id,
                     const torch::TorchOptions& options = {},
                     bool allow_partial_load = false);
  // The fqns checkpoint `id` holds.
  std::set<std::string> Fqns(const std::string& id);
  // What checkpoint `id` holds under `fqn`: "float32 [4, 8]", or "bytes".
  std::string Describe(const std::string& id, const std::string& fqn);

  // Saves `trainer` as `id` as SaveTrainer does, after `edit` changed its
  // state dict: a checkpoint as Python's planners or an earlier rocksdcp
  // wrote it. Tensors that `edit` adds are viewed with Keep().
  Result<Metadata> SaveEdited(const torch::Trainer& trainer,
                              const std::string& id,
                              const std::function<void(StateDict&)>& edit);
  // A view of `t`, which the fixture keeps alive.
  TensorView Keep(::torch::Tensor t);
  // What checkpoint `id` holds under `fqn`: a tensor of its dtype and
  // shape, or bytes (undefined tensor / empty string when it is not one).
  ::torch::Tensor ReadTensor(const std::string& id, const std::string& fqn);
  std::string ReadBytes(const std::string& id, const std::string& fqn);

 private:
  std::vector<::torch::Tensor> kept_;
};

}  // namespace rocksdcp::testing

#endif  // ROCKSDCP_TESTS_TORCH_TORCH_FIXTURE_H_
