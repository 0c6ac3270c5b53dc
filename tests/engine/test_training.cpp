// Engine<CpuBackend> end to end on a small text (tests/engine/data/hamlet_act1.txt): the losses of a
// short run against a recorded trajectory (within 1e-4: CPUs differ in the bits they produce), and the
// llm.c-style determinism checks — the same seed gives the same bits, 4 steps + resume + 4 steps give
// the bits of 8 steps, --graph gives the bits of eager steps (dropout on). Bad input is refused with
// UsageError before anything is written.
#include "dropout_masks.hpp"
#include "engine_test_support.hpp"
#include "run.hpp"
#include "train.hpp"

#include <accel/accel.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;

const std::string hamlet = std::string(ENGINE_TEST_DATA_DIR) + "/hamlet_act1.txt";

using engine_test::temp_dir;

engine::Config small(const fs::path& dump) {
  engine::Config c;
  engine::apply_size(c, "tiny");
  c.shape.block = 32;
  c.batch = 4;
  c.steps = 8;
  c.warmup = 2;
  c.data = hamlet;
  c.dump = dump.string();
  c.eval_every = 0;
  c.quiet = true;
  c.threads = 1;  // robust on a loaded CI machine; the kernels' results do not depend on it
  return c;
}

/// The losses (exact text, 17 digits) of a dump directory.
std::vector<std::string> losses(const fs::path& dump) {
  std::ifstream in(dump / "losses.txt");
  std::vector<std::string> out;
  for (std::string step, loss, rest; in >> step >> loss && std::getline(in, rest);) out.push_back(loss);
  return out;
}

/// Two runs' losses: both logged every one of `steps` steps (a run that stopped early or logged nothing
/// must not pass as equal), and bit for bit the same.
void check_same_losses(const fs::path& a, const fs::path& b, std::int64_t steps) {
  const auto x = losses(a), y = losses(b);
  REQUIRE(x.size() == static_cast<std::size_t>(steps));
  REQUIRE(y.size() == static_cast<std::size_t>(steps));
  CHECK(x == y);
}

int run(const engine::Config& c) { return engine::train(accel::CpuBackend{}, c); }

#if defined(ACCEL_HAS_CUDA)
int run_cuda(const engine::Config& c) { return engine::train(accel::CudaBackend{}, c); }
#endif

using Run = int (*)(const engine::Config&);

// The checks every backend passes, `run` being one backend's Engine; `tag` names their directories.

/// 12 steps against the trajectory recorded on the CPU, within `rel` (the CPU's own bits may differ
/// by CPU; a GPU's sums run in another order), and the model learns.
void check_trajectory(Run run, const std::string& tag, double rel) {
  const fs::path dir = temp_dir(tag + "trajectory");
  auto c = small(dir);
  c.steps = 12;
  REQUIRE(run(c) == 0);
  const auto got = losses(dir);
  // Recorded with this configuration on an AMD EPYC (Zen 4) and checked against PyTorch with
  // benchmarks/engine/torch_gpt.py check (every step within 3e-7).
  const double expected[] = {ENGINE_TEST_TRAJECTORY};
  REQUIRE(got.size() == std::size(expected));
  for (std::size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(std::fabs(std::stod(got[i]) - expected[i]) <= rel * expected[i]);
  }
  CHECK(std::stod(got.back()) < std::stod(got.front()) - 0.5);  // it learns
  fs::remove_all(dir);
}

/// The same seed gives the same bits; 4 steps + resume + 4 steps give 8 steps' bits (dropout on: its
/// masks are keyed by the step, which the checkpoint holds, with the data generator's state).
void check_same_seed_and_resume(Run run, const std::string& tag) {
  const fs::path a = temp_dir(tag + "a"), b = temp_dir(tag + "b"), ck = temp_dir(tag + "ck"), r = temp_dir(tag + "r");
  auto c = small(a);
  c.dropout = 0.1;
  REQUIRE(run(c) == 0);
  auto again = small(b);
  again.dropout = 0.1;
  REQUIRE(run(again) == 0);
  check_same_losses(a, b, c.steps);

  auto first = small(temp_dir(tag + "first"));
  first.dropout = 0.1;
  first.stop_at = 4;  // the same schedule, stopped half way
  first.save = ck.string();
  REQUIRE(run(first) == 0);
  CHECK(fs::is_symlink(ck / "latest"));
  CHECK(fs::exists(ck / "step_00000004" / "manifest.txt"));
  auto second = small(r);
  second.dropout = 0.1;
  second.resume = "latest";
  second.save = ck.string();
  REQUIRE(run(second) == 0);
  const auto full = losses(a), resumed = losses(r);
  REQUIRE(full.size() == 8);
  REQUIRE(resumed.size() == 4);
  for (std::size_t i = 0; i < 4; ++i) CHECK(resumed[i] == full[4 + i]);
  CHECK(fs::read_symlink(ck / "latest") == "step_00000008");
  for (const auto& d : {a, b, ck, r}) fs::remove_all(d);
}

/// --graph: the step captured once and replayed gives the eager step's bits, dropout on (with `adjust`
/// applied to both runs' configuration).
void check_graph_bits(Run run, const std::string& tag, const std::string& dtype = "fp32",
                      const std::function<void(engine::Config&)>& adjust = {}) {
  const fs::path e = temp_dir(tag + "eager"), g = temp_dir(tag + "graph");
  auto eager = small(e);
  eager.dropout = 0.2;
  eager.dtype = dtype;
  if (adjust) adjust(eager);
  auto graph = eager;
  graph.dump = g.string();
  graph.graph = true;
  REQUIRE(run(eager) == 0);
  REQUIRE(run(graph) == 0);
  check_same_losses(e, g, eager.steps);
  fs::remove_all(e);
  fs::remove_all(g);
}

/// Engine<AnyBackend> holding `backend` gives the static engine's bits.
void check_any_bits(Run run, const accel::AnyBackend& backend, const std::string& tag) {
  const fs::path st = temp_dir(tag + "static"), an = temp_dir(tag + "any");
  auto c = small(st);
  c.steps = 4;
  REQUIRE(run(c) == 0);
  auto a = small(an);
  a.steps = 4;
  REQUIRE(engine::train(backend, a) == 0);
  check_same_losses(st, an, 4);
  fs::remove_all(st);
  fs::remove_all(an);
}

/// The small run, 5 steps, under two settings (`first` and `second` applied to its configuration): the
/// losses within `rel` of each other, step by step. Returns the second run's losses.
std::vector<std::string> check_trains_alike(Run run, const std::string& tag, double rel,
                                            const std::function<void(engine::Config&)>& first,
                                            const std::function<void(engine::Config&)>& second) {
  const fs::path f = temp_dir(tag + "first"), s = temp_dir(tag + "second");
  auto a_cfg = small(f);
  a_cfg.steps = 5;
  first(a_cfg);
  auto b_cfg = small(s);
  b_cfg.steps = 5;
  second(b_cfg);
  REQUIRE(run(a_cfg) == 0);
  REQUIRE(run(b_cfg) == 0);
  const auto a = losses(f), b = losses(s);
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CAPTURE(i);
    CHECK(std::fabs(std::stod(a[i]) - std::stod(b[i])) < rel * std::stod(a[i]));
  }
  fs::remove_all(f);
  fs::remove_all(s);
  return b;
}

/// --attention gemm (strided-batched GEMMs around softmax kernels) trains as the fused kernel does
/// (or `second` as `first`, in `dtype`), within `rel`, with each dropout rate of `dropouts`.
void check_fused_vs_gemm(Run run, const std::string& tag, std::initializer_list<double> dropouts, double rel,
                         const std::string& first = "fused", const std::string& second = "gemm",
                         const std::string& dtype = "fp32") {
  for (const double dropout : dropouts) {
    CAPTURE(dropout);
    const auto with = [&](const std::string& attention) {
      return [&, attention](engine::Config& c) {
        c.dropout = dropout;
        c.attention = attention;
        c.dtype = dtype;
      };
    };
    (void)check_trains_alike(run, tag + first + "-" + second + "-", rel, with(first), with(second));
  }
}

/// --gelu-fusion on (the GELU and its gradient inside the MLP's GEMMs) trains as the separate kernels do,
/// within `rel`, dropout off and on; and its step captured in a graph gives its eager bits.
void check_gelu_fusion(Run run, const std::string& tag, double rel, const std::string& dtype = "fp32") {
  for (const double dropout : {0.0, 0.2}) {
    CAPTURE(dropout);
    const auto with = [&](bool fusion) {
      return [&, fusion](engine::Config& c) {
        c.dropout = dropout;
        c.dtype = dtype;
        c.gelu_fusion = fusion ? "on" : "off";
      };
    };
    const auto fused = check_trains_alike(run, tag + "gelu-", rel, with(false), with(true));
    REQUIRE(fused.size() == 5);
    CHECK(std::stod(fused.back()) < std::stod(fused.front()));  // it learns
  }
  check_graph_bits(run, tag + "gelu-fused-", dtype, [](engine::Config& c) { c.gelu_fusion = "on"; });
}

/// --dtype bf16: bf16 weights and activations train, the losses within 2 % of fp32's.
void check_bf16(Run run, const std::string& tag) {
  const fs::path f = temp_dir(tag + "fp32"), h = temp_dir(tag + "bf16");
  auto a = small(f);
  a.steps = 12;
  auto b = small(h);
  b.steps = 12;
  b.dtype = "bf16";
  REQUIRE(run(a) == 0);
  REQUIRE(run(b) == 0);
  const auto x = losses(f), y = losses(h);
  REQUIRE(x.size() == 12);
  REQUIRE(y.size() == 12);
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    CAPTURE(i);
    const double rel = std::fabs(std::stod(y[i]) - std::stod(x[i])) / std::stod(x[i]);
    worst = std::max(worst, rel);
    CHECK(rel < 0.02);
  }
  MESSAGE("bf16 vs fp32, largest relative loss difference over 12 steps: " << worst);
  CHECK(std::stod(y.back()) < std::stod(y.front()) - 0.5);  // it learns
  CHECK(x != y);  // and is not the fp32 run
  for (const auto& d : {f, h}) fs::remove_all(d);
}

/// --run-ahead on (the default: step k + 1 enqueued before step k's losses are read) gives the bits of
/// --run-ahead off (every step waited for), with `adjust` applied to both runs: dropout on, an
/// evaluation and a checkpoint every 3 steps (where the loop does not run ahead) between the steps it does.
void check_run_ahead_bits(Run run, const std::string& tag, const std::function<void(engine::Config&)>& adjust = {}) {
  const fs::path on = temp_dir(tag + "ahead-on"), off = temp_dir(tag + "ahead-off"), ck_on = temp_dir(tag + "ahead-ck-on"),
                 ck_off = temp_dir(tag + "ahead-ck-off");
  auto a = small(on);
  a.dropout = 0.1;
  a.eval_every = 3;
  a.eval_batches = 2;
  a.save = ck_on.string();
  a.save_every = 3;
  if (adjust) adjust(a);
  auto b = a;
  b.dump = off.string();
  b.save = ck_off.string();
  b.run_ahead = "off";
  REQUIRE(a.run_ahead == "on");
  REQUIRE(run(a) == 0);
  REQUIRE(run(b) == 0);
  check_same_losses(on, off, a.steps);
  // The checkpoints between steps run ahead hold the same state (step 6: after steps 4 and 5, run ahead).
  for (const char* file : {"zero_rank_00000.f32", "manifest.txt"}) {
    CAPTURE(file);
    const auto bytes = [&](const fs::path& d) {
      std::ifstream in(d / "step_00000006" / file, std::ios::binary);
      return std::string((std::istreambuf_iterator<char>(in)), {});
    };
    CHECK(!bytes(ck_on).empty());
    CHECK(bytes(ck_on) == bytes(ck_off));
  }
  for (const auto& d : {on, off, ck_on, ck_off}) fs::remove_all(d);
}


}  // namespace

TEST_CASE("engine summary: the median step; of an even count the mean of the middle two, as statistics.median") {
  CHECK(engine::median({}) == 0.0);
  CHECK(engine::median({7.5}) == 7.5);
  CHECK(engine::median({145.7, 23.6}) == doctest::Approx(84.65));  // a 2-step run: not its slow first step alone
  CHECK(engine::median({30, 10, 20}) == 20.0);
  CHECK(engine::median({4, 1, 3, 2}) == 2.5);
  CHECK(engine::median({5, 5, 1, 9, 5, 5}) == 5.0);
  CHECK(engine::median({9, 8, 7, 6, 5, 4, 3, 2}) == 5.5);
}

TEST_CASE("engine: the tiny model's losses on a small text follow the recorded trajectory") {
  check_trajectory(run, "", 1e-4);
}

TEST_CASE("engine: the same seed gives the same bits; 4 steps + resume + 4 steps give 8 steps' bits") {
  check_same_seed_and_resume(run, "");
}

TEST_CASE("engine: sampling a saved model (--resume, its --save, no step to train) leaves the checkpoint and latest alone") {
  const fs::path ck = temp_dir("sample-saved"), d = temp_dir("sample-saved-dump"), other = temp_dir("sample-saved-copy");
  auto c = small(d);
  c.steps = 4;
  c.save = ck.string();
  c.save_every = 2;
  REQUIRE(run(c) == 0);
  REQUIRE(fs::read_symlink(ck / "latest") == "step_00000004");
  const auto inode = [](const fs::path& p) {
    struct stat st {};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    return st.st_ino;
  };
  const auto step2 = inode(ck / "step_00000002" / "manifest.txt"), step4 = inode(ck / "step_00000004" / "manifest.txt");
  auto again = small(d);
  again.dump.clear();
  again.save = ck.string();
  again.resume = (ck / "step_00000002").string();  // an older step than latest's
  again.steps = 2;
  again.sample = 20;
  REQUIRE(run(again) == 0);
  CHECK(fs::read_symlink(ck / "latest") == "step_00000004");  // it was moved back to step 2 before
  CHECK(inode(ck / "step_00000002" / "manifest.txt") == step2);  // not written again
  CHECK(inode(ck / "step_00000004" / "manifest.txt") == step4);
  again.resume = "latest";
  again.steps = 4;
  REQUIRE(run(again) == 0);
  CHECK(inode(ck / "step_00000004" / "manifest.txt") == step4);
  // Into another directory it is a copy.
  again.save = other.string();
  again.resume = (ck / "step_00000004").string();
  REQUIRE(run(again) == 0);
  CHECK(fs::read_symlink(other / "latest") == "step_00000004");
  CHECK(fs::exists(other / "step_00000004" / "manifest.txt"));
  for (const auto& dir : {ck, d, other}) fs::remove_all(dir);
}

