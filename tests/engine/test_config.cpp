// The engine's command line (examples/engine/config.hpp): every flag lands in its setting, every
// numeric flag's bounds are accepted and one past them refused with the message naming them, every
// word flag's values, the size preset and a DeepSpeed config as bases the other flags override wherever
// they stand, the defaults derived after parsing, the refused combinations, and the batch triple a
// command line resolves to on several ranks; and the DeepSpeed JSON config's reader (deepspeed_config.hpp):
// JSON's grammar, each key's type, bounds and section.
#include "config.hpp"
#include "deepspeed_config.hpp"
#include "engine_test_support.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

namespace fs = std::filesystem;

std::optional<engine::Config> parse(std::vector<std::string> args) {
  std::vector<char*> argv{const_cast<char*>("engine")};
  for (auto& a : args) argv.push_back(a.data());
  return engine::parse_args(static_cast<int>(argv.size()), argv.data());
}

/// parse()'s UsageError message ("" when it parsed).
std::string parse_error(std::vector<std::string> args) {
  try {
    (void)parse(std::move(args));
  } catch (const engine::UsageError& e) {
    return e.what();
  }
  return "";
}

engine::Config parsed(std::vector<std::string> args) {
  auto c = parse(std::move(args));
  REQUIRE(c.has_value());
  return *c;
}

/// A double as text that strtod reads back to the same value.
std::string exact(double x) {
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", x);
  return text;
}

/// Bounds in usage messages are printed as %g.
std::string bound(double x) {
  char text[40];
  std::snprintf(text, sizeof text, "%g", x);
  return text;
}

struct NumericFlag {
  const char* flag;
  double lo, hi;
  bool integer;
  std::function<double(const engine::Config&)> field;
  std::vector<std::string> context;  // what the extremes need besides the flag (a width the heads divide...)
};

}  // namespace

TEST_CASE("engine command line: each numeric flag sets its setting, takes its bounds and refuses one past them") {
  using C = const engine::Config&;
  const std::vector<NumericFlag> flags = {
      {"--layers", 1, 256, true, [](C c) { return c.shape.layers; }, {}},
      {"--heads", 1, 256, true, [](C c) { return c.shape.heads; }, {"--width", "256"}},
      {"--width", 1, 65536, true, [](C c) { return c.shape.width; }, {"--heads", "1"}},
      {"--block", 1, 65536, true, [](C c) { return c.shape.block; }, {}},
      {"--batch", 1, 1 << 20, true, [](C c) { return c.batch; }, {}},
      {"--accum", 1, 1 << 16, true, [](C c) { return c.accum; }, {}},
      {"--global-batch", 1, 1 << 24, true, [](C c) { return static_cast<double>(c.global_batch); }, {}},
      {"--zero-stage", 1, 2, true, [](C c) { return c.zero_stage; }, {}},
      {"--reduce-bucket-size", 0, 1099511627776.0, true, [](C c) { return static_cast<double>(c.reduce_bucket); }, {}},
      {"--initial-scale-power", 0, 64, false, [](C c) { return c.initial_scale_power; }, {}},
      {"--loss-scale-window", 1, 1 << 30, true, [](C c) { return c.loss_scale_window; }, {}},
      {"--hysteresis", 1, 1 << 20, true, [](C c) { return c.hysteresis; }, {}},
      {"--min-loss-scale", 1e-30, 1e30, false, [](C c) { return c.min_loss_scale; }, {}},
      {"--loss-scale", 1e-30, 1e30, false, [](C c) { return c.loss_scale; }, {}},
      {"--steps", 0, 1099511627776.0, true, [](C c) { return static_cast<double>(c.steps); }, {}},
      {"--stop-at", 1, 1099511627776.0, true, [](C c) { return static_cast<double>(c.stop_at); }, {}},
      {"--time", 0, 1e9, false, [](C c) { return c.max_seconds; }, {}},
      {"--lr", 0, 10, false, [](C c) { return c.lr; }, {}},
      {"--min-lr", 0, 10, false, [](C c) { return c.min_lr; }, {}},
      {"--warmup", 0, 1099511627776.0, true, [](C c) { return static_cast<double>(c.warmup); }, {}},
      {"--beta1", 0, 0.999999, false, [](C c) { return c.beta1; }, {}},
      {"--beta2", 0, 0.999999, false, [](C c) { return c.beta2; }, {}},
      {"--weight-decay", 0, 10, false, [](C c) { return c.weight_decay; }, {}},
      {"--clip", 0, 1e9, false, [](C c) { return c.clip; }, {}},
      {"--dropout", 0, 0.95, false, [](C c) { return c.dropout; }, {}},
      {"--seed", 0, 4611686018427387904.0, true, [](C c) { return static_cast<double>(c.seed); }, {}},
      {"--threads", 1, 4096, true, [](C c) { return c.threads; }, {}},
      {"--streams", 1, 256, true, [](C c) { return c.streams; }, {"--batch", "256"}},
      {"--save-every", 1, 1099511627776.0, true, [](C c) { return static_cast<double>(c.save_every); }, {}},
      {"--keep-last", 1, 1099511627776.0, true, [](C c) { return static_cast<double>(c.keep_last); }, {}},
      {"--sample", 0, 1 << 24, true, [](C c) { return c.sample; }, {}},
      {"--temperature", 1e-3, 100, false, [](C c) { return c.temperature; }, {}},
      {"--top-k", 0, 1 << 20, true, [](C c) { return c.top_k; }, {}},
      {"--print-every", 1, 1099511627776.0, true, [](C c) { return static_cast<double>(c.print_every); }, {}},
      {"--eval-every", 0, 1099511627776.0, true, [](C c) { return static_cast<double>(c.eval_every); }, {}},
      {"--eval-batches", 1, 1 << 16, true, [](C c) { return c.eval_batches; }, {}},
      {"--trace-steps", 1, 1099511627776.0, true, [](C c) { return static_cast<double>(c.trace_steps); }, {}},
  };
  for (const auto& f : flags) {
    const std::string flag = f.flag;
    CAPTURE(flag);
    const auto with = [&](const std::string& value) {
      std::vector<std::string> args = f.context;
      args.insert(args.end(), {f.flag, value});
      return args;
    };
    const auto text = [&](double x) { return f.integer ? std::to_string(static_cast<long long>(x)) : exact(x); };
    const std::string kind = f.integer ? " expects an integer in [" : " expects a number in [";
    const std::string range = f.integer ? std::to_string(static_cast<long long>(f.lo)) + ", " +
                                              std::to_string(static_cast<long long>(f.hi)) + "]"
                                        : bound(f.lo) + ", " + bound(f.hi) + "]";
    for (const double x : {f.lo, f.hi}) {
      CHECK(f.field(parsed(with(text(x)))) == x);
    }
    // One past each bound: the next integer (in integers: 2^62 + 1 is no double), the next double.
    const std::string below = f.integer ? std::to_string(static_cast<long long>(f.lo) - 1) : exact(std::nextafter(f.lo, -1e300));
    const std::string above = f.integer ? std::to_string(static_cast<long long>(f.hi) + 1) : exact(std::nextafter(f.hi, 1e300));
    for (const std::string& past : {below, above}) {
      CHECK(parse_error(with(past)) == std::string(f.flag) + kind + range + ", got '" + past + "'");
    }
    // Text that is not a whole number, or no number at all, or one past what strtoll/strtod can hold.
    for (const std::string bad : {"", "7x", "x7", "0x", "1e9999", " 7 "}) {
      CHECK(parse_error(with(bad)) == std::string(f.flag) + kind + range + ", got '" + bad + "'");
    }
    if (f.integer) {
      for (const std::string bad : {"1.5", "99999999999999999999", "-99999999999999999999"}) {
        CHECK(parse_error(with(bad)) == std::string(f.flag) + kind + range + ", got '" + bad + "'");
      }
    } else {
      for (const std::string bad : {"nan", "inf", "-inf"}) {
        CHECK(parse_error(with(bad)) == std::string(f.flag) + kind + range + ", got '" + bad + "'");
      }
    }
    CHECK(parse_error({f.flag}) == std::string(f.flag) + " needs a value");
  }
}

