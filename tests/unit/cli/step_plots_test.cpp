// `zerosim run --out DIR --plots` and the trace's unsimulated spans, end to end on shipped scenarios (docs/outputs.md
// "The trace" and "Plots"). Expected values come from the run's own summary.json (the reported figures the pictures
// and the trace must agree with), the trace.json of the same run, and the PNG and XML specifications.
#include "cli/commands.hpp"
#include "core/gnuplot.hpp"
#include "core/json.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using zerosim::core::Json;

namespace {

namespace fs = std::filesystem;

const std::string SCENARIOS = std::string(ZEROSIM_SOURCE_DIR) + "/scenarios/";

struct Result {
  int status = -1;
  std::string out, err;
};

Result run_zerosim(const std::vector<std::string>& args)
{
  std::ostringstream out, err;
  Result r;
  r.status = zerosim::cli::run_command(args, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

std::string read_file(const fs::path& path)
{
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A fresh folder of its own under the system's temporary folder, named after the test.
std::string fresh_dir(const std::string& name)
{
  const fs::path dir = fs::temp_directory_path() / ("zerosim-step-plots-test-" + name);
  fs::remove_all(dir);
  return dir.string();
}

/// A 4-stage pipeline on one node (Llama-2-7B on 4 A100s, 16 micro-batches through DeepSpeed's 1F1B, full
/// checkpointing) written to a fresh folder `name`; returns the scenario file.
fs::path pipeline_scenario(const std::string& name)
{
  const std::string dir = fresh_dir(name);
  fs::create_directories(dir);
  const fs::path scenario = fs::path(dir) / "pipeline.yaml";
  std::ofstream f(scenario);
  f << "name: " << name
    << "\nmodel: llama2-7b\ncluster: {node: dgx-a100-80gb, nodes: 1, gpus_per_node: 4}\n"
       "training: {seq_len: 1024, micro_batch: 1, global_batch: 16, precision: bf16, activation_checkpointing: "
       "full, pipeline_parallel: 4, pipeline: {schedule: 1f1b}}\ndeepspeed_version: \"0.16\"\n"
       "deepspeed: {zero_optimization: {stage: 0}}\n";
  return scenario;
}

/// The PNG signature and its first chunk, IHDR (PNG specification, ISO/IEC 15948, sections 5.2-5.3 and 11.2.2): 8
/// signature bytes, then length 13, "IHDR", width and height (big-endian); two_terminal_script draws 900 x 600.
void check_png(const std::string& bytes)
{
  REQUIRE(bytes.size() > 33);
  CHECK(bytes.substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
  CHECK(bytes.substr(8, 8) == std::string("\0\0\0\x0dIHDR", 8));
  auto be32 = [&](size_t at) {
    std::uint32_t v = 0;
    for (size_t i = 0; i < 4; ++i)
      v = v << 8 | static_cast<unsigned char>(bytes[at + i]);
    return v;
  };
  CHECK(be32(16) == 900);
  CHECK(be32(20) == 600);
}

/// XML well-formedness as far as an SVG needs it (XML 1.0, sections 2-3): a prolog of declarations, comments and a
/// DOCTYPE, then one root element whose start and end tags nest, attributes quoted. Returns the root's name ("" when
/// not well formed) and sets `why`.
std::string xml_root(const std::string& x, std::string& why)
{
  std::vector<std::string> open;
  std::string root;
  size_t i = 0;
  auto name_at = [&](size_t& k) {
    const size_t from = k;
    while (k < x.size() &&
           (std::isalnum(static_cast<unsigned char>(x[k])) || x[k] == ':' || x[k] == '-' || x[k] == '_' || x[k] == '.'))
      ++k;
    return x.substr(from, k - from);
  };
  while (i < x.size()) {
    const size_t lt = x.find('<', i);
    if (lt == std::string::npos)
      break;
    if (x.compare(lt, 4, "<!--") == 0) {
      i = x.find("-->", lt);
      if (i == std::string::npos)
        return why = "an unclosed comment", "";
      i += 3;
    } else if (x.compare(lt, 9, "<![CDATA[") == 0) {
      i = x.find("]]>", lt);
      if (i == std::string::npos)
        return why = "an unclosed CDATA section", "";
      i += 3;
    } else if (x.compare(lt, 2, "<?") == 0) {
      i = x.find("?>", lt);
      if (i == std::string::npos)
        return why = "an unclosed declaration", "";
      i += 2;
    } else if (x.compare(lt, 2, "<!") == 0) { // DOCTYPE, possibly with an internal subset
      int depth = 0;
      for (i = lt; i < x.size(); ++i) {
        if (x[i] == '[')
          ++depth;
        if (x[i] == ']')
          --depth;
        if (x[i] == '>' && depth == 0)
          break;
      }
      ++i;
    } else if (x.compare(lt, 2, "</") == 0) {
      size_t k = lt + 2;
      const std::string name = name_at(k);
      if (open.empty() || open.back() != name)
        return why = "</" + name + "> closes " + (open.empty() ? "nothing" : "<" + open.back() + ">"), "";
      open.pop_back();
      i = x.find('>', k) + 1;
    } else {
      size_t k = lt + 1;
      const std::string name = name_at(k);
      if (name.empty())
        return why = "a '<' that starts no tag", "";
      if (open.empty()) {
        if (!root.empty())
          return why = "a second root <" + name + ">", "";
        root = name;
      }
      // Attributes: name = "value" or 'value', until '>' or '/>'.
      for (;;) {
        while (k < x.size() && std::isspace(static_cast<unsigned char>(x[k])))
          ++k;
        if (k >= x.size())
          return why = "an unclosed tag <" + name + ">", "";
        if (x[k] == '>' || x.compare(k, 2, "/>") == 0)
          break;
        const std::string attribute = name_at(k);
        while (k < x.size() && std::isspace(static_cast<unsigned char>(x[k])))
          ++k;
        if (attribute.empty() || k >= x.size() || x[k] != '=')
          return why = "a malformed attribute in <" + name + ">", "";
        ++k;
        while (k < x.size() && std::isspace(static_cast<unsigned char>(x[k])))
          ++k;
        const char quote = k < x.size() ? x[k] : '\0';
        const size_t end = quote == '"' || quote == '\'' ? x.find(quote, k + 1) : std::string::npos;
        if (end == std::string::npos)
          return why = "an unquoted attribute " + attribute + " in <" + name + ">", "";
        k = end + 1;
      }
      if (x[k] == '>')
        open.push_back(name);
      i = x.find('>', k) + 1;
    }
  }
  if (!open.empty())
    return why = "<" + open.back() + "> is never closed", "";
  return root;
}

void check_svg(const std::string& text)
{
  std::string why;
  CHECK_MESSAGE(xml_root(text, why) == "svg", why);
}

/// The whitespace-separated fields of a data line, a double-quoted field as one.
std::vector<std::string> fields(const std::string& line)
{
  std::vector<std::string> out;
  size_t i = 0;
  while (i < line.size()) {
    if (line[i] == ' ') {
      ++i;
      continue;
    }
    if (line[i] == '"') {
      const size_t end = line.find('"', i + 1);
      out.push_back(line.substr(i + 1, end - i - 1));
      i = end + 1;
    } else {
      const size_t end = std::min(line.find(' ', i), line.size());
      out.push_back(line.substr(i, end - i));
      i = end;
    }
  }
  return out;
}

/// The data rows of a .dat file (comment lines left out).
std::vector<std::vector<std::string>> data_rows(const fs::path& path)
{
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(read_file(path));
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#')
      rows.push_back(fields(line));
  return rows;
}

/// Seconds of a .dat column or microseconds of a trace, as whole nanoseconds (the trace's grid).
std::int64_t ns_of_seconds(const std::string& s)
{
  return std::llround(std::stod(s) * 1e9);
}
std::int64_t ns_of_us(double us)
{
  return std::llround(us * 1e3);
}

/// The events of the "not simulated" process of a trace, and the latest end of every complete event.
struct TraceSpans {
  std::vector<Json> marks;
  double last_end_us = 0;
};

TraceSpans trace_spans(const Json& trace)
{
  int pid = -1;
  for (const Json& e : trace.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == "process_name" && e.at("args").at("name") == "not simulated")
      pid = e.at("pid").get<int>();
  TraceSpans t;
  for (const Json& e : trace.at("traceEvents"))
    if (e.at("ph") == "X") {
      t.last_end_us = std::max(t.last_end_us, e.at("ts").get<double>() + e.at("dur").get<double>());
      if (e.at("pid").get<int>() == pid)
        t.marks.push_back(e);
    }
  return t;
}

} // namespace

TEST_SUITE("cli")
{
  TEST_CASE("run --plots without --out is a usage error (exit 2)")
  {
    const Result r = run_zerosim({"run", SCENARIOS + "llama2-70b-8xa100-200gbps.yaml", "--plots"});
    CHECK(r.status == 2);
    CHECK(r.err == "zerosim: run: --plots draws its pictures into the --out DIR; give --out DIR too (see 'zerosim run "
                   "--help')\n");
  }

  TEST_CASE("run --plots on the default scenario: both pictures, their data against summary.json and trace.json, "
            "the trace's unsimulated micro-steps")
  {
    const std::string dir = fresh_dir("default");
    const Result r =
        run_zerosim({"run", SCENARIOS + "llama2-70b-8xa100-200gbps.yaml", "--out", dir, "--trace", "--plots"});
    INFO(r.err);
    REQUIRE(r.status == 0);
    const Json summary = Json::parse(read_file(fs::path(dir) / "summary.json"));
    const Json trace = Json::parse(read_file(fs::path(dir) / "trace.json"));

    // The pictures: valid images when gnuplot is installed (gnuplot-nox is a project dependency).
    if (!zerosim::core::find_gnuplot().empty()) {
      CHECK(r.err.empty());
      for (const char* name : {"memory_over_step", "micro_step_timeline"}) {
        CAPTURE(name);
        check_png(read_file(fs::path(dir) / (std::string(name) + ".png")));
        check_svg(read_file(fs::path(dir) / (std::string(name) + ".svg")));
      }
    }

    // The memory picture: its script draws allocated and reserved over the step, the peaks and the breakdown; its
    // data's maxima are summary.json's peak_memory_bytes.gpu and .gpu_reserved, and at the first allocated maximum
    // the categories are memory_breakdown_bytes.
    const std::string memory_gp = read_file(fs::path(dir) / "memory_over_step.gp");
    for (const char* piece :
         {"set output 'memory_over_step.svg'", "set output 'memory_over_step.png'", "title 'allocated (torch)'",
          "title 'reserved (caching allocator)'", "'allocated peak' at", "reserved peak", "\"  optimizer ",
          "set yrange [0:", "micro-steps 2-14 not simulated: 13 x "})
      CHECK_MESSAGE(memory_gp.find(piece) != std::string::npos, piece);
    const auto memory = data_rows(fs::path(dir) / "memory_over_step.dat");
    REQUIRE(memory.size() > 1);
    std::int64_t allocated = -1, reserved = -1;
    size_t at = 0;
    for (size_t i = 0; i < memory.size(); ++i) {
      REQUIRE(memory[i].size() == 11);
      if (std::stoll(memory[i][1]) > allocated) {
        allocated = std::stoll(memory[i][1]);
        at = i;
      }
      reserved = std::max<std::int64_t>(reserved, std::stoll(memory[i][2]));
    }
    CHECK(allocated == summary.at("peak_memory_bytes").at("gpu").get<std::int64_t>());
    CHECK(reserved == summary.at("peak_memory_bytes").at("gpu_reserved").get<std::int64_t>());
    const char* categories[] = {"params", "grads", "optimizer", "activations", "buffers", "other"};
    for (size_t c = 0; c < 6; ++c)
      CHECK(std::stoll(memory[at][3 + c]) ==
            summary.at("memory_breakdown_bytes").at(categories[c]).get<std::int64_t>());
    CHECK(memory[at][10] == summary.at("peak_task").get<std::string>());

    // The timeline picture: one row per task of micro-step 1 of the breakdown rank, at the trace's times.
    const int rank = summary.at("simulation").at("breakdown_rank").get<int>();
    int rank_pid = -1;
    for (const Json& e : trace.at("traceEvents"))
      if (e.at("ph") == "M" && e.at("name") == "process_name" &&
          e.at("args").at("name").get<std::string>().rfind("rank " + std::to_string(rank) + " (", 0) == 0)
        rank_pid = e.at("pid").get<int>();
    REQUIRE(rank_pid > 0);
    std::map<std::string, std::pair<std::int64_t, std::int64_t>> traced; // task -> (start, end) ns
    for (const Json& e : trace.at("traceEvents"))
      if (e.at("ph") == "X" && e.at("pid").get<int>() == rank_pid && e.at("args").contains("micro_step") &&
          e.at("args").at("micro_step").get<int>() == 1) {
        const double ts = e.at("ts").get<double>();
        traced[e.at("name").get<std::string>()] = {ns_of_us(ts), ns_of_us(ts + e.at("dur").get<double>())};
      }
    const auto timeline = data_rows(fs::path(dir) / "micro_step_timeline.dat");
    CHECK(timeline.size() == traced.size());
    for (const auto& row : timeline) {
      REQUIRE(row.size() == 7);
      CAPTURE(row[6]);
      const auto it = traced.find(row[6]);
      REQUIRE(it != traced.end());
      CHECK(std::llabs(ns_of_seconds(row[1]) - it->second.first) <= 1); // the trace rounds ts and dur apart
      CHECK(std::llabs(ns_of_seconds(row[2]) - it->second.second) <= 1);
    }
    const std::string timeline_gp = read_file(fs::path(dir) / "micro_step_timeline.gp");
    for (const char* piece :
         {"set output 'micro_step_timeline.svg'", "with boxxyerror", "\"compute stream\" 0", "\"allgather stream\"",
          "\"NIC0 tx\"", "\"PCIe gpu0 H2D\"", "micro-step 1 of rank 0, per stream and resource", "with labels"})
      CHECK_MESSAGE(timeline_gp.find(piece) != std::string::npos, piece);

    // The trace (docs/engine.md "Accumulation reuse"): micro-steps 0, 1 and g-1 simulated; one mark covers
    // micro-steps 2 .. g-2, (g - 3) periods long; the last event ends at the step time (within 0.1 %), and the
    // metadata states it.
    const int g = summary.at("micro_steps").get<int>();
    const int simulated = summary.at("simulation").at("micro_steps_simulated").get<int>();
    const double period = summary.at("simulation").at("micro_step_period_s").get<double>();
    const double step = summary.at("step_time_s").get<double>();
    REQUIRE(g == 16);
    REQUIRE(simulated == 3);
    const TraceSpans spans = trace_spans(trace);
    REQUIRE(spans.marks.size() == 1);
    const Json& mark = spans.marks.front();
    CHECK(mark.at("args").at("first").get<int>() == simulated - 1);
    CHECK(mark.at("args").at("last").get<int>() == g - 2);
    CHECK(mark.at("dur").get<double>() == doctest::Approx((g - simulated) * period * 1e6).epsilon(1e-9));
    CHECK(mark.at("name").get<std::string>().rfind("micro-steps 2-14 not simulated: 13 x ", 0) == 0);
    CHECK(spans.last_end_us == doctest::Approx(step * 1e6).epsilon(1e-3));
    CHECK(trace.at("otherData").at("step_time_s").get<double>() == step);
  }

  TEST_CASE("trace of the BLOOM-176B inference scenario: its step time is the request's, the decode passes not "
            "simulated are marked")
  {
    const std::string dir = fresh_dir("inference");
    const Result r = run_zerosim({"run", SCENARIOS + "bloom-176b-inference-1xa100-nvme.yaml", "--out", dir, "--trace"});
    INFO(r.err);
    REQUIRE(r.status == 0);
    const Json summary = Json::parse(read_file(fs::path(dir) / "summary.json"));
    const Json trace = Json::parse(read_file(fs::path(dir) / "trace.json"));
    const double request = summary.at("step_time_s").get<double>(); // the request (docs/outputs.md §4)
    CHECK(request == doctest::Approx(summary.at("inference").at("prefill_time_s").get<double>() +
                                     summary.at("inference").at("decode_time_s").get<double>()));
    CHECK(trace.at("otherData").at("step_time_s").get<double>() == request);
    // The passes the sample left out (docs/inference.md): every pass of the request is simulated or marked, once.
    const TraceSpans spans = trace_spans(trace);
    REQUIRE_FALSE(spans.marks.empty());
    int marked = 0;
    for (const Json& m : spans.marks)
      marked += m.at("args").at("count").get<int>();
    CHECK(marked + summary.at("inference").at("simulated_passes").get<int>() ==
          summary.at("inference").at("forward_passes").get<int>());
    CHECK(spans.last_end_us == doctest::Approx(request * 1e6).epsilon(1e-3));
  }
}

TEST_SUITE("cli")
{
  TEST_CASE("trace of a pipeline under accumulation reuse: ranks named by stage, the micro-batches not simulated "
            "marked, every event where it lies in the real step")
  {
    // Llama-2-7B as 4 pipeline stages on one node of 4 A100s, 16 micro-batches through DeepSpeed's 1F1B: the replay
    // simulates p + 4 = 8 (docs/engine.md "Accumulation reuse under a pipeline"); the 8 others are one mark. Under a
    // pipeline a task moves by when it starts (docs/outputs.md §6), so no rank's event starts inside the mark, and the
    // last event ends at the step time (to the nanosecond grid; 1e-3 allowed as for the default scenario).
    const fs::path scenario = pipeline_scenario("pipeline");
    const std::string out = (scenario.parent_path() / "out").string();
    const Result r = run_zerosim({"run", scenario.string(), "--out", out, "--trace"});
    INFO(r.err);
    REQUIRE(r.status == 0);
    const Json summary = Json::parse(read_file(fs::path(out) / "summary.json"));
    const Json trace = Json::parse(read_file(fs::path(out) / "trace.json"));
    const double step = summary.at("step_time_s").get<double>();
    CHECK(summary.at("simulation").at("micro_steps_simulated").get<int>() == 8);
    const TraceSpans spans = trace_spans(trace);
    REQUIRE(spans.marks.size() == 1);
    const Json& mark = spans.marks.front();
    CHECK(mark.at("args").at("count").get<int>() == 16 - 8);
    CHECK(spans.last_end_us == doctest::Approx(step * 1e6).epsilon(1e-3));
    std::vector<std::string> ranks;
    std::map<int, std::string> process;
    for (const Json& e : trace.at("traceEvents"))
      if (e.at("ph") == "M" && e.at("name") == "process_name") {
        process[e.at("pid").get<int>()] = e.at("args").at("name").get<std::string>();
        if (process[e.at("pid").get<int>()].rfind("rank ", 0) == 0)
          ranks.push_back(process[e.at("pid").get<int>()]);
      }
    CHECK(ranks == std::vector<std::string>{"rank 0 (stage 0, node 0, GPU 0)", "rank 1 (stage 1, node 0, GPU 1)",
                                            "rank 2 (stage 2, node 0, GPU 2)", "rank 3 (stage 3, node 0, GPU 3)"});
    // The trace writes microseconds on the nanosecond grid (3 decimals): an event that starts where the mark ends
    // reads ts = from + dur to that grid, not to the double's last bit.
    constexpr double GRID_US = 1e-3;
    const double from = mark.at("ts").get<double>(), to = from + mark.at("dur").get<double>();
    int inside = 0;
    for (const Json& e : trace.at("traceEvents"))
      if (e.at("ph") == "X" && process[e.at("pid").get<int>()].rfind("rank ", 0) == 0) {
        const double ts = e.at("ts").get<double>();
        inside += ts > from + GRID_US / 2 && ts < to - GRID_US / 2 ? 1 : 0;
      }
    CHECK(inside == 0);
  }

  TEST_CASE("run --plots under a pipeline: pipeline_schedule has each stage's forward and backward of each simulated "
            "micro-batch, in DeepSpeed's 1F1B order")
  {
    // The scenario of the test above: Llama-2-7B as p = 4 stages on 4 A100s, 16 micro-batches, full checkpointing;
    // the replay simulates p + 4 = 8. DeepSpeed's TrainSchedule (docs/pipeline-parallel.md §2): stage s runs
    // p - s - 1 warm-up forwards, then alternates, so p - s forwards start before its first backward. A micro-batch's
    // forward on stage s + 1 starts after it ends on stage s (the activation is sent), its backward on stage s after
    // it ends on stage s + 1 (the gradient is sent back).
    const int p = 4, simulated = 8;
    const fs::path scenario = pipeline_scenario("pipeline-plot");
    const std::string out = (scenario.parent_path() / "out").string();
    const Result r = run_zerosim({"run", scenario.string(), "--out", out, "--plots"});
    INFO(r.err);
    REQUIRE(r.status == 0);
    if (!zerosim::core::find_gnuplot().empty()) {
      check_png(read_file(fs::path(out) / "pipeline_schedule.png"));
      check_svg(read_file(fs::path(out) / "pipeline_schedule.svg"));
    }
    // box[stage][micro-batch][phase] = (start, end); phases 0 forward, 1 backward (with the recomputed forward).
    std::map<int, std::map<int, std::map<int, std::pair<double, double>>>> box;
    for (const auto& row : data_rows(fs::path(out) / "pipeline_schedule.dat")) {
      REQUIRE(row.size() == 6);
      CHECK(std::stoi(row[5]) == std::stoi(row[0])); // stage s's first rank is rank s (one GPU a stage)
      box[std::stoi(row[0])][std::stoi(row[4])][std::stoi(row[3])] = {std::stod(row[1]), std::stod(row[2])};
    }
    REQUIRE(box.size() == static_cast<size_t>(p));
    for (int st = 0; st < p; ++st) {
      CAPTURE(st);
      REQUIRE(box[st].size() == static_cast<size_t>(simulated));
      double first_backward = 1e30;
      for (const auto& [mb, phases] : box[st]) {
        CHECK(phases.size() == 2);
        first_backward = std::min(first_backward, phases.at(1).first);
      }
      int forwards_before = 0;
      for (const auto& [mb, phases] : box[st])
        forwards_before += phases.at(0).first < first_backward ? 1 : 0;
      CHECK(forwards_before == p - st);
      if (st + 1 < p)
        for (const auto& [mb, phases] : box[st]) {
          CAPTURE(mb);
          CHECK(box[st + 1].at(mb).at(0).first >= phases.at(0).second);
          CHECK(phases.at(1).first >= box[st + 1].at(mb).at(1).second);
        }
    }
    const std::string gp = read_file(fs::path(out) / "pipeline_schedule.gp");
    for (const char* piece :
         {"set output 'pipeline_schedule.svg'", "title \"forward\"", "title \"backward (with the recomputed forward)\"",
          "pipeline schedule, 4 stages", "not simulated"})
      CHECK_MESSAGE(gp.find(piece) != std::string::npos, piece);
  }
}