TEST_CASE("engine: SIGTERM finishes the step, writes a checkpoint and returns 0; --resume latest goes on") {
  const fs::path ck = temp_dir("signal"), d = temp_dir("signal-dump");
  auto c = small(d);
  c.save = ck.string();
  engine::stop_signal().store(SIGTERM);  // as if it arrived during the first step
  const int status = run(c);
  engine::stop_signal().store(0);
  CHECK(status == 0);
  CHECK(losses(d).size() == 1);
  CHECK(fs::read_symlink(ck / "latest") == "step_00000001");
  auto again = small(temp_dir("signal-resume"));
  again.save = ck.string();
  again.resume = "latest";
  REQUIRE(run(again) == 0);
  CHECK(fs::read_symlink(ck / "latest") == "step_00000008");
  fs::remove_all(ck);
  fs::remove_all(d);
}

/// Occurrences of `what` in the file at `path`.
std::size_t count_in(const fs::path& path, const std::string& what) {
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

/// The GELU kernels a traced 2-step run of `run` enqueues (forward and backward spans) with
/// --gelu-fusion `setting`: none where the GELU runs inside the GEMMs.
int gelu_kernel_spans(Run run, const std::string& tag, const std::string& setting) {
  const fs::path dir = temp_dir(tag + "gelu-spans-" + setting);
  auto c = small(dir);
  c.steps = 2;
  c.gelu_fusion = setting;
  c.trace = (dir / "trace.json").string();
  c.trace_steps = 2;
  REQUIRE(run(c) == 0);
  const int spans = static_cast<int>(count_in(dir / "trace.json", "{\"name\": \"gelu\", \"cat\": \"stream\"") +
                                     count_in(dir / "trace.json", "{\"name\": \"gelu backward\", \"cat\": \"stream\""));
  fs::remove_all(dir);
  return spans;
}

TEST_CASE("engine --trace: the first N steps as a Chrome trace (a range per step, the stream's layer and optimizer spans); the losses do not change") {
  const fs::path plain = temp_dir("untraced"), traced = temp_dir("traced"), graphed = temp_dir("traced-graph");
  auto c = small(plain);
  c.steps = 4;
  REQUIRE(run(c) == 0);
  auto t = small(traced);
  t.steps = 4;
  t.trace = (traced / "trace.json").string();
  t.trace_steps = 3;
  REQUIRE(run(t) == 0);
  check_same_losses(plain, traced, 4);
  const fs::path json = traced / "trace.json";
  REQUIRE(fs::exists(json));
  CHECK(count_in(json, "\"traceEvents\"") == 1);
  CHECK(count_in(json, "{\"name\": \"step\", \"cat\": \"range\", \"ph\": \"X\"") == 3);
  CHECK(count_in(json, "{\"name\": \"step\", \"cat\": \"stream\", \"ph\": \"X\"") == 3);  // the step's device time
  CHECK(count_in(json, "{\"name\": \"adamw\", \"cat\": \"stream\", \"ph\": \"X\"") == 3);
  CHECK(count_in(json, "{\"name\": \"layer 3\", \"cat\": \"stream\"") == 3);
  CHECK(count_in(json, "{\"name\": \"layer 0 backward\", \"cat\": \"stream\"") == 3);
  CHECK(count_in(json, "\"args\": {\"name\": \"cpu:0\"}") == 1);
  // The ops inside each of the 4 layers, per step: 4 GEMMs forward and 8 backward, attention, 2
  // LayerNorms and GELU each way.
  CHECK(count_in(json, "{\"name\": \"attention\", \"cat\": \"stream\"") == 3 * 4);
  CHECK(count_in(json, "{\"name\": \"attention backward\", \"cat\": \"stream\"") == 3 * 4);
  CHECK(count_in(json, "{\"name\": \"layernorm\", \"cat\": \"stream\"") == 3 * 4 * 2);
  CHECK(count_in(json, "{\"name\": \"layernorm backward\", \"cat\": \"stream\"") == 3 * 4 * 2);
  CHECK(count_in(json, "{\"name\": \"gelu\", \"cat\": \"stream\"") == 3 * 4);  // --gelu-fusion auto: off on the CPU
  CHECK(count_in(json, "{\"name\": \"gelu backward\", \"cat\": \"stream\"") == 3 * 4);
  CHECK(count_in(json, "{\"name\": \"gemm\", \"cat\": \"stream\"") >= 3 * 4 * 12);

  auto g = small(graphed);  // the captured work has no spans of its own; the replay has one per step
  g.steps = 4;
  g.graph = true;
  g.dump.clear();  // --dump runs its first step eagerly (for the gradients before clipping)
  g.trace = (graphed / "trace.json").string();
  g.trace_steps = 3;
  REQUIRE(run(g) == 0);
  CHECK(count_in(graphed / "trace.json", "{\"name\": \"graph replay\", \"cat\": \"stream\"") == 3);
  CHECK(count_in(graphed / "trace.json", "{\"name\": \"step\", \"cat\": \"stream\"") == 3);  // around the capture too
  CHECK(count_in(graphed / "trace.json", "{\"name\": \"layer 0\", \"cat\": \"stream\"") == 0);
  for (const auto& d : {plain, traced, graphed}) fs::remove_all(d);
}

TEST_CASE("engine --graph: the step captured once and replayed gives the eager step's bits (dropout on)") {
  check_graph_bits(run, "");
}

TEST_CASE("engine --run-ahead: the next step enqueued before this one's losses are read gives --run-ahead off's bits") {
  SUBCASE("one stream") { check_run_ahead_bits(run, ""); }
  SUBCASE("--streams 2 (each lane's inputs rewritten in its own stream's order)") {
    check_run_ahead_bits(run, "streams-", [](engine::Config& c) {
      c.streams = 2;
      c.threads = 2;
    });
  }
  SUBCASE("--graph") { check_run_ahead_bits(run, "graph-", [](engine::Config& c) { c.graph = true; }); }
  SUBCASE("--dtype bf16") { check_run_ahead_bits(run, "bf16-", [](engine::Config& c) { c.dtype = "bf16"; }); }
}

namespace {

/// What an in-process Trainer takes: small()'s config on one stream (no dump), its corpus and plan.
struct TrainerInputs {
  engine::Config cfg;
  engine::Corpus corpus;
  engine::Plan plan;
};

TrainerInputs trainer_inputs(double dropout) {
  auto cfg = small("");
  cfg.dump.clear();
  cfg.streams = 1;
  cfg.dropout = dropout;
  engine::resolve_batch(cfg, 1);
  engine::Corpus corpus = engine::Corpus::load(cfg.data);
  engine::Plan plan;
  plan.vocab = corpus.vocab_size();
  plan.vocab_padded = (plan.vocab + cfg.shape.vocab_multiple - 1) / cfg.shape.vocab_multiple * cfg.shape.vocab_multiple;
  return {std::move(cfg), std::move(corpus), plan};
}

}  // namespace

TEST_CASE("Engine: two steps in flight (begin_step, begin_step, finish_step, finish_step) give train_step's results; what needs the device idle refuses") {
  const TrainerInputs in = trainer_inputs(0.1);
  const auto& [cfg, corpus, plan] = in;
  using Tr = engine::Trainer<accel::CpuBackend, float>;
  // Destroyed with two steps in flight (as when an exception leaves the loop between begin_step and
  // finish_step): the destructor waits for them, so they write neither its freed host slots (ASan
  // reports it) nor the device memory it returned, which the trainers below are then given.
  {
    engine::Ranks<accel::CpuBackend> rank_c(accel::CpuBackend{});
    Tr abandoned(accel::CpuBackend{}, cfg, corpus, plan, rank_c);
    abandoned.init_weights();
    abandoned.begin_step();
    abandoned.begin_step();
    CHECK(abandoned.steps_in_flight() == 2);
  }
  engine::Ranks<accel::CpuBackend> rank_a(accel::CpuBackend{}), rank_b(accel::CpuBackend{});
  Tr one_by_one(accel::CpuBackend{}, cfg, corpus, plan, rank_a);
  Tr ahead(accel::CpuBackend{}, cfg, corpus, plan, rank_b);
  // One after the other: the backend's generator (weights, dropout masks) is the process's; each
  // init_weights seeds it.
  one_by_one.init_weights();
  std::vector<Tr::StepResult> want;
  for (int i = 0; i < 5; ++i) want.push_back(one_by_one.train_step());
  const auto a = one_by_one.save_state();
  ahead.init_weights();

  std::vector<Tr::StepResult> got;
  CHECK_THROWS_AS(ahead.finish_step(), std::logic_error);  // nothing in flight
  ahead.begin_step();
  ahead.begin_step();
  CHECK(ahead.steps_in_flight() == 2);
  CHECK(ahead.step() == 2);
  CHECK_THROWS_AS(ahead.begin_step(), std::logic_error);  // a third slot would overwrite step 0's
  CHECK_THROWS_AS(ahead.train_step(), std::logic_error);
  CHECK_THROWS_AS(ahead.save_state(), std::logic_error);
  CHECK_THROWS_AS(ahead.eval_loss(), std::logic_error);
  CHECK(ahead.steps_in_flight() == 2);  // the refusals changed nothing
  got.push_back(ahead.finish_step());
  ahead.begin_step();
  got.push_back(ahead.finish_step());
  got.push_back(ahead.finish_step());
  CHECK(ahead.steps_in_flight() == 0);
  ahead.begin_step();
  ahead.begin_step();
  got.push_back(ahead.finish_step());
  got.push_back(ahead.finish_step());
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i].step == static_cast<std::int64_t>(i));
    CHECK(want[i].step == static_cast<std::int64_t>(i));
    CHECK(std::bit_cast<std::uint64_t>(got[i].loss) == std::bit_cast<std::uint64_t>(want[i].loss));
    CHECK(std::bit_cast<std::uint64_t>(got[i].grad_norm) == std::bit_cast<std::uint64_t>(want[i].grad_norm));
    CHECK(got[i].lr == want[i].lr);
  }
  CHECK(want.back().loss < want.front().loss);
  const auto b = ahead.save_state();
  CHECK(a.step == 5);
  CHECK(b.step == 5);
  CHECK(a.params == b.params);
  CHECK(a.exp_avg_sq == b.exp_avg_sq);
  CHECK(a.values == b.values);  // the generators' states too
}

TEST_CASE("engine --sample: N characters of the vocabulary, continuing --prompt; the run's seed fixes the text") {
  const TrainerInputs in = trainer_inputs(0.0);
  const auto& [cfg, corpus, plan] = in;
  engine::Ranks<accel::CpuBackend> ranks(accel::CpuBackend{});
  engine::Trainer<accel::CpuBackend, float> t(accel::CpuBackend{}, cfg, corpus, plan, ranks);
  t.init_weights();
  for (int i = 0; i < 8; ++i) (void)t.train_step();
  const std::string vocabulary = corpus.vocabulary();
  const std::string a = t.sample(60, 0.8, 200);
  CHECK(a.size() == 60);  // the corpus is ASCII: a character a byte
  for (const char ch : a) CHECK(vocabulary.find(ch) != std::string::npos);
  CHECK(t.sample(60, 0.8, 200) == a);  // the generator is seeded by the run's seed at each call
  const std::string greedy = t.sample(30, 0.8, 1);
  CHECK(t.sample(30, 2.0, 1) == greedy);  // top-k 1: the most likely character, whatever the temperature
  // A prompt longer than the block: its last `block` characters are the context.
  const std::vector<std::int32_t> prompt = corpus.encode_text(std::string(40, ' ') + "HAMLET:", "--prompt");
  REQUIRE(prompt.size() == 47);
  CHECK(prompt.back() == corpus.encode(':'));
  const std::string b = t.sample(60, 0.8, 200, prompt);
  CHECK(b.size() == 60);
  for (const char ch : b) CHECK(vocabulary.find(ch) != std::string::npos);
  CHECK(t.sample(60, 0.8, 200, prompt) == b);
  // A prompt the vocabulary cannot spell: named, before anything is allocated (in run(): below).
  CHECK_THROWS_WITH_AS((void)corpus.encode_text("HAMLET \xe2\x82\xac", "--prompt"),
                       doctest::Contains("--prompt: '\xe2\x82\xac' (U+20AC) is not in the vocabulary of "), engine::UsageError);
  CHECK_THROWS_WITH_AS((void)corpus.encode_text("\xff", "--prompt"),
                       doctest::Contains("--prompt: not valid UTF-8 at byte 0"), engine::UsageError);
}

TEST_CASE("Engine<AnyBackend>: the same code dispatched at run time gives Engine<CpuBackend>'s bits") {
  check_any_bits(run, accel::AnyBackend{accel::CpuBackend{}}, "");
}

TEST_CASE("engine --attention gemm (CUDA's default path: strided-batched GEMMs around softmax kernels) trains as the fused kernel does") {
  check_fused_vs_gemm(run, "", {0.0, 0.2}, 1e-6);
}

