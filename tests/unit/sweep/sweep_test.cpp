// `zerosim sweep` (sweep/sweep.hpp, docs/sweep.md): files written per point and rewritten in point order, failed
// points kept as rows, --resume after a stop, shares merged, and one point's figures equal to `zerosim run`'s.
#include "core/error.hpp"
#include "core/json.hpp"
#include "sweep/plots.hpp"
#include "sweep/summary.hpp"
#include "sweep/sweep.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

using namespace zerosim;
using namespace zerosim::sweep;
namespace fs = std::filesystem;

namespace {

const std::string SCENARIO = std::string(ZEROSIM_SOURCE_DIR) + "/scenarios/llama2-70b-8xa100-200gbps.yaml";

std::string slurp(const fs::path& p)
{
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The file without its wall_s values (the only bytes two runs may differ in).
std::string without_wall(const std::string& text)
{
  static const std::regex json_wall("\"wall_s\":[^,}]*");
  return std::regex_replace(text, json_wall, "\"wall_s\":W");
}

std::string csv_without_wall(const std::string& text)
{
  std::string out, line;
  std::istringstream is(text);
  while (std::getline(is, line))
    out += line.substr(0, line.rfind(',')) + "\n";
  return out;
}

/// A stand-in for the simulation: the step time is micro-batch x stage; stage 0 is refused as the real loader
/// refuses a contradiction; a nested object and an array, as run_json has them.
std::string fake_point(const Plan&, const std::vector<std::string>& sets)
{
  double mb = 0, stage = 0;
  for (const std::string& s : sets) {
    const std::string key = s.substr(0, s.find('=')), value = s.substr(s.find('=') + 1);
    if (key == "training.micro_batch")
      mb = std::stod(value);
    if (key == "deepspeed.zero_optimization.stage")
      stage = std::stod(value);
  }
  if (stage == 0)
    throw core::InputError("stage 0 refused by the stand-in");
  std::ostringstream os;
  os << "{\"step_time_s\":" << mb * stage << ",\"tflops_per_gpu\":{\"model\":" << 10 * mb
     << ",\"hardware\":null},\"warnings\":[\"a, b\"],\"fits\":true}";
  return os.str();
}

fs::path fresh_dir(const std::string& name)
{
  const fs::path d = fs::path(ZEROSIM_BINARY_DIR) / "tests-tmp" / name;
  fs::remove_all(d);
  fs::create_directories(d.parent_path());
  return d;
}

Plan sixteen_points(const Shard& shard = Shard{})
{
  return make_plan(SCENARIO, {}, "none", {"training.micro_batch=1..8:x2", "deepspeed.zero_optimization.stage=0..3"},
                   shard);
}

int run(const Plan& plan, const fs::path& dir, bool resume = false, int jobs = 2)
{
  SweepOptions o;
  o.out_dir = dir.string();
  o.jobs = jobs;
  o.resume = resume;
  o.simulate = fake_point;
  std::ostringstream out, err;
  return run_sweep(plan, o, out, err);
}

} // namespace

TEST_SUITE("sweep")
{
  TEST_CASE("sweep: 16 points with 2 workers: one row per point in point order, refused points kept and exit 1")
  {
    const fs::path dir = fresh_dir("sixteen");
    const Plan plan = sixteen_points();
    CHECK(plan.grid().size() == 16);
    CHECK(run(plan, dir) == 1); // the four stage-0 points are refused
    const std::string csv = slurp(dir / "sweep.csv");
    std::istringstream is(csv);
    std::string header, line;
    std::getline(is, header);
    CHECK(header == "point,training.micro_batch,deepspeed.zero_optimization.stage,status,message,step_time_s,"
                    "tflops_per_gpu.model,tflops_per_gpu.hardware,warnings,fits,wall_s");
    std::vector<std::string> rows;
    while (std::getline(is, line))
      rows.push_back(line);
    REQUIRE(rows.size() == 16);
    for (std::size_t p = 0; p < rows.size(); ++p)
      CHECK(rows[p].rfind(std::to_string(p) + ",", 0) == 0);
    // Point 0: micro-batch 1, stage 0: refused, its message kept, the result cells empty.
    CHECK(rows[0].rfind("0,1,0,refused,stage 0 refused by the stand-in,,,,,,", 0) == 0);
    // Point 7: micro-batch 2 (second value of the first axis), stage 3: 2 x 3 = 6 s; the array quoted as JSON text.
    CHECK(rows[7].rfind("7,2,3,done,,6,20,,\"[\"\"a, b\"\"]\",true,", 0) == 0);
    const std::string jsonl = slurp(dir / "sweep.jsonl");
    CHECK(std::count(jsonl.begin(), jsonl.end(), '\n') == 16);
    CHECK(jsonl.find("{\"point\":7,\"values\":{\"training.micro_batch\":\"2\",\"deepspeed.zero_optimization.stage\":"
                     "\"3\"},\"status\":\"done\",\"message\":\"\",\"result\":{\"step_time_s\":6,") !=
          std::string::npos);
    // A second run into the same folder is refused (it would mix two sweeps).
    CHECK_THROWS_WITH_AS(run(plan, dir), doctest::Contains("already holds a sweep"), core::InputError);
  }

  TEST_CASE("sweep: a stopped sweep keeps its finished points, --resume drops a torn line and runs only the rest")
  {
    const Plan plan = sixteen_points();
    const fs::path whole = fresh_dir("whole");
    run(plan, whole);
    // A stop after five points, the sixth half written.
    const fs::path stopped = fresh_dir("stopped");
    run(plan, stopped);
    const std::string all = slurp(stopped / "sweep.jsonl");
    std::size_t cut = 0;
    for (int k = 0; k < 5; ++k)
      cut = all.find('\n', cut) + 1;
    {
      std::ofstream out(stopped / "sweep.jsonl", std::ios::binary | std::ios::trunc);
      out << all.substr(0, cut) << all.substr(cut, 40); // no newline: torn
    }
    SweepOptions o;
    o.out_dir = stopped.string();
    o.jobs = 2;
    o.resume = true;
    int ran = 0;
    o.simulate = [&](const Plan& p, const std::vector<std::string>& sets) {
      ++ran; // in the worker: counts nothing in the parent
      return fake_point(p, sets);
    };
    std::ostringstream out, err;
    CHECK(run_sweep(plan, o, out, err) == 1);
    CHECK(err.str().find("dropped a torn last line") != std::string::npos);
    CHECK(err.str().find("5 of 16 points already finished, skipped; 11 to run") != std::string::npos);
    CHECK(out.str().find("16 points (11 run now, 5 from before)") != std::string::npos);
    CHECK(without_wall(slurp(stopped / "sweep.jsonl")) == without_wall(slurp(whole / "sweep.jsonl")));
    CHECK(csv_without_wall(slurp(stopped / "sweep.csv")) == csv_without_wall(slurp(whole / "sweep.csv")));
    // --resume of another grid is refused.
    const Plan other = make_plan(SCENARIO, {}, "none", {"training.micro_batch=1,2"}, Shard{});
    o.simulate = fake_point;
    CHECK_THROWS_WITH_AS(run_sweep(other, o, out, err), doctest::Contains("holds a different sweep: its axes differs"),
                         core::InputError);
  }

  TEST_CASE("sweep: two shares merged give the whole run's files, missing, duplicated and foreign shares refused")
  {
    const Plan plan = sixteen_points();
    const fs::path whole = fresh_dir("merge-whole");
    run(plan, whole);
    const fs::path a = fresh_dir("share1"), b = fresh_dir("share2"), m = fresh_dir("merged");
    const Plan p1 = sixteen_points(parse_shard("1/2")), p2 = sixteen_points(parse_shard("2/2"));
    run(p1, a, false, 1);
    run(p2, b, false, 1);
    std::ostringstream out;
    CHECK(merge_sweeps({b.string(), a.string()}, m.string(), out) == 1);
    CHECK(slurp(m / "sweep-plan.json") == slurp(whole / "sweep-plan.json"));
    CHECK(without_wall(slurp(m / "sweep.jsonl")) == without_wall(slurp(whole / "sweep.jsonl")));
    CHECK(csv_without_wall(slurp(m / "sweep.csv")) == csv_without_wall(slurp(whole / "sweep.csv")));
    CHECK_THROWS_WITH_AS(merge_sweeps({a.string()}, fresh_dir("m2").string(), out),
                         "sweep --merge: share(s) 2 of 2 missing", core::InputError);
    CHECK_THROWS_WITH_AS(merge_sweeps({a.string(), a.string()}, fresh_dir("m3").string(), out),
                         doctest::Contains("share 1 is given twice"), core::InputError);
    // A share of another grid.
    const fs::path c = fresh_dir("foreign");
    run(make_plan(SCENARIO, {}, "none", {"training.micro_batch=1,2"}, parse_shard("2/2")), c, false, 1);
    CHECK_THROWS_WITH_AS(merge_sweeps({a.string(), c.string()}, fresh_dir("m4").string(), out),
                         doctest::Contains("is a share of another sweep: its axes differs"), core::InputError);
    // An unfinished share.
    {
      std::ofstream trunc(b / "sweep.jsonl", std::ios::binary | std::ios::trunc);
    }
    CHECK_THROWS_WITH_AS(merge_sweeps({a.string(), b.string()}, fresh_dir("m5").string(), out),
                         doctest::Contains("is unfinished (0 of its 8 points)"), core::InputError);
  }

  TEST_CASE("sweep: bad input is refused before any point runs")
  {
    CHECK_THROWS_WITH_AS(make_plan(SCENARIO, {}, "", {"training.micro_batc=1,2"}, Shard{}),
                         doctest::Contains("unknown key (did you mean 'micro_batch'?)"), core::InputError);
    CHECK_THROWS_WITH_AS(make_plan(SCENARIO, {}, "", {}, Shard{}), doctest::Contains("nothing to sweep"),
                         core::InputError);
    CHECK_THROWS_WITH_AS(make_plan(SCENARIO, {}, "", {"training.micro_batch=8..1"}, Shard{}),
                         doctest::Contains("empty range"), core::InputError);
    CHECK_THROWS_AS(make_plan("no-such-file.yaml", {}, "", {"training.micro_batch=1"}, Shard{}), core::InputError);
  }

  TEST_CASE("sweep: a point's figures are zerosim run's for the same --set (the real pipeline, two points)")
  {
    const Plan plan = make_plan(SCENARIO, {}, "none", {"training.micro_batch=1,2"}, Shard{});
    const fs::path dir = fresh_dir("real");
    SweepOptions o;
    o.out_dir = dir.string();
    o.jobs = 2;
    std::ostringstream out, err;
    CHECK(run_sweep(plan, o, out, err) == 0);
    // Point 1 is micro-batch 2: the same text as the pipeline gives for that --set (run in a worker here too, since
    // SimGrid allows one engine per process).
    const std::string jsonl = slurp(dir / "sweep.jsonl");
    const auto second = core::Json::parse(jsonl.substr(jsonl.find('\n') + 1));
    CHECK(second["point"] == 1);
    CHECK(second["values"]["training.micro_batch"] == "2");
    const std::string direct = simulate_point(plan, {"training.micro_batch=2"});
    CHECK(second["result"] == core::Json::parse(direct));
    CHECK(second["result"]["step_time_s"].get<double>() > 0);
  }

  // Issue 32: the pipeline keys are sweep axes like any other (docs/config.md "Pipeline parallelism"). On a small
  // DeepSpeed pipeline (4 GPUs, global batch 8), each point runs at its degree and schedule: p stages of 4 / p
  // data-parallel ranks, one pipeline.stages entry per stage.
  TEST_CASE("sweep: training.pipeline_parallel and training.pipeline.schedule are axes, each point runs its own")
  {
    const std::string pipeline = std::string(ZEROSIM_SOURCE_DIR) + "/tests/data/scenarios/pipeline-recommend.yaml";
    const Plan plan = make_plan(pipeline, {}, "none",
                                {"training.pipeline_parallel=2,4", "training.pipeline.schedule=1f1b,gpipe",
                                 "training.pipeline.partition=uniform"},
                                Shard{});
    REQUIRE(plan.grid().size() == 4);
    const fs::path dir = fresh_dir("pipeline-axes");
    SweepOptions o;
    o.out_dir = dir.string();
    o.jobs = 2;
    std::ostringstream out, err;
    CHECK(run_sweep(plan, o, out, err) == 0);
    std::istringstream jsonl(slurp(dir / "sweep.jsonl"));
    std::string line;
    int points = 0;
    while (std::getline(jsonl, line)) {
      const core::Json r = core::Json::parse(line);
      CAPTURE(line.substr(0, 300));
      REQUIRE(r["status"] == "done");
      const int p = std::stoi(r["values"]["training.pipeline_parallel"].get<std::string>());
      CHECK(r["result"]["parallelism"]["pp"] == p);
      CHECK(r["result"]["parallelism"]["dp"] == 4 / p);
      CHECK(r["result"]["parallelism"]["schedule"] == r["values"]["training.pipeline.schedule"]);
      CHECK(r["result"]["pipeline"]["stages"].size() == static_cast<std::size_t>(p));
      ++points;
    }
    CHECK(points == 4);
  }

  // The run JSON's tight.gpu (a fit within memory::DEFAULT_HEADROOM) is named on its row, and only there.
  TEST_CASE("sweep: the summary marks a point that fits within the memory headroom as tight")
  {
    const Plan plan = sixteen_points();
    Summary summary(plan);
    for (std::uint64_t p = 0; p < 2; ++p) {
      Record r;
      r.point = p;
      r.values = plan.grid().point(p);
      r.status = "done";
      r.result = core::Json::parse("{\"tokens_per_s\":" + std::to_string(10 * (p + 1)) +
                                   ",\"fits\":true,\"tight\":{\"gpu\":" + (p == 1 ? "true" : "false") +
                                   ",\"headroom\":0.177}}");
      summary.add(r);
    }
    const std::string t = summary.table();
    const std::string mark = "  tight: within the memory headroom (docs/recommend.md)\n";
    REQUIRE(t.find(mark) != std::string::npos);
    CHECK(t.find(mark) > t.find("\n     1      1")); // point 1 (20 tokens/s) ranks first and is the tight one
    CHECK(t.find(mark) < t.find("\n     2      0"));
    CHECK(t.find(mark, t.find(mark) + 1) == std::string::npos);
  }

  TEST_CASE("sweep: the summary keeps the 20 best that fit, the 10 nearest that do not and the first 10 not run")
  {
    // 16 points of the grid, each added twice over (32 records: the summary counts what it is given). Point p fits
    // when p is even, with p x 10 tokens/s; an odd point is short by p GiB; every fourth record did not run.
    const Plan plan = sixteen_points();
    Summary summary(plan);
    for (std::uint64_t n = 0; n < 32; ++n) {
      Record r;
      r.point = n % 16;
      r.values = plan.grid().point(r.point);
      if (n % 4 == 3) {
        r.status = "refused";
        r.message = "bad";
      } else {
        r.status = "done";
        r.result = core::Json::parse("{\"tokens_per_s\":" + std::to_string(r.point * 10) +
                                     ",\"fits\":" + (r.point % 2 == 0 ? "true" : "false") +
                                     ",\"shortfall_bytes\":" + std::to_string(r.point * 1073741824.0) + "}");
      }
      summary.add(r);
    }
    const std::string t = summary.table();
    // 24 ran: 16 even (fit), 8 odd (do not fit); 8 did not run. 16 fitting rows are all shown (at most 20).
    CHECK(t.find("best first: 16 fit, 8 do not fit in memory (after them, never ranked), 8 did not run\n") !=
          std::string::npos);
    // The best is point 14 (140 tokens/s; added twice: ranks 1 and 2), the nearest not fitting point 1 (1 GiB).
    CHECK(t.find("\n     1     14") != std::string::npos);
    CHECK(t.find("\n     2     14") != std::string::npos);
    CHECK(t.find("\n    16      0") != std::string::npos);
    CHECK(t.find("\n     -      1 ") < t.find("\n     -      5 "));
    CHECK(t.find("does not fit: short by 1.0 GiB") != std::string::npos);
    CHECK(t.find("not run: refused: bad") != std::string::npos);
    CHECK(t.find("more") == std::string::npos); // nothing over the limits
    // A summary with limits of 3 and 2 says how many more sweep.csv holds.
    Summary small(plan, 3, 2);
    for (std::uint64_t p = 0; p < 16; ++p) {
      Record r;
      r.point = p;
      r.values = plan.grid().point(p);
      r.status = "done";
      r.result = core::Json::parse("{\"tokens_per_s\":" + std::to_string(p) +
                                   ",\"fits\":" + (p < 10 ? "true" : "false") + "}");
      small.add(r);
    }
    const std::string s = small.table();
    CHECK(s.find("  ... 7 more that fit (sweep.csv)\n") != std::string::npos);
    CHECK(s.find("  ... 4 more that do not fit (sweep.csv)\n") != std::string::npos);
    CHECK(s.find("\n     1      9") != std::string::npos); // the fastest that fits: point 9
  }

  TEST_CASE("sweep: without gnuplot on PATH the plots' data and scripts are written and a notice says so")
  {
    const Plan plan = sixteen_points();
    const fs::path dir = fresh_dir("no-gnuplot");
    fs::create_directories(dir);
    std::vector<Record> records(1);
    records[0].point = 5;
    records[0].values = plan.grid().point(5);
    records[0].status = "done";
    records[0].result = core::Json::parse(
        R"({"tokens_per_s":100,"tflops_per_gpu":{"model":50},"peak_memory_bytes":{"gpu_device":1073741824},)"
        R"("capacity_bytes":{"gpu":85899345920},"fits":true,"step_time_s":3,"time_breakdown_s":{"compute":2,"idle":1}})");
    const std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
    ::setenv("PATH", dir.c_str(), 1); // a folder without gnuplot
    std::string notice;
    const std::vector<PlotFiles> plots = write_plots(dir.string(), plan, records, notice);
    ::setenv("PATH", path.c_str(), 1);
    REQUIRE(plots.size() == 3); // micro-batch is swept: throughput and memory, and the breakdown
    for (const PlotFiles& p : plots)
      CHECK_FALSE(p.drawn);
    CHECK(notice.find("gnuplot not found") != std::string::npos);
    CHECK(fs::exists(dir / "memory.gp"));
    CHECK_FALSE(fs::exists(dir / "memory.png"));
    // Point 5 is micro-batch 2, stage 1: 1 GiB of the 80 GiB capacity, fits; the breakdown's bar is labelled with
    // those values, then compute 2 s, the four other busy keys and pipeline_bubble 0, idle 1 s, fits 1, the step time
    // 3 s and the point.
    CHECK(slurp(dir / "memory.dat").find("\n2 1 1 80 5\n") != std::string::npos);
    CHECK(slurp(dir / "breakdown.dat").find("\"mb 2, stage 1\" 2 0 0 0 0 0 1 1 3 5\n") != std::string::npos);
  }

  TEST_CASE(
      "sweep: flatten joins nested keys with dots, writes arrays and numbers as JSON text and strings as they are")
  {
    const auto j = core::Json::parse(R"({"a":1.5,"b":{"c":"x","d":{"e":null}},"f":[1,2],"g":{}})");
    const auto f = flatten(j);
    REQUIRE(f.size() == 5);
    CHECK(f[0] == std::make_pair(std::string("a"), std::string("1.5")));
    CHECK(f[1] == std::make_pair(std::string("b.c"), std::string("x")));
    CHECK(f[2] == std::make_pair(std::string("b.d.e"), std::string("")));
    CHECK(f[3] == std::make_pair(std::string("f"), std::string("[1,2]")));
    CHECK(f[4] == std::make_pair(std::string("g"), std::string("{}")));
  }
}