TEST_CASE("engine command line: each word flag takes its values and names them when refusing one") {
  struct WordFlag {
    const char* flag;
    std::vector<std::string> values;
    std::function<std::string(const engine::Config&)> field;
    const char* expects;
  };
  using C = const engine::Config&;
  const std::vector<WordFlag> flags = {
      {"--overlap", {"on", "off", "auto"}, [](C c) { return c.overlap; }, "on, off or auto"},
      {"--schedule", {"cosine", "constant"}, [](C c) { return c.schedule; }, "cosine or constant"},
      {"--dtype", {"fp32", "bf16", "fp16"}, [](C c) { return c.dtype; }, "fp32, bf16 or fp16"},
      {"--dispatch", {"static", "any"}, [](C c) { return c.dispatch; }, "static or any"},
      {"--attention", {"fused", "gemm", "flash", "auto"}, [](C c) { return c.attention; }, "fused, gemm, flash or auto"},
      {"--flash-backward", {"split", "fused"}, [](C c) { return c.flash_backward; }, "split or fused"},
      {"--gelu-fusion", {"on", "off", "auto"}, [](C c) { return c.gelu_fusion; }, "on, off or auto"},
      {"--run-ahead", {"on", "off"}, [](C c) { return c.run_ahead; }, "on or off"},
  };
  for (const auto& f : flags) {
    const std::string flag = f.flag;
    CAPTURE(flag);
    for (const auto& v : f.values) CHECK(f.field(parsed({f.flag, v})) == v);
    for (const std::string& bad : std::vector<std::string>{"", "ON", "maybe", f.values.front() + " "}) {
      CHECK(parse_error({f.flag, bad}) == std::string(f.flag) + " expects " + f.expects + ", got '" + bad + "'");
    }
    CHECK(parse_error({f.flag}) == std::string(f.flag) + " needs a value");
  }
}