TEST_CASE("engine --attention auto: a head size the CPU's fused kernels lack takes the gemm path; fused asked for is refused") {
  using engine::AttentionPath;
  const auto path = [](accel::DeviceType type, std::int64_t width, std::int64_t heads, const char* attention,
                       std::int64_t block = 64) {
    engine::Config c;
    c.shape.width = width;
    c.shape.heads = heads;
    c.shape.block = block;
    c.attention = attention;
    return engine::attention_path(type, c);
  };
  const auto cpu = accel::DeviceType::cpu, cuda = accel::DeviceType::cuda;
  for (const std::int64_t hs : {16, 32, 48, 64, 80, 96, 128}) {
    CHECK(engine::cpu_fused_attention_fits(2 * hs, 2));
    CHECK(path(cpu, 2 * hs, 2, "auto") == AttentionPath::fused);
  }
  for (const std::int64_t hs : {8, 24, 65, 112, 256}) {
    CHECK_FALSE(engine::cpu_fused_attention_fits(2 * hs, 2));
    CHECK(path(cpu, 2 * hs, 2, "auto") == AttentionPath::gemm);
  }
  CHECK_FALSE(engine::cpu_fused_attention_fits(130, 0));
  CHECK_THROWS_WITH_AS(path(cpu, 130, 2, "fused"),
                       "--attention fused on the CPU needs a head size (width / heads) of 16, 32, 48, 64, 80, 96 or 128; "
                       "this run has head size 65 (width 130, heads 2): --attention gemm takes any head size",
                       engine::UsageError);
  // CUDA's fused kernels take any head size, and a row's scores in 48 KiB of shared memory.
  CHECK(path(cuda, 130, 2, "fused") == AttentionPath::fused);
  CHECK(path(cuda, 128, 2, "fused", 12288) == AttentionPath::fused);
  CHECK_THROWS_WITH_AS(path(cuda, 128, 2, "fused", 12289),
                       "--attention fused on CUDA keeps a row's scores in shared memory: --block 12289 is over its "
                       "12288; --attention gemm or flash takes longer blocks",
                       engine::UsageError);
  CHECK(path(cuda, 130, 2, "auto") == AttentionPath::gemm);

  // The run: head size 65 trains (before, the fused kernel refused its arguments at the first step),
  // with the bits of --attention gemm.
  const fs::path a = temp_dir("hs65-auto"), b = temp_dir("hs65-gemm");
  auto c = small(a);
  c.shape.width = 130;
  c.shape.heads = 2;
  c.steps = 4;
  REQUIRE(run(c) == 0);
  c.dump = b.string();
  c.attention = "gemm";
  REQUIRE(run(c) == 0);
  check_same_losses(a, b, c.steps);
  const auto y = losses(a);
  REQUIRE(y.size() == 4);
  CHECK(std::stod(y.back()) < std::stod(y.front()));
  fs::remove_all(a);
  fs::remove_all(b);
}

TEST_CASE("engine --gelu-fusion auto (the default) is off on the CPU: GELU kernels, 2 steps x 4 layers x 2; on runs none") {
  CHECK(gelu_kernel_spans(run, "", engine::Config{}.gelu_fusion) == 2 * 4 * 2);
  CHECK(gelu_kernel_spans(run, "", "on") == 0);
}

TEST_CASE("engine --gelu-fusion on: the GELU inside the MLP's GEMMs trains as the separate kernels do; --graph gives its bits") {
  check_gelu_fusion(run, "", 1e-5);
}

TEST_CASE("DropoutMasks: a sequence's bits depend on (seed, step, site, sequence) only, drawn eagerly or replayed") {
  using B = accel::CpuBackend;
  const B b;
  B::Stream stream;
  const B::StreamRef s = stream;
  constexpr std::int64_t rows = 4;
  for (const std::int64_t words : {8, 6}) {  // a multiple of 4 (one fill), and not (a fill per row)
    CAPTURE(words);
    const auto n = static_cast<std::size_t>(rows * words);
    accel::Buffer<std::uint32_t, B> whole(n, s), split(n, s), other(n, s), replayed(n, s);
    const auto read = [&](const accel::Buffer<std::uint32_t, B>& buf) {
      s.synchronize();
      return std::vector<std::uint32_t>(buf.data(), buf.data() + n);
    };
    // One lane, one micro-batch: rows 0..3 at once.
    engine::DropoutMasks one(42, {words, 12}, 1, 1);
    one.position(3, [](int, int) { return std::int64_t{0}; });
    one.draw(b, s, 0, 0, 0, whole.data(), rows);
    // Two lanes x two micro-batches: rows 0-1 are lane 0's micro-batch 1, rows 2-3 lane 1's micro-batch 0.
    engine::DropoutMasks two(42, {words, 12}, 2, 2);
    two.position(3, [](int slot, int m) { return std::int64_t{slot == 0 ? (m == 1 ? 0 : 9) : (m == 0 ? 2 : 9)}; });
    two.draw(b, s, 1, 0, 0, split.data() + 2 * words, 2);  // the later rows first: the order does not matter
    two.draw(b, s, 0, 1, 0, split.data(), 2);
    const auto w = read(whole);
    CHECK(read(split) == w);
    // The definition: row r is Philox(key(step, site)) words [r x stride, r x stride + words).
    const auto stride = static_cast<std::size_t>((words + 3) / 4 * 4);
    std::vector<std::uint32_t> ref(stride * rows);
    accel::rng::fill_bits(std::span<std::uint32_t>(ref), one.key(3, 0), 0);
    for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
      for (std::size_t i = 0; i < static_cast<std::size_t>(words); ++i) {
        CHECK(w[r * static_cast<std::size_t>(words) + i] == ref[r * stride + i]);
      }
    }
    // Another step, another site, another seed: other bits.
    one.position(4, [](int, int) { return std::int64_t{0}; });
    one.draw(b, s, 0, 0, 0, other.data(), rows);
    const auto step4 = read(other);
    CHECK(step4 != w);
    engine::DropoutMasks sites(42, {12, words}, 1, 1), seeds(43, {words, 12}, 1, 1);
    sites.position(3, [](int, int) { return std::int64_t{0}; });
    sites.draw(b, s, 0, 0, 1, other.data(), rows);
    CHECK(read(other) != w);
    seeds.position(3, [](int, int) { return std::int64_t{0}; });
    seeds.draw(b, s, 0, 0, 0, other.data(), rows);
    CHECK(read(other) != w);
    // Captured once: each replay draws the step position() set before it (the generator's words are
    // reserved at the replay).
    auto g = b.create_graph();
    {
      auto capture = b.capture_to_graph(g, s);
      one.draw(b, s, 0, 0, 0, replayed.data(), rows);
      capture.end();
    }
    one.position(3, [](int, int) { return std::int64_t{0}; });
    b.replay_graph(g, s);
    CHECK(read(replayed) == w);
    one.position(4, [](int, int) { return std::int64_t{0}; });
    b.replay_graph(g, s);
    CHECK(read(replayed) == step4);
  }
  CHECK_THROWS_AS(engine::DropoutMasks(1, {0}, 1, 1), std::invalid_argument);
}

TEST_CASE("engine --streams 2: the batch's rows on two streams, gradients summed, trains as one stream does (dropout on)") {
  // Each sequence's dropout masks are keyed by its index in the batch, not drawn in the lanes' order:
  // the two runs differ only in their sums' order.
  const fs::path one = temp_dir("one"), two = temp_dir("two"), again = temp_dir("two-again");
  auto a = small(one);
  a.steps = 5;
  a.streams = 1;
  a.dropout = 0.1;
  auto b = a;
  b.dump = two.string();
  b.streams = 2;
  REQUIRE(run(a) == 0);
  REQUIRE(run(b) == 0);
  const auto x = losses(one), y = losses(two);
  REQUIRE(x.size() == y.size());
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(std::fabs(std::stod(x[i]) - std::stod(y[i])) < 1e-6 * std::stod(x[i]));
  auto c = b;
  c.dump = again.string();
  REQUIRE(run(c) == 0);
  CHECK(losses(again) == y);  // deterministic with two streams too
  for (const auto& d : {one, two, again}) fs::remove_all(d);
}

/// A file's bytes ("" when it cannot be read).
std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST_CASE("engine --dtype bf16 --streams 2: the same seed gives the same bits (both lanes' products at once)") {
  // Both lanes run the same bf16 products at the same time: through oneDNN's matmul where the CPU has
  // AVX512-BF16 or AMX, whose library scratchpad two threads shared (every run's losses differed).
  const fs::path a = temp_dir("bf16-lanes-a"), b = temp_dir("bf16-lanes-b");
  auto x = small(a);
  x.dtype = "bf16";
  x.streams = 2;
  x.threads = 2;
  x.steps = 4;
  x.dropout = 0.1;
  auto y = x;
  y.dump = b.string();
  REQUIRE(run(x) == 0);
  REQUIRE(run(y) == 0);
  check_same_losses(a, b, 4);
  CHECK(read_bytes(a / "grads0.f32") == read_bytes(b / "grads0.f32"));
  for (const auto& d : {a, b}) fs::remove_all(d);
}

/// The dump's whole losses.txt (step, loss, learning rate and gradient norm, 17 digits each).
std::string loss_lines(const fs::path& dump) { return read_bytes(dump / "losses.txt"); }

/// --activation-checkpointing gives the stored activations' bits: the recomputed forward reads the
/// layer's kept input (the sum the fused add stored, so the same LayerNorm statistics) and reuses the
/// dropout's bits; losses, gradient norms and step 0's gradients, with `adjust` applied to both runs.
void check_recompute_bits(Run run, const std::string& tag, const std::function<void(engine::Config&)>& adjust) {
  const fs::path kept = temp_dir(tag + "kept"), again = temp_dir(tag + "again");
  auto a = small(kept);
  a.steps = 5;
  a.dropout = 0.2;
  a.eval_every = 2;  // evaluations (forward only, into the working set) between the steps
  a.eval_batches = 2;
  adjust(a);
  auto b = a;
  b.dump = again.string();
  b.activation_checkpointing = true;
  REQUIRE(run(a) == 0);
  REQUIRE(run(b) == 0);
  check_same_losses(kept, again, a.steps);
  CHECK(loss_lines(kept) == loss_lines(again));
  const std::string g = read_bytes(kept / "grads0.f32");
  CHECK(g.size() > 3'000'000);
  CHECK(g == read_bytes(again / "grads0.f32"));
  for (const auto& d : {kept, again}) fs::remove_all(d);
}

TEST_CASE("engine --activation-checkpointing: each layer's forward again before its backward gives the stored activations' bits") {
  // On every path that changes what a layer computes or where.
  SUBCASE("fused attention") { check_recompute_bits(run, "ac-fused-", [](engine::Config&) {}); }
  SUBCASE("--attention gemm") { check_recompute_bits(run, "ac-gemm-", [](engine::Config& c) { c.attention = "gemm"; }); }
  SUBCASE("no dropout, --gelu-fusion on") {
    check_recompute_bits(run, "ac-gelu-", [](engine::Config& c) {
      c.dropout = 0;
      c.gelu_fusion = "on";
    });
  }
  SUBCASE("--streams 2, --accum 2") {
    check_recompute_bits(run, "ac-lanes-", [](engine::Config& c) {
      c.streams = 2;
      c.threads = 2;
      c.accum = 2;
    });
  }
  SUBCASE("--graph") { check_recompute_bits(run, "ac-graph-", [](engine::Config& c) { c.graph = true; }); }
  SUBCASE("--dtype bf16") { check_recompute_bits(run, "ac-bf16-", [](engine::Config& c) { c.dtype = "bf16"; }); }
  SUBCASE("--zero-stage 2 --streams 2") {
    check_recompute_bits(run, "ac-stage2-", [](engine::Config& c) {
      c.zero_stage = 2;
      c.streams = 2;
      c.threads = 2;
    });
  }
}

TEST_CASE("engine --activation-checkpointing: the activations are one layer's working set plus each layer's output") {
  engine::ModelShape s;
  s.layers = 6;
  s.heads = 6;
  s.width = 384;
  s.block = 256;
  const std::int64_t batch = 64, vocab = 128, N = batch * s.block, C = s.width, Tp = 256;
  for (const auto path : {engine::AttentionPath::fused, engine::AttentionPath::gemm, engine::AttentionPath::flash}) {
    for (const bool dropout : {false, true}) {
      CAPTURE(int(path));
      CAPTURE(dropout);
      const engine::ActLayout all(s, batch, vocab, 1, dropout, path), once(s, batch, vocab, 1, dropout, path, true);
      CHECK_FALSE(all.recompute);
      CHECK(once.recompute);
      // A layer's own activations (in elements): the LayerNorms' outputs 2 C, qkv 3 C, y C, projection C, res2 C,
      // MLP 8 C, fcproj C a token (17 C), and attention's P (or the flash kernels' log-sum-exp).
      const std::int64_t inner_act = N * 17 * C + (path == engine::AttentionPath::gemm ? batch * s.heads * s.block * s.block : 0);
      const std::int64_t inner_f32 = 4 * N + (path == engine::AttentionPath::gemm    ? 0
                                              : path == engine::AttentionPath::flash ? batch * s.heads * s.block
                                                                                     : batch * s.heads * Tp * Tp);
      CHECK(all.act - once.act == (s.layers - 1) * inner_act);
      CHECK(all.f32 - once.f32 == (s.layers - 1) * inner_f32);
      CHECK(all.bits == once.bits);  // the dropout's bits stay per layer
      for (std::size_t l = 0; l < once.layers.size(); ++l) {
        const auto& L = once.layers[l];
        CHECK(L.qkv == once.layers[0].qkv);  // one working set
        CHECK(L.att == once.layers[0].att);
        CHECK(L.res_in == (l == 0 ? once.encoded : once.layers[l - 1].res_out));
        if (l > 0) CHECK(L.res_out != once.layers[l - 1].res_out);  // each layer's output kept
      }
    }
  }
  // --flash-backward fused: the flash path's scratch also holds dq's float32 partial sums ([B x NH x
  // tiles][hs][64]) and a counter a query tile, plus the ticket (kernels/attention.h)
  const engine::ActLayout split(s, batch, vocab, 1, false, engine::AttentionPath::flash),
      fused(s, batch, vocab, 1, false, engine::AttentionPath::flash, false, engine::FlashBackward::fused);
  const std::int64_t hs = C / s.heads, tiles = (s.block + 63) / 64, heads = batch * s.heads;
  CHECK(engine::flash_backward_scratch_floats(engine::FlashBackward::fused, batch, s.block, s.heads, hs) ==
        heads * s.block + heads * tiles * 64 * hs + heads * tiles + 1);
  const auto padded = [](std::int64_t n) { return (n + 15) / 16 * 16; };  // ActLayout's 16-element alignment
  CHECK(fused.f32 - split.f32 == padded(heads * s.block + heads * tiles * (64 * hs + 1) + 1) - padded(heads * s.block));
  CHECK(fused.act == split.act);
}

