#include "json.h"

#include <cstdio>
#include <limits>
#include <set>

namespace rocksdcp::tools {
namespace {

void AppendUtf8(uint32_t cp, std::string* out) {
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

}  // namespace

size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const uint8_t c = static_cast<uint8_t>(s[i]);
  int extra;
  uint32_t cp;
  if (c < 0x80) {
    return 1;
  } else if ((c & 0xe0) == 0xc0) {
    extra = 1, cp = c & 0x1f;
  } else if ((c & 0xf0) == 0xe0) {
    extra = 2, cp = c & 0x0f;
  } else if ((c & 0xf8) == 0xf0) {
    extra = 3, cp = c & 0x07;
  } else {
    return 0;
  }
  if (s.size() - i <= static_cast<size_t>(extra)) return 0;
  for (int k = 1; k <= extra; ++k) {
    const uint8_t cc = static_cast<uint8_t>(s[i + k]);
    if ((cc & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3f);
  }
  static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
  if (cp < kMin[extra] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
    return 0;
  }
  return extra + 1;
}

bool IsUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8SequenceLength(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

void AppendJsonString(std::string_view s, std::string* out) {
  *out += '"';
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = Utf8SequenceLength(s, i);
      if (n == 0) {
        *out += "\\ufffd";
        ++i;
      } else {
        out->append(s.substr(i, n));
        i += n;
      }
      continue;
    }
    ++i;
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else {
          *out += static_cast<char>(c);
        }
    }
  }
  *out += '"';
}

std::string JsonString(std::string_view s) {
  std::string out;
  AppendJsonString(s, &out);
  return out;
}

JsonWriter& JsonWriter::Key(std::string_view k) {
  Separate();
  AppendJsonString(k, &out_);
  out_ += ':';
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::String(std::string_view s) {
  Separate();
  AppendJsonString(s, &out_);
  return *this;
}

JsonWriter& JsonWriter::IntArray(const std::vector<int64_t>& v) {
  BeginArray();
  for (int64_t x : v) Int(x);
  return EndArray();
}

JsonWriter& JsonWriter::Raw(std::string_view s) {
  Separate();
  out_ += s;
  return *this;
}

JsonWriter& JsonWriter::Open(char c) {
  Separate();
  out_ += c;
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::Close(char c) {
  out_ += c;
  first_.pop_back();
  return *this;
}

// A comma before every value but the first of its container; none after a
// key.
void JsonWriter::Separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_ += ',';
    first_.back() = false;
  }
}

Result<Json> ParseJson(std::string_view text, std::string_view what,
                       uint64_t max_values) {
  JsonReader reader(text, what);
  Json v;
  ROCKSDCP_RETURN_IF_ERROR(reader.ReadValue(&v, max_values));
  ROCKSDCP_RETURN_IF_ERROR(reader.Finish());
  return v;
}

// ---- JsonReader ----

template <typename Fn>
Status JsonReader::Members(bool check_duplicate_keys, const Fn& on_member) {
  ++pos_;  // The '{'.
  SkipSpace();
  if (Consume("}")) return Status::OK();
  // A set, not a scan of the members: an object may hold 10^6 keys.
  std::set<std::string> keys;
  while (true) {
    SkipSpace();
    if (pos_ == s_.size() || s_[pos_] != '"') return Error("expected a key");
    std::string key;
    ROCKSDCP_RETURN_IF_ERROR(String(&key));
    if (check_duplicate_keys && !keys.insert(key).second) {
      return Error("duplicate key " + JsonString(key));
    }
    SkipSpace();
    if (!Consume(":")) return Error("expected ':'");
    ROCKSDCP_RETURN_IF_ERROR(on_member(std::move(key)));
    SkipSpace();
    if (Consume("}")) return Status::OK();
    if (!Consume(",")) return Error("expected ',' or '}'");
  }
}

Result<Json::Kind> JsonReader::Peek() {
  SkipSpace();
  if (pos_ == s_.size()) return Error("unexpected end");
  switch (s_[pos_]) {
    case '{':
      return Json::kObject;
    case '[':
      return Json::kArray;
    case '"':
      return Json::kString;
    case 't':
    case 'f':
      return Json::kBool;
    case 'n':
      return Json::kNull;
    default:
      if (s_[pos_] == '-' || (s_[pos_] >= '0' && s_[pos_] <= '9')) {
        return Json::kNumber;
      }
      return Error("unexpected character");
  }
}

