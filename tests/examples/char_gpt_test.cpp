// examples/char_gpt: its model and training step against PyTorch (tests/data/make_char_gpt_fixture.py),
// and the program's checkpoints: a resumed run is bit for bit the uninterrupted one.
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
  Sandbox box;
  std::string text;
  for (int i = 0; i < 300; ++i) text += "the quick brown fox " + std::to_string(i * 7919 % 1000) + " jumps.\n";
  write_text(box.dir / "corpus.txt", text);
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
  refused("--steps -3", "--steps needs a whole number >= 0, not '-3'");
  refused("--frobnicate 1", "unknown or incomplete option '--frobnicate'");
  refused("--steps", "unknown or incomplete option '--steps'");
  refused("--heads 3", "--heads 3 does not divide --d-model 128");
  refused("--dropout 1", "--dropout needs a number in [0, 1), not '1'");
  refused("--lr nan", "--lr needs a number >= 0, not 'nan'");
  refused("--dtype half", "--dtype must be float32|float64, not 'half'");
  refused("--save out.pt", "--save needs a .safetensors or .npz file, not 'out.pt'");
  refused("--data missing.txt", "cannot read missing.txt");
  refused("--data tiny.txt", "tiny.txt has 3 bytes: its last 10% must hold a window of --block 64 tokens and one more");
  refused("--resume missing.safetensors", "missing.safetensors");
  // A resumed run keeps the model its checkpoint holds.
  const Run saved = box.shell("exec '" XGRAD_CHAR_GPT "' --data corpus.txt --layers 1 --d-model 8 --heads 2 --block 4 "
                              "--steps 1 --eval-batches 1 --save c.safetensors");
  BOOST_TEST_REQUIRE(saved.rc == 0, saved.err);
  refused("--data corpus.txt --resume c.safetensors --layers 2 --steps 2",
          "--layers differs from the layers of c.safetensors (1): a resumed run keeps its model, data and schedule");
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
                             "--resume", "--sample", "--log", "--plot"}) {
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
#endif

BOOST_AUTO_TEST_SUITE_END()