/// The spans of the layers' forward and backward ("layer N", "layer N backward") in a trace written by
/// the engine: (tid, start, end) in microseconds. (Not "gradient sum": it spans lane 0's wait for the
/// other lanes, so it overlaps them however they ran.)
std::vector<std::array<double, 3>> layer_spans(const fs::path& json) {
  std::ifstream in(json);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::array<double, 3>> out;
  const std::string tag = "\"cat\": \"stream\", \"ph\": \"X\", \"ts\": ";
  for (std::size_t at = text.find(tag); at != std::string::npos; at = text.find(tag, at + 1)) {
    const char* p = text.c_str() + at + tag.size();
    char* end = nullptr;
    const double ts = std::strtod(p, &end);
    const std::size_t name_at = text.rfind("{\"name\": \"", at);
    REQUIRE(name_at != std::string::npos);
    if (text.compare(name_at + 10, 6, "layer ") != 0) continue;
    const std::size_t dur_at = text.find("\"dur\": ", at), tid_at = text.find("\"tid\": ", at);
    REQUIRE(dur_at != std::string::npos);
    REQUIRE(tid_at != std::string::npos);
    const double dur = std::strtod(text.c_str() + dur_at + 7, nullptr);
    const double tid = std::strtod(text.c_str() + tid_at + 7, nullptr);
    out.push_back({tid, ts, ts + dur});
  }
  return out;
}

TEST_CASE("engine --streams 2: the two streams' forward and backward run side by side, not one after the other") {
  // Lane 1 must wait only for what lane 0's stream held before the step's work (the previous update),
  // not for lane 0's forward and backward: a trace of a few steps then shows layer spans of the two
  // streams overlapping in time. (Waiting at the wrong point ran the lanes in turn at one core's speed.)
  // On a loaded machine the two lane workers may still happen to run in turn for a whole short run, so
  // up to three runs are tried: with the wrong wait no run can ever show an overlap, so retrying does
  // not hide that defect.
  constexpr int steps_traced = 6;
  std::size_t overlapping = 0;
  for (int attempt = 0; attempt < 3 && overlapping == 0; ++attempt) {
    const fs::path dir = temp_dir("lanes");
    auto c = small(dir);
    c.shape.block = 64;  // longer layer spans than small()'s block 32
    c.batch = 8;
    c.steps = steps_traced + 1;
    c.streams = 2;
    c.threads = 2;
    c.trace = (dir / "trace.json").string();
    c.trace_steps = steps_traced;
    REQUIRE(run(c) == 0);
    const auto spans = layer_spans(dir / "trace.json");
    std::set<double> streams;  // the trace's ids of the two lanes' streams (they count up per process)
    for (const auto& x : spans) streams.insert(x[0]);
    CHECK(streams.size() == 2);
    CHECK(spans.size() == steps_traced * 2 * 2 * 4);  // steps x 2 lanes x (forward, backward) x 4 layers
    for (const auto& x : spans) {
      for (const auto& y : spans) {
        if (x[0] < y[0] && x[1] < y[2] && y[1] < x[2]) ++overlapping;
      }
    }
    fs::remove_all(dir);
  }
  CHECK(overlapping > 0);
}

/// Each step's gradient norm (the dump's fourth column; inf for a step the loss scaler skipped).
std::vector<double> norms(const fs::path& dump) {
  std::ifstream in(dump / "losses.txt");
  std::vector<double> out;
  for (std::string step, loss, lr, norm; in >> step >> loss >> lr >> norm;) out.push_back(std::stod(norm));
  return out;
}

TEST_CASE("engine --dtype bf16 on the CPU: bf16 weights and activations train, the losses within 2 % of fp32's") {
  check_bf16(run, "");
}

TEST_CASE("engine --dtype fp16 on the CPU: the dynamic loss scaler overflows at the start, backs off, and the loss falls") {
  const fs::path h = temp_dir("fp16");
  auto b = small(h);
  b.steps = 16;
  b.dtype = "fp16";
  b.loss_scale = 0;              // dynamic (the command line's default with --dtype fp16)
  b.initial_scale_power = 22;    // 2^22: the fp16 weight gradients overflow at once (here already at 2^18)
  REQUIRE(run(b) == 0);
  const auto y = losses(h);
  const auto n = norms(h);
  REQUIRE(y.size() == 16);
  REQUIRE(n.size() == 16);
  // The first steps overflow (an inf or NaN norm) and are skipped until the scale has come down
  // (hysteresis 2: the first overflow keeps the scale, each later one halves it); the run then learns.
  // (A later loss spike may overflow once more: the scaler's job, not a failure.)
  int leading = 0;
  while (leading < static_cast<int>(n.size()) && !std::isfinite(n[static_cast<std::size_t>(leading)])) ++leading;
  const auto total = std::count_if(n.begin(), n.end(), [](double x) { return !std::isfinite(x); });
  MESSAGE("fp16 from 2^22: " << leading << " steps skipped at the start, " << total << " in all");
  CHECK(leading >= 2);
  CHECK(leading <= 8);
  CHECK(total <= leading + 3);
  // A skipped step leaves the weights alone: the first steps' losses are the initial model's.
  CHECK(std::fabs(std::stod(y[1]) - std::stod(y[0])) < 0.1);
  CHECK(std::stod(y.back()) < std::stod(y.front()) - 0.5);
  fs::remove_all(h);
}

TEST_CASE("engine: bad input is refused before anything is allocated or written") {
  const fs::path dir = temp_dir("errors");
  const auto refused = [&](engine::Config c, const std::string& what) {
    c.metrics = (dir / "metrics.csv").string();
    c.dump = (dir / "dump").string();
    try {
      (void)run(c);
      FAIL("accepted: " << what);
    } catch (const engine::UsageError& e) {
      CHECK(std::string(e.what()).find(what) != std::string::npos);
    }
    CHECK_FALSE(fs::exists(dir / "metrics.csv"));
    CHECK_FALSE(fs::exists(dir / "dump"));
  };
  auto c = small(dir);
  c.data = (dir / "missing.txt").string();
  refused(c, "cannot read the data file");
  std::ofstream(dir / "empty.txt").close();
  c.data = (dir / "empty.txt").string();
  refused(c, "is empty");
  {
    std::ofstream bin(dir / "binary.bin", std::ios::binary);
    bin << "ELF" << '\0' << "binary";
  }
  c.data = (dir / "binary.bin").string();
  refused(c, "is binary");
  c = small(dir);
  c.shape.block = 4096;
  refused(c, "is longer than the corpus allows");
  c = small(dir);
  engine::apply_size(c, "gpt2");
  c.data = hamlet;
  c.shape.block = 1024;
  c.batch = 1 << 16;
  refused(c, "the model does not fit: it needs");
  c = small(dir);
  c.resume = (dir / "nowhere").string();
  refused(c, "is not a checkpoint");
  c = small(dir);
  c.trace = (dir / "no-such-dir" / "trace.json").string();
  refused(c, "--trace " + c.trace + ": the directory");
  c = small(dir);
  c.attention = "flash";  // the CPU, fp32: the flash kernels are CUDA's, for 16-bit activations
  refused(c, "--attention flash needs a CUDA device, --dtype bf16 or fp16, and a head size of 32 or 64 "
             "(width / heads, width a multiple of 8); this run has no CUDA device, --dtype fp32, head size 32");
  c = small(dir);
  c.flash_backward = "fused";  // the CPU's attention is the fused kernel: no flash backward to choose
  refused(c, "--flash-backward fused is a backward of the flash kernels, and this run's attention is fused");
  c = small(dir);
  c.shape.width = 130;
  c.shape.heads = 2;
  c.attention = "fused";  // head size 65: the CPU's fused kernels have no loops for it
  refused(c, "--attention fused on the CPU needs a head size (width / heads) of 16, 32, 48, 64, 80, 96 or 128");
  c = small(dir);
  c.prompt = "To be, or not to be \xe2\x82\xac";
  refused(c, "--prompt: '\xe2\x82\xac' (U+20AC) is not in the vocabulary of ");
  fs::remove_all(dir);
}

TEST_CASE("engine: command-line errors name what is wrong") {
  const auto parse = [](std::vector<std::string> args) {
    std::vector<char*> argv{const_cast<char*>("engine")};
    for (auto& a : args) argv.push_back(a.data());
    return engine::parse_args(static_cast<int>(argv.size()), argv.data());
  };
  CHECK_THROWS_WITH_AS(parse({"--size", "huge"}), "unknown --size 'huge' (sizes: tiny, shakespeare, gpt2)",
                       engine::UsageError);
  CHECK_THROWS_WITH_AS(parse({"--heads", "3"}),
                       "--heads 3 does not divide --width 128 (each head gets width / heads channels)",
                       engine::UsageError);
  CHECK_THROWS_AS(parse({"--batch", "0"}), engine::UsageError);
  CHECK_THROWS_WITH_AS(parse({"--lr", "fast"}), "--lr expects a number in [0, 10], got 'fast'", engine::UsageError);
  CHECK_THROWS_WITH_AS(parse({"--min-loss-scale", "0"}), "--min-loss-scale expects a number in [1e-30, 1e+30], got '0'",
                       engine::UsageError);  // bounds as written, not std::to_string's 0.000000
  CHECK_THROWS_WITH_AS(parse({"--beta2", "nan"}), "--beta2 expects a number in [0, 0.999999], got 'nan'",
                       engine::UsageError);
  CHECK_THROWS_WITH_AS(parse({"--frobnicate"}), "unknown option '--frobnicate' (see --help)", engine::UsageError);
  CHECK_THROWS_WITH_AS(parse({"--streams", "5"}), "--streams 5 does not divide --batch 12 (each stream runs batch / streams sequences)",
                       engine::UsageError);
  CHECK_THROWS_WITH_AS(parse({"--graph", "--streams", "2"}),
                       "--graph captures one stream: it cannot be combined with --streams 2", engine::UsageError);
  // --overlap on needs one stream per rank and reduces in backward's order: an explicit conflict is an
  // error, not a setting silently dropped
  CHECK_THROWS_WITH_AS(parse({"--overlap", "on", "--streams", "2"}),
                       "--overlap on reduces one stream's buckets as backward completes them: it cannot be combined "
                       "with --streams 2",
                       engine::UsageError);
  CHECK_THROWS_WITH_AS(parse({"--overlap", "on", "--deterministic"}), doctest::Contains("--deterministic reduces"),
                       engine::UsageError);
  CHECK(parse({"--overlap", "on", "--streams", "1"})->overlap == "on");
  CHECK(parse({"--zero-stage", "2", "--streams", "2"})->streams == 2);  // a bucket set per stream
  CHECK(parse({"--zero-stage", "2", "--reduce-bucket-size", "500000"})->reduce_bucket == 500000);
  CHECK(parse({"--force-collectives"})->force_collectives);
  CHECK(parse({"--activation-checkpointing"})->activation_checkpointing);
  CHECK_FALSE(parse({})->activation_checkpointing);
  CHECK(engine::Config{}.flash_backward == "split");
  CHECK(parse({"--flash-backward", "fused"})->flash_backward == "fused");
  CHECK_THROWS_WITH_AS(parse({"--flash-backward", "both"}), "--flash-backward expects split or fused, got 'both'",
                       engine::UsageError);
  CHECK(parse({"--gelu-fusion", "on"})->gelu_fusion == "on");
  CHECK(parse({"--gelu-fusion", "off"})->gelu_fusion == "off");
  CHECK(parse({})->gelu_fusion == "auto");
  CHECK_THROWS_WITH_AS(parse({"--gelu-fusion", "yes"}), "--gelu-fusion expects on, off or auto, got 'yes'", engine::UsageError);
  CHECK_THROWS_WITH_AS(parse({"--gelu-fusion", "on", "--heads", "1", "--width", "33"}),
                       "--gelu-fusion on needs an even --width (the MLP's pre-activation rows, 4 x width = 132, must be "
                       "a multiple of 8 elements), got --width 33",
                       engine::UsageError);
  CHECK_THROWS_WITH_AS(parse({"--prompt", ""}), "--prompt expects a text (without it the sample starts from a newline)",
                       engine::UsageError);
  CHECK(parse({"--prompt", "ROMEO:"})->prompt == "ROMEO:");
  CHECK_FALSE(parse({})->force_collectives);
  const auto c = parse({"--size", "shakespeare", "--batch", "8", "--layers", "2"});
  REQUIRE(c.has_value());
  CHECK(c->shape.layers == 2);
  CHECK(c->shape.width == 384);
  CHECK(c->batch == 8);
  CHECK(c->dropout == doctest::Approx(0.2));
}

