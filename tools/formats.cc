#include "formats.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "cli_json.h"

namespace rocksdcp::tools {
namespace {

static_assert(std::endian::native == std::endian::little,
              ".npy and safetensors data are written as in memory: "
              "little-endian hosts only");

// Safetensors' own reader refuses headers past 100 MB.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
// Byte items whose value is not UTF-8 (or could be mistaken for this
// encoding) go into "__metadata__" as kBase64Prefix + base64(value).
constexpr std::string_view kBase64Prefix = "base64:";
constexpr std::string_view kMetadataKey = "__metadata__";

std::string Quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

std::string Where(const Store& store, const std::string& id) {
  return "store " + Quoted(store.path()) + ", checkpoint " + Quoted(id);
}

std::string ErrnoText() { return std::strerror(errno); }

// ---- Files ----

// A file written whole or not at all: removed unless Commit() succeeded.
class OutFile {
 public:
  explicit OutFile(std::string path) : path_(std::move(path)) {}
  ~OutFile() {
    if (f_ != nullptr) std::fclose(f_);
    if (!committed_) std::remove(path_.c_str());
  }
  Status Open() {
    f_ = std::fopen(path_.c_str(), "wb");
    if (f_ == nullptr) {
      return Status::IOError("cannot create " + Quoted(path_) + ": " +
                             ErrnoText());
    }
    return Status::OK();
  }
  Status Write(const void* data, size_t n) {
    if (n != 0 && std::fwrite(data, 1, n, f_) != n) {
      return Status::IOError("cannot write " + Quoted(path_) + ": " +
                             ErrnoText());
    }
    return Status::OK();
  }
  Status Write(std::string_view s) { return Write(s.data(), s.size()); }
  Status Commit() {
    const int rc = std::fclose(f_);
    f_ = nullptr;
    if (rc != 0) {
      return Status::IOError("cannot write " + Quoted(path_) + ": " +
                             ErrnoText());
    }
    committed_ = true;
    return Status::OK();
  }

 private:
  std::string path_;
  FILE* f_ = nullptr;
  bool committed_ = false;
};

// A read-only mapping of a whole file.
class MappedFile {
 public:
  ~MappedFile() {
    if (data_ != nullptr) munmap(data_, size_);
  }
  Status Open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      Status s = Status::IOError("cannot open " + Quoted(path) + ": " +
                                 ErrnoText());
      return errno == ENOENT ? Status::NotFound(s.message()) : s;
    }
    struct stat st;
    Status s;
    if (fstat(fd, &st) != 0) {
      s = Status::IOError("cannot stat " + Quoted(path) + ": " + ErrnoText());
    } else if (st.st_size > 0) {
      size_ = static_cast<size_t>(st.st_size);
      void* p = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        s = Status::IOError("cannot map " + Quoted(path) + ": " + ErrnoText());
        size_ = 0;
      } else {
        data_ = p;
      }
    }
    ::close(fd);
    return s;
  }
  const uint8_t* data() const { return static_cast<const uint8_t*>(data_); }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// ---- Reading items one at a time ----

struct OpenCheckpoint {
  std::unique_ptr<RocksDBStorageReader> reader;
  Metadata metadata;
};

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

// Numel times element size, or nullopt if a size is negative or it
// overflows.
std::optional<uint64_t> ByteSize(DType dtype,
                                 const std::vector<int64_t>& shape) {
  uint64_t n = DTypeSize(dtype);
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > std::numeric_limits<uint64_t>::max() /
                          static_cast<uint64_t>(d)) {
      return std::nullopt;
    }
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

// Loads tensor `fqn` whole, reassembled from its chunks, into `buffer`.
Status LoadTensor(Store& store, const std::string& id, OpenCheckpoint& c,
                  const std::string& fqn, const TensorStorageMetadata& md,
                  std::vector<uint8_t>* buffer) {
  const auto nbytes = ByteSize(md.properties.dtype, md.size);
  if (!nbytes || *nbytes > std::numeric_limits<size_t>::max()) {
    return Status::Corruption(Where(store, id) + ", item " + Quoted(fqn) +
                              ": shape too large");
  }
  buffer->assign(static_cast<size_t>(*nbytes), 0);
  StateDict sd;
  sd[fqn] = TensorView::Contiguous(md.properties.dtype, md.size,
                                   buffer->data());
  LoadOptions options;
  options.checkpoint_id = id;
  options.allow_partial_load = true;
  return Load(&sd, *c.reader, options);
}