TEST_CASE("engine command line: paths, texts and switches land in their settings") {
  const engine::Config defaults = parsed({});
  CHECK(defaults.data.empty());
  CHECK(defaults.save.empty());
  CHECK(defaults.resume.empty());
  CHECK(defaults.metrics.empty());
  CHECK(defaults.dump.empty());
  CHECK(defaults.trace.empty());
  CHECK(defaults.prompt.empty());
  CHECK(defaults.zero_to_fp32.empty());
  CHECK(defaults.deepspeed_config.empty());
  CHECK_FALSE((defaults.deterministic || defaults.force_collectives || defaults.graph ||
               defaults.activation_checkpointing || defaults.quiet));

  const engine::Config c = parsed({"--data", "plays.txt", "--save", "ck", "--resume", "latest", "--metrics", "m.csv",
                                   "--dump", "dumped", "--trace", "t.json", "--prompt", "ROMEO:", "--zero-to-fp32",
                                   "ck/step_00000010", "weights.f32"});
  CHECK(c.data == "plays.txt");
  CHECK(c.save == "ck");
  CHECK(c.resume == "latest");
  CHECK(c.metrics == "m.csv");
  CHECK(c.dump == "dumped");
  CHECK(c.trace == "t.json");
  CHECK(c.prompt == "ROMEO:");
  CHECK(c.zero_to_fp32 == "ck/step_00000010");
  CHECK(c.zero_to_fp32_out == "weights.f32");
  CHECK(parse_error({"--zero-to-fp32", "ck/step_00000010"}) == "--zero-to-fp32 needs a value");
  for (const std::string path_flag : {"--data", "--save", "--resume", "--metrics", "--dump", "--trace", "--prompt"}) {
    CAPTURE(path_flag);
    CHECK(parse_error({path_flag}) == path_flag + " needs a value");
  }

  CHECK(parsed({"--deterministic"}).deterministic);
  CHECK(parsed({"--force-collectives"}).force_collectives);
  CHECK(parsed({"--graph"}).graph);
  CHECK(parsed({"--activation-checkpointing"}).activation_checkpointing);
  CHECK(parsed({"--quiet"}).quiet);
  // A switch takes no value: what follows it is the next flag.
  const engine::Config q = parsed({"--quiet", "--steps", "3"});
  CHECK(q.quiet);
  CHECK(q.steps == 3);
  CHECK(parse_error({"--quiet", "3"}) == "unknown option '3' (see --help)");
  CHECK(parse_error({"-x"}) == "unknown option '-x' (see --help)");
  CHECK(parse_error({"--Steps", "3"}) == "unknown option '--Steps' (see --help)");
}

TEST_CASE("engine command line: --help and -h print the usage and parse nothing further") {
  for (const std::string help : {"--help", "-h"}) {
    CAPTURE(help);
    const fs::path dir = engine_test::temp_dir("help");
    const fs::path out = dir / "stdout.txt";
    std::fflush(stdout);
    const int saved = ::dup(STDOUT_FILENO);
    std::FILE* sink = std::fopen(out.c_str(), "w");
    REQUIRE(sink != nullptr);
    ::dup2(::fileno(sink), STDOUT_FILENO);
    std::optional<engine::Config> c;
    std::string error;
    try {
      c = parse({"--steps", "5", help, "--frobnicate"});  // the help before the unknown flag: no error
    } catch (const engine::UsageError& e) {
      error = e.what();
    }
    std::fflush(stdout);
    ::dup2(saved, STDOUT_FILENO);
    ::close(saved);
    std::fclose(sink);
    CHECK(error.empty());
    CHECK_FALSE(c.has_value());
    std::ifstream in(out);
    const std::string printed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(printed == engine::usage_text());
    CHECK(printed.rfind("usage: engine [options]", 0) == 0);
  }
}

TEST_CASE("engine command line: a size's preset is the base the other flags change, wherever --size stands") {
  const engine::Config tiny = parsed({});
  CHECK(tiny.size == "tiny");
  CHECK(tiny.shape.layers == 4);
  CHECK(tiny.shape.heads == 4);
  CHECK(tiny.shape.width == 128);
  CHECK(tiny.shape.block == 64);
  CHECK(tiny.shape.vocab_multiple == 1);
  CHECK(tiny.batch == 12);
  CHECK(tiny.steps == 2000);
  CHECK(tiny.lr == 2e-3);
  CHECK(tiny.min_lr == 2e-4);
  CHECK(tiny.beta2 == 0.99);
  CHECK(tiny.dropout == 0.0);
  CHECK(parsed({"--size", "tiny"}).lr == 2e-3);  // the default is the preset, given or not

  const engine::Config sh = parsed({"--size", "shakespeare"});
  CHECK(sh.size == "shakespeare");
  CHECK(sh.shape.layers == 6);
  CHECK(sh.shape.heads == 6);
  CHECK(sh.shape.width == 384);
  CHECK(sh.shape.block == 256);
  CHECK(sh.shape.vocab_multiple == 1);
  CHECK(sh.batch == 64);
  CHECK(sh.steps == 5000);
  CHECK(sh.lr == 1e-3);
  CHECK(sh.min_lr == 1e-4);
  CHECK(sh.dropout == 0.2);

  const engine::Config g = parsed({"--size", "gpt2"});
  CHECK(g.size == "gpt2");
  CHECK(g.shape.layers == 12);
  CHECK(g.shape.heads == 12);
  CHECK(g.shape.width == 768);
  CHECK(g.shape.block == 1024);
  CHECK(g.shape.vocab_multiple == 64);
  CHECK(g.batch == 8);
  CHECK(g.steps == 1000);
  CHECK(g.lr == 6e-4);
  CHECK(g.min_lr == 6e-5);
  CHECK(g.beta2 == 0.95);
  CHECK(g.dropout == 0.0);

  // Flags before --size still override its preset.
  const engine::Config before = parsed({"--layers", "2", "--lr", "0.01", "--dropout", "0.1", "--size", "gpt2"});
  CHECK(before.shape.layers == 2);
  CHECK(before.shape.width == 768);
  CHECK(before.lr == 0.01);
  CHECK(before.dropout == 0.1);
  CHECK(parse_error({"--size"}) == "--size needs a value (tiny, shakespeare, gpt2)");
  CHECK(parse_error({"--size", "Tiny"}) == "unknown --size 'Tiny' (sizes: tiny, shakespeare, gpt2)");
}