TEST_CASE("engine --zero-stage 2 on one rank: gradients through the buckets into the shard give stage 1's bits") {
  // One micro-batch: each bucket is zeroed, backward accumulates into it as into stage 1's flat
  // buffer, and 0 + x = x into the shard: the same bits, the step-0 gradients byte for byte.
  const fs::path s1 = temp_dir("stage1"), s2 = temp_dir("stage2");
  auto a = small(s1);
  a.steps = 4;
  auto b = small(s2);
  b.steps = 4;
  b.zero_stage = 2;
  REQUIRE(run(a) == 0);
  REQUIRE(run(b) == 0);
  check_same_losses(s1, s2, 4);
  const auto bytes = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  };
  const std::string g1 = bytes(s1 / "grads0.f32"), g2 = bytes(s2 / "grads0.f32");
  CHECK(g1.size() == 800768 * 4);  // the tiny model at block 32 on hamlet_act1 (62 characters)
  CHECK(g1 == g2);
  // Three micro-batches (accumulated in the shard instead of by backward): within 1e-6.
  // --deterministic with four (a power of two: every micro-batch's leaf alone): stage 1's bits; with
  // three (one run of three: their backwards in lockstep over three activation sets, adding into one
  // bucket set in stage 1's order) too, the step-0 gradients byte for byte.
  for (const auto& setting : {std::pair{false, 3}, std::pair{true, 4}, std::pair{true, 3}}) {
    const bool det = setting.first;  // named, not bound: clang before 16 cannot capture a structured binding
    const int accum = setting.second;
    CAPTURE(det);
    CAPTURE(accum);
    const fs::path x = temp_dir("acc1"), y = temp_dir("acc2");
    auto c = small(x);
    c.steps = 4;
    c.accum = accum;
    c.accum_given = true;
    c.deterministic = det;
    auto d = c;
    d.dump = y.string();
    d.zero_stage = 2;
    REQUIRE(run(c) == 0);
    REQUIRE(run(d) == 0);
    const auto p = losses(x), q = losses(y);
    REQUIRE(p.size() == q.size());
    if (det) {
      CHECK(p == q);
      CHECK(bytes(x / "grads0.f32") == bytes(y / "grads0.f32"));
    } else {
      for (std::size_t i = 0; i < p.size(); ++i) CHECK(std::fabs(std::stod(p[i]) - std::stod(q[i])) < 1e-6 * std::stod(p[i]));
    }
    fs::remove_all(x);
    fs::remove_all(y);
  }
  // --graph: the bucketed step captured once and replayed gives the eager bits.
  const fs::path gr = temp_dir("stage2-graph");
  auto g = small(gr);
  g.steps = 4;
  g.zero_stage = 2;
  g.graph = true;
  REQUIRE(run(g) == 0);
  check_same_losses(gr, s2, 4);
  for (const auto& dir : {s1, s2, gr}) fs::remove_all(dir);
}

TEST_CASE("engine --zero-stage 2 --streams 2: a bucket set per lane, summed in lane order before the shard") {
  // One micro-batch: lane 0's bucket plus lane 1's is the add stage 1 makes of the two lanes'
  // gradients, and 0 + x into the shard: stage 1 --streams 2's bits, the step-0 gradients byte for
  // byte. Three micro-batches (accumulated in the shard instead of by backward): within 1e-6. Either
  // way the same bits run to run (the lanes are summed in a fixed order, whatever ran first).
  const auto bytes = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  };
  for (const int accum : {1, 3}) {
    CAPTURE(accum);
    const fs::path s1 = temp_dir("lanes-stage1"), s2 = temp_dir("lanes-stage2"), again = temp_dir("lanes-stage2-again");
    auto a = small(s1);
    a.steps = 4;
    a.streams = 2;
    a.threads = 2;
    a.dropout = 0.1;  // stage 2 interleaves the lanes: the masks, keyed by sequence, do not follow their order
    a.accum = accum;
    a.accum_given = true;
    auto b = a;
    b.dump = s2.string();
    b.zero_stage = 2;
    auto c = b;
    c.dump = again.string();
    REQUIRE(run(a) == 0);
    REQUIRE(run(b) == 0);
    REQUIRE(run(c) == 0);
    const auto p = losses(s1), q = losses(s2);
    REQUIRE(p.size() == 4);
    REQUIRE(q.size() == 4);
    if (accum == 1) {
      CHECK(p == q);
      const std::string g1 = bytes(s1 / "grads0.f32"), g2 = bytes(s2 / "grads0.f32");
      CHECK(g1.size() == 800768 * 4);
      CHECK(g1 == g2);
    } else {
      for (std::size_t i = 0; i < p.size(); ++i) CHECK(std::fabs(std::stod(p[i]) - std::stod(q[i])) < 1e-6 * std::stod(p[i]));
    }
    CHECK(losses(again) == q);
    CHECK(bytes(again / "grads0.f32") == bytes(s2 / "grads0.f32"));
    for (const auto& d : {s1, s2, again}) fs::remove_all(d);
  }
}

// Engine<CudaBackend>: the same checks on a GPU (skipped, saying so, where there is none). The GPU's
// products and sums run in another order than the CPU's, so against the CPU's recorded trajectory the
// losses agree within 1e-4; the determinism checks are bit for bit, as on the CPU.
#if defined(ACCEL_HAS_CUDA)
TEST_CASE("Engine<CudaBackend>: the recorded trajectory, same-seed, resume, --graph and AnyBackend bits, fused vs gemm attention, bf16") {
  if (accel::CudaBackend{}.device_count() == 0) {
    MESSAGE("skipped: " << accel::CudaBackend::availability().reason);
    return;
  }
  SUBCASE("the CPU's recorded trajectory within 1e-4") { check_trajectory(run_cuda, "cuda-", 1e-4); }
  SUBCASE("the same seed gives the same bits; 4 steps + resume + 4 steps give 8 steps' bits") {
    check_same_seed_and_resume(run_cuda, "cuda-");
  }
  SUBCASE("--graph (a CUDA graph replayed) gives the eager step's bits, dropout on") { check_graph_bits(run_cuda, "cuda-"); }
  SUBCASE("--run-ahead on gives off's bits (pinned slots, the next step enqueued before the losses are read)") {
    check_run_ahead_bits(run_cuda, "cuda-");
    check_run_ahead_bits(run_cuda, "cuda-bf16-graph-", [](engine::Config& c) {
      c.dtype = "bf16";
      c.graph = true;
    });
  }
  SUBCASE("Engine<AnyBackend> holding CUDA gives Engine<CudaBackend>'s bits") {
    check_any_bits(run_cuda, accel::AnyBackend{accel::CudaBackend{}}, "cuda-");
  }
  SUBCASE("the fused attention kernel trains as the GEMM path does (within 1e-5)") {
    check_fused_vs_gemm(run_cuda, "cuda-", {0.0}, 1e-5);
  }
  SUBCASE("--dtype bf16: the losses within 2 % of fp32's, and it learns") { check_bf16(run_cuda, "cuda-"); }
  SUBCASE("bf16: the flash kernels (the default) train as the GEMM path does (within 1 %), dropout off and on") {
    check_fused_vs_gemm(run_cuda, "cuda-", {0.0, 0.2}, 1e-2, "flash", "gemm", "bf16");
  }
  SUBCASE("--gelu-fusion on (cuBLASLt's GELU epilogues) trains as the separate kernels do (within 1e-5); --graph gives its bits") {
    check_gelu_fusion(run_cuda, "cuda-", 1e-5);
  }
  SUBCASE("--gelu-fusion auto (the default) is on with CUDA: no GELU kernels; off runs them, 2 steps x 4 layers x 2") {
    CHECK(gelu_kernel_spans(run_cuda, "cuda-", engine::Config{}.gelu_fusion) == 0);
    CHECK(gelu_kernel_spans(run_cuda, "cuda-", "off") == 2 * 4 * 2);
  }
  SUBCASE("bf16 --gelu-fusion on: within 1 % of the separate kernels (the epilogue rounds once less)") {
    check_gelu_fusion(run_cuda, "cuda-bf16-", 1e-2, "bf16");
  }
  SUBCASE("--activation-checkpointing gives the stored activations' bits: fp32, bf16 with the flash kernels, and --graph") {
    check_recompute_bits(run_cuda, "cuda-ac-", [](engine::Config&) {});
    check_recompute_bits(run_cuda, "cuda-ac-bf16-", [](engine::Config& c) { c.dtype = "bf16"; });
    check_recompute_bits(run_cuda, "cuda-ac-bf16-graph-", [](engine::Config& c) {
      c.dtype = "bf16";
      c.graph = true;
    });
  }
  SUBCASE("bf16 --graph with the flash kernels gives the eager step's bits, dropout on") {
    check_graph_bits(run_cuda, "cuda-bf16-", "bf16");
  }
  SUBCASE("--flash-backward fused (one kernel, dq summed in a fixed order) trains as split does; its bits run to run, "
          "in a graph and under --activation-checkpointing") {
    for (const double dropout : {0.0, 0.2}) {
      CAPTURE(dropout);
      const auto with = [dropout](const char* how) {
        return [dropout, how](engine::Config& c) {
          c.dtype = "bf16";
          c.attention = "flash";
          c.dropout = dropout;
          c.flash_backward = how;
        };
      };
      (void)check_trains_alike(run_cuda, "cuda-flash-backward-", 1e-2, with("split"), with("fused"));
    }
    const auto fused = [](engine::Config& c) {
      c.attention = "flash";
      c.flash_backward = "fused";
    };
    check_graph_bits(run_cuda, "cuda-bf16-fused-", "bf16", fused);  // eager and replayed: two runs, one set of bits
    check_recompute_bits(run_cuda, "cuda-ac-bf16-fused-", [&](engine::Config& c) {
      c.dtype = "bf16";
      fused(c);
    });
  }
}
#endif  // ACCEL_HAS_CUDA

// ---- Checkpoints, data and output paths, signals: the audit's findings, each as it failed.

namespace {

/// A file's bytes.
std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

/// FNV-1a-64 of a file's bytes, written out here (not the engine's function) to check its manifest.
std::string fnv_of(const fs::path& p) {
  std::uint64_t h = 14695981039346656037ULL;
  for (const char c : file_bytes(p)) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  char buf[32];
  std::snprintf(buf, sizeof buf, "fnv1a64:%016llx", static_cast<unsigned long long>(h));
  return buf;
}

/// Names in a directory that start with `prefix`.
std::vector<std::string> entries_with(const fs::path& dir, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path().filename().string());
  }
  return out;
}

/// The step column of a metrics CSV, and how many header lines it has.
std::pair<std::vector<long long>, int> metrics_steps(const fs::path& csv) {
  std::ifstream in(csv);
  std::vector<long long> steps;
  int headers = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("step,", 0) == 0) {
      ++headers;
    } else {
      steps.push_back(std::stoll(line.substr(0, line.find(','))));
    }
  }
  return {steps, headers};
}

/// Replaces the checkpoint's rename calls for a scope (engine::detail::rename_fn).
struct RenameOverride {
  explicit RenameOverride(engine::detail::RenameFn fn) : saved(engine::detail::rename_fn()) { engine::detail::rename_fn() = fn; }
  ~RenameOverride() { engine::detail::rename_fn() = saved; }
  engine::detail::RenameFn saved;
};

bool names_step4(const char* to) { return std::string(to).ends_with("/step_00000004"); }

}  // namespace

TEST_CASE("engine checkpoints: re-saving the step latest points to never leaves it missing; a failed publish keeps the old one, which resumes") {
  const fs::path ck = temp_dir("resave"), d = temp_dir("resave-dump");
  auto first = small(d);
  first.stop_at = 4;
  first.save = ck.string();
  first.save_every = 2;
  REQUIRE(run(first) == 0);
  const fs::path step4 = ck / "step_00000004";
  const std::string shard = file_bytes(step4 / "zero_rank_00000.f32"), manifest = file_bytes(step4 / "manifest.txt");
  REQUIRE(shard.size() > 0);
  // A run resumed at step 2 that stops at 4 saves step 4 again, the same bits (resuming is exact). (One
  // resumed at step 4 that trains nothing leaves it alone: the test above.)
  const auto resave = [&] {
    auto c = small(d);
    c.dump.clear();  // --dump writes a checkpoint of its own: only --save's is under test
    c.stop_at = 4;
    c.resume = (ck / "step_00000002").string();
    c.save = ck.string();
    return run(c);
  };
  const auto intact = [&] {
    CHECK(fs::read_symlink(ck / "latest") == "step_00000004");
    CHECK(file_bytes(step4 / "zero_rank_00000.f32") == shard);
    CHECK(file_bytes(step4 / "manifest.txt") == manifest);
    CHECK(entries_with(ck, ".tmp.").empty());
    CHECK(entries_with(ck, ".old.").empty());
  };
  SUBCASE("the swap with the existing step fails") {
    RenameOverride fail([](const char* from, const char* to, unsigned flags) {
      if (names_step4(to)) {
        errno = flags == RENAME_EXCHANGE ? EIO : EEXIST;  // the plain rename: the step exists
        return -1;
      }
      return engine::detail::system_rename(from, to, flags);
    });
    CHECK_THROWS_WITH_AS(resave(), doctest::Contains(("cannot replace " + step4.string() + " with ").c_str()), std::runtime_error);
    intact();
  }
  SUBCASE("no exchange on this filesystem: the old step goes aside, the publishing rename fails, it is put back") {
    RenameOverride fail([](const char* from, const char* to, unsigned flags) {
      if (names_step4(to) && flags == RENAME_EXCHANGE) {
        errno = EINVAL;
        return -1;
      }
      if (names_step4(to) && std::string(from).find("/.tmp.") != std::string::npos) {
        errno = fs::exists(to) ? ENOTEMPTY : EIO;  // the first try (step exists) and the publish after the move aside
        return -1;
      }
      return engine::detail::system_rename(from, to, flags);
    });
    CHECK_THROWS_WITH_AS(resave(), doctest::Contains(("Input/output error; the previous " + step4.string() + " is kept").c_str()),
                         std::runtime_error);
    intact();
  }
  SUBCASE("the re-save succeeds: the same bytes (nothing trained), no leftovers") {
    REQUIRE(resave() == 0);
    intact();
  }
  // Whatever happened, the step-4 checkpoint resumes and trains on to step 8.
  auto on = small(temp_dir("resave-resume"));
  on.resume = "latest";
  on.save = ck.string();
  REQUIRE(run(on) == 0);
  CHECK(losses(on.dump).size() == 4);
  CHECK(fs::read_symlink(ck / "latest") == "step_00000008");
  fs::remove_all(ck);
  fs::remove_all(d);
}

