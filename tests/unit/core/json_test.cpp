#include "core/json.hpp"

#include <doctest/doctest.h>

using zerosim::core::Json;
using zerosim::core::format_number;

TEST_SUITE("core")
{
  TEST_CASE("json: objects keep insertion order and print deterministically")
  {
    Json j = Json::object();
    j.set("b", 1).set("a", 2.5).set("c", Json::array().push("x").push(nullptr));
    CHECK(j.dump(-1) == R"({"b": 1, "a": 2.5, "c": ["x", null]})");
    j.set("b", true); // replacing keeps the position
    CHECK(j.dump(-1) == R"({"b": true, "a": 2.5, "c": ["x", null]})");
  }

  TEST_CASE("json: numbers print in their shortest round-trip form")
  {
    CHECK(format_number(68976648192.0) == "68976648192"); // an exact integer: no exponent
    CHECK(format_number(0.1) == "0.1");
    CHECK(format_number(1.0 / 3.0) == "0.3333333333333333");
    CHECK(format_number(1.0 / 0.0) == "null"); // infinity is not JSON
  }

  TEST_CASE("json: strings are escaped")
  {
    CHECK(Json("a\"b\\c\n").dump() == R"("a\"b\\c\n")");
  }
}