TEST_CASE("engine command line: a DeepSpeed config is a base that every flag overrides, wherever it stands") {
  const fs::path dir = engine_test::temp_dir("ds-cli");
  const fs::path json = dir / "ds.json";
  std::ofstream(json) << R"({"optimizer": {"type": "AdamW", "params": {"lr": 3e-4}}, "gradient_clipping": 0.5,
                             "fp16": {"enabled": true, "loss_scale": 128}})";
  const engine::Config base = parsed({"--deepspeed-config", json.string()});
  CHECK(base.deepspeed_config == json.string());
  CHECK(base.lr == 3e-4);
  CHECK(base.clip == 0.5);
  CHECK(base.dtype == "fp16");
  CHECK(base.loss_scale == 128.0);  // the config's fp16 block set its scale: not the dynamic default
  const engine::Config over = parsed({"--lr", "0.01", "--deepspeed-config", json.string(), "--clip", "2"});
  CHECK(over.lr == 0.01);
  CHECK(over.clip == 2.0);
  CHECK(parsed({"--deepspeed-config", json.string(), "--loss-scale", "dynamic"}).loss_scale == 0.0);
  CHECK(parse_error({"--deepspeed-config"}) == "--deepspeed-config needs a file");
  CHECK(parse_error({"--deepspeed-config", (dir / "absent.json").string()}) ==
        "--deepspeed-config: cannot read " + (dir / "absent.json").string());
  // The size's preset comes first, the config over it, the flags over both.
  std::ofstream(json) << R"({"train_micro_batch_size_per_gpu": 3})";
  const engine::Config sized = parsed({"--deepspeed-config", json.string(), "--size", "gpt2", "--layers", "5"});
  CHECK(sized.batch == 3);
  CHECK(sized.batch_given);
  CHECK(sized.shape.width == 768);
  CHECK(sized.shape.layers == 5);
  fs::remove_all(dir);
}

TEST_CASE("engine command line: the settings derived after parsing") {
  // --min-lr follows a lower --lr down to a tenth of it, unless it was given.
  CHECK(parsed({"--lr", "1e-4"}).min_lr == doctest::Approx(1e-5).epsilon(1e-12));
  CHECK(parsed({"--lr", "1e-4", "--min-lr", "5e-4"}).min_lr == 5e-4);
  CHECK(parsed({"--min-lr", "5e-4", "--lr", "1e-4"}).min_lr == 5e-4);
  CHECK(parsed({"--lr", "1e-3"}).min_lr == 2e-4);  // tiny's 2e-4 is below 1e-3: kept
  // fp16 without a scale: DeepSpeed's dynamic scaler; a scale given (fixed or dynamic) is kept.
  CHECK(parsed({}).loss_scale == 1.0);
  CHECK(parsed({"--dtype", "fp16"}).loss_scale == 0.0);
  CHECK(parsed({"--dtype", "fp16", "--loss-scale", "64"}).loss_scale == 64.0);
  CHECK(parsed({"--loss-scale", "64", "--dtype", "fp16"}).loss_scale == 64.0);
  CHECK(parsed({"--loss-scale", "dynamic"}).loss_scale == 0.0);
  CHECK(parsed({"--dtype", "bf16"}).loss_scale == 1.0);
  CHECK(parse_error({"--loss-scale", "Dynamic"}) == "--loss-scale expects a number in [1e-30, 1e+30], got 'Dynamic'");
}