TEST_CASE("engine --zero-to-fp32: the export replaces OUT whole or not at all") {
  const fs::path ck = temp_dir("export-ck"), d = temp_dir("export-dump"), out_dir = temp_dir("export-out");
  auto c = small(d);
  c.stop_at = 2;
  c.save = ck.string();
  REQUIRE(run(c) == 0);
  const fs::path out = out_dir / "weights.f32";
  const std::string params = file_bytes(ck / "latest" / "params.f32");
  REQUIRE(engine::zero_to_fp32(ck.string(), out.string()) == 0);
  CHECK(file_bytes(out) == params);  // one rank: the consolidated weights are params.f32's bytes
  const std::string index = file_bytes(fs::path(out.string() + ".index"));
  CHECK(std::count(index.begin(), index.end(), '\n') > 0);
  // An export whose publishing rename fails leaves the previous OUT as it was, and no temporary.
  std::ofstream(out, std::ios::binary | std::ios::trunc) << "previous";
  {
    RenameOverride fail([](const char* from, const char* to, unsigned flags) {
      if (std::string(to).ends_with("/weights.f32")) {
        errno = EIO;
        return -1;
      }
      return engine::detail::system_rename(from, to, flags);
    });
    CHECK_THROWS_WITH_AS((void)engine::zero_to_fp32(ck.string(), out.string()),
                         doctest::Contains("Input/output error"), std::runtime_error);
  }
  CHECK(file_bytes(out) == "previous");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(out_dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"weights.f32", "weights.f32.index"});  // no temporary left
  // Bad paths are named before anything is read or written.
  const auto refused = [&](const std::string& checkpoint, const fs::path& target, const std::string& message) {
    CAPTURE(target);
    CHECK_THROWS_WITH_AS((void)engine::zero_to_fp32(checkpoint, target.string()), doctest::Contains(message.c_str()),
                         engine::UsageError);
    CHECK_FALSE(fs::exists(target.string() + ".index"));
  };
  refused("/nonexistent-ck", out_dir / "w.f32",
          "--zero-to-fp32 /nonexistent-ck: no checkpoint in /nonexistent-ck (/nonexistent-ck/latest does not exist)");
  const std::string head = "--zero-to-fp32 " + ck.string() + " ";
  refused(ck.string(), out_dir / "no-dir" / "w.f32",
          head + (out_dir / "no-dir" / "w.f32").string() + ": the directory " + (out_dir / "no-dir").string() + " does not exist");
  fs::create_directory(out_dir / "a-dir");
  refused(ck.string(), out_dir / "a-dir", head + (out_dir / "a-dir").string() + ": it is a directory, not a file");
  refused(ck.string(), "/proc/w.f32", head + "/proc/w.f32: cannot create a file in /proc: ");  // even as root
  const std::string step = fs::canonical(ck / "latest").string();
  const std::string before = file_bytes(fs::path(step) / "params.f32");
  refused(ck.string(), ck / "latest" / "params.f32",
          head + (ck / "latest" / "params.f32").string() + ": it is inside the checkpoint it reads (" + step + ")");
  CHECK(file_bytes(fs::path(step) / "params.f32") == before);
  fs::remove_all(ck);
  fs::remove_all(d);
  fs::remove_all(out_dir);
}

TEST_CASE("engine --resume latest: a dangling latest is named as such, with the newest complete checkpoint") {
  const fs::path ck = temp_dir("dangling");
  fs::create_directories(ck / "step_00000002");
  std::ofstream(ck / "step_00000002" / "manifest.txt") << "format accel-engine-checkpoint/2\nstep 2\n";
  fs::create_directories(ck / "step_00000003");  // no manifest: incomplete
  fs::create_directory_symlink("step_00000004", ck / "latest");
  const std::string dangling = "--resume latest: " + (ck / "latest").string() +
                               " is a dangling link (it points to step_00000004, which does not exist)";
  CHECK_THROWS_WITH_AS(engine::resolve_resume("latest", ck.string()),
                       (dangling + "; the newest complete checkpoint is " + (ck / "step_00000002").string() +
                        ": give --resume " + (ck / "step_00000002").string())
                           .c_str(),
                       engine::UsageError);
  fs::remove_all(ck / "step_00000002");
  CHECK_THROWS_WITH_AS(engine::resolve_resume("latest", ck.string()),
                       (dangling + "; " + ck.string() + " holds no complete checkpoint").c_str(), engine::UsageError);
  fs::remove(ck / "latest");
  CHECK_THROWS_WITH_AS(engine::resolve_resume("latest", ck.string()),
                       ("--resume latest: no checkpoint in " + ck.string() + " (" + (ck / "latest").string() + " does not exist)").c_str(),
                       engine::UsageError);
  fs::remove_all(ck);
}

TEST_CASE("engine checkpoints: manifest values are whole numbers in range, the step matches the directory") {
  const fs::path dir = temp_dir("manifest") / "step_00000002";
  fs::create_directories(dir);
  const fs::path file = dir / "manifest.txt";
  const auto with = [&](const std::string& lines) {
    std::ofstream(file) << "format accel-engine-checkpoint/2\n" << lines;
  };
  const auto bad = [&](const std::string& lines, const std::string& message) {
    with(lines);
    CAPTURE(lines);
    CHECK_THROWS_WITH_AS(engine::read_checkpoint_manifest(dir), ("checkpoint " + file.string() + ": " + message).c_str(),
                         engine::UsageError);
  };
  bad("step 2\nranks 1\nshard abc\n",
      "bad 'shard' value 'abc': not a whole decimal number (expected an integer in [1, 1099511627776])");
  bad("step 99999999999999999999\n",
      "bad 'step' value '99999999999999999999': out of range (expected an integer in [0, 1000000000000000])");
  bad("step 2x\n", "bad 'step' value '2x': not a whole decimal number (expected an integer in [0, 1000000000000000])");
  bad("step -5\n", "bad 'step' value '-5': out of range (expected an integer in [0, 1000000000000000])");
  bad("step 2\nranks 0\n", "bad 'ranks' value '0': out of range (expected an integer in [1, 1048576])");
  bad("step 2\ntotal 1e6\n", "bad 'total' value '1e6': not a whole decimal number (expected an integer in [1, 1099511627776])");
  bad("step 3\n", "'step' is 3 but the directory is step_00000002");
  bad("ranks 1\n", "no 'step'");
  bad("step 2\nchecksum params.f32 fnv1a64:12345\n",
      "bad 'checksum' value 'params.f32 fnv1a64:12345': expected '<file> fnv1a64:<16 hex digits>'");
  bad("step 2\nchecksum  fnv1a64:00000000000000ff\n",  // no file name
      "bad 'checksum' value ' fnv1a64:00000000000000ff': expected '<file> fnv1a64:<16 hex digits>'");
  bad("step 2\nchecksum params.f32 fnv1a64:00000000000000fz\n",
      "bad 'checksum' value 'params.f32 fnv1a64:00000000000000fz': expected '<file> fnv1a64:<16 hex digits>'");
  bad("step 1000000000000001\n",
      "bad 'step' value '1000000000000001': out of range (expected an integer in [0, 1000000000000000])");
  // Generators' states and the vocabulary: lower-case hex, two digits a byte, a state 16 bytes.
  bad("step 2\ndata_rng 0123456789abcdeg0123456789abcdef\n",
      "bad 'data_rng' value '0123456789abcdeg0123456789abcdef': character 16 is not a hex digit (0-9, a-f)");
  bad("step 2\ndevice_rng 0A\n", "bad 'device_rng' value '0A': character 2 is not a hex digit (0-9, a-f)");
  bad("step 2\ndata_rng 0123456789abcdef0123456789abcde\n",
      "bad 'data_rng' value '0123456789abcdef0123456789abcde': an odd number of hex digits (31)");
  bad("step 2\ndevice_rng 0123456789abcdef\n",
      "bad 'device_rng' value '0123456789abcdef': 16 hex digits, expected 32 (16 bytes)");
  bad("step 2\nvocabulary " + std::string(65, '6') + "\n", "bad 'vocabulary' value (65 characters): an odd number of hex digits (65)");
  with("step 2\nranks 3\nshard 40\nchecksum params.f32 fnv1a64:00000000000000ff\ndata_rng 00ff10a0000000000000000000000001\n"
       "vocabulary 0a41627a\ntensor wte float32 0 64 64\n");
  const auto st = engine::read_checkpoint_manifest(dir);
  CHECK(st.step == 2);
  CHECK(st.ranks == 3);
  CHECK(st.shard == 40);
  CHECK(st.checksums.at("params.f32") == 255);
  CHECK(st.decoded.at("data_rng") == std::string("\x00\xff\x10\xa0", 4) + std::string(11, '\0') + "\x01");
  CHECK(st.decoded.at("vocabulary") == "\nAbz");
  CHECK(st.values.at("vocabulary") == "0a41627a");  // kept as written too
  CHECK(st.values.count("tensor") == 0);  // the tensor lines are the layout's, not values
  // The directory named with a slash after it is the same directory.
  with("step 3\n");
  CHECK_THROWS_WITH_AS(engine::read_checkpoint_manifest(dir.string() + "/"),
                       ("checkpoint " + file.string() + ": 'step' is 3 but the directory is step_00000002").c_str(),
                       engine::UsageError);
  // A directory not named for a step (a copy put aside) may hold any step.
  const fs::path aside = dir.parent_path() / "step_00000002.old";
  fs::create_directories(aside);
  std::ofstream(aside / "manifest.txt") << "format accel-engine-checkpoint/2\nstep 9\n";
  CHECK(engine::read_checkpoint_manifest(aside).step == 9);
  fs::remove_all(dir.parent_path());
}

TEST_CASE("engine checkpoints: every tensor file's checksum is in the manifest; a corrupt shard is refused before training") {
  const fs::path ck = temp_dir("checksum"), d = temp_dir("checksum-dump");
  auto first = small(d);
  first.stop_at = 2;
  first.save = ck.string();
  REQUIRE(run(first) == 0);
  const fs::path step2 = ck / "step_00000002";
  const std::string manifest = file_bytes(step2 / "manifest.txt");
  CHECK(count_in(step2 / "manifest.txt", "checksum params.f32 " + fnv_of(step2 / "params.f32") + "\n") == 1);
  CHECK(count_in(step2 / "manifest.txt", "checksum zero_rank_00000.f32 " + fnv_of(step2 / "zero_rank_00000.f32") + "\n") == 1);
  CHECK(entries_with(step2, "zero_rank_00000.f32.").empty());  // the rank's checksum went into the manifest
  const std::string recorded = fnv_of(step2 / "zero_rank_00000.f32");
  {  // a NaN over the first master weight
    std::fstream f(step2 / "zero_rank_00000.f32", std::ios::in | std::ios::out | std::ios::binary);
    const float nan = std::nanf("");
    f.write(reinterpret_cast<const char*>(&nan), 4);
  }
  const fs::path out = temp_dir("checksum-out");
  auto again = small(out / "dump");
  again.resume = "latest";
  again.save = ck.string();
  again.metrics = (out / "m.csv").string();
  CHECK_THROWS_WITH_AS(run(again),
                       ("checkpoint: " + (step2 / "zero_rank_00000.f32").string() + " is corrupt: its checksum is " +
                        fnv_of(step2 / "zero_rank_00000.f32") + ", the manifest records " + recorded)
                           .c_str(),
                       engine::UsageError);
  CHECK_FALSE(fs::exists(out / "m.csv"));
  CHECK_FALSE(fs::exists(out / "dump"));
  CHECK(file_bytes(step2 / "manifest.txt") == manifest);
  for (const auto& x : {ck, d, out}) fs::remove_all(x);
}