Status JsonReader::ReadObject(const MemberFn& on_member,
                              bool check_duplicate_keys) {
  SkipSpace();
  if (pos_ == s_.size() || s_[pos_] != '{') return Error("not a JSON object");
  if (depth_ >= kMaxDepth) return Error("nested too deeply");
  ++depth_;
  Status s = Members(check_duplicate_keys, on_member);
  --depth_;
  return s;
}

Status JsonReader::ReadString(std::string* out) {
  SkipSpace();
  if (pos_ == s_.size() || s_[pos_] != '"') return Error("expected a string");
  out->clear();
  return String(out);
}

Status JsonReader::ReadValue(Json* out, uint64_t max_values) {
  *out = Json();
  max_values_ = max_values;
  values_ = 0;
  return Value(out, depth_);
}

Status JsonReader::Finish() {
  SkipSpace();
  if (pos_ != s_.size()) return Error("trailing characters");
  return Status::OK();
}

Status JsonReader::Error(std::string_view message) const {
  return Status::Corruption("invalid JSON at byte " + std::to_string(pos_) +
                            " of " + std::string(what_) + ": " +
                            std::string(message));
}

void JsonReader::SkipSpace() {
  while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' ||
                              s_[pos_] == '\n' || s_[pos_] == '\r')) {
    ++pos_;
  }
}

bool JsonReader::Consume(std::string_view word) {
  if (s_.substr(pos_, word.size()) != word) return false;
  pos_ += word.size();
  return true;
}

Status JsonReader::Value(Json* v, int depth) {
  if (depth >= kMaxDepth) return Error("nested too deeply");
  if (++values_ > max_values_) {
    // Valid JSON, but more than the caller will hold: not "invalid JSON".
    return Status::Corruption("more than " + std::to_string(max_values_) +
                              " values at byte " + std::to_string(pos_) +
                              " of " + std::string(what_) +
                              " (a bound of rocksdcp's, not of JSON)");
  }
  SkipSpace();
  if (pos_ == s_.size()) return Error("unexpected end");
  const char c = s_[pos_];
  if (c == '{') {
    v->kind = Json::kObject;
    return Members(/*check_duplicate_keys=*/true,
                   [&](std::string key) -> Status {
                     Json member;
                     ROCKSDCP_RETURN_IF_ERROR(Value(&member, depth + 1));
                     v->object.push_back({std::move(key), std::move(member)});
                     return Status::OK();
                   });
  }
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

Status JsonReader::Array(Json* v, int depth) {
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

Status JsonReader::Number(Json* v) {
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

Status JsonReader::Hex4(uint32_t* out) {
  if (s_.size() - pos_ < 4) return Error("truncated \\u escape");
  *out = 0;
  for (int i = 0; i < 4; ++i) {
    const char c = s_[pos_++];
    uint32_t d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      d = c - 'A' + 10;
    else
      return Error("bad \\u escape");
    *out = (*out << 4) | d;
  }
  return Status::OK();
}

Status JsonReader::String(std::string* out) {
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
      // The run of plain characters from here, appended at once: a
      // metadata value may be 100 MB.
      size_t end = pos_ + 1;
      while (end < s_.size() && s_[end] != '"' && s_[end] != '\\' &&
             static_cast<uint8_t>(s_[end]) >= 0x20) {
        ++end;
      }
      out->append(s_.substr(pos_, end - pos_));
      pos_ = end;
      continue;
    }
    ++pos_;
    if (pos_ == s_.size()) return Error("unterminated string");
    const char e = s_[pos_++];
    switch (e) {
      case '"':
        *out += '"';
        break;
      case '\\':
        *out += '\\';
        break;
      case '/':
        *out += '/';
        break;
      case 'b':
        *out += '\b';
        break;
      case 'f':
        *out += '\f';
        break;
      case 'n':
        *out += '\n';
        break;
      case 'r':
        *out += '\r';
        break;
      case 't':
        *out += '\t';
        break;
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

}  // namespace rocksdcp::tools
