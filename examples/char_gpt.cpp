// A character-level GPT (examples/char_gpt.hpp: nanoGPT's shape) trained on real text, with the
// attention entropy of every head logged while it trains. docs/char-gpt.md describes the model,
// the options, the checkpoint, the measured runs and the comparison with PyTorch.
//
// Data: the bytes of --data FILE, or by default the fortune cookies of Debian's `fortunes`
// package (/usr/share/games/fortunes, the text files in name order). Tokens are the file's
// character set: its distinct bytes, in byte order. The first 90% trains, the last 10% is held
// out. Training windows of --block tokens start at positions drawn from a splitmix64 stream of
// --seed; evaluation reads fixed windows from a second stream (seed + 1): --eval-batches batches
// of each split, the same at every evaluation.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <new>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <xgrad/lib/onnx_export.hpp>

#include "char_gpt.hpp"

namespace {

using char_gpt::Config;
using char_gpt::Model;
using char_gpt::Schedule;
using xgrad::Graph;
using xgrad::Var;

const char* const default_corpus = "/usr/share/games/fortunes";

const char* const usage =
    "usage: char_gpt [options]\n"
    "Trains a character-level GPT (pre-LN blocks, causal multi-head attention, GELU MLP) with\n"
    "AdamW, warm-up and cosine decay, and prints the train and val loss at every evaluation.\n"
    "Model:\n"
    "  --layers N          transformer blocks, 1 to 1024 (default 4)\n"
    "  --heads N           attention heads per block, 1 to 1024, dividing --d-model (default 4)\n"
    "  --d-model N         width of the residual stream, 1 to 65536 (default 128)\n"
    "  --block N           tokens per window, the context length, 1 to 65536 (default 64)\n"
    "  --dropout P         dropout probability in [0, 1) (default 0)\n"
    "  --dtype T           float32 or float64 (default float32)\n"
    "Attention variants (docs/attention-variants.md; the defaults are GPT-2's block):\n"
    "  --rope              rotary position embeddings of q and k instead of learned positions\n"
    "  --kv-heads N        key/value heads, each shared by --heads / N query heads (grouped-query\n"
    "                      attention; 1 is multi-query), dividing --heads (default --heads)\n"
    "  --norm K            layer or rms: the blocks' and the final norm (default layer)\n"
    "  --qk-norm           RMS norm of q and k per head, each with a learned gain\n"
    "  --softcap C         cap the attention scores at C > 0 as C tanh(s / C) (default none)\n"
    "  --window W          causal sliding window: each position attends to its last W (default all)\n"
    "  --attn K            softmax or sigmoid attention weights, sigmoid(s - log T) (default softmax)\n"
    "Training:\n"
    "  --batch N           windows per step, 1 to 65536 (default 12)\n"
    "  --steps N           optimizer steps in all, counting those of a resumed run (default 2000)\n"
    "  --lr X              peak learning rate (default 1e-3); the schedule decays to X / 10\n"
    "  --warmup N          steps of linear warm-up (default 100)\n"
    "  --decay-steps N     step at which the cosine decay ends (default --steps)\n"
    "  --weight-decay X    AdamW weight decay of the 2-D weights (default 0.1)\n"
    "  --seed S            seed of the initial weights, the windows and the sample (default 1)\n"
    "  --flush-denormal    flush subnormal floats to zero (xgrad::set_flush_denormal): faster where\n"
    "                      the CPU is slow with them, as in a collapsed run; results change only\n"
    "                      below the smallest normal float (docs/performance.md)\n"
    "  --data FILE         train on this text file, a regular file of at most 1 GiB (default: the\n"
    "                      corpus of the fortunes package, /usr/share/games/fortunes)\n"
    "  The model, --batch and --eval-batches together may need at most about 16 GiB (an estimate).\n"
    "Evaluation and output:\n"
    "  --eval-every N      evaluate every N steps, and at the first and last (default 100)\n"
    "  --eval-batches N    batches of each split per evaluation, 1 to 10000 (default 20)\n"
    "  --save CKPT         write a checkpoint (.safetensors or .npz) at every evaluation and at the end\n"
    "  --resume CKPT       continue the run a checkpoint saved, bit for bit as if uninterrupted\n"
    "  --sample N          print N generated characters at the end, at most 10000000 (default 0)\n"
    "  --temperature X     sampling temperature > 0 (default 1)\n"
    "  --onnx FILE.onnx    write the trained model for serving at the end: an ONNX model (evaluation\n"
    "                      mode) of input ids (1, block) int64 and outputs logits (1, block, vocab)\n"
    "                      and chars (vocab), the byte of each token (examples/serve_char_gpt.js)\n"
    "  --log FILE.csv      losses, learning rate and attention statistics at every evaluation (the\n"
    "                      whole file rewritten at each one)\n"
    "  --plot FILE.svg     the losses, each head's attention entropy and each layer's gradient gain\n"
    "                      against the step\n"
    "  --max-val-loss X    exit 1 unless the last val loss is below X\n"
    "Files: --save, --onnx, --log and --plot are checked before training starts (refused: a\n"
    "directory, a device, a FIFO, a missing directory, the --data or --resume file) and each is\n"
    "written whole or not at all, through a fresh temporary file renamed over it.\n"
    "Exit status: 0 on success, 1 if --max-val-loss is not met, 2 for bad usage or input, or a\n"
    "file that cannot be written.\n";

struct Options {
  Config model;
  Schedule schedule;
  std::size_t batch = 12, steps = 2000, eval_every = 100, eval_batches = 20, sample = 0;
  std::optional<std::size_t> decay_steps;
  double weight_decay = 0.1, temperature = 1.0;
  std::optional<double> max_val_loss;
  std::uint64_t seed = 1;
  bool flush_denormal = false;
  std::string dtype = "float32", data, save, resume, log, plot, onnx;
  std::set<std::string> given;  // the options on the command line
};

// Bad usage or input: the message on stderr, exit status 2.
struct UsageError {
  std::string message;
};

// ---- The values of options, from the command line or a checkpoint's metadata -----------------
//
// One rule per option, whichever it comes from: parse() reads argv with it, and
// apply_resume_metadata reads the checkpoint's key with the same bounds and message (naming the
// checkpoint and the key), so that a checkpoint can hold nothing the command line refuses.

// A whole-number option and the metadata key that stores it ("" for none).
struct CountRule {
  const char* option;
  const char* key;
  std::size_t min, max;
};

inline constexpr std::size_t max_count = std::size_t(1) << 40;

// The bounds keep a run to what a machine can build (the memory estimate below checks them
// together); a checkpoint's "step", the steps done, has the bounds of --steps.
const CountRule count_rules[] = {
    {"--layers", "layers", 1, 1024},         {"--heads", "heads", 1, 1024},
    {"--kv-heads", "kv_heads", 1, 1024},     {"--window", "window", 1, 65536},
    {"--d-model", "d_model", 1, 65536},      {"--block", "block", 1, 65536},
    {"--batch", "batch", 1, 65536},          {"--eval-batches", "eval_batches", 1, 10000},
    {"--steps", "step", 0, max_count},       {"--warmup", "warmup", 0, max_count},
    {"--decay-steps", "decay_steps", 0, max_count}, {"--seed", "seed", 0, max_count},
    {"--eval-every", "", 1, max_count},      {"--sample", "", 0, 10'000'000},
};

// A number option: finite, and in the range `ok` accepts (`range` says which).
struct NumberRule {
  const char* option;
  const char* key;
  bool (*ok)(double);
  const char* range;
};

const NumberRule number_rules[] = {
    {"--dropout", "dropout", [](double x) { return x >= 0 && x < 1; }, "in [0, 1)"},
    {"--lr", "lr", [](double x) { return x >= 0; }, ">= 0"},
    {"--softcap", "softcap", [](double x) { return x > 0; }, "> 0"},
    {"--weight-decay", "weight_decay", [](double x) { return x >= 0; }, ">= 0"},
    {"--temperature", "", [](double x) { return x > 0; }, "> 0"},
    {"--max-val-loss", "", [](double x) { return x > 0; }, "> 0"},
};

// The rule of an option ("--layers") or of a metadata key ("layers").
template <class Rule, std::size_t N>
const Rule& find_rule(const Rule (&rules)[N], const std::string& name) {
  for (const Rule& r : rules) {
    if (name == r.option || name == r.key) return r;
  }
  throw std::logic_error("char_gpt: no rule for " + name);
}

// A value as an error message quotes it: at most 40 characters (a checkpoint's may be long).
std::string quoted(const std::string& text) {
  return "'" + (text.size() <= 40 ? text : text.substr(0, 40) + "...") + "'";
}

// `what` is the option ("--layers") or the checkpoint's key ("run.npz's layers").
std::size_t parse_count(const CountRule& rule, const std::string& text, const std::string& what) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] < '0' || text[0] > '9' || *end != '\0' || errno != 0 || n < rule.min || n > rule.max) {
    throw UsageError{what + " needs a whole number from " + std::to_string(rule.min) + " to " + std::to_string(rule.max) +
                     ", not " + quoted(text)};
  }
  return static_cast<std::size_t>(n);
}