TEST_CASE("engine checkpoints: a manifest without a generator's state or the vocabulary, or with a malformed loss scale, is refused before training, naming the file and the key") {
  const fs::path ck = temp_dir("manifest-keys"), d = temp_dir("manifest-keys-dump"), out = temp_dir("manifest-keys-out");
  auto first = small(d);
  first.stop_at = 2;
  first.save = ck.string();
  REQUIRE(run(first) == 0);
  const fs::path manifest = ck / "step_00000002" / "manifest.txt";
  const std::string original = file_bytes(manifest);
  auto again = small(out / "dump");
  again.resume = "latest";
  again.save = ck.string();
  again.metrics = (out / "m.csv").string();
  // The manifest with the line of `key` replaced by `line` (removed when empty; added when it has none).
  const auto edit = [&](const std::string& key, const std::string& line) {
    std::string text;
    bool found = false;
    std::size_t at = 0;
    for (std::size_t end; (end = original.find('\n', at)) != std::string::npos; at = end + 1) {
      const std::string l = original.substr(at, end - at);
      const bool is_key = l.rfind(key + " ", 0) == 0;
      found = found || is_key;
      if (!is_key) text += l + "\n";
      if (is_key && !line.empty()) text += line + "\n";
    }
    if (!found) text += line + "\n";
    std::ofstream(manifest, std::ios::binary | std::ios::trunc) << text;
  };
  const auto refused = [&](const std::string& key, const std::string& line, const std::string& message) {
    CAPTURE(key);
    CAPTURE(line);
    edit(key, line);
    CHECK_THROWS_WITH_AS(run(again), ("checkpoint " + manifest.string() + ": " + message).c_str(), engine::UsageError);
    CHECK_FALSE(fs::exists(out / "m.csv"));
    CHECK_FALSE(fs::exists(out / "dump"));
  };
  REQUIRE(original.find("\ndata_rng ") != std::string::npos);
  REQUIRE(original.find("\nloss_scale ") == std::string::npos);  // fp32: no loss scale
  refused("data_rng", "", "no 'data_rng'");
  refused("device_rng", "", "no 'device_rng'");
  refused("vocabulary", "", "no 'vocabulary'");
  refused("checksum zero_rank_00000.f32", "", "no checksum for zero_rank_00000.f32");
  refused("device_rng", "device_rng 0123456789ABCDEF0123456789abcdef",
          "bad 'device_rng' value '0123456789ABCDEF0123456789abcdef': character 11 is not a hex digit (0-9, a-f)");
  refused("data_rng", "data_rng 00ff", "bad 'data_rng' value '00ff': 4 hex digits, expected 32 (16 bytes)");
  const std::string fields = "expected 'scale,iteration,last overflow iteration,hysteresis left,skipped steps'";
  refused("loss_scale", "loss_scale 65536,4,-1,2", "bad 'loss_scale' value '65536,4,-1,2': " + fields);
  refused("loss_scale", "loss_scale 65536,4,-1,2,0,", "bad 'loss_scale' value '65536,4,-1,2,0,': " + fields);
  refused("loss_scale", "loss_scale 65536;4;-1;2;0", "bad 'loss_scale' value '65536;4;-1;2;0': " + fields);
  refused("loss_scale", "loss_scale -1,4,-1,2,0",
          "bad 'loss_scale' value '-1,4,-1,2,0': the scale is not a positive finite number");
  refused("loss_scale", "loss_scale 65536,4,4,2,0",
          "bad 'loss_scale' value '65536,4,4,2,0': the counts are not ones training reaches");
  // The manifest as written resumes.
  std::ofstream(manifest, std::ios::binary | std::ios::trunc) << original;
  CHECK(run(again) == 0);
  CHECK(fs::exists(out / "m.csv"));
  for (const auto& x : {ck, d, out}) fs::remove_all(x);
}

TEST_CASE("engine --data: only a regular file of at most 4 GiB, said before reading it") {
  const fs::path dir = temp_dir("data-kind");
  const auto refused = [](const std::string& data, const std::string& message) {
    CAPTURE(data);
    CHECK_THROWS_WITH_AS(engine::Corpus::load(data), message.c_str(), engine::UsageError);
  };
  refused("/dev/zero", "the data file /dev/zero is a character device: the engine reads a regular text file");
  refused(dir.string(), "the data file " + dir.string() + " is a directory: the engine reads a regular text file");
  const fs::path fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  refused(fifo.string(), "the data file " + fifo.string() + " is a FIFO: the engine reads a regular text file");
  const fs::path big = dir / "big.txt";  // sparse: no disk used
  std::ofstream(big).close();
  fs::resize_file(big, (4ULL << 30) + 1);
  refused(big.string(), "the data file " + big.string() +
                            " is 4294967297 bytes: the engine reads at most 4 GiB (4294967296 bytes)");
  fs::remove_all(dir);
}

TEST_CASE("engine corpus: characters are a UTF-8 text's code points (nanoGPT's sorted(set(text))); other texts byte by byte") {
  using Units = engine::Corpus::Units;
  const fs::path dir = temp_dir("corpus-units");
  const auto load = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir / name, std::ios::binary) << bytes;
    return engine::Corpus::load((dir / name).string());
  };
  const auto text_of = [](const engine::Corpus& c) {
    std::string t;
    for (const auto& split : {c.train(), c.val()}) {
      for (std::size_t i = 0; i < split.size(); ++i) t += c.decode(split[i]);
    }
    return t;
  };
  std::string utf8;  // é (2 bytes), ✓ (3), 😀 (4)
  for (int i = 0; i < 40; ++i) utf8 += "h\xc3\xa9llo w\xc3\xb6rld \xe2\x9c\x93 \xf0\x9f\x98\x80\n";
  const engine::Corpus u = load("utf8.txt", utf8);
  CHECK(u.units() == Units::utf8);
  CHECK(u.bytes() == utf8.size());
  CHECK(u.size() == 40 * 16);  // characters, not bytes (23 a line)
  CHECK(u.train().size() == u.size() * 9 / 10);
  // The vocabulary: the code points in order, "\n" " " d h l o r w é ö ✓ 😀
  CHECK(u.vocab_size() == 12);
  CHECK(u.vocabulary() == "\n dhlorw\xc3\xa9\xc3\xb6\xe2\x9c\x93\xf0\x9f\x98\x80");
  CHECK(u.encode('\n') == 0);
  CHECK(u.encode('h') == 3);
  CHECK(u.encode('z') == -1);
  CHECK(u.decode(8) == "\xc3\xa9");
  CHECK(u.decode(11) == "\xf0\x9f\x98\x80");
  CHECK(text_of(u) == utf8);  // every token decodes back to its character

  const std::string ascii = std::string(200, 'a') + "b\n";
  const engine::Corpus a = load("ascii.txt", ascii);
  CHECK(a.units() == Units::ascii);
  CHECK(a.size() == ascii.size());
  CHECK(a.vocabulary() == "\nab");
  CHECK(text_of(a) == ascii);

  // Not UTF-8: Latin-1, and each malformed form; taken byte by byte, and decoded back to the same bytes.
  for (const std::string& bad : {std::string("caf\xe9 na\xefve\n"), std::string("\xc0\xaf overlong\n"),
                                std::string("\xed\xa0\x80 surrogate\n"), std::string("\xf4\x90\x80\x80 past U+10FFFF\n"),
                                std::string("\x80 stray continuation\n"), std::string("truncated \xe2\x9c")}) {
    CAPTURE(bad);
    std::string t;
    for (int i = 0; i < 20; ++i) t += bad;
    const engine::Corpus b = load("bad.txt", t);
    CHECK(b.units() == Units::bytes_not_utf8);
    CHECK(b.size() == t.size());
    CHECK(text_of(b) == t);
  }
  CHECK(u.token_bytes() == 1);
  // More than 256 distinct characters (Chinese text): still characters, 16 bits a token.
  std::string many;
  for (int rep = 0; rep < 2; ++rep) {
    for (char32_t cp = 0x4E00; cp < 0x4E00 + 300; ++cp) many += engine::Corpus::encode_utf8(cp);
  }
  const engine::Corpus m = load("many.txt", many);
  CHECK(m.units() == Units::utf8);
  CHECK(m.token_bytes() == 2);
  CHECK(m.vocab_size() == 300);
  CHECK(m.size() == 600);
  CHECK(m.val()[m.val().size() - 1] == 299);
  CHECK(text_of(m) == many);
  // More than 65,536: byte by byte.
  std::string too_many;
  for (char32_t cp = 0x100; cp < 0x100 + engine::Corpus::max_vocabulary + 1 + 0x800; ++cp) {
    if (cp < 0xD800 || cp > 0xDFFF) too_many += engine::Corpus::encode_utf8(cp);  // 65,537 characters
  }
  const engine::Corpus b = load("too-many.txt", too_many);
  CHECK(b.units() == Units::bytes_too_many);
  CHECK(b.size() == too_many.size());
  CHECK(b.token_bytes() == 1);
  CHECK(text_of(b) == too_many);
  // encode_utf8 and next_utf8 agree at each length's ends.
  for (const char32_t cp : {0x0u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xD7FFu, 0xE000u, 0xFFFFu, 0x10000u, 0x10FFFFu}) {
    const std::string e = engine::Corpus::encode_utf8(cp);
    std::size_t i = 0;
    char32_t back = 0;
    CHECK(engine::Corpus::next_utf8(e, i, back));
    CHECK(back == cp);
    CHECK(i == e.size());
  }
  fs::remove_all(dir);
}

TEST_CASE("engine corpus at its bounds: 256 and 65,536 distinct characters, 1 % control bytes, every start drawn") {
  using Units = engine::Corpus::Units;
  const fs::path dir = temp_dir("corpus-bounds");
  const auto load = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir / name, std::ios::binary) << bytes;
    return engine::Corpus::load((dir / name).string());
  };
  const auto characters = [](char32_t first, std::size_t n) {
    std::string text;
    for (char32_t cp = first; n > 0; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      text += engine::Corpus::encode_utf8(cp);
      --n;
    }
    return text;
  };
  // 256 distinct characters still fit a byte a token; 257 take two.
  const engine::Corpus c256 = load("256.txt", characters(0x4E00, 256));
  CHECK(c256.units() == Units::utf8);
  CHECK(c256.vocab_size() == 256);
  CHECK(c256.token_bytes() == 1);
  CHECK(c256.val()[c256.val().size() - 1] == 255);
  const engine::Corpus c257 = load("257.txt", characters(0x4E00, 257));
  CHECK(c257.token_bytes() == 2);
  // 65,536 distinct characters are still characters (16 bits a token); one more is byte by byte
  // (the case above).
  const engine::Corpus most = load("65536.txt", characters(0x100, engine::Corpus::max_vocabulary));
  CHECK(most.units() == Units::utf8);
  CHECK(most.vocab_size() == 65536);
  CHECK(most.token_bytes() == 2);

  // Control bytes other than tab, newline, CR and FF: up to 1 % is text, more looks binary.
  std::string one_percent(99, 'a');
  one_percent += '\x01';
  CHECK(load("one.txt", one_percent).vocab_size() == 2);
  std::string more = one_percent;
  more[0] = '\x02';
  const std::string more_path = (dir / "more.txt").string();
  std::ofstream(more_path, std::ios::binary) << more;
  CHECK_THROWS_WITH_AS(engine::Corpus::load(more_path),
                       ("the data file " + more_path + " looks binary (2 control bytes): the engine trains on text").c_str(),
                       engine::UsageError);
  std::string layout;  // tabs, form feeds and CRLF line ends are text, however many
  for (int i = 0; i < 50; ++i) layout += "\tcol\f\r\n";
  CHECK(load("layout.txt", layout).vocab_size() == 7);

  // Batches: a sequence of T tokens starts anywhere from 0 to n - T - 1 (its target ends at the
  // split's last token), and every such start is drawn. Tokens 0..39 make each start readable.
  std::vector<std::uint8_t> tokens(41);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::uint8_t>(i);
  tokens[40] = 200;  // past the split: never read
  const engine::TokenSpan split(std::span<const std::uint8_t>(tokens).first(40));
  const int batch = 64, block = 8;
  const engine::BatchSampler sampler(split, batch, block);
  accel::Generator g(1234);
  std::vector<std::int32_t> inputs(batch * block), targets(batch * block);
  std::set<int> starts;
  for (int draw = 0; draw < 30; ++draw) {
    sampler.next(g, inputs.data(), targets.data());
    for (int b = 0; b < batch; ++b) {
      const int start = inputs[static_cast<std::size_t>(b * block)];
      starts.insert(start);
      for (int t = 0; t < block; ++t) {
        const auto at = static_cast<std::size_t>(b * block + t);
        CHECK(inputs[at] == start + t);
        CHECK(targets[at] == start + t + 1);
      }
    }
  }
  CHECK(starts.size() == 32);  // 0 to 40 - 8 - 1
  CHECK(*starts.begin() == 0);
  CHECK(*starts.rbegin() == 31);
  fs::remove_all(dir);
}

