// core/json.hpp: nlohmann's ordered JSON with zerosim's number rule and writer settings; core/text.hpp's
// format_number, the form numbers take in messages.
#include "core/json.hpp"
#include "core/text.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

using zerosim::core::dump_json;
using zerosim::core::format_number;
using zerosim::core::Json;

TEST_SUITE("core")
{
  TEST_CASE("json: objects keep insertion order, one line is nlohmann's compact form, indent 2 its pretty form")
  {
    Json j = Json::object({{"b", 1}, {"a", 2.5}, {"c", Json::array({"x", nullptr})}});
    CHECK(dump_json(j, -1) == R"({"b":1,"a":2.5,"c":["x",null]})");
    j["b"] = true; // replacing keeps the position
    j["d"] = Json::object();
    j["e"] = Json::array();
    CHECK(dump_json(j, -1) == R"({"b":true,"a":2.5,"c":["x",null],"d":{},"e":[]})");
    CHECK(dump_json(j, 2) == "{\n  \"b\": true,\n  \"a\": 2.5,\n  \"c\": [\n    \"x\",\n    null\n  ],\n"
                             "  \"d\": {},\n  \"e\": []\n}");
  }

  TEST_CASE("json: a double that is an exact integer below 2^53 is an integer, NaN and infinities are null")
  {
    CHECK(dump_json(Json(68976648192.0), -1) == "68976648192"); // nlohmann alone writes 68976648192.0
    CHECK(Json(3.0).is_number_integer());
    CHECK(dump_json(Json(-0.0), -1) == "0");
    CHECK(dump_json(Json(-12.0), -1) == "-12");
    CHECK(dump_json(Json(9007199254740991.0), -1) == "9007199254740991");      // 2^53 - 1
    CHECK(dump_json(Json(9007199254740992.0), -1) == "9.007199254740992e+15"); // 2^53: a double, nlohmann's form
    CHECK(dump_json(Json(1e300), -1) == "1e+300");
    CHECK(Json(std::nan("")).is_null());
    CHECK(Json(std::numeric_limits<double>::infinity()).is_null());
    CHECK(Json(-std::numeric_limits<double>::infinity()).is_null());
    // In arrays and initializer lists, and when read back: the same rule.
    CHECK(dump_json(Json(std::vector<double>{1.0, 1.5}), -1) == "[1,1.5]");
    CHECK(dump_json(Json::object({{"x", 2.0}}), -1) == R"({"x":2})");
    CHECK(Json::parse("3.0").is_number_integer());
    CHECK(Json::parse("[3.0, 2.5]") == Json::parse("[3, 2.5]"));
  }

  TEST_CASE("json: other doubles in nlohmann's round-trip form (Grisu2), format_number in std::to_chars' shortest")
  {
    CHECK(dump_json(Json(0.1), -1) == "0.1");
    CHECK(dump_json(Json(1.0 / 3.0), -1) == "0.3333333333333333");
    CHECK(dump_json(Json(2.5e-7), -1) == "2.5e-07");
    CHECK(dump_json(Json(123456.789), -1) == "123456.789");
    // The two forms differ where to_chars' exponent form is shorter than nlohmann's fixed one ...
    CHECK(dump_json(Json(0.0001), -1) == "0.0001");
    CHECK(format_number(0.0001) == "1e-04");
    // ... and in the rare doubles whose Grisu2 digits are not the shortest or not the closest: both read back.
    CHECK(dump_json(Json(45.87553242954721), -1) == "45.875532429547206");
    CHECK(format_number(45.87553242954721) == "45.87553242954721");
    CHECK(Json::parse("45.875532429547206").get<double>() == 45.87553242954721);
  }

  TEST_CASE("format_number: exact integers without exponent or point, else the shortest round-trip form")
  {
    CHECK(format_number(68976648192.0) == "68976648192");
    CHECK(format_number(-0.0) == "0");
    CHECK(format_number(0.1) == "0.1");
    CHECK(format_number(1.0 / 3.0) == "0.3333333333333333");
    CHECK(format_number(9007199254740992.0) == "9007199254740992");
    CHECK(format_number(1e21) == "1e+21");
    CHECK(format_number(1.0 / 0.0) == "null"); // infinity is not JSON
    CHECK(format_number(std::nan("")) == "null");
  }

  TEST_CASE("json: strings are escaped as JSON requires, bytes that are not UTF-8 become U+FFFD, never an error")
  {
    CHECK(dump_json(Json("a\"b\\c\n"), -1) == R"("a\"b\\c\n")");
    CHECK(dump_json(Json("\b\f\r\t"), -1) == R"("\b\f\r\t")");
    CHECK(dump_json(Json(std::string("\x01\x1f", 2)), -1) == R"("\u0001\u001f")");
    CHECK(dump_json(Json("/\x7f"), -1) == "\"/\x7f\"");                                       // '/' and DEL as they are
    CHECK(dump_json(Json("caf\xc3\xa9 \xe2\x86\x92"), -1) == "\"caf\xc3\xa9 \xe2\x86\x92\""); // UTF-8 as it is
    CHECK(dump_json(Json("a\xff!"), -1) == "\"a\xef\xbf\xbd!\"");                             // 0xff is not UTF-8
    CHECK(dump_json(Json::object({{"k\xc3", 1}}), -1) == "{\"k\xef\xbf\xbd\":1}"); // a truncated sequence, in a key
  }
}