double parse_number(const NumberRule& rule, const std::string& text, const std::string& what) {
  char* end = nullptr;
  const double x = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(x) || !rule.ok(x)) {
    throw UsageError{what + " needs a number " + rule.range + ", not " + quoted(text)};
  }
  return x;
}

// One of the words `allowed` ("float32|float64").
std::string parse_word(const std::string& text, const std::string& what, const std::string& allowed) {
  const std::string bar = "|" + allowed + "|";
  if (text.empty() || text.find('|') != std::string::npos || bar.find("|" + text + "|") == std::string::npos) {
    throw UsageError{what + " must be " + allowed + ", not " + quoted(text)};
  }
  return text;
}
std::string parse_dtype(const std::string& text, const std::string& what) { return parse_word(text, what, "float32|float64"); }

// A flag's value in a checkpoint's metadata: "0" or "1".
bool parse_flag(const std::string& text, const std::string& what) { return parse_word(text, what, "0|1") == "1"; }

// The most bytes a run may need by run_bytes' estimate (16 GiB), and of training text (1 GiB).
inline constexpr double max_run_bytes = 16.0 * (1ull << 30);
inline constexpr std::size_t max_data_bytes = std::size_t(1) << 30;

// An estimate of the memory a run holds at its peak, for the vocabulary of 256 tokens at most:
// per parameter 8 values (the value, its gradient, AdamW's two moments, the copies in the
// evaluation and serving graphs); per layer, window and position the activations of the
// training graph (forward and backward) and of the evaluation graph, 130 values per channel and
// 12 per attention weight; the one-hot targets; the evaluation windows (int64). Measured peaks
// (RSS, float32) of runs from 140 MB to 4.4 GB were 0.66 to 1.05 times the estimate.
double run_bytes(const Options& o) {
  const Config& c = o.model;
  const double L = static_cast<double>(c.layers), H = static_cast<double>(c.heads), d = static_cast<double>(c.d_model);
  const double T = static_cast<double>(c.block), B = static_cast<double>(o.batch), V = 256;
  const double value = o.dtype == "float64" ? 8 : 4;
  const double params = 2 * V * d + T * d + L * (12 * d * d + 13 * d) + 2 * d;
  const double activations = L * B * T * (130 * d + 12 * H * T) + 4 * B * T * V;
  const double eval_windows = 4 * static_cast<double>(o.eval_batches) * B * T * 8;
  return value * (8 * params + activations) + eval_windows;
}