TEST_CASE("engine ranks: the settings compared at start-up; a corpus compared by its text, not its name") {
  const fs::path dir = temp_dir("same-run");
  const auto load = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir / name, std::ios::binary) << bytes;
    return engine::Corpus::load((dir / name).string());
  };
  std::string text;
  for (int i = 0; i < 50; ++i) text += "To be, or not to be: that is the question.\n";  // 2,150 bytes: a tail of 6
  const engine::Corpus base = load("a.txt", text);
  CHECK(load("b.txt", text).content_hash() == base.content_hash());  // another name, the same data
  std::set<std::uint64_t> seen{base.content_hash()};
  for (const std::size_t at : {std::size_t{0}, text.size() / 2, text.size() - 7, text.size() - 2}) {
    std::string t = text;
    t[at] = t[at] == 'o' ? 'e' : 'o';  // one character changed: in the first word, in the middle, in the tail
    CAPTURE(at);
    CHECK(seen.insert(load("c.txt", t).content_hash()).second);
  }
  CHECK(seen.insert(load("d.txt", text + "\n").content_hash()).second);  // one byte longer
  std::string wide;  // 16-bit tokens
  for (char32_t cp = 0x4E00; cp < 0x4E00 + 300; ++cp) wide += engine::Corpus::encode_utf8(cp);
  const engine::Corpus w = load("w.txt", wide);
  REQUIRE(w.token_bytes() == 2);
  CHECK(w.content_hash() == load("w2.txt", wide).content_hash());
  CHECK(seen.insert(w.content_hash()).second);

  // Each setting a rank must share changes exactly its own entry; names are unique.
  engine::Config cfg;
  cfg.save = (dir / "ck").string();
  engine::resolve_batch(cfg, 2);
  const auto settings = engine::shared_settings(cfg, base, nullptr);
  std::set<std::string> names;
  for (const auto& x : settings) CHECK(names.insert(x.name).second);
  const auto differing = [&](const engine::Config& c, const engine::Corpus& corpus, const engine::CheckpointState* resume) {
    const auto other = engine::shared_settings(c, corpus, resume);
    REQUIRE(other.size() == settings.size());
    std::vector<std::string> d;
    for (std::size_t i = 0; i < other.size(); ++i) {
      if (other[i].compared != settings[i].compared) d.push_back(other[i].name);
    }
    return d;
  };
  using Names = std::vector<std::string>;
  const std::vector<std::pair<std::function<void(engine::Config&)>, Names>> changes = {
      {[](engine::Config& c) { c.steps += 1; }, {"--steps"}},
      {[](engine::Config& c) { c.seed = 7; }, {"--seed"}},
      {[](engine::Config& c) { c.shape.layers = 2; }, {"--layers"}},
      {[](engine::Config& c) { c.lr = 1.0000000000000002e-3; }, {"--lr"}},  // the next double: compared exactly
      {[](engine::Config& c) { c.dtype = "bf16"; }, {"--dtype"}},
      {[](engine::Config& c) { c.zero_stage = 2; }, {"--zero-stage"}},
      {[](engine::Config& c) { c.eps = 1e-6; }, {"Adam's eps (--deepspeed-config)"}},
      {[](engine::Config& c) { c.loss_scale = 0; }, {"--loss-scale"}},
      {[&](engine::Config& c) { c.save = (dir / "ck" / ".." / "ck").string(); }, {}},  // the same directory
      {[](engine::Config& c) { c.save.clear(); }, {"--save"}},
      {[](engine::Config& c) { c.keep_last = 2; }, {"--keep-last"}},
      // What may differ per rank: not compared.
      {[](engine::Config& c) { c.threads = 1, c.streams = 2, c.dispatch = "any", c.max_seconds = 5, c.stop_at = 3; }, {}},
      {[](engine::Config& c) { c.eval_every = 10, c.print_every = 1, c.sample = 100, c.metrics = "m.csv", c.trace = "t.json"; }, {}},
  };
  for (const auto& change : changes) {
    engine::Config c = cfg;
    change.first(c);
    CHECK(differing(c, base, nullptr) == change.second);
  }
  CHECK(differing(cfg, load("b.txt", text), nullptr) == Names{});
  CHECK(differing(cfg, load("e.txt", text + "x"), nullptr) == Names{"the data file's contents (--data)"});
  engine::CheckpointState ck;
  ck.step = 10;
  ck.checksums["params.f32"] = 42;
  CHECK(differing(cfg, base, &ck) == Names{"--resume"});
  const auto at10 = engine::shared_settings(cfg, base, &ck);
  ck.checksums["params.f32"] = 43;  // the same step of another run
  CHECK(engine::shared_settings(cfg, base, &ck).back().compared != at10.back().compared);
  CHECK(at10.back().shown == "the checkpoint of step 10");

  CHECK(engine::detail::rank_list({0}) == "0");
  CHECK(engine::detail::rank_list({0, 1}) == "0, 1");
  CHECK(engine::detail::rank_list({0, 2, 3, 4, 5, 7, 9, 10}) == "0, 2-5, 7, 9, 10");
  fs::remove_all(dir);
}

TEST_CASE("engine --save, --metrics, --trace: refused before anything is allocated when they cannot be written or would overwrite an input") {
  const fs::path dir = temp_dir("outputs");
  const fs::path data = dir / "data.txt";
  fs::copy_file(hamlet, data);
  const std::string corpus = file_bytes(data);
  std::ofstream(dir / "plain-file") << "x";
  const auto refused = [&](const engine::Config& c, const std::string& message) {
    CAPTURE(message);
    CHECK_THROWS_WITH_AS(run(c), message.c_str(), engine::UsageError);
    CHECK(file_bytes(data) == corpus);
    CHECK_FALSE(fs::exists(dir / "dump"));
  };
  const auto base = [&] {
    auto c = small(dir / "dump");
    c.data = data.string();
    return c;
  };
  auto c = base();
  c.metrics = data.string();
  refused(c, "--metrics " + data.string() + " is the data file (--data " + data.string() + "): it would be overwritten");
  c = base();
  c.trace = (dir / "." / "data.txt").string();  // another spelling of the same file
  refused(c, "--trace " + c.trace + " is the data file (--data " + data.string() + "): it would be overwritten");
  c = base();
  c.save = (dir / "plain-file").string();
  refused(c, "--save " + c.save + ": it is a file, not a directory");
  c.save = (dir / "plain-file" / "ck").string();
  refused(c, "--save " + c.save + ": cannot create it: " + (dir / "plain-file").string() + " is a file, not a directory");
  c = base();
  c.metrics = "/nonexistent/m.csv";
  refused(c, "--metrics /nonexistent/m.csv: the directory /nonexistent does not exist");
  c.metrics = (dir / "plain-file" / "m.csv").string();
  refused(c, "--metrics " + c.metrics + ": " + (dir / "plain-file").string() + " is a file, not a directory");
  c.metrics = dir.string();
  refused(c, "--metrics " + dir.string() + ": it is a directory, not a file");
  // Where the permission bits say yes to root but nothing can be created (CI runs as root): tried, not asked.
  c = base();
  c.metrics = "/proc/m.csv";
  CHECK_THROWS_WITH_AS(run(c), doctest::Contains("--metrics /proc/m.csv: cannot create a file in /proc: "), engine::UsageError);
  c = base();
  c.save = "/proc/engine-ck";
  CHECK_THROWS_WITH_AS(run(c), doctest::Contains("--save /proc/engine-ck: cannot create it in /proc: "), engine::UsageError);
  CHECK_FALSE(fs::exists(dir / "dump"));
  c = base();
  c.metrics = (dir / "out.txt").string();
  c.trace = (dir / "out.txt").string();
  refused(c, "--trace " + c.trace + " and --metrics " + c.metrics + " are the same path");
  c = base();
  c.metrics = (dir / "out").string();
  c.save = (dir / "out").string();
  refused(c, "--save " + c.save + " and --metrics " + c.metrics + " are the same path");
  fs::create_directories(dir / "ck" / "step_00000002");
  std::ofstream(dir / "ck" / "step_00000002" / "manifest.txt") << "format accel-engine-checkpoint/2\nstep 2\n";
  c = base();
  c.resume = (dir / "ck" / "step_00000002").string();
  c.metrics = (dir / "ck" / "step_00000002" / "manifest.txt").string();
  refused(c, "--metrics " + c.metrics + " is inside the checkpoint --resume reads (" + c.resume + ")");
  c.metrics = (dir / "plain-file").string();  // appended to on --resume: it must be the engine's CSV
  refused(c, "--metrics " + c.metrics + ": a resumed run appends to it, and it is not the engine's metrics CSV "
             "(its first line is not the header); give another file");
  CHECK(file_bytes(dir / "plain-file") == "x");
  fs::remove_all(dir);
}

TEST_CASE("engine --metrics with --resume: the resumed run's rows follow the first run's, under one header") {
  const fs::path ck = temp_dir("metrics-ck"), out = temp_dir("metrics");
  auto first = small(out / "a");
  first.stop_at = 4;
  first.save = ck.string();
  first.print_every = 1;
  first.metrics = (out / "m.csv").string();
  REQUIRE(run(first) == 0);
  CHECK(metrics_steps(out / "m.csv") == std::pair{std::vector<long long>{1, 2, 3, 4}, 1});
  auto second = first;
  second.dump = (out / "b").string();
  second.stop_at = 0;
  second.resume = "latest";
  REQUIRE(run(second) == 0);
  CHECK(metrics_steps(out / "m.csv") == std::pair{std::vector<long long>{1, 2, 3, 4, 5, 6, 7, 8}, 1});
  auto fresh = first;  // not resumed: a new file
  fresh.dump = (out / "c").string();
  fresh.save.clear();
  fresh.stop_at = 2;
  REQUIRE(run(fresh) == 0);
  CHECK(metrics_steps(out / "m.csv") == std::pair{std::vector<long long>{1, 2}, 1});
  fs::remove_all(ck);
  fs::remove_all(out);
}

TEST_CASE("engine: a real SIGTERM (kill) during training finishes the step, writes a checkpoint and returns 0") {
  const fs::path ck = temp_dir("kill"), d = temp_dir("kill-dump");
  auto c = small(d);
  c.save = ck.string();
  c.steps = 1000000;     // runs until the signal
  c.max_seconds = 300;   // a guard only: a signal that is never handled ends the run here, and fails below
  engine::install_signal_handlers();  // what run() installs, so that a kill before it cannot end the test process
  engine::stop_signal().store(0);
  std::thread killer([&] {
    // Once a step has run (its loss is in the dump), the process gets SIGTERM as from `kill`.
    for (int i = 0; i < 6000 && losses(d).empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ::kill(::getpid(), SIGTERM);
  });
  const int status = run(c);
  killer.join();
  const int seen = engine::stop_signal().exchange(0);
  CHECK(status == 0);
  CHECK(seen == SIGTERM);
  const auto done = losses(d).size();
  REQUIRE(done >= 1);
  REQUIRE(done < 100000);
  const std::string step = engine::step_dir_name(static_cast<std::int64_t>(done));
  CHECK(fs::read_symlink(ck / "latest") == step);
  CHECK(fs::exists(ck / step / "manifest.txt"));
  CHECK(count_in(ck / step / "manifest.txt", "step " + std::to_string(done) + "\n") == 1);
  fs::remove_all(ck);
  fs::remove_all(d);
}

TEST_CASE("engine checkpoints: writers saving the same step into one directory at once do not mix or delete each other's files") {
  const fs::path ck = temp_dir("concurrent");
  const engine::ModelShape shape{1, 1, 16, 8, 1};
  const engine::ParamLayout P(shape, 8);
  const auto state = [&](float v) {
    engine::CheckpointState st;
    st.step = 3;
    st.shard = P.total;
    st.params.assign(static_cast<std::size_t>(P.total), v);
    st.exp_avg = st.params;
    st.exp_avg_sq = st.params;
    return st;
  };
  std::vector<std::string> failures[2];
  std::vector<std::thread> writers;
  for (int w = 0; w < 2; ++w) {
    writers.emplace_back([&, w] {
      const auto st = state(static_cast<float>(w + 1));
      for (int i = 0; i < 25; ++i) {
        try {
          (void)engine::write_checkpoint(ck, P, st, st.params);
        } catch (const std::exception& e) {
          failures[w].push_back(e.what());
        }
      }
    });
  }
  for (auto& t : writers) t.join();
  CHECK(failures[0].empty());
  CHECK(failures[1].empty());
  if (!failures[0].empty()) MESSAGE(failures[0].front());
  const fs::path step = ck / "step_00000003";
  CHECK(fs::read_symlink(ck / "latest") == "step_00000003");
  auto st = engine::read_checkpoint_manifest(step);
  engine::read_checkpoint_tensors(step, P.total, st, 0, P.total);  // checksums verified
  REQUIRE(!st.params.empty());
  const float v = st.params[0];
  CHECK((v == 1.0f || v == 2.0f));
  CHECK(std::all_of(st.exp_avg_sq.begin(), st.exp_avg_sq.end(), [&](float x) { return x == v; }));  // one writer's
  CHECK(entries_with(ck, ".tmp.").empty());
  CHECK(entries_with(ck, ".old.").empty());
  fs::remove_all(ck);
}

TEST_CASE("engine MFU: train_flops_per_token counts every product of a training step, causal attention's half only") {
  // Each product of one sequence's training step, listed from the model (nanoGPT's GPT: Linear layers
  // without bias, the LM head tied to the token embedding): 2 m n k FLOPs forward, and backward the
  // two gradients' products (dX = dY W, dW = dY^T X) of the same size.
  const auto listed = [](const engine::ModelShape& s, std::int64_t vocab_padded) {
    const std::int64_t T = s.block, C = s.width, H = s.heads, hs = C / H;
    std::int64_t flops = 0;
    const auto linear = [&](std::int64_t out, std::int64_t in) { flops += 3 * (2 * T * out * in); };
    for (int l = 0; l < s.layers; ++l) {
      linear(3 * C, C);  // attn.c_attn
      for (std::int64_t h = 0; h < H; ++h) {
        for (std::int64_t t = 0; t < T; ++t) {
          const std::int64_t keys = t + 1;  // causal: token t sees keys 0..t
          flops += 2 * (2 * keys * hs);     // forward: q_t . k_j, then sum_j p_tj v_j
          flops += 4 * (2 * keys * hs);     // backward: dP = dy v^T, dv += P^T dy, dq = dS k, dk += dS^T q
        }
      }
      linear(C, C);      // attn.c_proj
      linear(4 * C, C);  // mlp.c_fc
      linear(C, 4 * C);  // mlp.c_proj
    }
    linear(vocab_padded, C);  // the LM head
    REQUIRE(flops % T == 0);
    return flops / T;
  };
  struct Shape {
    engine::ModelShape shape;
    std::int64_t vocab_padded;
  };
  const Shape shapes[] = {{{4, 4, 128, 64, 1}, 84},      // tiny on the Gutenberg plays
                          {{6, 6, 384, 256, 1}, 84},     // shakespeare
                          {{12, 12, 768, 1024, 64}, 128},  // gpt2
                          {{1, 1, 16, 8, 1}, 8},
                          {{3, 2, 64, 33, 1}, 61}};
  for (const auto& x : shapes) {
    CAPTURE(x.shape.layers);
    CAPTURE(x.shape.width);
    CAPTURE(x.shape.block);
    CHECK(engine::train_flops_per_token(x.shape, x.vocab_padded) == listed(x.shape, x.vocab_padded));
  }
  // gpt2: 566.9 MFLOP a token, where nanoGPT's estimate (6 N + 12 L C T, N without the position
  // embedding) gives 623.7, counting the masked half of attention as done.
  CHECK(engine::train_flops_per_token(shapes[2].shape, 128) == 566876160);
}
