// Writes the fuzzers' dictionaries (libFuzzer -dict, docs/fuzzing.md) from the schema (config/schema.hpp), so they
// follow it: every key of every table, the words of the value types ("one of bf16 | fp16", units), and for the
// `--set` target every dotted path with its '='.
//   fuzz_dictionaries OUT_DIR   writes OUT_DIR/yaml.dict, OUT_DIR/json.dict, OUT_DIR/set.dict
#include "config/schema.hpp"

#include <cctype>
#include <fstream>
#include <iostream>
#include <set>
#include <string>

namespace {

using zerosim::config::Schema;

struct Words {
  std::set<std::string> keys;   ///< key names
  std::set<std::string> values; ///< words of the value types
  std::set<std::string> paths;  ///< dotted paths from the scenario's top
};

void add_type_words(const std::string& type, Words& w)
{
  std::string cur;
  for (char c : type + " ") {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '/' || c == '.') {
      cur += c;
    } else {
      if (cur.size() > 1)
        w.values.insert(cur);
      cur.clear();
    }
  }
}

void walk(const Schema& s, const std::string& prefix, Words& w, int depth)
{
  for (const auto& k : s.keys) {
    w.keys.insert(k.key);
    const std::string path = prefix.empty() ? k.key : prefix + "." + k.key;
    w.paths.insert(path);
    add_type_words(k.type, w);
    add_type_words(k.default_text, w);
    if (k.child && depth < 8)
      walk(*k.child, path, w, depth + 1);
  }
}

/// A JSON string's spelling of a key or word (they hold no control characters).
std::string json_string(const std::string& s)
{
  return "\"" + s + "\"";
}

/// A dictionary entry: the bytes in quotes, '"' and '\\' escaped, anything else outside printable ASCII as \xNN.
std::string entry(const std::string& s)
{
  static const char* HEX = "0123456789ABCDEF";
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u > 0x7e) {
      out += "\\x";
      out += HEX[u >> 4];
      out += HEX[u & 0xf];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

bool write(const std::string& file, const std::set<std::string>& entries)
{
  std::ofstream out(file);
  for (const std::string& e : entries)
    out << entry(e) << "\n";
  return static_cast<bool>(out);
}

} // namespace

int main(int argc, char** argv)
{
  if (argc != 2) {
    std::cerr << "usage: fuzz_dictionaries OUT_DIR\n";
    return 2;
  }
  const std::string dir = argv[1];
  Words w;
  walk(zerosim::config::scenario_schema(), "", w, 0);
  walk(zerosim::config::model_schema(), "model", w, 0);
  walk(zerosim::config::node_schema(), "cluster.node", w, 0);
  walk(zerosim::config::deepspeed_schema(), "deepspeed", w, 0);
  walk(zerosim::config::fsdp_schema(), "fsdp", w, 0);
  walk(zerosim::config::ddp_schema(), "ddp", w, 0);
  const std::set<std::string> common = {"true", "false", "null", "auto", "~",    "[",      "]",
                                        "{",    "}",     ": ",   "- ",   "\n  ", "1e9",    "-1",
                                        "0.5",  "GiB",   "GB/s", "Gbps", "us",   "TFLOPS", "none"};
  std::set<std::string> yaml = common, json = common, set = common;
  for (const std::string& v : w.values) {
    yaml.insert(v);
    json.insert(json_string(v));
    set.insert(v);
  }
  for (const std::string& k : w.keys) {
    yaml.insert(k + ": ");
    json.insert(json_string(k) + ": ");
  }
  for (const std::string& p : w.paths)
    set.insert(p + "=");
  const bool ok = write(dir + "/yaml.dict", yaml) && write(dir + "/json.dict", json) && write(dir + "/set.dict", set);
  if (!ok) {
    std::cerr << "fuzz_dictionaries: cannot write in " << dir << "\n";
    return 1;
  }
  std::cout << "fuzz_dictionaries: " << yaml.size() << " yaml, " << json.size() << " json, " << set.size()
            << " set entries in " << dir << "\n";
  return 0;
}