TEST_CASE("engine command line: combinations that cannot run are refused, naming both sides") {
  CHECK(parse_error({"--dtype", "fp16", "--graph"}) ==
        "--graph captures the step with its loss scale, which the dynamic scaler changes: give a fixed --loss-scale X, "
        "or drop --graph");
  CHECK(parse_error({"--loss-scale", "dynamic", "--graph"}).rfind("--graph captures the step with its loss scale", 0) == 0);
  CHECK(parsed({"--dtype", "fp16", "--loss-scale", "1024", "--graph"}).graph);
  CHECK(parse_error({"--graph", "--overlap", "on"}) ==
        "--graph captures one stream: it cannot be combined with --overlap on (a second stream)");
  CHECK(parsed({"--graph", "--overlap", "off"}).graph);
  CHECK(parse_error({"--deterministic", "--streams", "2"}) ==
        "--deterministic runs one stream per rank (the rows of a micro-batch are not split): drop --streams 2");
  CHECK(parsed({"--deterministic", "--streams", "1"}).deterministic);
  CHECK(parse_error({"--overlap", "on", "--deterministic"}) ==
        "--deterministic reduces the gradients in a fixed order after backward: it cannot be combined with --overlap on "
        "(buckets reduced as backward completes them)");
  CHECK(parsed({"--graph", "--streams", "1"}).streams == 1);
  CHECK(parsed({"--streams", "4"}).streams == 4);  // 12 rows: 3 a stream
  CHECK(parse_error({"--batch", "8", "--streams", "3"}) ==
        "--streams 3 does not divide --batch 8 (each stream runs batch / streams sequences)");
  CHECK(parse_error({"--width", "130", "--heads", "4"}) ==
        "--heads 4 does not divide --width 130 (each head gets width / heads channels)");
  CHECK(parsed({"--width", "130", "--heads", "2"}).shape.heads == 2);
  CHECK(parsed({"--gelu-fusion", "on", "--width", "34", "--heads", "2"}).shape.width == 34);
  CHECK(parsed({"--gelu-fusion", "auto", "--width", "33", "--heads", "1"}).shape.width == 33);
}

TEST_CASE("engine command line: the batch triple a command line resolves to on R ranks") {
  const auto on = [](std::vector<std::string> args, int ranks) {
    engine::Config c = parsed(std::move(args));
    engine::resolve_batch(c, ranks);
    return c;
  };
  // One rank's run, unchanged: 12 x 1, drawn 12 at a time.
  engine::Config c = on({}, 1);
  CHECK(c.batch == 12);
  CHECK(c.accum == 1);
  CHECK(c.global_batch == 12);
  CHECK(c.draw_chunk == 12);
  CHECK(c.eval_rows == 12);
  CHECK(c.ranks == 1);
  // --accum 2 on two ranks: the one-rank run's 2 micro-batches of 12 are one a rank; drawn per --batch.
  c = on({"--accum", "2"}, 2);
  CHECK(c.global_batch == 24);
  CHECK(c.batch == 12);
  CHECK(c.accum == 1);
  CHECK(c.draw_chunk == 12);
  CHECK(c.ranks == 2);
  // --global-batch with --batch (no --accum): the accumulation follows; the whole batch drawn at once.
  c = on({"--global-batch", "48", "--batch", "4"}, 3);
  CHECK(c.batch == 4);
  CHECK(c.accum == 4);
  CHECK(c.draw_chunk == 48);
  CHECK(c.eval_rows == 4);
  CHECK(c.ranks == 3);
  // --global-batch with --accum (no --batch): the micro-batch follows, or the accumulation cannot divide.
  c = on({"--global-batch", "24", "--accum", "3"}, 2);
  CHECK(c.batch == 4);
  CHECK(c.accum == 3);
  engine::Config bad = parsed({"--global-batch", "24", "--accum", "5"});
  CHECK_THROWS_WITH_AS(engine::resolve_batch(bad, 2),
                       "--accum 5 does not divide the 12 sequences each of 2 ranks gets of the global batch 24",
                       engine::UsageError);
  // All three given: they must multiply out.
  c = on({"--global-batch", "24", "--batch", "4", "--accum", "3"}, 2);
  CHECK(c.batch == 4);
  CHECK(c.accum == 3);
  bad = parsed({"--global-batch", "24", "--batch", "4", "--accum", "3"});
  CHECK_THROWS_WITH_AS(engine::resolve_batch(bad, 4),
                       "the batch triple does not hold: global batch 24 != micro-batch 4 x gradient accumulation 3 x 4 ranks",
                       engine::UsageError);
}

namespace {

/// parse_json's UsageError message ("" when it parsed).
std::string json_error(const std::string& text) {
  try {
    (void)engine::parse_json(text, "ds.json");
  } catch (const engine::UsageError& e) {
    return e.what();
  }
  return "";
}

/// The Config a DeepSpeed config file holding `text` gives, or its error in `error`.
engine::Config from_deepspeed(const fs::path& dir, const std::string& text, std::string* error = nullptr) {
  const fs::path file = dir / "ds.json";
  std::ofstream(file) << text;
  engine::Config c;
  try {
    engine::apply_deepspeed_config(c, file.string());
  } catch (const engine::UsageError& e) {
    if (error == nullptr) FAIL("unexpected error: ", e.what());
    *error = e.what();
  }
  return c;
}

std::string deepspeed_error(const fs::path& dir, const std::string& text) {
  std::string error;
  (void)from_deepspeed(dir, text, &error);
  return error;
}

}  // namespace