Status LoadBytes(const std::string& id, OpenCheckpoint& c,
                 const std::string& fqn, std::string* out) {
  StateDict sd;
  sd[fqn] = std::string();
  LoadOptions options;
  options.checkpoint_id = id;
  options.allow_partial_load = true;
  ROCKSDCP_RETURN_IF_ERROR(Load(&sd, *c.reader, options));
  *out = std::move(std::get<std::string>(sd[fqn]));
  return Status::OK();
}

// ---- .npy ----

std::optional<std::string_view> NpyDescr(DType dtype) {
  switch (dtype) {
    case DType::kBool: return "|b1";
    case DType::kInt8: return "|i1";
    case DType::kUInt8: return "|u1";
    case DType::kInt16: return "<i2";
    case DType::kUInt16: return "<u2";
    case DType::kInt32: return "<i4";
    case DType::kUInt32: return "<u4";
    case DType::kInt64: return "<i8";
    case DType::kUInt64: return "<u8";
    case DType::kFloat16: return "<f2";
    case DType::kFloat32: return "<f4";
    case DType::kFloat64: return "<f8";
    case DType::kComplex64: return "<c8";
    case DType::kComplex128: return "<c16";
    default: return std::nullopt;
  }
}

// The .npy 1.0 preamble: magic, version, header length, then the header
// dict padded with spaces and a newline so that the data starts at a
// multiple of 64 bytes.
// REQUIRES: shape.size() <= kMaxNpyDims, so the header fits its 16 bits.
constexpr size_t kMaxNpyDims = 1000;
std::string NpyPreamble(std::string_view descr,
                        const std::vector<int64_t>& shape) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // (2, 3), but (5,)
  if (shape.size() == 1) dims.pop_back();
  std::string header = "{'descr': '" + std::string(descr) +
                       "', 'fortran_order': False, 'shape': (" + dims +
                       "), }";
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header;
}

// ---- JSON ----

bool IsUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const uint8_t c = static_cast<uint8_t>(s[i]);
    int extra;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      extra = 1, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      extra = 2, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      extra = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (s.size() - i <= static_cast<size_t>(extra)) return false;
    for (int k = 1; k <= extra; ++k) {
      const uint8_t cc = static_cast<uint8_t>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

// REQUIRES: IsUtf8(s).
std::string JsonString(std::string_view s) {
  JsonWriter w;
  w.String(s);
  return w.str();
}

constexpr char kBase64Chars[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string Base64Encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  for (size_t i = 0; i < in.size(); i += 3) {
    uint32_t v = static_cast<uint8_t>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<uint8_t>(in[i + 1]) << 8;
    if (i + 2 < in.size()) v |= static_cast<uint8_t>(in[i + 2]);
    out += kBase64Chars[(v >> 18) & 63];
    out += kBase64Chars[(v >> 12) & 63];
    out += i + 1 < in.size() ? kBase64Chars[(v >> 6) & 63] : '=';
    out += i + 2 < in.size() ? kBase64Chars[v & 63] : '=';
  }
  return out;
}

// Strict: padded, no whitespace, no stray bits.
std::optional<std::string> Base64Decode(std::string_view in) {
  if (in.size() % 4 != 0) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < in.size(); i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char ch = in[i + k];
      const char* p = ch == '\0' ? nullptr : std::strchr(kBase64Chars, ch);
      if (ch == '=' && i + 4 == in.size() && k >= 2) {
        ++pad;
        v <<= 6;
        continue;
      }
      if (p == nullptr || pad > 0) return std::nullopt;
      v = (v << 6) | static_cast<uint32_t>(p - kBase64Chars);
    }
    if ((pad == 2 && (v & 0xffff) != 0) || (pad == 1 && (v & 0xff) != 0)) {
      return std::nullopt;
    }
    out += static_cast<char>(v >> 16);
    if (pad < 2) out += static_cast<char>((v >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(v & 0xff);
  }
  return out;
}

// A JSON value; objects keep their members in file order.
struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  bool boolean = false;
  std::optional<uint64_t> integer;  // Set for non-negative integers only.
  std::string string;
  std::vector<Json> array;
  std::vector<std::pair<std::string, Json>> object;
};