// The rules that combine options, from the command line or a checkpoint (`where`).
void check_options(const Options& o, const std::string& where) {
  const Config& c = o.model;
  if (c.d_model % c.heads != 0) {
    throw UsageError{where + "--heads " + std::to_string(c.heads) + " does not divide --d-model " + std::to_string(c.d_model)};
  }
  if (c.heads % c.kv() != 0) {
    throw UsageError{where + "--kv-heads " + std::to_string(c.kv()) + " does not divide --heads " + std::to_string(c.heads)};
  }
  if (c.rope && (c.d_model / c.heads) % 2 != 0) {
    throw UsageError{where + "--rope needs an even head dimension, --d-model / --heads is " +
                     std::to_string(c.d_model / c.heads)};
  }
  const double bytes = run_bytes(o);
  if (bytes > max_run_bytes) {
    char gib[32], limit[32];
    std::snprintf(gib, sizeof gib, "%.1f", bytes / (1ull << 30));
    std::snprintf(limit, sizeof limit, "%.0f", max_run_bytes / (1ull << 30));
    throw UsageError{where + "the run would need about " + gib + " GiB (--layers " + std::to_string(c.layers) + " --heads " +
                     std::to_string(c.heads) + " --d-model " + std::to_string(c.d_model) + " --block " +
                     std::to_string(c.block) + " --batch " + std::to_string(o.batch) + " --eval-batches " +
                     std::to_string(o.eval_batches) + ", " + o.dtype +
                     "), more than the " + limit + " GiB char_gpt allows: make the model, --block or --batch smaller"};
  }
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(usage, stdout);
      std::exit(0);
    }
    static const std::set<std::string> known = {
        "--layers", "--heads", "--d-model", "--block", "--dropout", "--dtype", "--batch", "--steps", "--lr",
        "--warmup", "--decay-steps", "--weight-decay", "--seed", "--data", "--eval-every", "--eval-batches",
        "--save", "--resume", "--sample", "--temperature", "--log", "--plot", "--max-val-loss", "--onnx",
        "--kv-heads", "--norm", "--softcap", "--window", "--attn"};
    if (arg == "--rope" || arg == "--qk-norm" || arg == "--flush-denormal") {  // the flags without a value
      o.given.insert(arg);
      (arg == "--rope" ? o.model.rope : arg == "--qk-norm" ? o.model.qk_norm : o.flush_denormal) = true;
      continue;
    }
    if (!known.count(arg) || i + 1 >= argc) throw UsageError{"unknown or incomplete option '" + arg + "'"};
    const std::string v = argv[++i];
    o.given.insert(arg);
    const auto count = [&] { return parse_count(find_rule(count_rules, arg), v, arg); };
    const auto number = [&] { return parse_number(find_rule(number_rules, arg), v, arg); };
    if (arg == "--layers") o.model.layers = count();
    if (arg == "--heads") o.model.heads = count();
    if (arg == "--d-model") o.model.d_model = count();
    if (arg == "--block") o.model.block = count();
    if (arg == "--dropout") o.model.dropout = number();
    if (arg == "--kv-heads") o.model.kv_heads = count();
    if (arg == "--window") o.model.window = count();
    if (arg == "--softcap") o.model.softcap = number();
    if (arg == "--norm") o.model.norm = parse_word(v, arg, "layer|rms");
    if (arg == "--attn") o.model.attn = parse_word(v, arg, "softmax|sigmoid");
    if (arg == "--batch") o.batch = count();
    if (arg == "--steps") o.steps = count();
    if (arg == "--lr") o.schedule.lr = number();
    if (arg == "--warmup") o.schedule.warmup = count();
    if (arg == "--decay-steps") o.decay_steps = count();
    if (arg == "--weight-decay") o.weight_decay = number();
    if (arg == "--seed") o.seed = count();
    if (arg == "--eval-every") o.eval_every = count();
    if (arg == "--eval-batches") o.eval_batches = count();
    if (arg == "--sample") o.sample = count();
    if (arg == "--temperature") o.temperature = number();
    if (arg == "--max-val-loss") o.max_val_loss = number();
    if (arg == "--dtype") o.dtype = parse_dtype(v, arg);
    for (const auto& [name, field] : {std::pair{"--data", &o.data}, {"--save", &o.save}, {"--resume", &o.resume},
                                      {"--log", &o.log}, {"--plot", &o.plot}, {"--onnx", &o.onnx}}) {
      if (arg == name) {
        if (v.empty()) throw UsageError{arg + " needs a file name"};
        *field = v;
      }
    }
  }
  check_options(o, "");
  for (const auto& [option, path] : {std::pair{"--save", o.save}, {"--resume", o.resume}}) {
    if (!path.empty() && !xgrad::ends_with(path, ".safetensors") && !xgrad::ends_with(path, ".npz")) {
      throw UsageError{std::string(option) + " needs a .safetensors or .npz file, not '" + path + "'"};
    }
  }
  if (!o.log.empty() && !xgrad::ends_with(o.log, ".csv")) throw UsageError{"--log needs a .csv file, not '" + o.log + "'"};
  if (!o.plot.empty() && !xgrad::ends_with(o.plot, ".svg")) throw UsageError{"--plot needs a .svg file, not '" + o.plot + "'"};
  if (!o.onnx.empty() && !xgrad::ends_with(o.onnx, ".onnx")) throw UsageError{"--onnx needs a .onnx file, not '" + o.onnx + "'"};
  return o;
}

// ---- Data -----------------------------------------------------------------------------------

// splitmix64 (Steele, Lea and Flood 2014): 64-bit state, one addition and a mix per draw, so
// that its state is one number to save and bench/char_gpt_torch.py draws the same windows.
struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};

struct Corpus {
  std::string source;                 // what was read, for the output and the checkpoint
  std::string chars;                  // the character set: token i is the byte chars[i]
  std::vector<std::uint8_t> train, val;  // token ids (a character set has 256 tokens at most)
};

