// Small text helpers shared by the layers: edit distance for did-you-mean, number formatting, Markdown table cells,
// trimming.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zerosim::core {

/// Edit distance counting an insertion, a deletion, a substitution and the swap of two adjacent characters as 1 each
/// (optimal string alignment): "stgae" is 1 from "stage", where Levenshtein's distance is 2.
int edit_distance(std::string_view a, std::string_view b);

/// The candidate closest to `word` if it is close enough to be a likely typo
/// (distance <= max(1, len/3)), else "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

/// A number for messages: an exact integer below 2^53 without ".0" or exponent ("68976648192"), any other
/// finite double in std::to_chars' shortest round-trip form ("0.1", "1e-04"); NaN and the infinities as "null".
std::string format_number(double v);

/// `v` with `decimals` digits after the point ("%.*f").
std::string format_fixed(double v, int decimals);

/// A signed percentage with `decimals` digits after the point: "+12.3 %".
std::string format_signed_pct(double v, int decimals);

/// `s` as a Markdown table cell: a pipe becomes '/', a line break a space.
std::string markdown_cell(std::string s);

/// `s` without leading and trailing spaces, tabs and carriage returns.
std::string trim(std::string_view s);

/// A duration for people, in the largest unit that keeps it above 2: "45.2 s", "12.5 min", "7.25 h", "787.6 days"
/// (four significant digits; a day is 86,400 s).
std::string format_duration(double seconds);

/// `s` with ASCII letters in lower case.
std::string lowercase(std::string_view s);

} // namespace zerosim::core
