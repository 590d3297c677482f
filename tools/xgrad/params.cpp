// xgrad params: what a checkpoint (.safetensors or .npz) holds, one line per tensor.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include <xgrad/xgrad.hpp>

#include "cli.hpp"

namespace xgrad::tool {

namespace {

const char* const help =
    "usage: xgrad params FILE.safetensors|FILE.npz\n"
    "\n"
    "Reads a checkpoint (save_parameters, save_tensors, np.savez, safetensors) with every check\n"
    "load_tensors makes, and prints\n"
    "  FILE: FORMAT, N tensors, E elements, M metadata entries\n"
    "then one line per tensor, in file order, the columns padded:\n"
    "  NAME  DTYPE  SHAPE  min MIN  mean MEAN  max MAX\n"
    "(DTYPE float32 or float64 as stored; numbers with 6 significant digits; any NaN makes all\n"
    "three nan; an empty tensor shows -), then one line per metadata entry, in key order, key and\n"
    "value as JSON strings:\n"
    "  metadata \"KEY\": \"VALUE\"\n"
    "\n"
    "exit status: 0 success, 2 bad usage or input (one line on stderr naming the file and the\n"
    "             tensor) or out of memory\n";

std::string number(double x) {
  if (std::isnan(x)) return "nan";  // never "-nan": the sign of a NaN means nothing here
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", x);
  return text;
}

struct Row {
  std::string name, dtype, shape, min, mean, max;
};

Row row_of(const std::string& name, const StoredArray& a) {
  Row r{name, a.dtype, shape_str(a.values.shape()), "-", "-", "-"};
  const std::size_t n = a.values.size();
  if (n == 0) return r;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0;
  bool nan = false;
  for (std::size_t i = 0; i < n; ++i) {
    const double x = a.values.data()[i];
    nan = nan || std::isnan(x);
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sum += x;
  }
  const double mean = sum / static_cast<double>(n);
  const double q = std::numeric_limits<double>::quiet_NaN();
  r.min = number(nan ? q : lo);
  r.mean = number(nan ? q : mean);
  r.max = number(nan ? q : hi);
  return r;
}

std::string padded(const std::string& s, std::size_t width) {
  return s + std::string(width > s.size() ? width - s.size() : 0, ' ');
}

int run(const std::vector<std::string>& args) {
  const Options o(args, {}, 1);
  const std::string path = o.first_positional("FILE (a .safetensors or .npz checkpoint)");
  const Phase phase("reading " + path);
  const StoredCheckpoint c = read_checkpoint(path);

  std::vector<Row> rows;
  std::size_t elements = 0;
  for (const auto& [name, array] : c.tensors) {
    // A name with a control character (a newline would split its line) is shown as a JSON string.
    const bool plain = std::none_of(name.begin(), name.end(), [](char ch) { return static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f; });
    rows.push_back(row_of(plain ? name : Json(name).dump(-1, ' ', false, Json::error_handler_t::replace), array));
    elements += array.values.size();
  }
  std::size_t w[5] = {0, 0, 0, 0, 0};
  for (const Row& r : rows) {
    w[0] = std::max(w[0], r.name.size());
    w[1] = std::max(w[1], r.dtype.size());
    w[2] = std::max(w[2], r.shape.size());
    w[3] = std::max(w[3], r.min.size());
    w[4] = std::max(w[4], r.mean.size());
  }
  const bool npz = checkpoint_format(path) == CheckpointFormat::npz;
  std::string out = path + ": " + (npz ? "npz" : "safetensors") + ", " + std::to_string(rows.size()) + " tensor" +
                    (rows.size() == 1 ? "" : "s") + ", " + std::to_string(elements) + " element" +
                    (elements == 1 ? "" : "s") + ", " + std::to_string(c.metadata.size()) + " metadata entr" +
                    (c.metadata.size() == 1 ? "y" : "ies") + "\n";
  for (const Row& r : rows) {
    out += padded(r.name, w[0]) + "  " + padded(r.dtype, w[1]) + "  " + padded(r.shape, w[2]) + "  min " +
           padded(r.min, w[3]) + "  mean " + padded(r.mean, w[4]) + "  max " + r.max + "\n";
  }
  for (const auto& [key, value] : c.metadata) {
    out += "metadata " + Json(key).dump(-1, ' ', false, Json::error_handler_t::replace) + ": " +
           Json(value).dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace

const Command params_command = {"params", "list the tensors and metadata of a checkpoint (.safetensors, .npz)", help,
                                run};

}  // namespace xgrad::tool
