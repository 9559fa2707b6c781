// Internal to sim/calibration: the words and numbers of an nccl-tests output, as the table reader
// (nccl_tests.cpp) takes them apart.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zerosim::calibration::nccl_text {

std::string in_quotes(std::string_view text);
bool is_space(char c);
bool is_digit(char c);
bool is_identifier(char c);
std::string_view trim(std::string_view text);
std::vector<std::string_view> split_words(std::string_view text);
/// Removes the tag that `mpirun --tag-output` puts before each line: "[1,0]<stdout>:" or "[1,0]<stderr>:".
std::string_view strip_mpi_tag(std::string_view line);
std::optional<std::int64_t> to_integer(std::string_view word);
std::optional<double> to_number(std::string_view word);
/// Half a unit in the last place of a printed number: "232.20" -> 0.005, "80922" -> 0.5, "1.2e+03" -> 50.
double half_ulp(std::string_view word);
/// `value` printed as `like` is (same decimals), for messages.
std::string printed_like(double value, std::string_view like);
std::string number(double value);

} // namespace zerosim::calibration::nccl_text
