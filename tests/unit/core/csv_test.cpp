#include "core/csv.hpp"
#include "core/error.hpp"

#include <doctest/doctest.h>

using namespace zerosim::core;

TEST_SUITE("core")
{
  TEST_CASE("csv: quoted fields keep commas, doubled quotes and line breaks")
  {
    // RFC 4180, sections 2.5-2.7: a quoted field may hold commas and line breaks; "" inside stands for one quote.
    auto rows = parse_csv("a,\"b, c\",\"say \"\"hi\"\"\"\n\"two\nlines\",,end\n");
    REQUIRE(rows.size() == 2);
    CHECK(rows[0] == std::vector<std::string>{"a", "b, c", "say \"hi\""});
    CHECK(rows[1] == std::vector<std::string>{"two\nlines", "", "end"});
  }

  TEST_CASE("csv: CRLF line ends, empty fields and a missing final line break")
  {
    auto rows = parse_csv("x,,\r\n,\"\",z");
    REQUIRE(rows.size() == 2);
    CHECK(rows[0] == std::vector<std::string>{"x", "", ""}); // three fields: two commas
    CHECK(rows[1] == std::vector<std::string>{"", "", "z"});
  }

  TEST_CASE("csv: a published.csv-style line with a quoted note")
  {
    // The shape of published.csv row 13's notes: a quoted field holding commas, parentheses and an apostrophe.
    auto rows = parse_csv("13,S02,\"Max trainable model size, measured. Paper's theoretical max (e.g. 7.6B at "
                          "MP1/64).\",C\n");
    REQUIRE(rows.size() == 1);
    REQUIRE(rows[0].size() == 4);
    CHECK(rows[0][2] == "Max trainable model size, measured. Paper's theoretical max (e.g. 7.6B at MP1/64).");
    CHECK(rows[0][3] == "C");
  }

  TEST_CASE("csv: malformed quoting is an input error naming the line")
  {
    CHECK_THROWS_AS(parse_csv("a,b\n\"never closed,c\n", "f.csv"), zerosim::core::InputError);
    CHECK_THROWS_WITH(parse_csv("a,b\n\"never closed,c\n", "f.csv"), "f.csv:2: quoted field is never closed");
    CHECK_THROWS_AS(parse_csv("a,b\"c\n"), zerosim::core::InputError);   // quote inside an unquoted field
    CHECK_THROWS_AS(parse_csv("\"a\"b,c\n"), zerosim::core::InputError); // text after a closing quote
  }

  TEST_CASE("csv: written fields read back unchanged")
  {
    std::vector<std::string> fields = {"plain", "with, comma", "with \"quote\"", "two\nlines", ""};
    std::string line = csv_record(fields);
    CHECK(line == "plain,\"with, comma\",\"with \"\"quote\"\"\",\"two\nlines\",\n");
    auto back = parse_csv(line);
    REQUIRE(back.size() == 1);
    CHECK(back[0] == fields);
  }

  TEST_CASE("csv: a table addresses fields by column and rejects ragged records")
  {
    auto t = CsvTable::parse("row_id,model\n1,\"GPT-2, 1.5B\"\n2,x\n");
    REQUIRE(t.size() == 2);
    CHECK(t.get(0, "model") == "GPT-2, 1.5B");
    CHECK(t.record(1).at("row_id") == "2");
    CHECK_THROWS_AS(t.get(0, "no_such_column"), zerosim::core::InputError);
    CHECK_THROWS_AS(CsvTable::parse("a,b\n1,2,3\n"), zerosim::core::InputError);
  }
}