// The text files of the default corpus in name order: no index (.dat), no symlink (the .u8
// names). None if the directory is missing.
std::vector<std::string> default_corpus_files() {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::string> files;
  if (!fs::is_directory(default_corpus, ec)) return files;
  for (const auto& e : fs::directory_iterator(default_corpus, ec)) {
    if (e.is_regular_file() && !e.is_symlink() && e.path().extension() != ".dat") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The files a run reads that an output may not replace: --data (or the default corpus) and
// --resume, except for --save, which may continue the checkpoint it resumed (read whole before
// the first step, and replaced atomically).
std::vector<std::string> run_inputs(const Options& o, const std::string& option) {
  std::vector<std::string> inputs = o.data.empty() ? default_corpus_files() : std::vector<std::string>{o.data};
  if (!o.resume.empty() && option != "--save") inputs.push_back(o.resume);
  return inputs;
}

// Appends the bytes of a regular file (never a directory, FIFO or device: xgrad::InputFile opens
// without blocking and refuses them) to text, keeping text within max_data_bytes.
void append_file(std::string& text, const std::string& path, const std::string& what) {
  const xgrad::InputFile in(path, what);
  if (in.size() > max_data_bytes - text.size()) {
    throw xgrad::error(what + " holds " + std::to_string(text.size() + in.size()) + " bytes, more than the " +
                       std::to_string(max_data_bytes) + " (" + std::to_string(max_data_bytes >> 30) + " GiB) char_gpt trains on");
  }
  text += in.read(0, in.size());
}

Corpus load_corpus(const std::string& data, std::size_t block) {
  Corpus c;
  std::string text;
  if (!data.empty()) {
    append_file(text, data, "--data " + data);
    c.source = data;
  } else {
    const std::vector<std::string> files = default_corpus_files();
    if (files.empty()) {
      throw UsageError{std::string("the default corpus ") + default_corpus +
                       " is missing: install Debian's fortunes package (./tools/setup does) or give --data FILE"};
    }
    for (const auto& f : files) append_file(text, f, "the default corpus: " + f);
    c.source = std::string(default_corpus) + " (" + std::to_string(files.size()) + " files)";
  }
  bool present[256] = {};
  for (const unsigned char b : text) present[b] = true;
  std::uint8_t id_of[256] = {};
  for (int b = 0; b < 256; ++b) {
    if (present[b]) {
      id_of[b] = static_cast<std::uint8_t>(c.chars.size());
      c.chars.push_back(static_cast<char>(b));
    }
  }
  const std::size_t split = text.size() * 9 / 10;
  c.train.reserve(split);
  c.val.reserve(text.size() - split);
  for (std::size_t i = 0; i < text.size(); ++i) {
    (i < split ? c.train : c.val).push_back(id_of[static_cast<unsigned char>(text[i])]);
  }
  if (c.val.size() < block + 1) {
    throw UsageError{c.source + " has " + std::to_string(text.size()) + " bytes: its last 10% must hold a window of --block " +
                     std::to_string(block) + " tokens and one more (" + std::to_string((block + 1) * 10) +
                     " bytes at least)"};
  }
  return c;
}

// `batch` windows of the split, starting at positions drawn from rng: x (B, T) and their
// successors y (B, T).
std::pair<xt::xarray<std::int64_t>, xt::xarray<std::int64_t>> windows(const std::vector<std::uint8_t>& tokens,
                                                                      std::size_t batch, std::size_t block,
                                                                      SplitMix64& rng) {
  xt::xarray<std::int64_t> x = xt::zeros<std::int64_t>({batch, block}), y = x;
  for (std::size_t b = 0; b < batch; ++b) {
    const std::size_t start = static_cast<std::size_t>(rng.next() % (tokens.size() - block));
    for (std::size_t t = 0; t < block; ++t) {
      x(b, t) = tokens[start + t];
      y(b, t) = tokens[start + t + 1];
    }
  }
  return {x, y};
}

std::string hex(const std::string& bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string s;
  for (const unsigned char b : bytes) s += {digits[b >> 4], digits[b & 15]};
  return s;
}

// ---- Statistics of an evaluation ------------------------------------------------------------

struct Evaluation {
  std::size_t step = 0;
  double train_loss = 0, val_loss = 0, lr = 0;
  std::vector<std::vector<double>> entropy;  // [layer][head]: mean normalised entropy of its rows
  std::vector<double> max_weight, gradient_gain;  // [layer]: means over the layer's rows
};

std::string csv_header(const Config& c) {
  std::string h = "step,train_loss,val_loss,lr";
  for (std::size_t l = 0; l < c.layers; ++l) {
    for (std::size_t k = 0; k < c.heads; ++k) h += ",entropy_l" + std::to_string(l) + "_h" + std::to_string(k);
  }
  for (std::size_t l = 0; l < c.layers; ++l) h += ",max_weight_l" + std::to_string(l);
  for (std::size_t l = 0; l < c.layers; ++l) h += ",gradient_gain_l" + std::to_string(l);
  return h + "\n";
}

std::string csv_row(const Evaluation& e) {
  std::ostringstream s;
  s.precision(9);
  s << e.step << ',' << e.train_loss << ',' << e.val_loss << ',' << e.lr;
  for (const auto& layer : e.entropy) {
    for (const double h : layer) s << ',' << h;
  }
  for (const double w : e.max_weight) s << ',' << w;
  for (const double g : e.gradient_gain) s << ',' << g;
  s << '\n';
  return s.str();
}

// Three panels stacked, against the step: the train and val loss; each head's mean normalised
// attention entropy (one colour per layer, one dash pattern per head); each layer's mean
// gradient gain through its softmax.
std::string plot_svg(const std::vector<Evaluation>& evals, const Config& c, const std::string& title) {
  const double width = 760, left = 70, right = 600, panel_h = 220, gap = 70, top1 = 60, top2 = top1 + panel_h + gap;
  const double top3 = top2 + panel_h + gap, height = top3 + panel_h + 50;
  const double last_step = std::max<double>(1.0, static_cast<double>(evals.empty() ? 1 : evals.back().step));
  double first_step = evals.empty() ? 0 : static_cast<double>(evals.front().step);
  if (first_step >= last_step) first_step = 0;
  double loss_hi = 0, loss_lo = HUGE_VAL;
  for (const auto& e : evals) {
    for (const double v : {e.train_loss, e.val_loss}) {
      if (std::isfinite(v)) loss_hi = std::max(loss_hi, v), loss_lo = std::min(loss_lo, v);
    }
  }
  if (!(loss_lo < loss_hi)) loss_lo = 0, loss_hi = std::max(1.0, loss_hi);
  const double loss_tick = loss_hi - loss_lo <= 5 ? 0.5 : std::ceil((loss_hi - loss_lo) / 5);
  loss_lo = std::floor(loss_lo / loss_tick) * loss_tick, loss_hi = std::ceil(loss_hi / loss_tick) * loss_tick;
  const auto x_of = [&](std::size_t step) {
    return left + (static_cast<double>(step) - first_step) / (last_step - first_step) * (right - left);
  };
  std::ostringstream s;
  s.precision(5);
  s << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width
    << "\" height=\"" << height << "\" viewBox=\"0 0 " << width << " " << height
    << "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
       "fill=\"white\"/>\n<text x=\""
    << (left + right) / 2 << "\" y=\"26\" text-anchor=\"middle\" font-size=\"15\">" << title << "</text>\n";
  const auto panel = [&](double top, double lo, double hi, const char* label, int ticks) {
    const double bottom = top + panel_h;
    for (int i = 0; i <= ticks; ++i) {
      const double v = lo + (hi - lo) * i / ticks, y = bottom - (v - lo) / (hi - lo) * panel_h;
      s << "<line x1=\"" << left << "\" y1=\"" << y << "\" x2=\"" << right << "\" y2=\"" << y
        << "\" stroke=\"#dddddd\"/>\n<text x=\"" << left - 6 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">" << v
        << "</text>\n";
    }
    for (int i = 0; i <= 4; ++i) {
      const double step = first_step + (last_step - first_step) * i / 4, x = x_of(static_cast<std::size_t>(step));
      s << "<text x=\"" << x << "\" y=\"" << bottom + 16 << "\" text-anchor=\"middle\">" << std::llround(step)
        << "</text>\n";
    }
    s << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << right - left << "\" height=\"" << panel_h
      << "\" fill=\"none\" stroke=\"#333333\"/>\n<text x=\"" << (left + right) / 2 << "\" y=\"" << top - 8
      << "\" text-anchor=\"middle\" font-size=\"13\">" << label << "</text>\n";
    return [=, &s](const std::vector<double>& ys, const std::string& colour, const char* dash, const std::string& id) {
      s << "<polyline id=\"" << id << "\" fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"1.8\""
        << (dash[0] ? std::string(" stroke-dasharray=\"") + dash + "\"" : std::string()) << " points=\"";
      for (std::size_t i = 0; i < ys.size(); ++i) {
        const double v = std::clamp(std::isfinite(ys[i]) ? ys[i] : hi, lo, hi);
        s << x_of(evals[i].step) << "," << top + panel_h - (v - lo) / (hi - lo) * panel_h << " ";
      }
      s << "\"/>\n";
    };
  };
  const auto series = [&](auto get) {
    std::vector<double> ys;
    for (const auto& e : evals) ys.push_back(get(e));
    return ys;
  };
  const auto legend = [&](double y, const std::string& colour, const char* dash, const std::string& text) {
    s << "<line x1=\"" << right + 14 << "\" y1=\"" << y << "\" x2=\"" << right + 44 << "\" y2=\"" << y << "\" stroke=\""
      << colour << "\" stroke-width=\"1.8\"" << (dash[0] ? std::string(" stroke-dasharray=\"") + dash + "\"" : "")
      << "/>\n<text x=\"" << right + 50 << "\" y=\"" << y + 4 << "\">" << text << "</text>\n";
  };
  const auto loss_line = panel(top1, loss_lo, loss_hi, "loss (cross-entropy, nats per character)",
                                static_cast<int>(std::lround((loss_hi - loss_lo) / loss_tick)));
  loss_line(series([](const Evaluation& e) { return e.train_loss; }), "#999999", "4 3", "train_loss");
  loss_line(series([](const Evaluation& e) { return e.val_loss; }), "#000000", "", "val_loss");
  legend(top1 + 10, "#999999", "4 3", "train");
  legend(top1 + 28, "#000000", "", "val");
  const auto entropy_line = panel(top2, 0, 1, "mean normalised attention entropy of each head", 5);
  static const char* const colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};
  static const char* const dashes[] = {"", "6 3", "2 2", "8 3 2 3"};
  for (std::size_t l = 0; l < c.layers; ++l) {
    for (std::size_t k = 0; k < c.heads; ++k) {
      entropy_line(series([&](const Evaluation& e) { return e.entropy[l][k]; }), colours[l % 8], dashes[k % 4],
                   "entropy_l" + std::to_string(l) + "_h" + std::to_string(k));
    }
    legend(top2 + 10 + 18.0 * static_cast<double>(l), colours[l % 8], "", "layer " + std::to_string(l));
  }
  for (std::size_t k = 0; k < std::min<std::size_t>(c.heads, 4); ++k) {
    legend(top2 + 30 + 18.0 * static_cast<double>(c.layers + k), "#555555", dashes[k], "head " + std::to_string(k));
  }
  double gain_hi = 0;
  for (const auto& e : evals) {
    for (const double v : e.gradient_gain) gain_hi = std::isfinite(v) ? std::max(gain_hi, v) : gain_hi;
  }
  gain_hi = gain_hi > 0 ? std::ceil(gain_hi * 1.1 * 20) / 20 : 1.0;  // a multiple of 0.05
  const auto gain_line = panel(top3, 0, gain_hi, "mean gradient gain through each layer's softmax", 5);
  for (std::size_t l = 0; l < c.layers; ++l) {
    gain_line(series([&](const Evaluation& e) { return e.gradient_gain[l]; }), colours[l % 8], "",
              "gradient_gain_l" + std::to_string(l));
    legend(top3 + 10 + 18.0 * static_cast<double>(l), colours[l % 8], "", "layer " + std::to_string(l));
  }
  s << "<text x=\"" << (left + right) / 2 << "\" y=\"" << height - 12 << "\" text-anchor=\"middle\">step</text>\n</svg>\n";
  return s.str();
}

std::string duration(double seconds) {
  char buf[32];
  const long s = std::lround(seconds);
  std::snprintf(buf, sizeof buf, s >= 60 ? "%ldm%02lds" : "%ld.%lds", s >= 60 ? s / 60 : long(seconds),
                s >= 60 ? s % 60 : long(seconds * 10) % 10);
  return buf;
}

// ---- Output files ---------------------------------------------------------------------------

// The files a run writes, with their options.
std::vector<std::pair<std::string, std::string>> run_outputs(const Options& o) {
  std::vector<std::pair<std::string, std::string>> outputs;
  for (const auto& [option, path] : {std::pair{"--save", o.save}, {"--onnx", o.onnx}, {"--log", o.log}, {"--plot", o.plot}}) {
    if (!path.empty()) outputs.emplace_back(option, path);
  }
  return outputs;
}

// Refuses, before anything is read or trained, an output that could not be written or would
// destroy an input (xgrad::check_output_path), and two outputs that are one file.
void check_outputs(const Options& o) {
  namespace fs = std::filesystem;
  const auto outputs = run_outputs(o);
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const auto& [option, path] = outputs[i];
    try {
      xgrad::check_output_path(path, run_inputs(o, option));
    } catch (const xgrad::error& e) {
      throw UsageError{option + " " + e.what()};
    }
    for (std::size_t j = 0; j < i; ++j) {
      std::error_code ec1, ec2;
      const fs::path a = fs::weakly_canonical(path, ec1), b = fs::weakly_canonical(outputs[j].second, ec2);
      if (!ec1 && !ec2 && a == b) {
        throw UsageError{outputs[j].first + " and " + option + " name one file, " + a.string()};
      }
    }
  }
}

