// Checkpoints: the format-independent part (names, dtypes, exactness, atomic writes, parameters).
// The formats are in lib/checkpoint_safetensors.cpp and lib/checkpoint_npz.cpp.
#include <xgrad/lib/checkpoint.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sys/stat.h>
#include <unistd.h>

#include <xgrad/graph/error.hpp>
#include <xgrad/graph/json.hpp>
#include <xgrad/lib/checkpoint_formats.hpp>
#include <xgrad/lib/files.hpp>
#include <xgrad/lib/format.hpp>

namespace xgrad {

using namespace checkpoint_detail;

namespace {

std::string tensor_what(const std::string& what, const std::string& name) { return what + ": tensor '" + name + "'"; }

template <class T>
xt::xarray<T> in_dtype(StoredArray&& a, const std::string& what) {
  if constexpr (std::is_same_v<T, double>) {
    return std::move(a.values);
  } else {
    if (a.dtype == "float64") {
      for (std::size_t i = 0; i < a.values.size(); ++i) {
        const double x = a.values.data()[i];
        const bool in_range = !std::isfinite(x) || std::abs(x) <= static_cast<double>(std::numeric_limits<float>::max());
        if (!std::isnan(x) && !(in_range && static_cast<double>(static_cast<float>(x)) == x)) {
          char text[40];
          std::snprintf(text, sizeof text, "%.17g", x);
          throw error(what + ": the float64 value " + text + " at " + index_str(unravel_index(i, a.values.shape())) +
                      " has no exact float32 value; load the checkpoint into a float64 graph");
        }
      }
    }
    return xt::cast<float>(a.values);
  }
}

template <class T>
TensorFile<T> to_tensor_file(StoredCheckpoint&& c, const std::string& what) {
  TensorFile<T> out;
  out.metadata = std::move(c.metadata);
  for (auto& [name, array] : c.tensors) {
    out.tensors.emplace_back(name, in_dtype<T>(std::move(array), tensor_what(what, name)));
  }
  return out;
}

// The parameters of g by name; every parameter named, no name twice.
template <class T>
std::map<std::string, Var<T>> parameters_by_name(Graph<T>& g, const std::string& what) {
  std::map<std::string, Var<T>> out;
  for (const Var<T>& p : g.parameters()) {
    const std::string& name = p.node().name;
    if (name.empty()) {
      throw error(what + ": parameter node " + std::to_string(p.id()) + " " + shape_str(p.shape()) +
                  " has no name; a checkpoint stores parameters by name");
    }
    const auto [it, added] = out.emplace(name, p);
    if (!added) {
      throw error(what + ": parameters node " + std::to_string(it->second.id()) + " and node " + std::to_string(p.id()) +
                  " are both named '" + name + "'; a checkpoint names each parameter once");
    }
  }
  return out;
}

}  // namespace

namespace checkpoint_detail {

void check_tensor_name(const std::string& name, const std::string& what) {
  if (name.empty()) throw error(what + ": a tensor has an empty name");
  if (name == "__metadata__") throw error(what + ": the name '__metadata__' is reserved for the metadata, not a tensor");
}

CheckpointMetadata parse_metadata_json(std::string_view text, const std::string& what) {
  const Json json = parse_json(text, 1, what);
  if (!json.is_object()) throw error(what + ": expected an object of strings, got " + json.type_name());
  CheckpointMetadata out;
  for (const auto& item : json.items()) {
    if (!item.value().is_string()) {
      throw error(what + ": the value of \"" + item.key().substr(0, 64) + "\" is " + item.value().type_name() +
                  "; metadata maps strings to strings");
    }
    out[item.key()] = item.value().get<std::string>();
  }
  return out;
}

std::string metadata_json(const CheckpointMetadata& metadata, const std::string& what) {
  Json json = Json::object();
  for (const auto& [key, value] : metadata) append_member(json, key, value);
  try {
    return json.dump();
  } catch (const nlohmann::json::type_error&) {
    throw error(what + ": a metadata key or value is not valid UTF-8");
  }
}

}  // namespace checkpoint_detail

CheckpointFormat checkpoint_format(const std::string& path) {
  if (ends_with(path, ".safetensors")) return CheckpointFormat::safetensors;
  if (ends_with(path, ".npz")) return CheckpointFormat::npz;
  throw error(path + ": unknown checkpoint type: the name must end in .safetensors or .npz");
}

StoredCheckpoint read_checkpoint(const std::string& path) {
  const CheckpointFormat format = checkpoint_format(path);
  if (format == CheckpointFormat::npz) return read_npz_file(path);
  const InputFile file(path);  // open once: every tensor is one read at its offset
  return read_safetensors({file.size(), [&](std::size_t offset, std::size_t n) { return file.read(offset, n); }, path});
}

StoredCheckpoint parse_checkpoint(std::string_view bytes, CheckpointFormat format, const std::string& what) {
  if (format == CheckpointFormat::npz) return parse_npz(bytes, what);
  return read_safetensors(
      {bytes.size(), [&](std::size_t offset, std::size_t n) { return std::string(bytes.substr(offset, n)); }, what});
}

template <class T>
const xt::xarray<T>* TensorFile<T>::find(const std::string& name) const {
  for (const auto& [n, array] : tensors) {
    if (n == name) return &array;
  }
  return nullptr;
}

template <class T>
TensorFile<T> load_tensors(const std::string& path) {
  return to_tensor_file<T>(read_checkpoint(path), path);
}

template <class T>
TensorFile<T> parse_tensors(std::string_view bytes, CheckpointFormat format, const std::string& what) {
  return to_tensor_file<T>(parse_checkpoint(bytes, format, what), what);
}

CheckpointMetadata read_checkpoint_metadata(const std::string& path) { return read_checkpoint(path).metadata; }

template <class T>
std::string checkpoint_bytes(const std::map<std::string, xt::xarray<T>>& tensors, const CheckpointMetadata& metadata,
                             CheckpointFormat format, const std::string& what) {
  std::vector<EncodedTensor> encoded;
  for (const auto& [name, array] : tensors) {
    check_tensor_name(name, what);
    EncodedTensor e{name, sizeof(T) == 4 ? "F32" : "F64", Shape(array.shape().begin(), array.shape().end()), {}};
    e.bytes = format == CheckpointFormat::npz ? npy_bytes(array) : little_endian_bytes(array.data(), array.size());
    encoded.push_back(std::move(e));
  }
  return format == CheckpointFormat::npz ? npz_bytes(encoded, metadata, what) : safetensors_bytes(encoded, metadata, what);
}

template <class T>
void save_tensors(const std::string& path, const std::map<std::string, xt::xarray<T>>& tensors,
                  const CheckpointMetadata& metadata) {
  write_file_atomically(path, checkpoint_bytes(tensors, metadata, checkpoint_format(path), path));
}

template <class T>
void save_parameters(Graph<T>& g, const std::string& path, const CheckpointMetadata& metadata) {
  std::map<std::string, xt::xarray<T>> tensors;
  for (const auto& [name, p] : parameters_by_name(g, path)) tensors.emplace(name, p.value());
  save_tensors(path, tensors, metadata);
}

template <class T>
CheckpointMetadata load_parameters(Graph<T>& g, const std::string& path) {
  const auto params = parameters_by_name(g, path);
  TensorFile<T> file = load_tensors<T>(path);
  std::map<std::string, const xt::xarray<T>*> by_name;  // find() is linear in the tensors
  for (const auto& [name, t] : file.tensors) by_name.emplace(name, &t);
  // Every check before the first set_value: all or nothing.
  for (const auto& [name, p] : params) {
    const auto it = by_name.find(name);
    const xt::xarray<T>* t = it == by_name.end() ? nullptr : it->second;
    if (!t) {
      throw error(path + ": no tensor '" + name + "' for parameter '" + name + "' (node " + std::to_string(p.id()) + ", " +
                  shape_str(p.shape()) + ")");
    }
    if (!shapes_equal(t->shape(), p.shape())) {
      throw error(tensor_what(path, name) + " is " + shape_str(t->shape()) + ", parameter '" + name + "' (node " +
                  std::to_string(p.id()) + ") is " + shape_str(p.shape()));
    }
  }
  for (const auto& [name, t] : file.tensors) {
    if (!params.count(name)) {
      throw error(tensor_what(path, name) + " " + shape_str(t.shape()) + " is no parameter of the graph (" +
                  std::to_string(params.size()) + " parameters)");
    }
  }
  for (auto& [name, t] : file.tensors) g.set_value(params.at(name), std::move(t));
  return std::move(file.metadata);
}

template struct TensorFile<float>;
template struct TensorFile<double>;
template TensorFile<float> load_tensors(const std::string&);
template TensorFile<double> load_tensors(const std::string&);
template TensorFile<float> parse_tensors(std::string_view, CheckpointFormat, const std::string&);
template TensorFile<double> parse_tensors(std::string_view, CheckpointFormat, const std::string&);
template std::string checkpoint_bytes(const std::map<std::string, xt::xarray<float>>&, const CheckpointMetadata&,
                                      CheckpointFormat, const std::string&);
template std::string checkpoint_bytes(const std::map<std::string, xt::xarray<double>>&, const CheckpointMetadata&,
                                      CheckpointFormat, const std::string&);
template void save_tensors(const std::string&, const std::map<std::string, xt::xarray<float>>&, const CheckpointMetadata&);
template void save_tensors(const std::string&, const std::map<std::string, xt::xarray<double>>&, const CheckpointMetadata&);
template void save_parameters(Graph<float>&, const std::string&, const CheckpointMetadata&);
template void save_parameters(Graph<double>&, const std::string&, const CheckpointMetadata&);
template CheckpointMetadata load_parameters(Graph<float>&, const std::string&);
template CheckpointMetadata load_parameters(Graph<double>&, const std::string&);

}  // namespace xgrad
