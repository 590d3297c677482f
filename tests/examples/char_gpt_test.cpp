// examples/char_gpt: its model and training step against PyTorch (tests/data/make_char_gpt_fixture.py),
// and the program's checkpoints: a resumed run is bit for bit the uninterrupted one.
#include <sys/stat.h>

#include <chrono>
#include <optional>
#include <sstream>
#include <tuple>

#include "../check.hpp"
#include "../tools/sandbox.hpp"

#include "../../examples/char_gpt.hpp"

namespace {

using namespace xgrad::test;

const std::string fixture_dir = XGRAD_TEST_DATA "/char_gpt/";

std::size_t meta_count(const CheckpointMetadata& meta, const std::string& key) { return std::stoul(meta.at(key)); }

// |a - b| <= tol * max(1, |b|) for every element.
void check_near(const xt::xarray<double>& actual, const xt::xarray<double>& expected, double tol, const std::string& what) {
  BOOST_TEST_REQUIRE(shapes_equal(actual.shape(), expected.shape()), what);
  double worst = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    worst = std::max(worst, std::abs(actual.data()[i] - expected.data()[i]) / std::max(1.0, std::abs(expected.data()[i])));
  }
  BOOST_TEST(worst <= tol, what << ": worst relative difference " << worst << " > " << tol);
}