// Writes an output whole or not at all (xgrad::write_file_atomically: a fresh temporary beside
// it, every write checked, renamed over it; never over an input). Errors name the option.
void write_output(const Options& o, const std::string& option, const std::string& path, const std::string& bytes) {
  try {
    xgrad::write_file_atomically(path, bytes, run_inputs(o, option));
  } catch (const xgrad::error& e) {
    throw xgrad::error(option + " " + e.what());
  }
}

// ---- Training -------------------------------------------------------------------------------

// The attention variants of a model, as the options that set them (", rope, kv-heads 2"), or "".
std::string variants(const Config& c) {
  std::ostringstream s;
  if (c.rope) s << ", rope";
  if (c.kv() != c.heads) s << ", kv-heads " << c.kv();
  if (c.norm != "layer") s << ", " << c.norm << " norm";
  if (c.qk_norm) s << ", qk-norm";
  if (c.softcap > 0) s << ", softcap " << c.softcap;
  if (c.window > 0) s << ", window " << c.window;
  if (c.attn != "softmax") s << ", " << c.attn << " attention";
  return s.str();
}

// The checkpoint's metadata: everything that fixes the run, so that --resume rebuilds it.
xgrad::CheckpointMetadata run_metadata(const Options& o, const Corpus& corpus) {
  const auto num = [](double x) {
    std::ostringstream s;
    s.precision(17);
    s << x;
    return s.str();
  };
  return {{"program", "char_gpt"},
          {"layers", std::to_string(o.model.layers)},
          {"heads", std::to_string(o.model.heads)},
          {"d_model", std::to_string(o.model.d_model)},
          {"block", std::to_string(o.model.block)},
          {"vocab", std::to_string(o.model.vocab)},
          {"dropout", num(o.model.dropout)},
          {"rope", o.model.rope ? "1" : "0"},
          {"kv_heads", std::to_string(o.model.kv())},
          {"norm", o.model.norm},
          {"qk_norm", o.model.qk_norm ? "1" : "0"},
          {"softcap", num(o.model.softcap)},
          {"window", std::to_string(o.model.window)},
          {"attn", o.model.attn},
          {"dtype", o.dtype},
          {"batch", std::to_string(o.batch)},
          {"lr", num(o.schedule.lr)},
          {"warmup", std::to_string(o.schedule.warmup)},
          {"decay_steps", std::to_string(o.schedule.decay_steps)},
          {"weight_decay", num(o.weight_decay)},
          {"seed", std::to_string(o.seed)},
          {"eval_batches", std::to_string(o.eval_batches)},
          {"chars", hex(corpus.chars)},
          {"data", corpus.source}};
}

