#include "torch/torch_fixture.h"

#include <cstring>
#include <utility>
#include <variant>

namespace rocksdcp_test_models {

NetImpl::NetImpl(int64_t width, int64_t depth)
    : bn(register_module("bn", ::torch::nn::BatchNorm1d(width))),
      dropout(register_module("dropout", ::torch::nn::Dropout(0.1))),
      head(register_module("head", ::torch::nn::Linear(width, 1))) {
  for (int64_t i = 0; i < depth; ++i) {
    if (i > 0) layers->push_back(::torch::nn::ReLU());
    layers->push_back(::torch::nn::Linear(width, width));
  }
  register_module("layers", layers);
}

::torch::Tensor NetImpl::forward(::torch::Tensor x) {
  return head(dropout(bn(layers->forward(x))));
}

}  // namespace rocksdcp_test_models

namespace rocksdcp::testing {

void TrainStep(Net& net, ::torch::optim::Optimizer& optimizer, uint64_t seed) {
  // Data and dropout masks are a function of the seed.
  ::torch::manual_seed(seed);
  const int64_t width = net->head->weight.size(1);
  ::torch::Tensor x = ::torch::randn({16, width});
  ::torch::Tensor y = ::torch::randn({16, 1});
  net->train();
  optimizer.zero_grad();
  ::torch::Tensor loss = ::torch::mse_loss(net->forward(x), y);
  loss.backward();
  optimizer.step();
}

::testing::AssertionResult BitEqual(const ::torch::Tensor& a,
                                    const ::torch::Tensor& b) {
  if (!a.defined() || !b.defined()) {
    return a.defined() == b.defined()
               ? ::testing::AssertionSuccess()
               : ::testing::AssertionFailure() << "one tensor is undefined";
  }
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) {
    return ::testing::AssertionFailure()
           << a.scalar_type() << a.sizes() << " vs " << b.scalar_type()
           << b.sizes();
  }
  ::torch::Tensor ca = a.contiguous(), cb = b.contiguous();
  if (std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) != 0) {
    return ::testing::AssertionFailure() << "bytes differ";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult SameModuleState(const ::torch::nn::Module& a,
                                           const ::torch::nn::Module& b) {
  for (bool params : {true, false}) {
    auto na = params ? a.named_parameters() : a.named_buffers();
    auto nb = params ? b.named_parameters() : b.named_buffers();
    if (na.keys() != nb.keys()) {
      return ::testing::AssertionFailure() << "different names";
    }
    for (const auto& item : na) {
      if (auto r = BitEqual(item.value(), nb[item.key()]); !r) {
        return r << " at " << item.key();
      }
    }
  }
  return ::testing::AssertionSuccess();
}

Result<Metadata> TorchStoreTest::SaveTrainer(
    const torch::Trainer& trainer, const std::string& id,
    const torch::TorchOptions& options) {
  ROCKSDCP_RETURN_IF_ERROR(NeedStore());
  ROCKSDCP_ASSIGN_OR_RETURN(auto writer,
                            store_->NewWriter({.overwrite = true}));
  return torch::Save(trainer, *writer, {.checkpoint_id = id}, options);
}

Status TorchStoreTest::LoadTrainer(const torch::Trainer& trainer,
                                   const std::string& id,
                                   const torch::TorchOptions& options,
                                   bool allow_partial_load) {
  ROCKSDCP_RETURN_IF_ERROR(NeedStore());
  ROCKSDCP_ASSIGN_OR_RETURN(auto reader, store_->NewReader());
  return torch::Load(
      trainer, *reader,
      {.checkpoint_id = id, .allow_partial_load = allow_partial_load}, options);
}

std::set<std::string> TorchStoreTest::Fqns(const std::string& id) {
  std::set<std::string> fqns;
  auto reader = store_->NewReader();
  EXPECT_OK(reader);
  if (!reader.ok()) return fqns;
  EXPECT_OK((*reader)->Reset(id));
  auto metadata = (*reader)->ReadMetadata();
  EXPECT_OK(metadata);
  if (!metadata.ok()) return fqns;
  for (const auto& [fqn, item] : metadata->state_dict_metadata) {
    fqns.insert(fqn);
  }
  return fqns;
}

std::string TorchStoreTest::Describe(const std::string& id,
                                     const std::string& fqn) {
  auto reader = store_->NewReader();
  EXPECT_OK(reader);
  if (!reader.ok()) return "";
  EXPECT_OK((*reader)->Reset(id));
  auto metadata = (*reader)->ReadMetadata();
  if (!metadata.ok()) return metadata.status().ToString();
  auto it = metadata->state_dict_metadata.find(fqn);
  if (it == metadata->state_dict_metadata.end()) return "absent";
  if (std::holds_alternative<BytesStorageMetadata>(it->second)) return "bytes";
  const auto& t = std::get<TensorStorageMetadata>(it->second);
  std::string shape;
  for (int64_t s : t.size)
    shape += (shape.empty() ? "" : ", ") + std::to_string(s);
  return std::string(DTypeName(t.properties.dtype)) + " [" + shape + "]";
}

Result<Metadata> TorchStoreTest::SaveEdited(
    const torch::Trainer& trainer, const std::string& id,
    const std::function<void(StateDict&)>& edit) {
  ROCKSDCP_ASSIGN_OR_RETURN(torch::TorchStateDict made,
                            torch::MakeStateDict(trainer));
  StateDict dict = made.dict();
  edit(dict);
  ROCKSDCP_RETURN_IF_ERROR(NeedStore());
  ROCKSDCP_ASSIGN_OR_RETURN(auto writer,
                            store_->NewWriter({.overwrite = true}));
  return Save(dict, *writer, {.checkpoint_id = id});
}

TensorView TorchStoreTest::Keep(::torch::Tensor t) {
  Result<TensorView> view = torch::ViewOf(t, "kept");
  EXPECT_OK(view);
  kept_.push_back(std::move(t));
  return view.ok() ? *view : TensorView();
}

::torch::Tensor TorchStoreTest::ReadTensor(const std::string& id,
                                           const std::string& fqn) {
  auto reader = store_->NewReader();
  EXPECT_OK(reader);
  if (!reader.ok()) return {};
  EXPECT_OK((*reader)->Reset(id));
  auto metadata = (*reader)->ReadMetadata();
  EXPECT_OK(metadata);
  if (!metadata.ok()) return {};
  auto it = metadata->state_dict_metadata.find(fqn);
  if (it == metadata->state_dict_metadata.end()) return {};
  const auto* t = std::get_if<TensorStorageMetadata>(&it->second);
  if (t == nullptr) return {};
  auto type = torch::ScalarTypeOf(t->properties.dtype);
  EXPECT_OK(type);
  if (!type.ok()) return {};
  ::torch::Tensor out = ::torch::empty(t->size, *type);
  auto view = torch::MutableViewOf(out, fqn);
  EXPECT_OK(view);
  if (!view.ok()) return {};
  StateDict sd{{fqn, *view}};
  EXPECT_OK(LoadDict(&sd, id, /*allow_partial_load=*/true));
  return out;
}

std::string TorchStoreTest::ReadBytes(const std::string& id,
                                      const std::string& fqn) {
  StateDict sd{{fqn, std::string()}};
  EXPECT_OK(LoadDict(&sd, id, /*allow_partial_load=*/true));
  return std::get<std::string>(sd.at(fqn));
}

}  // namespace rocksdcp::testing
