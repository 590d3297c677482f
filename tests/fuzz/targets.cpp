#include "targets.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string_view>
#include <vector>

#include <xgrad/graph/json.hpp>
#include <xgrad/lib/files.hpp>
#include <xgrad/lib/onnx_export.hpp>
#include <xgrad/lib/onnx_import.hpp>
#include <xgrad/xgrad.hpp>

#include "cli.hpp"

namespace xgrad::fuzz {

namespace {

// Imports at most this many elements and this much work (Op::work): enough for every seed,
// small enough to stay fast. tools/setup fuzz runs this target under memory limits that an
// import within them never reaches, so an input that makes it allocate past them is a finding.
constexpr std::size_t graph_budget = std::size_t(1) << 20;
constexpr double graph_work = 1 << 26;

std::string_view text_of(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A broken property: stop with a message libFuzzer shows beside the input.
[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "xgrad fuzz: property broken: %s\n", what);
  std::abort();
}

template <class T>
void import_round_trip(const Json& json) {
  const auto g = graph_from_parsed_json<T>(json, graph_budget, graph_work);
  g->replay();
  const std::string text = to_json(*g, ExportValues::all).dump();
  const auto again = graph_from_json<T>(text, graph_budget, graph_work);
  if (to_json(*again, ExportValues::all).dump() != text) broken("graph export -> import -> export changed the text");
  to_dot(*g);
}

// The ONNX importer's limits: every seed's values fit in max_elements (the GPT fixtures hold
// about 2^12), and a model of more is refused before it allocates.
constexpr std::size_t onnx_elements = std::size_t(1) << 16;
constexpr std::size_t onnx_file_bytes = std::size_t(1) << 20;

// The values of the graph's named outputs and gradients, in name order.
template <class T>
std::vector<xt::xarray<T>> named_values(const Graph<T>& g) {
  std::vector<xt::xarray<T>> out;
  for (const auto* names : {&g.outputs(), &g.grads()}) {
    for (const auto& [name, slot] : *names) out.push_back(g.node(slot.node).value(slot.output));
  }
  return out;
}

// An imported model must replay to the same values and go through the JSON format unchanged.
// NaNs compare equal whatever their bits, as for graph JSON. The JSON import gets the default
// work budget: the ONNX import has already done that work once.
template <class T>
void check_imported(Graph<T>& g) {
  const std::vector<xt::xarray<T>> before = named_values(g);
  g.replay();
  const std::vector<xt::xarray<T>> after = named_values(g);
  for (std::size_t i = 0; i < before.size(); ++i) {
    if (!same_bits_any_nan(before[i], after[i])) broken("ONNX import -> replay changed an output or gradient");
  }
  const std::string text = to_json(g, ExportValues::all).dump();
  std::unique_ptr<Graph<T>> again;
  try {
    again = graph_from_json<T>(text, graph_budget);
  } catch (const error& e) {
    std::fprintf(stderr, "xgrad fuzz: %s\n", e.what());
    broken("the JSON export of an imported ONNX model does not import");
  }
  if (to_json(*again, ExportValues::all).dump() != text) broken("ONNX import -> export -> import -> export changed the text");
  to_dot(g);
}

// Imports without gradients, then with them: a model that imports must also import with its
// gradients.
template <class T>
void import_model(const std::string& bytes) {
  OnnxImportOptions options;
  options.max_elements = onnx_elements;
  options.max_file_bytes = onnx_file_bytes;
  std::unique_ptr<Graph<T>> g;
  try {
    g = import_onnx_bytes<T>(bytes, "fuzz.onnx", options);
  } catch (const error&) {
    return;
  }
  check_imported(*g);
  options.gradients = true;
  try {
    g = import_onnx_bytes<T>(bytes, "fuzz.onnx", options);
  } catch (const error& e) {
    // The backward nodes are charged to the same work budget: only that may refuse them.
    if (std::string(e.what()).find("element visits (Op::work)") != std::string::npos) return;
    std::fprintf(stderr, "xgrad fuzz: %s\n", e.what());
    broken("an ONNX model that imports does not import with its gradients");
  }
  check_imported(*g);
  // And it exports again, backward included: every op has a lowering. Refused only for names
  // ONNX cannot hold twice (an output that is a graph input's name, say).
  try {
    to_onnx_bytes(*g);
  } catch (const error& e) {
    const std::string what = e.what();
    if (what.find("has the name of leaf") == std::string::npos && what.find("would share one ONNX name") == std::string::npos &&
        what.find("are both leaves named") == std::string::npos && what.find("names no output") == std::string::npos) {
      std::fprintf(stderr, "xgrad fuzz: %s\n", e.what());
      broken("an imported ONNX model does not export again");
    }
  }
}

template <class T>
std::map<std::string, xt::xarray<T>> tensors_in(const StoredCheckpoint& c) {
  std::map<std::string, xt::xarray<T>> out;
  for (const auto& [name, array] : c.tensors) out.emplace(name, xt::cast<T>(array.values));
  return out;
}

int checkpoint(CheckpointFormat format, const std::uint8_t* data, std::size_t size) {
  StoredCheckpoint a;
  try {
    a = parse_checkpoint(text_of(data, size), format, "fuzz");
  } catch (const error&) {
    return 0;
  }
  const bool all_float32 = std::all_of(a.tensors.begin(), a.tensors.end(),
                                       [](const auto& t) { return t.second.dtype == "float32"; });
  const std::string bytes = all_float32 ? checkpoint_bytes(tensors_in<float>(a), a.metadata, format, "rewritten")
                                        : checkpoint_bytes(tensors_in<double>(a), a.metadata, format, "rewritten");
  const StoredCheckpoint b = parse_checkpoint(bytes, format, "rewritten");
  if (b.metadata != a.metadata || b.tensors.size() != a.tensors.size()) broken("checkpoint read -> write -> read changed it");
  std::map<std::string, const StoredArray*> by_name;
  for (const auto& [name, array] : b.tensors) by_name[name] = &array;
  for (const auto& [name, array] : a.tensors) {
    const auto it = by_name.find(name);
    if (it == by_name.end() || !same_bits(array.values, it->second->values) ||
        (all_float32 && it->second->dtype != "float32")) {
      broken("checkpoint read -> write -> read changed a tensor");
    }
  }
  return 0;
}

std::string temp_dir() {
  std::string dir = (std::filesystem::temp_directory_path() / "xgrad_fuzz_cli_XXXXXX").string();
  if (!mkdtemp(dir.data())) broken("cannot make a temporary directory");
  return dir;
}

// A model's directory for `beneath`: files inside hold "inside", files outside "SECRET", and
// links lead out (to a file, through a directory, to a device) and within.
std::string beneath_tree() {
  namespace fs = std::filesystem;
  const fs::path root = temp_dir();
  const fs::path model = root / "model", outside = root / "outside";
  fs::create_directories(model / "sub" / "deeper");
  fs::create_directories(outside / "dir");
  for (const fs::path& p : {model / "w.bin", model / "sub" / "x.bin", model / "sub" / "deeper" / "y.bin"}) {
    std::ofstream(p, std::ios::binary) << "inside";
  }
  for (const fs::path& p : {outside / "secret.bin", outside / "dir" / "x.bin", root / "top.bin"}) {
    std::ofstream(p, std::ios::binary) << "SECRET";
  }
  fs::create_symlink(outside / "secret.bin", model / "leak.bin");
  fs::create_symlink("../outside/secret.bin", model / "rel.bin");
  fs::create_symlink("../../top.bin", model / "sub" / "up.bin");
  fs::create_directory_symlink(outside / "dir", model / "linked");
  fs::create_directory_symlink("..", model / "sub" / "parent");
  fs::create_symlink("/dev/zero", model / "zero.bin");
  fs::create_symlink("sub/x.bin", model / "alias.bin");
  fs::create_symlink("deeper", model / "sub" / "d");
  if (mkfifo((model / "fifo").c_str(), 0600) != 0) broken("cannot make a FIFO");
  return model.string();
}

}  // namespace

int json(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = text_of(data, size);
  std::optional<Json> ours, theirs;
  std::string refusal;
  try {
    ours = parse_json(text, 8, "fuzz.json");
  } catch (const error& e) {
    refusal = e.what();
  }
  try {
    theirs = Json::parse(text);
  } catch (const nlohmann::json::exception&) {
  }
  if (ours && !theirs) broken("parse_json accepts what nlohmann's parser refuses");
  if (ours && *ours != *theirs) broken("parse_json and nlohmann's parser build different documents");
  if (ours && ours->dump() != theirs->dump()) broken("parse_json does not keep the order of keys");
  if (!ours && theirs && refusal.find("appears twice") == std::string::npos &&
      refusal.find("nested deeper than 8 levels") == std::string::npos && refusal.find("a NUL byte") == std::string::npos) {
    std::fprintf(stderr, "xgrad fuzz: %s\n", refusal.c_str());
    broken("parse_json refuses a document nlohmann's parser reads, for no reason of its own");
  }
  return 0;
}

int beneath(const std::uint8_t* data, std::size_t size) {
  static const std::string model = beneath_tree();
  const std::string location(text_of(data, size));
  for (const auto open : {&InputFile::beneath, &InputFile::beneath_walk}) {
    try {
      const InputFile f = open(model, location, "fuzz.onnx: initializer 'w': external data");
      if (f.read(0, std::min<std::size_t>(f.size(), 6)) != "inside") broken("a file outside the model's directory was opened");
    } catch (const error& e) {
      if (std::string(e.what()).rfind("fuzz.onnx: initializer 'w': external data", 0) != 0) {
        broken("a refusal does not name the model and the initializer");
      }
    }
  }
  return 0;
}

int graph_json(const std::uint8_t* data, std::size_t size) {
  try {
    const Json json = parse_graph_json(text_of(data, size));
    if (graph_json_dtype(json) == "float32") import_round_trip<float>(json);
    else import_round_trip<double>(json);
  } catch (const error&) {
  }
  return 0;
}

// What parse() returns; nothing when it refuses the input (xgrad::error).
template <class Parse>
std::optional<StoredArray> accepted(Parse parse) {
  try {
    return parse();
  } catch (const error&) {
    return std::nullopt;
  }
}

int npy(const std::uint8_t* data, std::size_t size) {
  const auto a = accepted([&] { return parse_npy(text_of(data, size), "fuzz.npy"); });
  if (!a) return 0;
  const std::string bytes = a->dtype == "float32" ? npy_bytes(xt::xarray<float>(xt::cast<float>(a->values)))
                                                  : npy_bytes(a->values);
  const StoredArray b = parse_npy(bytes, "rewritten.npy");
  if (b.dtype != a->dtype || !same_bits(a->values, b.values)) broken(".npy read -> write -> read changed the array");
  return 0;
}

int json_array(const std::uint8_t* data, std::size_t size) {
  const auto a = accepted([&] { return parse_json_array(text_of(data, size), "fuzz.json"); });
  // Nested arrays cannot say the shape of an empty array.
  if (!a || a->values.size() == 0) return 0;
  const StoredArray b = parse_json_array(array_to_json(a->values).dump(), "rewritten.json");
  if (!same_bits_any_nan(a->values, b.values)) broken("JSON array read -> write -> read changed the array");
  return 0;
}

int safetensors(const std::uint8_t* data, std::size_t size) {
  return checkpoint(CheckpointFormat::safetensors, data, size);
}

int npz(const std::uint8_t* data, std::size_t size) { return checkpoint(CheckpointFormat::npz, data, size); }

int onnx(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(text_of(data, size));
  if (size % 2 == 0) import_model<float>(bytes);
  else import_model<double>(bytes);
  return 0;
}

int cli_attention(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static const std::string dir = temp_dir();
  const std::uint8_t flags = data[0];
  std::vector<std::string> parts;
  std::string_view rest = text_of(data + 1, size - 1);
  for (std::size_t at; parts.size() < 4 && (at = rest.find(cli_separator)) != std::string_view::npos;) {
    parts.emplace_back(rest.substr(0, at));
    rest.remove_prefix(at + cli_separator.size());
  }
  parts.emplace_back(rest);
  if (parts.size() < 3) return 0;

  const char* names[] = {"q", "k", "v", "g"};
  const char* options[] = {"--q", "--k", "--v", "--grad-output"};
  std::vector<std::string> args;
  for (std::size_t i = 0; i < std::min<std::size_t>(parts.size(), 4); ++i) {
    const std::string path = dir + "/" + names[i] + ((flags >> (2 + i)) & 1 ? ".npy" : ".json");
    std::ofstream(path, std::ios::binary | std::ios::trunc) << parts[i];
    args.insert(args.end(), {options[i], path});
  }
  if (flags & 1) args.insert(args.end(), {"--dtype", "float32"});
  if (flags & 2) args.insert(args.end(), {"--dtype", "float64"});
  if (parts.size() == 5) {
    std::string_view extra = parts[4];
    for (std::size_t at; (at = extra.find('\0')) != std::string_view::npos; extra.remove_prefix(at + 1)) {
      args.emplace_back(extra.substr(0, at));
    }
    args.emplace_back(extra);
  }
  args.insert(args.end(), {"--out", dir + "/out"});
  try {
    tool::attention_command.run(args);
  } catch (const error&) {
  } catch (const tool::usage_error&) {
  } catch (const tool::help_requested&) {
  }
  return 0;
}

}  // namespace xgrad::fuzz
