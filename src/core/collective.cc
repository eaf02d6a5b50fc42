#include "rocksdcp/collective.h"

namespace rocksdcp {

Result<std::vector<std::string>> LocalCollective::Gather(std::string message) {
  std::vector<std::string> all;
  all.push_back(std::move(message));
  return all;
}

Result<std::string> LocalCollective::Scatter(
    std::vector<std::string> messages) {
  if (messages.size() != 1) {
    return Status::InvalidArgument(
        "LocalCollective::Scatter needs exactly 1 "
        "message, got " +
        std::to_string(messages.size()));
  }
  return std::move(messages[0]);
}

Result<std::string> LocalCollective::Broadcast(std::string message) {
  return message;
}

Result<std::vector<std::string>> LocalCollective::AllGather(
    std::string message) {
  return Gather(std::move(message));
}

}  // namespace rocksdcp