// A strict RFC 8259 parser: no comments, no trailing commas, no duplicate
// keys, strings valid UTF-8, nesting bounded.
class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : s_(text) {}

  Result<Json> ParseDocument() {
    Json v;
    ROCKSDCP_RETURN_IF_ERROR(Value(&v, 0));
    SkipSpace();
    if (pos_ != s_.size()) return Error("trailing characters");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 64;

  Status Error(std::string_view what) const {
    return Status::Corruption("invalid JSON at byte " + std::to_string(pos_) +
                              " of the header: " + std::string(what));
  }
  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' ||
                                s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Consume(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Status Value(Json* v, int depth) {
    if (depth > kMaxDepth) return Error("nested too deeply");
    SkipSpace();
    if (pos_ == s_.size()) return Error("unexpected end");
    const char c = s_[pos_];
    if (c == '{') return Object(v, depth);
    if (c == '[') return Array(v, depth);
    if (c == '"') {
      v->kind = Json::kString;
      return String(&v->string);
    }
    if (Consume("true")) {
      v->kind = Json::kBool;
      v->boolean = true;
      return Status::OK();
    }
    if (Consume("false")) {
      v->kind = Json::kBool;
      return Status::OK();
    }
    if (Consume("null")) return Status::OK();
    if (c == '-' || (c >= '0' && c <= '9')) return Number(v);
    return Error("unexpected character");
  }

  Status Object(Json* v, int depth) {
    v->kind = Json::kObject;
    ++pos_;
    SkipSpace();
    if (Consume("}")) return Status::OK();
    while (true) {
      SkipSpace();
      if (pos_ == s_.size() || s_[pos_] != '"') return Error("expected a key");
      std::string key;
      ROCKSDCP_RETURN_IF_ERROR(String(&key));
      for (const auto& [k, unused] : v->object) {
        if (k == key) return Error("duplicate key " + JsonString(key));
      }
      SkipSpace();
      if (!Consume(":")) return Error("expected ':'");
      Json member;
      ROCKSDCP_RETURN_IF_ERROR(Value(&member, depth + 1));
      v->object.emplace_back(std::move(key), std::move(member));
      SkipSpace();
      if (Consume("}")) return Status::OK();
      if (!Consume(",")) return Error("expected ',' or '}'");
    }
  }

  Status Array(Json* v, int depth) {
    v->kind = Json::kArray;
    ++pos_;
    SkipSpace();
    if (Consume("]")) return Status::OK();
    while (true) {
      Json element;
      ROCKSDCP_RETURN_IF_ERROR(Value(&element, depth + 1));
      v->array.push_back(std::move(element));
      SkipSpace();
      if (Consume("]")) return Status::OK();
      if (!Consume(",")) return Error("expected ',' or ']'");
    }
  }

  Status Number(Json* v) {
    v->kind = Json::kNumber;
    const size_t start = pos_;
    const bool negative = Consume("-");
    const size_t int_start = pos_;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    const size_t int_end = pos_;
    if (int_end == int_start) return Error("malformed number");
    if (s_[int_start] == '0' && int_end - int_start > 1) {
      return Error("number with a leading zero");
    }
    bool integral = true;
    if (Consume(".")) {
      integral = false;
      const size_t f = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      if (pos_ == f) return Error("malformed number");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      integral = false;
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      const size_t e = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      if (pos_ == e) return Error("malformed number");
    }
    if (!integral || negative) return Status::OK();
    uint64_t n = 0;
    for (size_t i = int_start; i < int_end; ++i) {
      const uint64_t digit = static_cast<uint64_t>(s_[i] - '0');
      if (n > (std::numeric_limits<uint64_t>::max() - digit) / 10) {
        pos_ = start;
        return Error("integer too large");
      }
      n = n * 10 + digit;
    }
    v->integer = n;
    return Status::OK();
  }

  Status Hex4(uint32_t* out) {
    if (s_.size() - pos_ < 4) return Error("truncated \\u escape");
    *out = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_++];
      uint32_t d;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      else return Error("bad \\u escape");
      *out = (*out << 4) | d;
    }
    return Status::OK();
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      *out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *out += static_cast<char>(0xc0 | (cp >> 6));
      *out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      *out += static_cast<char>(0xe0 | (cp >> 12));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      *out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      *out += static_cast<char>(0xf0 | (cp >> 18));
      *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      *out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  Status String(std::string* out) {
    ++pos_;  // The opening quote.
    const size_t start = pos_;
    while (true) {
      if (pos_ == s_.size()) return Error("unterminated string");
      const char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        break;
      }
      if (static_cast<uint8_t>(c) < 0x20) {
        return Error("control character in a string");
      }
      if (c != '\\') {
        *out += c;
        ++pos_;
        continue;
      }
      ++pos_;
      if (pos_ == s_.size()) return Error("unterminated string");
      const char e = s_[pos_++];
      switch (e) {
        case '"': *out += '"'; break;
        case '\\': *out += '\\'; break;
        case '/': *out += '/'; break;
        case 'b': *out += '\b'; break;
        case 'f': *out += '\f'; break;
        case 'n': *out += '\n'; break;
        case 'r': *out += '\r'; break;
        case 't': *out += '\t'; break;
        case 'u': {
          uint32_t cp;
          ROCKSDCP_RETURN_IF_ERROR(Hex4(&cp));
          if (cp >= 0xdc00 && cp <= 0xdfff) return Error("lone surrogate");
          if (cp >= 0xd800 && cp <= 0xdbff) {
            uint32_t low;
            if (!Consume("\\u")) return Error("lone surrogate");
            ROCKSDCP_RETURN_IF_ERROR(Hex4(&low));
            if (low < 0xdc00 || low > 0xdfff) return Error("lone surrogate");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          return Error("bad escape");
      }
    }
    if (!IsUtf8(*out)) {
      pos_ = start;
      return Error("string is not UTF-8");
    }
    return Status::OK();
  }

  std::string_view s_;
  size_t pos_ = 0;
};

// ---- safetensors ----

struct StDType {
  DType dtype;
  std::string_view name;
};
constexpr StDType kStDTypes[] = {
    {DType::kBool, "BOOL"},          {DType::kUInt8, "U8"},
    {DType::kInt8, "I8"},            {DType::kInt16, "I16"},
    {DType::kUInt16, "U16"},         {DType::kFloat16, "F16"},
    {DType::kBFloat16, "BF16"},      {DType::kInt32, "I32"},
    {DType::kUInt32, "U32"},         {DType::kFloat32, "F32"},
    {DType::kFloat64, "F64"},        {DType::kInt64, "I64"},
    {DType::kUInt64, "U64"},         {DType::kFloat8E4M3FN, "F8_E4M3"},
    {DType::kFloat8E5M2, "F8_E5M2"},
};

std::optional<std::string_view> StDTypeName(DType dtype) {
  for (const StDType& d : kStDTypes) {
    if (d.dtype == dtype) return d.name;
  }
  return std::nullopt;
}

std::optional<DType> StDTypeFromName(std::string_view name) {
  for (const StDType& d : kStDTypes) {
    if (d.name == name) return d.dtype;
  }
  return std::nullopt;
}

std::string EncodeMetadataValue(std::string_view value) {
  if (IsUtf8(value) && value.substr(0, kBase64Prefix.size()) != kBase64Prefix) {
    return JsonString(value);
  }
  return JsonString(std::string(kBase64Prefix) + Base64Encode(value));
}

struct ImportTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct ImportHeader {
  std::vector<ImportTensor> tensors;
  std::vector<std::pair<std::string, std::string>> byte_items;
};

Result<ImportTensor> ParseTensorEntry(const std::string& name, const Json& v,
                                      uint64_t data_size) {
  auto bad = [&](const std::string& what) {
    return Status::Corruption("tensor " + JsonString(name) + ": " + what);
  };
  if (v.kind != Json::kObject) return bad("entry is not an object");
  const Json* dtype = nullptr;
  const Json* shape = nullptr;
  const Json* offsets = nullptr;
  for (const auto& [key, member] : v.object) {
    if (key == "dtype") dtype = &member;
    else if (key == "shape") shape = &member;
    else if (key == "data_offsets") offsets = &member;
    else return bad("unknown field " + JsonString(key));
  }
  if (dtype == nullptr || shape == nullptr || offsets == nullptr) {
    return bad("needs \"dtype\", \"shape\" and \"data_offsets\"");
  }
  ImportTensor t;
  t.name = name;
  if (dtype->kind != Json::kString) return bad("dtype is not a string");
  const auto d = StDTypeFromName(dtype->string);
  if (!d) return bad("unknown dtype " + JsonString(dtype->string));
  t.dtype = *d;
  if (shape->kind != Json::kArray) return bad("shape is not an array");
  for (const Json& dim : shape->array) {
    if (!dim.integer || *dim.integer > uint64_t{1} << 62) {
      return bad("shape holds something other than a size");
    }
    t.shape.push_back(static_cast<int64_t>(*dim.integer));
  }
  if (offsets->kind != Json::kArray || offsets->array.size() != 2 ||
      !offsets->array[0].integer || !offsets->array[1].integer) {
    return bad("data_offsets is not [begin, end]");
  }
  t.begin = *offsets->array[0].integer;
  t.end = *offsets->array[1].integer;
  if (t.begin > t.end || t.end > data_size) {
    return bad("data_offsets [" + std::to_string(t.begin) + ", " +
               std::to_string(t.end) + "] outside the data (" +
               std::to_string(data_size) + " bytes)");
  }
  // Zero-size dims aside, the sizes must still multiply out: strides are
  // int64 products of them.
  std::vector<int64_t> nonzero;
  for (int64_t d : t.shape) nonzero.push_back(std::max<int64_t>(d, 1));
  const auto bound = ByteSize(t.dtype, nonzero);
  if (!bound || *bound > uint64_t{1} << 62) return bad("shape too large");
  const auto nbytes = ByteSize(t.dtype, t.shape);
  if (!nbytes || *nbytes != t.end - t.begin) {
    return bad("data_offsets span " + std::to_string(t.end - t.begin) +
               " bytes, dtype and shape need " +
               (nbytes ? std::to_string(*nbytes) : std::string("too many")));
  }
  return t;
}

Result<ImportHeader> ParseHeader(std::string_view json, uint64_t data_size) {
  ROCKSDCP_ASSIGN_OR_RETURN(Json doc, JsonParser(json).ParseDocument());
  if (doc.kind != Json::kObject) {
    return Status::Corruption("header is not a JSON object");
  }
  ImportHeader h;
  for (const auto& [name, v] : doc.object) {
    if (name != kMetadataKey) {
      ROCKSDCP_ASSIGN_OR_RETURN(ImportTensor t,
                                ParseTensorEntry(name, v, data_size));
      h.tensors.push_back(std::move(t));
      continue;
    }
    if (v.kind != Json::kObject) {
      return Status::Corruption("\"__metadata__\" is not an object");
    }
    for (const auto& [key, value] : v.object) {
      if (value.kind != Json::kString) {
        return Status::Corruption("\"__metadata__\" entry " + JsonString(key) +
                                  " is not a string");
      }
      std::string bytes = value.string;
      if (bytes.substr(0, kBase64Prefix.size()) == kBase64Prefix) {
        auto decoded = Base64Decode(
            std::string_view(bytes).substr(kBase64Prefix.size()));
        if (!decoded) {
          return Status::Corruption("\"__metadata__\" entry " +
                                    JsonString(key) + " has bad base64");
        }
        bytes = std::move(*decoded);
      }
      h.byte_items.emplace_back(key, std::move(bytes));
    }
  }
  // As safetensors' own reader: tensors tile the data region exactly, in
  // offset order, without gaps or overlaps.
  std::vector<const ImportTensor*> by_offset;
  for (const ImportTensor& t : h.tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const ImportTensor* a, const ImportTensor* b) {
              return std::pair(a->begin, a->end) < std::pair(b->begin, b->end);
            });
  uint64_t next = 0;
  for (const ImportTensor* t : by_offset) {
    if (t->begin != next) {
      return Status::Corruption(
          "tensor " + JsonString(t->name) + ": data_offsets begin at " +
          std::to_string(t->begin) + ", expected " + std::to_string(next) +
          (t->begin < next ? " (overlaps the previous tensor)" : " (a gap)"));
    }
    next = t->end;
  }
  if (next != data_size) {
    return Status::Corruption("tensors cover " + std::to_string(next) +
                              " bytes of data, the file holds " +
                              std::to_string(data_size));
  }
  for (const auto& [key, unused] : h.byte_items) {
    for (const ImportTensor& t : h.tensors) {
      if (t.name == key) {
        return Status::Corruption("\"__metadata__\" entry " + JsonString(key) +
                                  " has the name of a tensor");
      }
    }
  }
  return h;
}

}  // namespace