// Where a checkpoint left off: the updates done, the window generator's state, its character set.
struct ResumePoint {
  std::size_t step = 0;
  std::uint64_t data_rng = 0;
  std::string chars, data;
};

// --resume: the options a checkpoint fixes come from it; one given on the command line must agree.
ResumePoint apply_resume_metadata(Options& o, const xgrad::CheckpointMetadata& meta, const std::string& path) {
  const auto get = [&](const std::string& key) {
    const auto it = meta.find(key);
    if (it == meta.end()) throw UsageError{path + " is not a char_gpt checkpoint: its metadata has no '" + key + "'"};
    return it->second;
  };
  if (get("program") != "char_gpt") throw UsageError{path + " is not a char_gpt checkpoint"};
  // Each value read with the rule of its option: the same bounds, the message naming the file and key.
  const auto count = [&](const std::string& key) { return parse_count(find_rule(count_rules, key), get(key), path + "'s " + key); };
  const auto number = [&](const std::string& key) {
    return parse_number(find_rule(number_rules, key), get(key), path + "'s " + key);
  };
  const auto take = [&](const char* option, const char* key, auto& field, auto stored) {
    if (o.given.count(option) && field != stored) {
      throw UsageError{std::string(option) + " differs from the " + key + " of " + path + " (" +
                       (meta.count(key) ? get(key) : std::string("none: the default")) +
                       "): a resumed run keeps its model, data and schedule"};
    }
    field = stored;
  };
  take("--layers", "layers", o.model.layers, count("layers"));
  take("--heads", "heads", o.model.heads, count("heads"));
  take("--d-model", "d_model", o.model.d_model, count("d_model"));
  take("--block", "block", o.model.block, count("block"));
  take("--dropout", "dropout", o.model.dropout, number("dropout"));
  // The attention variants: a checkpoint from before them has none of these keys, and is the
  // default model.
  const auto variant = [&](const char* key) { return meta.count(key) != 0; };
  take("--rope", "rope", o.model.rope, variant("rope") && parse_flag(get("rope"), path + "'s rope"));
  std::size_t kv = o.model.kv();
  take("--kv-heads", "kv_heads", kv, variant("kv_heads") ? count("kv_heads") : o.model.heads);
  o.model.kv_heads = kv;
  take("--norm", "norm", o.model.norm, variant("norm") ? parse_word(get("norm"), path + "'s norm", "layer|rms") : "layer");
  take("--qk-norm", "qk_norm", o.model.qk_norm, variant("qk_norm") && parse_flag(get("qk_norm"), path + "'s qk_norm"));
  take("--softcap", "softcap", o.model.softcap, variant("softcap") && get("softcap") != "0" ? number("softcap") : 0.0);
  take("--window", "window", o.model.window, variant("window") && get("window") != "0" ? count("window") : 0);
  take("--attn", "attn", o.model.attn,
       variant("attn") ? parse_word(get("attn"), path + "'s attn", "softmax|sigmoid") : "softmax");
  take("--dtype", "dtype", o.dtype, parse_dtype(get("dtype"), path + "'s dtype"));
  take("--batch", "batch", o.batch, count("batch"));
  take("--lr", "lr", o.schedule.lr, number("lr"));
  take("--warmup", "warmup", o.schedule.warmup, count("warmup"));
  std::size_t decay = o.decay_steps.value_or(0);
  take("--decay-steps", "decay_steps", decay, count("decay_steps"));
  o.decay_steps = decay;
  take("--weight-decay", "weight_decay", o.weight_decay, number("weight_decay"));
  take("--seed", "seed", o.seed, count("seed"));
  take("--eval-batches", "eval_batches", o.eval_batches, count("eval_batches"));
  check_options(o, path + "'s metadata: ");
  ResumePoint r;
  r.step = count("step");
  r.data_rng = std::strtoull(get("data_rng").c_str(), nullptr, 10);
  if (get("data_rng") != std::to_string(r.data_rng)) throw UsageError{path + "'s data_rng is not a 64-bit number"};
  r.chars = get("chars");
  r.data = get("data");
  return r;
}