TEST_CASE("DeepSpeed config: the JSON reader takes JSON and names the line of what is not") {
  const engine::Json j = engine::parse_json(R"( {"b": [1, -2.5e3, 0.125, true, false, null, "x", [], {}], "a": {"k": "v"}} )", "ds.json");
  REQUIRE(j.kind == engine::Json::Kind::object);
  REQUIRE(j.members.size() == 2);
  CHECK(j.members[0].key == "b");  // in the file's order
  CHECK(j.members[1].key == "a");
  const auto& items = j.members[0].value.items;
  REQUIRE(items.size() == 9);
  CHECK(items[0].num == 1.0);
  CHECK(items[1].num == -2500.0);
  CHECK(items[2].num == 0.125);
  CHECK((items[3].kind == engine::Json::Kind::boolean && items[3].b));
  CHECK((items[4].kind == engine::Json::Kind::boolean && !items[4].b));
  CHECK(items[5].kind == engine::Json::Kind::null);
  CHECK((items[6].kind == engine::Json::Kind::string && items[6].str == "x"));
  CHECK((items[7].kind == engine::Json::Kind::array && items[7].items.empty()));
  CHECK((items[8].kind == engine::Json::Kind::object && items[8].members.empty()));
  CHECK(j.members[1].value.members.at(0).value.str == "v");
  CHECK(engine::parse_json(R"("tab\tnl\ncr\rbs\bff\fq\"bsl\\sl\/")", "ds.json").str == "tab\tnl\ncr\rbs\bff\fq\"bsl\\sl/");
  CHECK(engine::parse_json("-0", "ds.json").num == 0.0);
  CHECK(engine::parse_json("1E+2", "ds.json").num == 100.0);

  CHECK(json_error("") == "ds.json:1: not valid JSON: unexpected end");
  CHECK(json_error("{\"a\": 1}\nx") == "ds.json:2: not valid JSON: unexpected text after the value");
  CHECK(json_error("{\"a\":\n\n") == "ds.json:3: not valid JSON: unexpected end");
  CHECK(json_error("{\"a\": 1") == "ds.json:1: not valid JSON: expected '}'");
  CHECK(json_error("{\"a\": 1,}") == "ds.json:1: not valid JSON: expected '\"'");
  CHECK(json_error("{\"a\" 1}") == "ds.json:1: not valid JSON: expected ':'");
  CHECK(json_error("[1, 2") == "ds.json:1: not valid JSON: expected ']'");
  CHECK(json_error("\"abc") == "ds.json:1: not valid JSON: an unterminated string");
  CHECK(json_error("\"abc\\") == "ds.json:1: not valid JSON: an unfinished escape");
  CHECK(json_error(R"("\u0041")") == "ds.json:1: not valid JSON: \\u escapes are not supported in a config");
  CHECK(json_error(R"("\q")") == "ds.json:1: not valid JSON: an unknown escape '\\q'");
  CHECK(json_error("\"a\tb\"") == "ds.json:1: not valid JSON: a control character in a string (write it as an escape)");
  // strtod's forms beyond JSON's numbers are not numbers.
  for (const std::string not_json : {"nan", "NaN", "inf", "Infinity", "+1", ".5", "1.", "1e", "-", "tru"}) {
    CAPTURE(not_json);
    CHECK(json_error(not_json) == "ds.json:1: not valid JSON: expected a value");
  }
  for (const std::string trailing : {"01", "0x10", "truex"}) {
    CAPTURE(trailing);
    CHECK(json_error(trailing) == "ds.json:1: not valid JSON: unexpected text after the value");
  }
}