Status DumpNpy(Store& store, const std::string& id, const std::string& fqn,
               const std::string& out_path) {
  ROCKSDCP_ASSIGN_OR_RETURN(OpenCheckpoint c, OpenForRead(store, id));
  const std::string where = Where(store, id) + ", item " + Quoted(fqn);
  auto it = c.metadata.state_dict_metadata.find(fqn);
  if (it == c.metadata.state_dict_metadata.end()) {
    return Status::NotFound(where + ": no such item");
  }
  const auto* md = std::get_if<TensorStorageMetadata>(&it->second);
  if (md == nullptr) {
    return Status::InvalidArgument(where +
                                   ": a byte item, not a tensor; .npy holds "
                                   "tensors only");
  }
  const auto descr = NpyDescr(md->properties.dtype);
  if (!descr) {
    return Status::InvalidArgument(
        where + ": dtype " + std::string(DTypeName(md->properties.dtype)) +
        " has no NumPy type");
  }
  if (md->size.size() > kMaxNpyDims) {
    return Status::InvalidArgument(where + ": too many dimensions for .npy");
  }
  std::vector<uint8_t> buffer;
  ROCKSDCP_RETURN_IF_ERROR(LoadTensor(store, id, c, fqn, *md, &buffer));
  OutFile out(out_path);
  ROCKSDCP_RETURN_IF_ERROR(out.Open());
  ROCKSDCP_RETURN_IF_ERROR(out.Write(NpyPreamble(*descr, md->size)));
  ROCKSDCP_RETURN_IF_ERROR(out.Write(buffer.data(), buffer.size()));
  return out.Commit();
}