// Trains in T, from the start or from `resumed` (with --resume).
template <class T>
int train(Options o, const std::optional<ResumePoint>& resumed) {
  xgrad::TensorFile<T> state;
  if (!o.resume.empty()) state = xgrad::load_tensors<T>(o.resume);
  o.schedule.decay_steps = o.decay_steps.value_or(o.steps);
  const Corpus corpus = load_corpus(o.data, o.model.block);
  o.model.vocab = corpus.chars.size();
  if (resumed && resumed->chars != hex(corpus.chars)) {
    throw UsageError{"the character set of " + corpus.source + " differs from that of " + o.resume + " (" +
                     resumed->data + ")"};
  }
  if (corpus.train.size() < o.model.block + 1) throw UsageError{corpus.source + " is too short for --block"};

  Graph<T> g;
  const Model<T> m = char_gpt::build_model(g, o.model, o.batch, o.seed);
  const std::vector<Var<T>> params = char_gpt::parameters(m);
  char_gpt::Trainer<T> trainer(m, o.weight_decay);

  // Evaluation replays a forward-only copy of the model (no backward to compute), fed the
  // current parameters; the attention statistics replay the training graph on one val batch
  // in evaluation mode, for the softmax gradients' gains.
  Graph<T> ge;
  const Model<T> me = char_gpt::build_model(ge, o.model, o.batch, o.seed);
  const std::vector<Var<T>> eval_params = char_gpt::parameters(me);
  ge.set_training(false);
  SplitMix64 eval_rng{o.seed + 1};
  std::vector<std::pair<xt::xarray<std::int64_t>, xt::xarray<std::int64_t>>> val_batches, train_batches;
  for (std::size_t i = 0; i < o.eval_batches; ++i) val_batches.push_back(windows(corpus.val, o.batch, o.model.block, eval_rng));
  for (std::size_t i = 0; i < o.eval_batches; ++i) train_batches.push_back(windows(corpus.train, o.batch, o.model.block, eval_rng));

  SplitMix64 rng{o.seed};
  std::size_t step = 0;
  if (!o.resume.empty()) {
    const auto tensor = [&](const std::string& name, const Var<T>& like) {
      const xt::xarray<T>* t = state.find(name);
      if (!t || !xgrad::shapes_equal(t->shape(), like.value().shape())) {
        throw UsageError{o.resume + ": tensor '" + name + "' is " + (t ? xgrad::shape_str(t->shape()) : "missing") +
                         ", the model needs " + xgrad::shape_str(like.value().shape())};
      }
      return *t;
    };
    step = resumed->step;
    rng.state = resumed->data_rng;
    for (auto* opt : {&trainer.decayed, &trainer.other}) {
      const auto& group = opt == &trainer.decayed ? m.decayed : m.not_decayed;
      xgrad::AdamState<T> s;
      s.step = static_cast<long>(step);
      for (const auto& p : group) {
        const std::string& name = p.node().name;
        g.set_value(p, tensor(name, p));
        s.m.push_back(tensor("adamw.m." + name, p));
        s.v.push_back(tensor("adamw.v." + name, p));
      }
      opt->set_state(std::move(s));
    }
  }
  const auto save = [&] {
    std::map<std::string, xt::xarray<T>> tensors;
    for (const auto* opt : {&trainer.decayed, &trainer.other}) {
      const auto& group = opt == &trainer.decayed ? m.decayed : m.not_decayed;
      for (std::size_t i = 0; i < group.size(); ++i) {
        const std::string& name = group[i].node().name;
        tensors[name] = group[i].value();
        tensors["adamw.m." + name] = opt->state().m[i];
        tensors["adamw.v." + name] = opt->state().v[i];
      }
    }
    auto meta = run_metadata(o, corpus);
    meta["step"] = std::to_string(step);
    meta["data_rng"] = std::to_string(rng.state);
    write_output(o, "--save", o.save, xgrad::checkpoint_bytes(tensors, meta, xgrad::checkpoint_format(o.save), o.save));
  };

  const auto evaluate = [&] {
    Evaluation e;
    e.step = step;
    e.lr = char_gpt::learning_rate(o.schedule, step == 0 ? 0 : step - 1);
    for (std::size_t i = 0; i < params.size(); ++i) ge.set_value(eval_params[i], params[i].value());
    for (auto* split : {&train_batches, &val_batches}) {
      double sum = 0;
      for (const auto& [x, y] : *split) {
        char_gpt::feed(ge, me, x, y);
        ge.replay();
        sum += static_cast<double>(me.loss.value()());
      }
      (split == &val_batches ? e.val_loss : e.train_loss) = sum / static_cast<double>(split->size());
    }
    g.set_training(false);
    char_gpt::feed(g, m, val_batches[0].first, val_batches[0].second);
    g.replay();
    // Sigmoid weights are no softmax: their rows' statistics are those of the rows normalised.
    std::vector<xgrad::SoftmaxDiagnostics> diagnostics;
    if (o.model.attn == "sigmoid") {
      for (std::size_t l = 0; l < m.attention_weights.size(); ++l) {
        diagnostics.push_back(xgrad::attention_weights_diagnostics(m.attention_weights[l], m.attention_logits[l]));
      }
    } else {
      diagnostics = xgrad::softmax_diagnostics(g, 0.99, true);
    }
    g.set_training(true);
    const std::size_t T_ = o.model.block, H = o.model.heads;
    for (const auto& weights : m.attention_weights) {
      const auto d = std::find_if(diagnostics.begin(), diagnostics.end(),
                                  [&](const xgrad::SoftmaxDiagnostics& s) { return s.node == weights.id(); });
      if (d == diagnostics.end()) throw std::logic_error("no diagnostics for attention node " + std::to_string(weights.id()));
      std::vector<double> per_head(H, 0.0);
      for (std::size_t r = 0; r < d->rows.size(); ++r) per_head[(r / T_) % H] += d->rows[r].normalized_entropy;
      for (double& h : per_head) h /= static_cast<double>(d->rows.size() / H);
      e.entropy.push_back(per_head);
      e.max_weight.push_back(d->max_weight.mean);
      e.gradient_gain.push_back(d->gradient_gain ? d->gradient_gain->mean : NAN);
    }
    return e;
  };

  std::printf("char_gpt: %s, %zu characters (%zu train, %zu val), %zu tokens in its character set\n",
              corpus.source.c_str(), corpus.train.size() + corpus.val.size(), corpus.train.size(), corpus.val.size(),
              corpus.chars.size());
  std::size_t n_params = 0;
  for (const auto& p : params) n_params += p.value().size();
  std::printf("model: %zu layers, %zu heads, d_model %zu, block %zu%s, %zu parameters, %s; batch %zu, %zu steps%s\n",
              o.model.layers, o.model.heads, o.model.d_model, o.model.block, variants(o.model).c_str(), n_params,
              o.dtype.c_str(), o.batch,
              o.steps, o.resume.empty() ? "" : (", resumed at step " + std::to_string(step)).c_str());
  std::fflush(stdout);

  // The log is small (a row per evaluation): its text is kept and the whole file rewritten at
  // each evaluation, atomically, so that it is never half a row or lost to a failed write.
  std::string log_text = o.log.empty() ? "" : csv_header(o.model);
  std::vector<Evaluation> evals;
  const bool progress = isatty(STDERR_FILENO);
  const auto start = std::chrono::steady_clock::now();
  const std::size_t first_step = step;
  const auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  const auto report = [&] {
    const Evaluation e = evaluate();
    if (progress) std::fputs("\r\033[K", stderr);
    std::printf("step %5zu  train %.4f  val %.4f  lr %.2e  %s\n", e.step, e.train_loss, e.val_loss, e.lr,
                duration(seconds()).c_str());
    std::fflush(stdout);
    if (!o.log.empty()) {
      log_text += csv_row(e);
      write_output(o, "--log", o.log, log_text);
    }
    evals.push_back(e);
    if (!o.save.empty()) save();
  };

  report();
  while (step < o.steps) {
    const auto [x, y] = windows(corpus.train, o.batch, o.model.block, rng);
    char_gpt::feed(g, m, x, y);
    g.set_step(step);  // the dropout masks of this step
    const double loss = trainer.step(char_gpt::learning_rate(o.schedule, step));
    ++step;
    if (progress) {
      const double t = seconds(), done = static_cast<double>(step - first_step);
      std::fprintf(stderr, "\r\033[Kstep %zu/%zu  loss %.4f  %.0f tokens/s  ETA %s", step, o.steps, loss,
                   done * static_cast<double>(o.batch * o.model.block) / t,
                   duration(t / done * static_cast<double>(o.steps - step)).c_str());
    }
    if (step % o.eval_every == 0 || step == o.steps) report();
  }
  if (progress) std::fputs("\r\033[K", stderr);
  const double elapsed = seconds();
  std::printf("trained %zu steps in %s (%.0f tokens/s, evaluations included)\n", step - first_step,
              duration(elapsed).c_str(),
              static_cast<double>((step - first_step) * o.batch * o.model.block) / std::max(elapsed, 1e-9));
  if (!o.plot.empty()) {
    std::ostringstream title;
    title << "char_gpt: " << o.model.layers << " layers, " << o.model.heads << " heads, d " << o.model.d_model
          << variants(o.model) << ", lr " << o.schedule.lr;
    write_output(o, "--plot", o.plot, plot_svg(evals, o.model, title.str()));
  }

  // The model for one window of ids in evaluation mode, with the trained parameters: sampling
  // replays it, --onnx writes it.
  const auto serving_model = [&](Graph<T>& gs) {
    const Model<T> ms = char_gpt::build_model(gs, o.model, 1, o.seed);
    const auto serving_params = char_gpt::parameters(ms);
    for (std::size_t i = 0; i < params.size(); ++i) gs.set_value(serving_params[i], params[i].value());
    gs.set_training(false);
    gs.replay();
    return ms;
  };
  if (!o.onnx.empty()) {
    Graph<T> gs;
    const Model<T> ms = serving_model(gs);
    gs.set_output("logits", ms.logits);
    xt::xarray<T> bytes = xt::zeros<T>({corpus.chars.size()});
    for (std::size_t i = 0; i < corpus.chars.size(); ++i) bytes(i) = static_cast<unsigned char>(corpus.chars[i]);
    gs.set_output("chars", gs.constant("chars", bytes));
    write_output(o, "--onnx", o.onnx, xgrad::to_onnx_bytes(gs));
    std::printf("wrote %s: ids (1, %zu) int64 -> logits (1, %zu, %zu), chars (%zu), %s\n", o.onnx.c_str(), o.model.block,
                o.model.block, o.model.vocab, o.model.vocab, o.dtype.c_str());
  }

  if (o.sample > 0) {
    // One window, the last `block` characters: with causal attention the logits at position i
    // depend on tokens 0..i only, so a shorter context fills the first positions.
    Graph<T> gs;
    const Model<T> ms = serving_model(gs);
    SplitMix64 sample_rng{o.seed + 2};
    const auto newline = corpus.chars.find('\n');
    std::vector<std::int64_t> context = {newline == std::string::npos ? 0 : static_cast<std::int64_t>(newline)};
    std::string text;
    xt::xarray<std::int64_t> ids = xt::zeros<std::int64_t>({std::size_t(1), o.model.block});
    for (std::size_t n = 0; n < o.sample; ++n) {
      const std::size_t len = std::min(context.size(), o.model.block);
      for (std::size_t t = 0; t < len; ++t) ids(0, t) = context[context.size() - len + t];
      char_gpt::feed(gs, ms, ids, xt::xarray<std::int64_t>(xt::zeros<std::int64_t>({std::size_t(1), o.model.block})));
      gs.replay();
      const auto& logits = ms.logits.value();
      const std::size_t V = o.model.vocab;
      std::vector<double> p(V);
      double hi = -HUGE_VAL, total = 0;
      for (std::size_t v = 0; v < V; ++v) hi = std::max(hi, static_cast<double>(logits(0, len - 1, v)) / o.temperature);
      for (std::size_t v = 0; v < V; ++v) total += p[v] = std::exp(static_cast<double>(logits(0, len - 1, v)) / o.temperature - hi);
      double u = static_cast<double>(sample_rng.next() >> 11) * 0x1p-53 * total;
      std::size_t pick = 0;
      while (pick + 1 < V && u >= p[pick]) u -= p[pick++];
      context.push_back(static_cast<std::int64_t>(pick));
      text += corpus.chars[pick];
    }
    std::printf("--- %zu sampled characters (temperature %g) ---\n%s\n---\n", o.sample, o.temperature, text.c_str());
  }
  if (o.max_val_loss) {
    const double v = evals.back().val_loss;
    const bool ok = v < *o.max_val_loss;
    std::printf("%s: val loss %.4f %s %g\n", ok ? "PASS" : "FAIL", v, ok ? "<" : ">=", *o.max_val_loss);
    return ok ? 0 : 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  xgrad::ignore_file_size_signal();  // past a file-size limit (ulimit -f) a write fails: an error, not a kill
  xgrad::use_best_blas_kernels();    // OpenBLAS's best kernels for this CPU (docs/performance.md)
  try {
    Options o = parse(argc, argv);
    if (o.flush_denormal && !xgrad::set_flush_denormal(true)) {
      throw UsageError{"--flush-denormal: this CPU has no flush-to-zero mode (x86-64 only)"};
    }
    check_outputs(o);
    std::optional<ResumePoint> resumed;
    if (!o.resume.empty()) {  // the model, its dtype and the schedule come from the checkpoint
      resumed = apply_resume_metadata(o, xgrad::read_checkpoint_metadata(o.resume), o.resume);
    }
    return o.dtype == "float64" ? train<double>(o, resumed) : train<float>(o, resumed);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "char_gpt: %s\n(char_gpt --help lists the options)\n", e.message.c_str());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "char_gpt: out of memory: make the model (--layers, --d-model), --block or --batch smaller\n");
    return 2;
  } catch (const std::exception& e) {  // xgrad::error: a checkpoint, a file read or written
    std::fprintf(stderr, "char_gpt: %s\n", e.what());
    return 2;
  }
}
