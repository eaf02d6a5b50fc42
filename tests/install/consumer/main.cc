// An outside project's first program against an installed rocksdcp: save a
// tiny state dict (a float tensor and a byte item) into a store in a
// temporary directory, load it back into fresh memory and compare. Exits
// non-zero, printing the Status, on any failure.

#include <rocksdcp/rocksdcp.h>
#include <stdlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <variant>
#include <vector>

namespace {

rocksdcp::Status SaveAndLoad(const std::string& path) {
  ROCKSDCP_ASSIGN_OR_RETURN(auto store, rocksdcp::Store::Open(path));

  std::vector<float> weight = {0.5f, -1.25f, 3.0f, 1e-3f, -0.0f, 42.0f};
  const std::string step = "step=7";
  rocksdcp::StateDict saved;
  saved["linear.weight"] = rocksdcp::TensorView::Contiguous(
      rocksdcp::DType::kFloat32, {2, 3}, weight.data());
  saved["optimizer/step"] = step;

  ROCKSDCP_ASSIGN_OR_RETURN(auto writer, store->NewWriter());
  ROCKSDCP_RETURN_IF_ERROR(
      rocksdcp::Save(saved, *writer, {.checkpoint_id = "step-7"}).status());

  std::vector<float> loaded(weight.size(), 0.0f);
  rocksdcp::StateDict dict;
  dict["linear.weight"] = rocksdcp::TensorView::Contiguous(
      rocksdcp::DType::kFloat32, {2, 3}, loaded.data());
  dict["optimizer/step"] = std::string();

  ROCKSDCP_ASSIGN_OR_RETURN(auto reader, store->NewReader());
  ROCKSDCP_RETURN_IF_ERROR(
      rocksdcp::Load(&dict, *reader, {.checkpoint_id = "step-7"}));

  // Compared as bytes, so that -0.0f must come back as -0.0f.
  if (std::memcmp(loaded.data(), weight.data(),
                  weight.size() * sizeof(float)) != 0) {
    return rocksdcp::Status::Corruption("linear.weight came back different");
  }
  const auto* got = std::get_if<std::string>(&dict["optimizer/step"]);
  if (got == nullptr || *got != step) {
    return rocksdcp::Status::Corruption("optimizer/step came back different");
  }
  ROCKSDCP_ASSIGN_OR_RETURN(auto list, store->List());
  if (list.size() != 1 || list[0].id != "step-7") {
    return rocksdcp::Status::Corruption("the store does not list step-7");
  }
  return rocksdcp::Status::OK();
}

}  // namespace

int main() {
  namespace fs = std::filesystem;
  const char* tmp = getenv("TMPDIR");
  std::string dir = (fs::path(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") /
                     "rocksdcp_consumer.XXXXXX")
                        .string();
  if (mkdtemp(dir.data()) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const rocksdcp::Status s = SaveAndLoad(dir + "/store");
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (!s.ok()) {
    std::fprintf(stderr, "consumer: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf(
      "consumer: saved and loaded step-7 through the installed "
      "rocksdcp: OK\n");
  return 0;
}