Result<TransferStats> ExportSafetensors(Store& store, const std::string& id,
                                        const std::string& out_path,
                                        const ProgressCallback& progress) {
  ROCKSDCP_ASSIGN_OR_RETURN(OpenCheckpoint c, OpenForRead(store, id));
  const std::string where = Where(store, id);
  // The header first: tensor sizes come from the metadata, byte items are
  // loaded (they live in the header anyway).
  TransferStats stats;
  Progress p;
  std::string tensors_json;
  std::string metadata_json;
  for (const auto& [fqn, smd] : c.metadata.state_dict_metadata) {
    const std::string item = where + ", item " + Quoted(fqn);
    if (!IsUtf8(fqn) || fqn == kMetadataKey) {
      return Status::InvalidArgument(
          item + ": not a name safetensors can hold (not UTF-8, or " +
          std::string(kMetadataKey) + ")");
    }
    ++p.items_total;
    if (const auto* md = std::get_if<TensorStorageMetadata>(&smd)) {
      const auto name = StDTypeName(md->properties.dtype);
      if (!name) {
        return Status::InvalidArgument(
            item + ": dtype " + std::string(DTypeName(md->properties.dtype)) +
            " has no safetensors dtype");
      }
      const auto nbytes = ByteSize(md->properties.dtype, md->size);
      if (!nbytes) return Status::Corruption(item + ": shape too large");
      std::string shape;
      for (int64_t d : md->size) {
        shape += (shape.empty() ? "" : ",") + std::to_string(d);
      }
      tensors_json += "," + JsonString(fqn) + ":{\"dtype\":\"" +
                      std::string(*name) + "\",\"shape\":[" + shape +
                      "],\"data_offsets\":[" + std::to_string(p.bytes_total) +
                      "," + std::to_string(p.bytes_total + *nbytes) + "]}";
      p.bytes_total += *nbytes;
    } else {
      std::string value;
      ROCKSDCP_RETURN_IF_ERROR(LoadBytes(id, c, fqn, &value));
      metadata_json += (metadata_json.empty() ? "" : ",") + JsonString(fqn) +
                       ":" + EncodeMetadataValue(value);
      if (metadata_json.size() > kMaxHeaderBytes) break;  // Refused below.
      ++stats.byte_items;
      ++p.items_done;
    }
  }
  std::string header = "{\"" + std::string(kMetadataKey) + "\":{" +
                       metadata_json + "}" + tensors_json + "}";
  if (header.size() > kMaxHeaderBytes) {
    return Status::InvalidArgument(
        where + ": safetensors header would be " +
        std::to_string(header.size()) + " bytes, over safetensors' limit of " +
        std::to_string(kMaxHeaderBytes) + " (byte items too large)");
  }
  // Safetensors pads the header with spaces so that the data is 8-aligned.
  header.append((8 - header.size() % 8) % 8, ' ');
  char size_le[8];
  for (int i = 0; i < 8; ++i) {
    size_le[i] = static_cast<char>((uint64_t{header.size()} >> (8 * i)) & 0xff);
  }
  OutFile out(out_path);
  ROCKSDCP_RETURN_IF_ERROR(out.Open());
  ROCKSDCP_RETURN_IF_ERROR(out.Write(size_le, sizeof(size_le)));
  ROCKSDCP_RETURN_IF_ERROR(out.Write(header));
  if (progress) progress(p);
  // Then the tensors, one at a time, in name order (the offsets above).
  std::vector<uint8_t> buffer;
  for (const auto& [fqn, smd] : c.metadata.state_dict_metadata) {
    const auto* md = std::get_if<TensorStorageMetadata>(&smd);
    if (md == nullptr) continue;
    ROCKSDCP_RETURN_IF_ERROR(LoadTensor(store, id, c, fqn, *md, &buffer));
    ROCKSDCP_RETURN_IF_ERROR(out.Write(buffer.data(), buffer.size()));
    ++stats.tensors;
    stats.bytes += buffer.size();
    p.bytes_done += buffer.size();
    ++p.items_done;
    if (progress) progress(p);
  }
  buffer = {};
  ROCKSDCP_RETURN_IF_ERROR(out.Commit());
  return stats;
}

