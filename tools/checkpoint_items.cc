#include "checkpoint_items.h"

#include <utility>

namespace rocksdcp::tools {

std::string Quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

std::string ShapeText(const std::vector<int64_t>& size) {
  std::string s;
  for (int64_t d : size) s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "[" + s + "]";
}

std::string Where(const Store& store, std::string_view id) {
  return "store " + Quoted(store.path()) + ", checkpoint " + Quoted(id);
}

std::optional<uint64_t> TensorBytes(DType dtype,
                                    const std::vector<int64_t>& size) {
  uint64_t n = DTypeSize(dtype);
  for (int64_t d : size) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) {
      return std::nullopt;
    }
  }
  return n;
}

Result<OpenCheckpoint> OpenForRead(Store& store, const std::string& id) {
  OpenCheckpoint c;
  ROCKSDCP_ASSIGN_OR_RETURN(c.reader, store.NewReader());
  Status s = c.reader->Reset(id);
  if (s.ok()) {
    auto md = c.reader->ReadMetadata();
    if (md.ok()) {
      c.metadata = std::move(md).value();
    } else {
      s = md.status();
    }
  }
  if (!s.ok()) return s.WithContext(Where(store, id));
  return c;
}

}  // namespace rocksdcp::tools
