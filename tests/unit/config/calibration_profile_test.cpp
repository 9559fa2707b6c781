// Calibration profiles (docs/calibration.md §5): the file format, pinned errors, and the precedence of
// --calibration, the scenario's key, the node file's key and the shipped profile.
#include "config_test_util.hpp"

#include "spec/calibration_spec.hpp"

#include <doctest/doctest.h>

#include <map>
#include <string>

using namespace zerosim;
using namespace zerosim::config;
using namespace zerosim::config::test;

namespace {

const std::string PROFILES = DATA + "/calibration/profiles";
const std::string PROF = "profile.yaml";

std::string profile_error(const std::string& text)
{
  return error_of([&] { load_calibration_text(text, PROF); });
}

} // namespace

TEST_SUITE("config")
{
  TEST_CASE("calibration profile: what calibrate writes reads back, with the hash of its bytes")
  {
    CalibrationProfile p;
    p.command = "zerosim calibrate --runs runs.csv --out p.yaml";
    p.fitted_on = "12 whole-step figures from 3 sources";
    CalibrationProfile::Parameter g;
    g.name = "gemm.A100";
    g.value = 0.912345;
    g.uncertainty = 0.021;
    g.lower = 0.6;
    g.upper = 1.25;
    g.rows = 12;
    g.sources = {"S01", "S14"};
    g.loso_min = 0.9;
    g.loso_max = 0.93;
    CalibrationProfile::Parameter i;
    i.name = "interference";
    i.value = 1.5;
    i.note = "one source informs it";
    p.parameters = {g, i};
    p.fit = {{"in_sample", "median |error| 9.6 %"}};
    const std::string text = calibration_profile_yaml(p);
    const spec::Calibration c = load_calibration_text(text, PROF);
    CHECK(c.factors.size() == 2);
    CHECK(c.factor("gemm.A100") == doctest::Approx(0.912345).epsilon(1e-12));
    CHECK(c.factor("interference") == 1.5);
    CHECK(c.factor("hbm.A100") == 1.0); // not named: its prior
    CHECK(c.hash == spec::fnv1a64_hex(text));
    CHECK(c.hash.size() == 16);
    // FNV-1a 64 of the empty string is its offset basis, cbf29ce484222325 (the published test vector).
    CHECK(spec::fnv1a64_hex("") == "cbf29ce484222325");
    CHECK(spec::fnv1a64_hex("a") == "af63dc4c8601ec8c");
  }

  TEST_CASE("calibration profile: every bad input names file, line, key, expected and found")
  {
    const std::string HEAD = "format: \"zerosim-calibration 1\"\nparameters:\n";
    CHECK(profile_error(HEAD + "  latency.net:\n    value: 1\n") ==
          "profile.yaml:3:3: parameters.latency.net: unknown parameter family 'latency'; accepted: gemm.*, "
          "attention.*, hbm.*, busbw.*, host.*, interference");
    CHECK(profile_error(HEAD + "  busbw.infiniband:\n    value: 1\n") ==
          "profile.yaml:3:3: parameters.busbw.infiniband: expected busbw with one of nvlink, pcie, net, found "
          "\"busbw.infiniband\"");
    CHECK(profile_error(HEAD + "  gemm:\n    value: 1\n") ==
          "profile.yaml:3:3: parameters.gemm: expected gemm with a GPU kind of calibration/kernels.yaml (A100, H100, "
          "...), found \"gemm\"");
    CHECK(profile_error(HEAD + "  gemm.A100:\n    value: 2\n") ==
          "profile.yaml:4:12: parameters.gemm.A100.value: expected a number in [0.6, 1.25] (the gemm family's "
          "bounds), found \"2\"");
    CHECK(profile_error(HEAD + "  gemm.A100:\n    valu: 0.9\n") ==
          "profile.yaml:4:5: parameters.gemm.A100.valu: unknown key (did you mean 'value'?); accepted keys: value, "
          "uncertainty, bounds, rows, sources, loso_range, note");
    CHECK(profile_error("format: \"zerosim-calibration 2\"\nparameters: {}\n") ==
          "profile.yaml:1:9: format: expected \"zerosim-calibration 1\", found \"zerosim-calibration 2\"");
    CHECK(profile_error("format: \"zerosim-calibration 1\"\n") ==
          "profile.yaml:1:1: parameters: required key is missing");
    CHECK(profile_error("- a\n- b\n").find("profile.yaml") == 0);
  }

  TEST_CASE("priors accuracy: what validate writes reads back, and every bad input names file, line and key")
  {
    std::map<std::string, spec::AccuracyBand> bands;
    spec::AccuracyBand a;
    a.median_abs_error_pct = 21.7;
    a.p90_abs_error_pct = 59.8;
    a.median_signed_error_pct = -18.9;
    a.rows = 50;
    bands["A100 / deepspeed"] = a;
    a.median_abs_error_pct = 14.8;
    a.rows = 297;
    bands[spec::ACCURACY_OVERALL] = a;
    const auto back = load_priors_accuracy_text(priors_accuracy_yaml(bands, "zerosim validate --run"), "p.yaml");
    REQUIRE(back.size() == 2);
    const spec::AccuracyBand& g = back.at("A100 / deepspeed");
    CHECK(g.kind == spec::AccuracyKind::PRIORS);
    CHECK(g.median_abs_error_pct == 21.7);
    CHECK(g.p90_abs_error_pct == 59.8);
    CHECK(g.median_signed_error_pct == -18.9);
    CHECK(g.rows == 50);
    CHECK(back.at("overall").rows == 297);

    const auto err = [](const std::string& text) {
      return error_of([&] { load_priors_accuracy_text(text, "p.yaml"); });
    };
    const std::string HEAD = "format: \"zerosim-priors-accuracy 1\"\ngroups:\n";
    CHECK(err(HEAD + "  overall: {median_abs_error: 1, p90_abs_eror: 2, median_signed_error: 0, rows: 3}\n") ==
          "p.yaml:3:34: groups.overall.p90_abs_eror: unknown key (did you mean 'p90_abs_error'?); accepted "
          "keys: median_abs_error, p90_abs_error, median_signed_error, rows");
    CHECK(err(HEAD + "  overall: {median_abs_error: -1, p90_abs_error: 2, median_signed_error: 0, rows: 3}\n") ==
          "p.yaml:3:31: groups.overall.median_abs_error: expected a percentage >= 0, found \"-1\"");
    CHECK(err(HEAD + "  overall: 3\n") == "p.yaml:3:12: groups.overall: expected a mapping with median_abs_error, "
                                          "p90_abs_error, median_signed_error and rows, found \"3\"");
    CHECK(err("format: \"zerosim-priors-accuracy 2\"\ngroups: {}\n") ==
          "p.yaml:1:9: format: expected \"zerosim-priors-accuracy 1\", found \"zerosim-priors-accuracy 2\"");
    CHECK(err("format: \"zerosim-priors-accuracy 1\"\n") == "p.yaml:1:1: groups: required key is missing");
    CHECK(err("format: \"zerosim-priors-accuracy 1\"\ngroups:\n") == "p.yaml:1:1: groups: required key is missing");
  }

  TEST_CASE("priors accuracy: without a profile a scenario carries the shipped priors' bands, with one the profile's")
  {
    LoadOptions o;
    o.calibration = "none";
    const spec::Scenario none = load_scenario_text(BASE, SCEN, o);
    REQUIRE_FALSE(none.calibration.accuracy.empty());
    CHECK(none.calibration.accuracy_file == SHIPPED_PRIORS_ACCURACY);
    CHECK(none.calibration.accuracy.count(spec::ACCURACY_OVERALL) == 1);
    for (const auto& [group, band] : none.calibration.accuracy)
      CHECK(band.kind == spec::AccuracyKind::PRIORS);
    // The shipped file, read on its own, is what the scenario carries.
    const auto shipped = load_priors_accuracy(std::string(ZEROSIM_DATA_DIR) + "/" + SHIPPED_PRIORS_ACCURACY);
    CHECK(shipped.size() == none.calibration.accuracy.size());
    o.calibration = PROFILES + "/a100.yaml";
    const spec::Scenario with = load_scenario_text(BASE, SCEN, o);
    for (const auto& [group, band] : with.calibration.accuracy)
      CHECK(band.kind == spec::AccuracyKind::LEAVE_ONE_SOURCE_OUT);
  }

  TEST_CASE("calibration profile: --calibration beats the scenario's key, which beats the node file's")
  {
    // The node file calibrated-node.yaml names node-level.yaml (interference 2), relative to its own folder.
    std::string scen = BASE;
    scen.replace(scen.find("node: test-node"), 15, "node: calibrated-node");
    const spec::Scenario by_node = load_scenario_text(scen, SCEN);
    CHECK(by_node.calibration.path == PROFILES + "/node-level.yaml");
    CHECK(by_node.calibration.factor("interference") == 2.0);
    // The scenario's key (relative to the scenario's folder, tests/data/scenarios) wins over the node's.
    const spec::Scenario by_scen = load_scenario_text(scen + "calibration: ../calibration/profiles/a100.yaml\n", SCEN);
    CHECK(by_scen.calibration.path == PROFILES + "/a100.yaml");
    CHECK(by_scen.calibration.factor("gemm.A100") == 0.7);
    CHECK(by_scen.calibration.factor("interference") == 1.0);
    // --calibration wins over both; none means the priors alone.
    LoadOptions o;
    o.calibration = "none";
    const spec::Scenario none = load_scenario_text(scen + "calibration: ../calibration/profiles/a100.yaml\n", SCEN, o);
    CHECK(none.calibration.path == "none");
    CHECK(none.calibration.factors.empty());
    o.calibration = PROFILES + "/node-level.yaml";
    CHECK(load_scenario_text(scen + "calibration: none\n", SCEN, o).calibration.factor("interference") == 2.0);
  }

  TEST_CASE("calibration profile: a missing file and an unknown GPU kind are input errors")
  {
    CHECK(error_of([] { load_scenario_text(BASE + "calibration: nowhere.yaml\n", SCEN); }) ==
          SCEN + ":9:14: calibration profile " + DATA + "/scenarios/nowhere.yaml does not exist");
    const std::string e =
        error_of([] { load_scenario_text(BASE + "calibration: ../calibration/profiles/unknown-kind.yaml\n", SCEN); });
    CHECK(e.find(PROFILES + "/unknown-kind.yaml: parameters.gemm.Z9: expected a GPU kind of ") == 0);
    CHECK(e.find("found \"Z9\"") != std::string::npos);
  }
}