Result<TransferStats> ImportSafetensors(const std::string& in_path,
                                        Store& store, const std::string& id,
                                        bool overwrite,
                                        const ProgressCallback& progress) {
  const std::string file = "safetensors file " + Quoted(in_path);
  MappedFile f;
  ROCKSDCP_RETURN_IF_ERROR(f.Open(in_path));
  if (f.size() < 8) {
    return Status::Corruption(file + ": " + std::to_string(f.size()) +
                              " bytes, too short for the header size");
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | f.data()[i];
  if (n > kMaxHeaderBytes || n > f.size() - 8) {
    return Status::Corruption(file + ": header size " + std::to_string(n) +
                              " exceeds the file's " +
                              std::to_string(f.size()) + " bytes (or " +
                              std::to_string(kMaxHeaderBytes) + ")");
  }
  const std::string_view json(reinterpret_cast<const char*>(f.data()) + 8, n);
  const uint8_t* data = f.data() + 8 + n;
  auto header = ParseHeader(json, f.size() - 8 - n);
  if (!header.ok()) return header.status().WithContext(file);

  StateDict sd;
  TransferStats stats;
  for (const ImportTensor& t : header.value().tensors) {
    // Save only reads the tensors: the read-only mapping is never written.
    sd[t.name] = TensorView::Contiguous(
        t.dtype, t.shape, const_cast<uint8_t*>(data + t.begin));
    ++stats.tensors;
    stats.bytes += t.end - t.begin;
  }
  for (auto& [key, value] : header.value().byte_items) {
    sd[key] = std::move(value);
    ++stats.byte_items;
  }
  RocksDBWriterOptions wo;
  wo.overwrite = overwrite;
  wo.progress = progress;
  ROCKSDCP_ASSIGN_OR_RETURN(auto writer, store.NewWriter(wo));
  SaveOptions so;
  so.checkpoint_id = id;
  auto saved = Save(sd, *writer, so);
  if (!saved.ok()) {
    return saved.status().WithContext(Where(store, id) + ", importing " +
                                      Quoted(in_path));
  }
  return stats;
}

}  // namespace rocksdcp::tools
