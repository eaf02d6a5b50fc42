// An outside LibTorch program against an installed rocksdcp::torch: one
// Adam step on a Linear layer, saved into a store in a temporary directory,
// then loaded into a fresh layer and optimizer; both must then take the
// same next step. Exits non-zero, printing why, on any failure.

#include <rocksdcp/rocksdcp.h>
#include <rocksdcp/torch.h>
#include <stdlib.h>
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>

namespace {

void Step(torch::nn::Linear& layer, torch::optim::Adam& adam) {
  torch::manual_seed(3);
  adam.zero_grad();
  layer->forward(torch::randn({4, 3})).sum().backward();
  adam.step();
}

rocksdcp::Status SaveAndResume(const std::string& path) {
  torch::nn::Linear saved(3, 2), resumed(3, 2);
  torch::optim::Adam adam(saved->parameters(), 0.1);
  torch::optim::Adam fresh(resumed->parameters(), 0.5);
  Step(saved, adam);

  ROCKSDCP_ASSIGN_OR_RETURN(auto store, rocksdcp::Store::Open(path));
  ROCKSDCP_ASSIGN_OR_RETURN(auto writer, store->NewWriter());
  ROCKSDCP_RETURN_IF_ERROR(rocksdcp::torch::Save({saved.get(), &adam}, *writer,
                                                 {.checkpoint_id = "step-1"})
                               .status());
  ROCKSDCP_ASSIGN_OR_RETURN(auto reader, store->NewReader());
  ROCKSDCP_RETURN_IF_ERROR(rocksdcp::torch::Load(
      {resumed.get(), &fresh}, *reader, {.checkpoint_id = "step-1"}));

  Step(saved, adam);
  Step(resumed, fresh);
  if (!torch::equal(saved->weight, resumed->weight) ||
      !torch::equal(saved->bias, resumed->bias)) {
    return rocksdcp::Status::Corruption(
        "the resumed layer trained differently");
  }
  return rocksdcp::Status::OK();
}

}  // namespace

int main() {
  namespace fs = std::filesystem;
  const char* tmp = getenv("TMPDIR");
  std::string dir = (fs::path(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") /
                     "rocksdcp_torch_consumer.XXXXXX")
                        .string();
  if (mkdtemp(dir.data()) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const rocksdcp::Status s = SaveAndResume(dir + "/store");
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (!s.ok()) {
    std::fprintf(stderr, "torch consumer: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf(
      "torch consumer: saved and resumed an Adam step through the installed "
      "rocksdcp::torch: OK\n");
  return 0;
}