// A directory with corpus.txt of 300 lines "the quick brown fox N jumps.", N pseudo-random below
// 1000: a corpus with some structure to learn.
struct FoxBox : Sandbox {
  FoxBox() {
    std::string text;
    for (int i = 0; i < 300; ++i) text += "the quick brown fox " + std::to_string(i * 7919 % 1000) + " jumps.\n";
    write_text(dir / "corpus.txt", text);
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(char_gpt)

BOOST_AUTO_TEST_CASE(ten_adamw_steps_match_pytorch) {
  // The PyTorch model of bench/char_gpt_torch.py in float64, from the same initial parameters on
  // one batch: the 11 losses within 1e-10 relative, the final parameters within 1e-9.
  const auto init = load_tensors<double>(fixture_dir + "init.safetensors");
  const auto final_params = load_tensors<double>(fixture_dir + "final.safetensors");
  const auto steps = load_tensors<double>(fixture_dir + "steps.safetensors");
  const CheckpointMetadata& meta = init.metadata;
  char_gpt::Config c;
  c.layers = meta_count(meta, "layers");
  c.heads = meta_count(meta, "heads");
  c.d_model = meta_count(meta, "d_model");
  c.block = meta_count(meta, "block");
  c.vocab = meta_count(meta, "vocab");
  const char_gpt::Schedule schedule{std::stod(meta.at("lr")), meta_count(meta, "warmup"), meta_count(meta, "decay_steps")};

  Graph<double> g;
  const auto model = char_gpt::build_model(g, c, steps.find("x")->shape()[0], 7);
  const auto params = char_gpt::parameters(model);
  BOOST_TEST(params.size() == init.tensors.size());  // one to one with PyTorch's parameters
  for (const auto& p : params) {
    const auto* t = init.find(p.node().name);
    BOOST_TEST_REQUIRE(t, "the fixture has no " << p.node().name);
    g.set_value(p, *t);
  }
  char_gpt::Trainer<double> trainer(model, std::stod(meta.at("weight_decay")));
  char_gpt::feed(g, model, xt::xarray<std::int64_t>(xt::cast<std::int64_t>(*steps.find("x"))),
                 xt::xarray<std::int64_t>(xt::cast<std::int64_t>(*steps.find("y"))));
  const xt::xarray<double>& torch_losses = *steps.find("losses");
  const xt::xarray<double>& torch_lrs = *steps.find("lr");
  xt::xarray<double> losses = xt::zeros<double>(torch_losses.shape());
  for (std::size_t k = 0; k + 1 < losses.size(); ++k) {
    BOOST_TEST(char_gpt::learning_rate(schedule, k) == torch_lrs(k), "the schedule at step " << k);
    losses(k) = trainer.step(char_gpt::learning_rate(schedule, k));
  }
  g.replay();
  losses(losses.size() - 1) = model.loss.value()();
  check_near(losses, torch_losses, 1e-10, "losses");
  BOOST_TEST(trainer.decayed.state().step == 10);
  for (const auto& p : params) check_near(p.value(), *final_params.find(p.node().name), 1e-9, p.node().name);
}

BOOST_AUTO_TEST_CASE(learning_rate_warms_up_then_decays_to_a_tenth) {
  const char_gpt::Schedule s{1e-3, 100, 2000};
  BOOST_TEST(char_gpt::learning_rate(s, 0) == 1e-3 * 1 / 101);
  BOOST_TEST(char_gpt::learning_rate(s, 99) == 1e-3 * 100 / 101);
  BOOST_TEST(char_gpt::learning_rate(s, 100) == 1e-3);
  BOOST_TEST(std::abs(char_gpt::learning_rate(s, 1050) - 0.55e-3) < 1e-15);  // half way down the cosine
  BOOST_TEST(char_gpt::learning_rate(s, 2000) == 1e-4);
  BOOST_TEST(char_gpt::learning_rate(s, 5000) == 1e-4);
  BOOST_TEST(char_gpt::learning_rate({1e-3, 10, 5}, 10) == 1e-4);  // decay ending before the warm-up
}

#ifdef XGRAD_CHAR_GPT
BOOST_AUTO_TEST_CASE(a_resumed_run_is_the_uninterrupted_run_bit_for_bit) {
  // 20 steps in one run, and 10 steps of the same 20-step schedule resumed for 10 more, with
  // dropout on (the masks follow the step): the same parameters, AdamW moments, data position
  // and last evaluation, in float32 and float64, through .safetensors and .npz.
  FoxBox box;
  const std::string model =
      " --data corpus.txt --layers 2 --heads 2 --d-model 16 --block 8 --batch 4 --eval-every 5 --eval-batches 2"
      " --dropout 0.1 --lr 3e-3 --warmup 4";
  for (const std::string dtype : {"float32", "float64"}) {
    for (const std::string ext : {".safetensors", ".npz"}) {
      const auto run = [&](const std::string& args) {
        const Run r = box.shell("exec '" XGRAD_CHAR_GPT "'" + model + " --dtype " + dtype + args);
        BOOST_TEST_REQUIRE(r.rc == 0, r.err);
        return r.out;
      };
      const std::string whole = run(" --steps 20 --save whole" + ext);
      run(" --steps 10 --decay-steps 20 --save half" + ext);
      const std::string resumed = run(" --resume half" + ext + " --steps 20 --save resumed" + ext);
      BOOST_TEST(resumed.find("resumed at step 10") != std::string::npos, resumed);
      const auto last_line = [](const std::string& out) {
        const auto at = out.find("step    20 ");
        return out.substr(at, out.find("  ", out.find(" lr ", at) + 4) - at);  // without the time
      };
      BOOST_TEST(last_line(whole) == last_line(resumed));
      const StoredCheckpoint a = read_checkpoint(box.path("whole" + ext)), b = read_checkpoint(box.path("resumed" + ext));
      BOOST_TEST_REQUIRE(a.tensors.size() == b.tensors.size());
      for (std::size_t i = 0; i < a.tensors.size(); ++i) {
        BOOST_TEST(a.tensors[i].first == b.tensors[i].first);
        BOOST_TEST(a.tensors[i].second.dtype == (dtype == "float32" ? "float32" : "float64"));
        BOOST_TEST(same_bits(a.tensors[i].second.values, b.tensors[i].second.values), a.tensors[i].first);
      }
      for (const char* key : {"step", "data_rng", "decay_steps", "chars"}) BOOST_TEST(a.metadata.at(key) == b.metadata.at(key));
      BOOST_TEST(a.metadata.at("step") == "20");
    }
  }
}

BOOST_AUTO_TEST_CASE(every_attention_variant_trains_logs_and_resumes_bit_for_bit) {
  // Each variant alone and all together: the run trains (finite losses, falling), logs its
  // heads' entropies, stores the variant in the checkpoint's metadata, and a resumed run is the
  // uninterrupted one bit for bit.
  FoxBox box;
  const std::string model =
      " --data corpus.txt --layers 2 --heads 4 --d-model 16 --block 8 --batch 4 --eval-every 5 --eval-batches 2"
      " --lr 3e-3 --warmup 4";
  const std::pair<std::string, std::map<std::string, std::string>> variants[] = {
      {" --rope", {{"rope", "1"}}},
      {" --kv-heads 2", {{"kv_heads", "2"}}},
      {" --norm rms", {{"norm", "rms"}}},
      {" --qk-norm", {{"qk_norm", "1"}}},
      {" --softcap 2", {{"softcap", "2"}}},
      {" --window 3", {{"window", "3"}}},
      {" --attn sigmoid", {{"attn", "sigmoid"}}},
      {" --rope --kv-heads 1 --norm rms --qk-norm --softcap 5 --window 4 --attn sigmoid",
       {{"rope", "1"}, {"kv_heads", "1"}, {"norm", "rms"}, {"qk_norm", "1"}, {"softcap", "5"}, {"window", "4"}, {"attn", "sigmoid"}}},
  };
  for (const auto& [flags, keys] : variants) {
    BOOST_TEST_CONTEXT(flags) {
      const auto run = [&](const std::string& args) {
        const Run r = box.shell("exec '" XGRAD_CHAR_GPT "'" + model + flags + args);
        BOOST_TEST_REQUIRE(r.rc == 0, r.err);
        return r.out;
      };
      const std::string whole = run(" --steps 20 --save whole.safetensors --log log.csv");
      run(" --steps 10 --decay-steps 20 --save half.safetensors");
      const std::string resumed = run(" --resume half.safetensors --steps 20 --save resumed.safetensors");
      const StoredCheckpoint a = read_checkpoint(box.path("whole.safetensors"));
      const StoredCheckpoint b = read_checkpoint(box.path("resumed.safetensors"));
      for (const auto& [key, value] : keys) BOOST_TEST(a.metadata.at(key) == value, key);
      BOOST_TEST_REQUIRE(a.tensors.size() == b.tensors.size());
      for (std::size_t i = 0; i < a.tensors.size(); ++i) {
        BOOST_TEST(same_bits(a.tensors[i].second.values, b.tensors[i].second.values), a.tensors[i].first);
      }
      // The log: a row per evaluation, every head's entropy a number in [0, 1].
      const std::string log = read_text(box.dir / "log.csv");
      BOOST_TEST(log.find("entropy_l1_h3") != std::string::npos);
      std::istringstream rows(log);
      std::string header, row;
      std::getline(rows, header);
      std::size_t n = 0;
      double first_loss = 0, last_loss = 0;
      while (std::getline(rows, row)) {
        std::vector<double> v;
        std::istringstream cells(row);
        for (std::string cell; std::getline(cells, cell, ',');) v.push_back(std::stod(cell));
        BOOST_TEST_REQUIRE(v.size() == 4u + 8u + 2u + 2u);
        for (std::size_t k = 4; k < 12; ++k) BOOST_TEST((v[k] >= 0 && v[k] <= 1), "entropy " << v[k]);
        (n++ == 0 ? first_loss : last_loss) = v[1];
      }
      BOOST_TEST(n == 5u);
      BOOST_TEST(std::isfinite(last_loss));
      BOOST_TEST(last_loss < first_loss);
    }
  }
}

BOOST_AUTO_TEST_CASE(refuses_bad_usage_with_exit_status_2) {
  Sandbox box;
  write_text(box.dir / "tiny.txt", "abc");
  write_text(box.dir / "corpus.txt", std::string(2000, 'a') + std::string(2000, 'b'));
  const auto refused = [&](const std::string& args, const std::string& message) {
    const Run r = box.shell("exec '" XGRAD_CHAR_GPT "' " + args);
    BOOST_TEST(r.rc == 2, args);
    BOOST_TEST(r.err.find("char_gpt: " + message) != std::string::npos, r.err);
    BOOST_TEST(r.out.empty(), r.out);
  };
  refused("--steps -3", "--steps needs a whole number from 0 to 1099511627776, not '-3'");
  refused("--frobnicate 1", "unknown or incomplete option '--frobnicate'");
  refused("--steps", "unknown or incomplete option '--steps'");
  refused("--heads 3", "--heads 3 does not divide --d-model 128");
  refused("--dropout 1", "--dropout needs a number in [0, 1), not '1'");
  refused("--lr nan", "--lr needs a number >= 0, not 'nan'");
  refused("--dtype half", "--dtype must be float32|float64, not 'half'");
  // The attention variants (issue 31).
  refused("--kv-heads 3", "--kv-heads 3 does not divide --heads 4");
  refused("--kv-heads 0", "--kv-heads needs a whole number from 1 to 1024, not '0'");
  refused("--window 0", "--window needs a whole number from 1 to 65536, not '0'");
  refused("--softcap 0", "--softcap needs a number > 0, not '0'");
  refused("--softcap -1", "--softcap needs a number > 0, not '-1'");
  refused("--softcap nan", "--softcap needs a number > 0, not 'nan'");
  refused("--norm batch", "--norm must be layer|rms, not 'batch'");
  refused("--attn relu", "--attn must be softmax|sigmoid, not 'relu'");
  refused("--rope --d-model 12 --heads 4", "--rope needs an even head dimension, --d-model / --heads is 3");
  refused("--save out.pt", "--save needs a .safetensors or .npz file, not 'out.pt'");
  refused("--data missing.txt", "--data missing.txt: no such file");
  refused("--data tiny.txt", "tiny.txt has 3 bytes: its last 10% must hold a window of --block 64 tokens and one more");
  refused("--resume missing.safetensors", "missing.safetensors");
  // A resumed run keeps the model its checkpoint holds.
  const Run saved = box.shell("exec '" XGRAD_CHAR_GPT "' --data corpus.txt --layers 1 --d-model 8 --heads 2 --block 4 "
                              "--steps 1 --eval-batches 1 --save c.safetensors");
  BOOST_TEST_REQUIRE(saved.rc == 0, saved.err);
  refused("--data corpus.txt --resume c.safetensors --layers 2 --steps 2",
          "--layers differs from the layers of c.safetensors (1): a resumed run keeps its model, data and schedule");
  refused("--data corpus.txt --resume c.safetensors --qk-norm --steps 2",
          "--qk-norm differs from the qk_norm of c.safetensors (0): a resumed run keeps its model, data and schedule");
  refused("--data corpus.txt --resume c.safetensors --attn sigmoid --steps 2",
          "--attn differs from the attn of c.safetensors (softmax)");
  save_tensors<float>(box.path("other.safetensors"), {{"w", xt::zeros<float>({2})}}, {{"d_model", "16"}});
  refused("--data corpus.txt --resume other.safetensors", "other.safetensors is not a char_gpt checkpoint: its metadata has no 'program'");
  // A checkpoint without a tensor the model needs, or with a malformed generator state.
  TensorFile<float> saved_state = load_tensors<float>(box.path("c.safetensors"));
  std::map<std::string, xt::xarray<float>> without_wte;
  for (const auto& [name, t] : saved_state.tensors) {
    if (name != "wte") without_wte[name] = t;
  }
  save_tensors(box.path("no_wte.safetensors"), without_wte, saved_state.metadata);
  refused("--data corpus.txt --resume no_wte.safetensors --steps 2",
          "no_wte.safetensors: tensor 'wte' is missing, the model needs (2, 8)");
  CheckpointMetadata bad_rng = saved_state.metadata;
  bad_rng["data_rng"] = "x12";
  std::map<std::string, xt::xarray<float>> all(saved_state.tensors.begin(), saved_state.tensors.end());
  save_tensors(box.path("bad_rng.safetensors"), all, bad_rng);
  refused("--data corpus.txt --resume bad_rng.safetensors --steps 2", "bad_rng.safetensors's data_rng is not a 64-bit number");
  write_text(box.dir / "other.txt", std::string(4000, 'x') + "yz");
  refused("--data other.txt --resume c.safetensors --steps 2", "the character set of other.txt differs from that of c.safetensors");
  const Run help = box.shell("exec '" XGRAD_CHAR_GPT "' --help");
  BOOST_TEST(help.rc == 0);
  BOOST_TEST(help.out.find("usage: char_gpt") == 0);
  for (const char* option : {"--layers", "--heads", "--d-model", "--block", "--batch", "--steps", "--lr", "--warmup",
                             "--dropout", "--weight-decay", "--seed", "--dtype", "--eval-every", "--data", "--save",
                             "--resume", "--sample", "--log", "--plot", "--rope", "--kv-heads", "--norm", "--qk-norm",
                             "--softcap", "--window", "--attn", "--flush-denormal"}) {
    BOOST_TEST(help.out.find(std::string("  ") + option + " ") != std::string::npos, option);
  }
}

BOOST_AUTO_TEST_CASE(logs_every_head_and_plots_them) {
  Sandbox box;
  std::string text;
  for (int i = 0; i < 400; ++i) text += "abcabd" + std::to_string(i % 10);
  write_text(box.dir / "corpus.txt", text);
  const Run r = box.shell("exec '" XGRAD_CHAR_GPT "' --data corpus.txt --layers 2 --heads 3 --d-model 12 --block 6 "
                          "--batch 2 --steps 7 --eval-every 3 --eval-batches 1 --log run.csv --plot run.svg --sample 40");
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const std::string csv = read_text(box.dir / "run.csv");
  const std::string header = csv.substr(0, csv.find('\n'));
  BOOST_TEST(header ==
             "step,train_loss,val_loss,lr,entropy_l0_h0,entropy_l0_h1,entropy_l0_h2,entropy_l1_h0,entropy_l1_h1,"
             "entropy_l1_h2,max_weight_l0,max_weight_l1,gradient_gain_l0,gradient_gain_l1");
  std::vector<std::string> steps;  // evaluations at 0, 3, 6 and the last, 7
  std::istringstream lines(csv.substr(csv.find('\n') + 1));
  for (std::string line; std::getline(lines, line);) {
    steps.push_back(line.substr(0, line.find(',')));
    std::size_t fields = 1;
    for (const char ch : line) fields += ch == ',';
    BOOST_TEST(fields == 14u);
    BOOST_TEST(line.find("nan") == std::string::npos, line);
  }
  BOOST_TEST((steps == std::vector<std::string>{"0", "3", "6", "7"}));
  const std::string svg = read_text(box.dir / "run.svg");
  BOOST_TEST(svg.find("<svg") != std::string::npos);
  for (const char* id : {"val_loss", "entropy_l0_h0", "entropy_l1_h2"}) {
    BOOST_TEST(svg.find(std::string("id=\"") + id + "\"") != std::string::npos, id);
  }
  BOOST_TEST(r.out.find("--- 40 sampled characters (temperature 1) ---\n") != std::string::npos, r.out);
  BOOST_TEST(r.err.empty(), r.err);  // no progress when stderr is not a terminal

  // The sample is seeded: the same characters again, others at another temperature.
  const auto sample = [&](const std::string& args) {
    const Run s = box.shell("exec '" XGRAD_CHAR_GPT "' --data corpus.txt --layers 1 --heads 1 --d-model 8 --block 6 "
                            "--batch 2 --steps 3 --eval-batches 1 --sample 60" + args);
    BOOST_TEST_REQUIRE(s.rc == 0, s.err);
    const auto at = s.out.find("--- 60 sampled characters");
    BOOST_TEST_REQUIRE(at != std::string::npos, s.out);
    return s.out.substr(s.out.find('\n', at) + 1, 60);  // the characters
  };
  const std::string first = sample("");
  BOOST_TEST(first.size() == 60u);
  BOOST_TEST(sample("") == first);
  BOOST_TEST(sample(" --temperature 0.05") != first);

  // On a terminal (script(1) gives it one), stderr shows the progress.
  const Run tty = box.shell("script -qec \"'" XGRAD_CHAR_GPT "' --data corpus.txt --layers 1 --heads 1 --d-model 8 "
                            "--block 6 --batch 2 --steps 3 --eval-batches 1\" /dev/null");
  BOOST_TEST(tty.rc == 0);
  BOOST_TEST(tty.out.find("step 3/3  loss ") != std::string::npos, tty.out);
  BOOST_TEST(tty.out.find(" tokens/s  ETA ") != std::string::npos, tty.out);
}

// ---- Files and limits (issue 37): every output checked before training, written through
// xgrad::write_file_atomically, never over an input; --data a regular file of at most 1 GiB;
// a checkpoint's metadata held to the bounds of the options.

namespace {

const std::string tiny_model = " --layers 1 --heads 2 --d-model 8 --block 4 --batch 2 --eval-batches 1";

// A directory with corpus.txt, 4000 bytes of two characters: enough for tiny_model.
struct CharGptBox : Sandbox {
  CharGptBox() { write_text(dir / "corpus.txt", std::string(2000, 'a') + std::string(2000, 'b')); }
  // char_gpt with `args`, stopped after 60 s (exit 124) if it hangs.
  Run run(const std::string& args) const { return shell("exec timeout 60 '" XGRAD_CHAR_GPT "' " + args); }
  // Expects a refusal before training: exit 2, the message on stderr, nothing on stdout (the
  // first line a run prints comes before training), within `seconds`.
  void refused(const std::string& args, const std::string& message, double seconds = 20) const {
    const auto start = std::chrono::steady_clock::now();
    const Run r = run(args);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    BOOST_TEST(r.rc == 2, args << ": exit " << r.rc);
    BOOST_TEST(r.err.find("char_gpt: " + message) != std::string::npos, args << "\n" << r.err);
    BOOST_TEST(r.out.empty(), args << "\n" << r.out);
    BOOST_TEST(took < seconds, args << ": took " << took << " s");
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_link_at_the_old_temporary_names_is_not_written_through) {
  // The bug: --plot wrote PATH.tmp, then renamed it: a symbolic link planted at run.svg.tmp was
  // written through (the victim overwritten) and renamed to run.svg. Now each output goes
  // through a fresh mkstemp name and the links stay as they were.
  CharGptBox box;
  write_text(box.dir / "victim.txt", "precious");
  for (const char* link : {"run.svg.tmp", "run.csv.tmp", "c.safetensors.tmp"}) fs::create_symlink("victim.txt", box.dir / link);
  const std::set<std::string> before = box.entries();
  const Run r = box.run("--data corpus.txt" + tiny_model + " --steps 2 --log run.csv --plot run.svg --save c.safetensors");
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  BOOST_TEST(read_text(box.dir / "victim.txt") == "precious");
  for (const char* link : {"run.svg.tmp", "run.csv.tmp", "c.safetensors.tmp"}) {
    BOOST_TEST(fs::is_symlink(box.dir / link), link);
    BOOST_TEST(fs::read_symlink(box.dir / link) == "victim.txt", link);
  }
  for (const char* out : {"run.svg", "run.csv", "c.safetensors"}) {
    BOOST_TEST((fs::is_regular_file(box.dir / out) && !fs::is_symlink(box.dir / out)), out);
  }
  BOOST_TEST(read_text(box.dir / "run.svg").find("<svg") != std::string::npos);
  BOOST_TEST(read_text(box.dir / "run.csv").find("step,train_loss") == 0u);
  std::set<std::string> expected = before;
  expected.insert({"run.svg", "run.csv", "c.safetensors"});
  BOOST_TEST((box.entries() == expected));  // no temporary left beside them
}

BOOST_AUTO_TEST_CASE(an_output_naming_an_input_is_refused_before_training) {
  // The bug: --log opened its path for writing at once, so --log naming the --data file
  // truncated the training text. Each output is compared with --data and --resume as files
  // (the same inode: through a link or another spelling too), before anything is trained.
  CharGptBox box;
  const std::string text = read_text(box.dir / "corpus.txt");
  for (const std::string ext : {".csv", ".svg", ".safetensors", ".onnx"}) write_text(box.dir / ("data" + ext), text);
  box.refused("--data data.csv --log data.csv" + tiny_model,
              "--log data.csv: is the input data.csv; refusing to write over it");
  box.refused("--data data.svg --plot ./data.svg" + tiny_model,
              "--plot ./data.svg: is the input data.svg; refusing to write over it");
  box.refused("--data data.safetensors --save data.safetensors" + tiny_model,
              "--save data.safetensors: is the input data.safetensors; refusing to write over it");
  box.refused("--data data.onnx --onnx data.onnx" + tiny_model, "--onnx data.onnx: is the input data.onnx; refusing to write over it");
  fs::create_symlink("corpus.txt", box.dir / "link.csv");
  fs::create_hard_link(box.dir / "corpus.txt", box.dir / "hard.svg");
  box.refused("--data corpus.txt --log link.csv" + tiny_model, "--log link.csv: is the input corpus.txt");
  box.refused("--data corpus.txt --plot hard.svg" + tiny_model, "--plot hard.svg: is the input corpus.txt");
  for (const std::string ext : {".csv", ".svg", ".safetensors", ".onnx"}) {
    BOOST_TEST(read_text(box.dir / ("data" + ext)) == text, ext);
  }
  BOOST_TEST(read_text(box.dir / "corpus.txt") == text);
  // --resume is an input of --log, --plot and --onnx (here through a link to it); --save may
  // continue the checkpoint it resumed, which is read whole before the first step.
  const Run saved = box.run("--data corpus.txt" + tiny_model + " --steps 1 --save c.safetensors");
  BOOST_TEST_REQUIRE(saved.rc == 0, saved.err);
  const std::string checkpoint = read_text(box.dir / "c.safetensors");
  fs::create_symlink("c.safetensors", box.dir / "ckpt.csv");
  box.refused("--data corpus.txt --resume c.safetensors --steps 2 --log ckpt.csv",
              "--log ckpt.csv: is the input c.safetensors; refusing to write over it");
  BOOST_TEST(read_text(box.dir / "c.safetensors") == checkpoint);
  const Run resumed = box.run("--data corpus.txt --resume c.safetensors --steps 2 --save c.safetensors");
  BOOST_TEST(resumed.rc == 0, resumed.err);
  BOOST_TEST(read_text(box.dir / "c.safetensors") != checkpoint);
}

BOOST_AUTO_TEST_CASE(an_output_that_cannot_be_written_is_refused_before_training) {
  // The bug: --plot's path was tried only after the whole training. A missing directory, a
  // directory, a device and a link to nothing are refused before any step.
  CharGptBox box;
  box.refused("--data corpus.txt --plot nodir/run.svg" + tiny_model, "--plot nodir/run.svg: its directory nodir does not exist");
  box.refused("--data corpus.txt --log nodir/run.csv" + tiny_model, "--log nodir/run.csv: its directory nodir does not exist");
  box.refused("--data corpus.txt --save nodir/c.npz" + tiny_model, "--save nodir/c.npz: its directory nodir does not exist");
  box.refused("--data corpus.txt --onnx nodir/m.onnx" + tiny_model, "--onnx nodir/m.onnx: its directory nodir does not exist");
  fs::create_directory(box.dir / "dir.csv");
  box.refused("--data corpus.txt --log dir.csv" + tiny_model, "--log dir.csv: exists and is a directory; refusing to replace it");
  fs::create_symlink("/dev/null", box.dir / "null.svg");
  box.refused("--data corpus.txt --plot null.svg" + tiny_model, "--plot null.svg: exists and is a device; refusing to replace it");
  fs::create_symlink("nothing.onnx", box.dir / "dangling.onnx");
  box.refused("--data corpus.txt --onnx dangling.onnx" + tiny_model, "--onnx dangling.onnx: is a symbolic link to nothing");
  // Two outputs that are one file (through a link).
  write_text(box.dir / "run.csv", "old log");
  fs::create_symlink("run.csv", box.dir / "same.svg");
  box.refused("--data corpus.txt --log run.csv --plot same.svg" + tiny_model, "--log and --plot name one file, ");
  BOOST_TEST(read_text(box.dir / "run.csv") == "old log");
  BOOST_TEST(fs::is_directory(box.dir / "dir.csv"));
  BOOST_TEST(fs::is_symlink(box.dir / "null.svg"));
}

BOOST_AUTO_TEST_CASE(data_must_be_a_regular_file_of_at_most_1_gib) {
  // The bug: --data read anything to its end: /dev/zero grew to 3.8 GB, a FIFO hung, a
  // directory gave a libstdc++ message. Each is refused at once, naming the path.
  CharGptBox box;
  box.refused("--data /dev/zero" + tiny_model, "--data /dev/zero: a device, not a regular file");
  BOOST_TEST_REQUIRE(mkfifo(box.path("fifo").c_str(), 0600) == 0);
  box.refused("--data fifo" + tiny_model, "--data fifo: a FIFO, not a regular file");
  fs::create_directory(box.dir / "dir");
  box.refused("--data dir" + tiny_model, "--data dir: a directory, not a regular file");
  {
    std::ofstream(box.dir / "big.txt") << "x";
    fs::resize_file(box.dir / "big.txt", (std::uintmax_t(1) << 30) + 1);  // sparse: no disk space
  }
  box.refused("--data big.txt" + tiny_model, "--data big.txt holds 1073741825 bytes, more than the 1073741824 (1 GiB) char_gpt trains on");
}

BOOST_AUTO_TEST_CASE(checkpoint_metadata_has_the_bounds_of_the_options) {
  // The bug: --resume trusted the sizes in a checkpoint's metadata: layers=10^9 hung building
  // the model, eval_batches=2^40 and batch=2^40 ended in std::bad_alloc naming no file. Each key
  // is read with the rule of its option: the bounds and the message the command line gives,
  // with the file and the key in place of the option.
  CharGptBox box;
  const Run saved = box.run("--data corpus.txt" + tiny_model + " --steps 1 --save c.safetensors");
  BOOST_TEST_REQUIRE(saved.rc == 0, saved.err);
  const TensorFile<float> state = load_tensors<float>(box.path("c.safetensors"));
  const std::map<std::string, xt::xarray<float>> tensors(state.tensors.begin(), state.tensors.end());
  const auto resume_with = [&](const std::string& key, const std::string& value) {
    CheckpointMetadata meta = state.metadata;
    BOOST_TEST_REQUIRE(meta.count(key), key);
    meta[key] = value;
    save_tensors(box.path("bad.safetensors"), tensors, meta);
    return "--data corpus.txt --resume bad.safetensors --steps 2";
  };
  // The values of the issue.
  for (const auto& [key, value, bounds] : {std::tuple{"layers", "1000000000", "from 1 to 1024"},
                                           {"eval_batches", "1099511627776", "from 1 to 10000"},
                                           {"batch", "1099511627776", "from 1 to 65536"}}) {
    box.refused(resume_with(key, value), std::string("bad.safetensors's ") + key + " needs a whole number " + bounds +
                                             ", not '" + value + "'");
  }
  // Every stored option, at and past its bounds as the command line states them.
  // "... needs a whole number from LO to HI, not 'x'": the bounds, read from the message.
  const auto bounds_of = [](const std::string& err) -> std::optional<std::pair<unsigned long long, unsigned long long>> {
    const std::string from = "needs a whole number from ";
    const auto at = err.find(from);
    if (at == std::string::npos) return std::nullopt;
    std::istringstream in(err.substr(at + from.size()));
    unsigned long long lo = 0, hi = 0;
    std::string to;
    if (!(in >> lo >> to >> hi) || to != "to") return std::nullopt;
    return std::pair{lo, hi};
  };
  const std::string help = box.run("--help").out;
  for (const auto& [option, key] : {std::pair{"--layers", "layers"}, {"--heads", "heads"}, {"--d-model", "d_model"},
                                    {"--block", "block"}, {"--batch", "batch"}, {"--eval-batches", "eval_batches"},
                                    {"--warmup", "warmup"}, {"--decay-steps", "decay_steps"}, {"--seed", "seed"},
                                    {"--steps", "step"}}) {
    const Run cli = box.run(std::string(option) + " x");
    const auto bounds = bounds_of(cli.err);
    BOOST_TEST_REQUIRE(bounds.has_value(), option << ": " << cli.err);
    const auto [lo, hi] = *bounds;
    if (hi < 1'000'000) {  // --help states the bounds of the size options
      const auto at = help.find(std::string("  ") + option + " ");
      BOOST_TEST_REQUIRE(at != std::string::npos, option);
      const std::string line = help.substr(at, help.find('\n', at) - at);
      BOOST_TEST(line.find(std::to_string(lo) + " to " + std::to_string(hi)) != std::string::npos, line);
    }
    std::vector<std::string> bad = {"x", "-1", "1e3", std::to_string(hi + 1)};
    if (lo > 0) bad.push_back(std::to_string(lo - 1));
    for (const std::string& value : bad) {
      const std::string rule = " needs a whole number from " + std::to_string(lo) + " to " + std::to_string(hi) + ", not '" + value + "'";
      box.refused("--data corpus.txt " + std::string(option) + " " + value, option + rule);
      box.refused(resume_with(key, value), "bad.safetensors's " + std::string(key) + rule);
    }
  }
  for (const auto& [option, key, value, range] : {std::tuple{"--dropout", "dropout", "1", "in [0, 1)"},
                                                  {"--dropout", "dropout", "nan", "in [0, 1)"},
                                                  {"--lr", "lr", "-1", ">= 0"},
                                                  {"--weight-decay", "weight_decay", "inf", ">= 0"}}) {
    const std::string rule = std::string(" needs a number ") + range + ", not '" + value + "'";
    box.refused("--data corpus.txt " + std::string(option) + " " + value, option + rule);
    box.refused(resume_with(key, value), "bad.safetensors's " + std::string(key) + rule);
  }
  box.refused(resume_with("dtype", "half"), "bad.safetensors's dtype must be float32|float64, not 'half'");
  // A long value is quoted in part.
  box.refused(resume_with("layers", std::string(100000, '9')),
              "bad.safetensors's layers needs a whole number from 1 to 1024, not '" + std::string(40, '9') + "...'");
  // Values within their bounds that together make a run too large for memory, as on the
  // command line.
  box.refused(resume_with("block", "65536"), "bad.safetensors's metadata: the run would need about ");
  box.refused("--data corpus.txt" + tiny_model + " --block 65536", "the run would need about ");
  box.refused(resume_with("heads", "3"), "bad.safetensors's metadata: --heads 3 does not divide --d-model 8");
}

BOOST_AUTO_TEST_CASE(a_save_past_a_file_size_limit_fails_and_leaves_no_temporary) {
  // The bug: SIGXFSZ killed the program in the middle of a save, leaving the partial temporary.
  // Now the signal is ignored, the write fails with EFBIG, the temporary is removed and the run
  // ends with exit 2 and a message. ulimit -f 8 allows 4 KiB (sh counts 512-byte blocks); the
  // checkpoint is larger.
  CharGptBox box;
  const std::set<std::string> before = box.entries();
  const Run r = box.shell("exec sh -c 'ulimit -f 8; exec \"$0\" \"$@\"' '" XGRAD_CHAR_GPT "' --data corpus.txt"
                          " --layers 1 --heads 2 --d-model 16 --block 4 --batch 2 --eval-batches 1 --steps 2"
                          " --save c.safetensors");
  BOOST_TEST(r.rc == 2, r.err);
  BOOST_TEST(r.err.find("char_gpt: --save c.safetensors: cannot write it: File too large (a file-size limit, ulimit -f)") !=
                 std::string::npos, r.err);
  BOOST_TEST((box.entries() == before));  // neither the checkpoint nor a temporary
}
#endif

BOOST_AUTO_TEST_SUITE_END()
