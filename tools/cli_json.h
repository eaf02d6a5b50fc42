// A small JSON writer for the CLI's --json output: objects, arrays, strings,
// integers and booleans, written in order into a string. No reader: the CLI
// reads no JSON (safetensors headers are formats.cc's).

#ifndef ROCKSDCP_TOOLS_CLI_JSON_H_
#define ROCKSDCP_TOOLS_CLI_JSON_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace rocksdcp::tools {

// Writes one JSON value. Call order follows the document: Begin/End pairs
// nest; inside an object, Key() precedes each value.
// Not thread-safe.
class JsonWriter {
 public:
  JsonWriter& BeginObject() { return Open('{'); }
  JsonWriter& EndObject() { return Close('}'); }
  JsonWriter& BeginArray() { return Open('['); }
  JsonWriter& EndArray() { return Close(']'); }

  JsonWriter& Key(std::string_view k) {
    Separate();
    AppendString(k);
    out_ += ':';
    after_key_ = true;
    return *this;
  }
  JsonWriter& String(std::string_view s) {
    Separate();
    AppendString(s);
    return *this;
  }
  JsonWriter& Int(int64_t v) { return Raw(std::to_string(v)); }
  JsonWriter& Uint(uint64_t v) { return Raw(std::to_string(v)); }
  JsonWriter& Bool(bool v) { return Raw(v ? "true" : "false"); }
  JsonWriter& Null() { return Raw("null"); }
  JsonWriter& IntArray(const std::vector<int64_t>& v) {
    BeginArray();
    for (int64_t x : v) Int(x);
    return EndArray();
  }

  // The document so far.
  const std::string& str() const { return out_; }

 private:
  JsonWriter& Raw(std::string_view s) {
    Separate();
    out_ += s;
    return *this;
  }
  JsonWriter& Open(char c) {
    Separate();
    out_ += c;
    first_.push_back(true);
    return *this;
  }
  JsonWriter& Close(char c) {
    out_ += c;
    first_.pop_back();
    return *this;
  }
  // A comma before every value but the first of its container; none after
  // a key.
  void Separate() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!first_.empty()) {
      if (!first_.back()) out_ += ',';
      first_.back() = false;
    }
  }
  void AppendString(std::string_view s) {
    out_ += '"';
    for (unsigned char c : s) {
      switch (c) {
        case '"':
          out_ += "\\\"";
          break;
        case '\\':
          out_ += "\\\\";
          break;
        case '\n':
          out_ += "\\n";
          break;
        case '\r':
          out_ += "\\r";
          break;
        case '\t':
          out_ += "\\t";
          break;
        default:
          if (c < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\u%04x", c);
            out_ += buf;
          } else {
            out_ += static_cast<char>(c);
          }
      }
    }
    out_ += '"';
  }

  std::string out_;
  std::vector<bool> first_;
  bool after_key_ = false;
};

}  // namespace rocksdcp::tools

#endif  // ROCKSDCP_TOOLS_CLI_JSON_H_