TEST_CASE("DeepSpeed config: each key's type, bounds and section are checked, naming the key") {
  const fs::path dir = engine_test::temp_dir("ds-keys");
  const std::string e = "--deepspeed-config: ";
  CHECK(deepspeed_error(dir, "[1]") == e + "the top level must be an object");
  CHECK(deepspeed_error(dir, R"({"optimizer": 3})") == e + "'optimizer' must be an object");
  CHECK(deepspeed_error(dir, R"({"optimizer": {"type": "AdamW", "params": []}})") == e + "'optimizer.params' must be an object");
  CHECK(deepspeed_error(dir, R"({"gradient_clipping": "1"})") == e + "gradient_clipping must be a number");
  CHECK(deepspeed_error(dir, R"({"optimizer": {"type": 1}})") == e + "optimizer.type must be a string");
  CHECK(deepspeed_error(dir, R"({"bf16": {"enabled": 1}})") == e + "bf16.enabled must be true or false");
  CHECK(deepspeed_error(dir, (dir / "none").string()).find("not valid JSON") != std::string::npos);
  // null is the default, as DeepSpeed's get() of a None gives.
  const engine::Config nulls = from_deepspeed(dir, R"({"gradient_clipping": null, "fp16": {"loss_scale_window": null,
      "hysteresis": null, "min_loss_scale": null}})");
  CHECK(nulls.clip == 1.0);
  CHECK(nulls.loss_scale_window == 1000);
  CHECK(nulls.hysteresis == 2);
  CHECK(nulls.min_loss_scale == 1.0);

  // Every bound taken, and one past it refused (integers printed as written).
  struct Bound {
    std::string json_at_bound, json_past, message;
    std::function<bool(const engine::Config&)> holds;
  };
  using C = const engine::Config&;
  const std::vector<Bound> bounds = {
      {R"({"train_batch_size": 16777216})", R"({"train_batch_size": 16777217})",
       "train_batch_size must be at most 16777216, got 16777217", [](C c) { return c.global_batch == 16777216; }},
      {R"({"train_batch_size": 1})", R"({"train_batch_size": 0})", "train_batch_size must be an integer >= 1",
       [](C c) { return c.global_batch == 1; }},
      {R"({"train_micro_batch_size_per_gpu": 1048576})", R"({"train_micro_batch_size_per_gpu": 1048577})",
       "train_micro_batch_size_per_gpu must be at most 1048576, got 1048577", [](C c) { return c.batch == 1048576 && c.batch_given; }},
      {R"({"gradient_accumulation_steps": 65536})", R"({"gradient_accumulation_steps": 65537})",
       "gradient_accumulation_steps must be at most 65536, got 65537", [](C c) { return c.accum == 65536 && c.accum_given; }},
      {R"({"steps_per_print": 1})", R"({"steps_per_print": 0})", "steps_per_print must be an integer >= 1",
       [](C c) { return c.print_every == 1; }},
      {R"({"gradient_clipping": 0})", R"({"gradient_clipping": 1e10})", "gradient_clipping must be a number in [0, 1e+09], got 1e+10",
       [](C c) { return c.clip == 0.0; }},
      {R"({"gradient_clipping": 1e9})", R"({"gradient_clipping": -1e-300})",
       "gradient_clipping must be a number in [0, 1e+09], got -1e-300", [](C c) { return c.clip == 1e9; }},
      {R"({"optimizer": {"type": "adamw", "params": {"eps": 1}}})", R"({"optimizer": {"type": "adam", "params": {"eps": 1.5}}})",
       "optimizer.params.eps must be a number in [0, 1], got 1.5", [](C c) { return c.eps == 1.0; }},
      {R"({"optimizer": {"type": "Adam", "params": {"weight_decay": 10}}})",
       R"({"optimizer": {"type": "Adam", "params": {"weight_decay": 10.5}}})",
       "optimizer.params.weight_decay must be a number in [0, 10], got 10.5", [](C c) { return c.weight_decay == 10.0; }},
      {R"({"scheduler": {"type": "WarmupCosineLR", "params": {"cos_min_ratio": 1}}})",
       R"({"scheduler": {"type": "WarmupCosineLR", "params": {"cos_min_ratio": 1.5}}})",
       "scheduler.params.cos_min_ratio must be a number in [0, 1], got 1.5", [](C c) { return c.min_lr == c.lr; }},
      {R"({"scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 1}}})",
       R"({"scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 0}}})",
       "scheduler.params.total_num_steps must be an integer >= 1", [](C c) { return c.steps == 1; }},
      {R"({"fp16": {"initial_scale_power": 64}})", R"({"fp16": {"initial_scale_power": 65}})",
       "fp16.initial_scale_power must be a number in [0, 64], got 65", [](C c) { return c.initial_scale_power == 64; }},
      {R"({"fp16": {"loss_scale_window": 1073741824}})", R"({"fp16": {"loss_scale_window": 1073741825}})",
       "fp16.loss_scale_window must be at most 1073741824, got 1073741825", [](C c) { return c.loss_scale_window == 1073741824; }},
      {R"({"fp16": {"hysteresis": 1048576}})", R"({"fp16": {"hysteresis": 1048577}})",
       "fp16.hysteresis must be at most 1048576, got 1048577", [](C c) { return c.hysteresis == 1048576; }},
      {R"({"fp16": {"min_loss_scale": 1e-30}})", R"({"fp16": {"min_loss_scale": 0}})",
       "fp16.min_loss_scale must be a number in [1e-30, 1e+30], got 0", [](C c) { return c.min_loss_scale == 1e-30; }},
      {R"({"fp16": {"enabled": true, "loss_scale": 1e30}})", R"({"fp16": {"enabled": true, "loss_scale": -1}})",
       "fp16.loss_scale must be >= 0 (0: dynamic)", [](C c) { return c.loss_scale == 1e30; }},
      {R"({"zero_optimization": {"reduce_bucket_size": 1e15}})", R"({"zero_optimization": {"reduce_bucket_size": 1e16}})",
       "zero_optimization.reduce_bucket_size must be an integer >= 0", [](C c) { return c.reduce_bucket == 1000000000000000; }},
      {R"({"zero_optimization": {"reduce_bucket_size": 0}})", R"({"zero_optimization": {"reduce_bucket_size": 1.5}})",
       "zero_optimization.reduce_bucket_size must be an integer >= 0", [](C c) { return c.reduce_bucket == 0; }},
  };
  for (const auto& b : bounds) {
    CAPTURE(b.json_at_bound);
    CHECK(b.holds(from_deepspeed(dir, b.json_at_bound)));
    CHECK(deepspeed_error(dir, b.json_past) == e + b.message);
  }

  // The schedulers: WarmupCosineLR's cos_min_ratio defaults to DeepSpeed's 0.0001; WarmupLR is a
  // warm-up to a constant rate.
  const engine::Config cosine = from_deepspeed(dir, R"({"optimizer": {"type": "AdamW", "params": {"lr": 0.5}},
      "scheduler": {"type": "WarmupCosineLR", "params": {"warmup_num_steps": 7, "warmup_type": "linear"}}})");
  CHECK(cosine.schedule == "cosine");
  CHECK(cosine.warmup == 7);
  CHECK(cosine.min_lr == 0.5 * 0.0001);
  const engine::Config warm = from_deepspeed(dir, R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 0.25,
      "warmup_num_steps": 9, "warmup_min_lr": 0}}})");
  CHECK(warm.schedule == "constant");
  CHECK(warm.lr == 0.25);
  CHECK(warm.warmup == 9);
  CHECK(from_deepspeed(dir, R"({"scheduler": {"type": "WarmupLR"}})").schedule == "constant");
  CHECK(deepspeed_error(dir, R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_type": "log"}}})") ==
        e + "scheduler.params.warmup_type must be linear");
  CHECK(deepspeed_error(dir, R"({"scheduler": {"type": "WarmupCosineLR", "params": {"warmup_min_ratio": 0.1}}})") ==
        e + "scheduler.params.warmup_min_ratio other than 0 is not supported");
  CHECK(deepspeed_error(dir, R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 1e-5}}})") ==
        e + "scheduler.params.warmup_min_lr other than 0 is not supported");
  CHECK(deepspeed_error(dir, R"({"scheduler": {"params": {}}})") ==
        e + "scheduler.type '' is not supported (WarmupCosineLR, WarmupLR)");
  CHECK(deepspeed_error(dir, R"({"optimizer": {"type": "AdamW", "params": {"adam_w_mode": false}}})") ==
        e + "optimizer.params.adam_w_mode false (L2-regularised Adam) is not supported");
  CHECK(from_deepspeed(dir, R"({"optimizer": {"type": "AdamW", "params": {"adam_w_mode": true}}})").lr == 1e-3);
  CHECK(deepspeed_error(dir, R"({"optimizer": {"type": "AdamW", "params": {"betas": [0.9, 0.99, 0.5]}}})") ==
        e + "optimizer.params.betas must be [beta1, beta2]");
  CHECK(deepspeed_error(dir, R"({"optimizer": {"type": "AdamW", "params": {"betas": 0.9}}})") ==
        e + "optimizer.params.betas must be [beta1, beta2]");
  CHECK(deepspeed_error(dir, R"({"zero_optimization": {"reduce_scatter": false}})") ==
        e + "zero_optimization.reduce_scatter false is not supported");
  CHECK(from_deepspeed(dir, R"({"zero_optimization": {"reduce_scatter": true, "contiguous_gradients": false}})").zero_stage == 1);
  CHECK(deepspeed_error(dir, R"({"zero_optimization": {"contiguous_gradients": 0}})") ==
        e + "zero_optimization.contiguous_gradients must be true or false");
  CHECK(deepspeed_error(dir, R"({"activation_checkpointing": {"synchronize_checkpoint_boundary": true}})") ==
        e + "activation_checkpointing.synchronize_checkpoint_boundary true is not supported (the engine's stream orders "
            "the recomputation)");
  CHECK(deepspeed_error(dir, R"({"activation_checkpointing": {"profile": true}})") ==
        e + "activation_checkpointing.profile true is not supported (--trace shows each layer's recomputation as a span)");
  CHECK(deepspeed_error(dir, R"({"activation_checkpointing": {"contiguous_memory_optimization": "yes"}})") ==
        e + "activation_checkpointing.contiguous_memory_optimization must be true or false");
  // fp16 / bf16 disabled change nothing but their scaler settings.
  const engine::Config off = from_deepspeed(dir, R"({"fp16": {"enabled": false, "loss_scale": 128}, "bf16": {"enabled": false}})");
  CHECK(off.dtype == "fp32");
  CHECK(off.loss_scale == 1.0);

  // An unknown key is refused in every section, named with its path.
  for (const std::string section : {"optimizer", "scheduler", "fp16", "bf16", "zero_optimization", "activation_checkpointing"}) {
    CAPTURE(section);
    const std::string type = section == "optimizer" ? R"("type": "AdamW", )" : section == "scheduler" ? R"("type": "WarmupLR", )" : "";
    CHECK(deepspeed_error(dir, "{\"" + section + "\": {" + type + "\"bogus\": 1}}") ==
          e + "unsupported key '" + section + ".bogus' (see examples/engine/deepspeed_config.hpp)");
  }
  CHECK(deepspeed_error(dir, R"({"scheduler": {"type": "WarmupLR", "params": {"bogus": 1}}})") ==
        e + "unsupported key 'scheduler.params.bogus' (see examples/engine/deepspeed_config.hpp)");
  fs::remove_all(dir);
}
