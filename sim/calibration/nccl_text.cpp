#include "calibration/nccl_text.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <system_error>

namespace zerosim::calibration::nccl_text {

std::string in_quotes(std::string_view text)
{
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('"');
  out.append(text);
  out.push_back('"');
  return out;
}

bool is_space(char c)
{
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}
bool is_digit(char c)
{
  return c >= '0' && c <= '9';
}
bool is_identifier(char c)
{
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

std::string_view trim(std::string_view text)
{
  while (!text.empty() && is_space(text.front()))
    text.remove_prefix(1);
  while (!text.empty() && is_space(text.back()))
    text.remove_suffix(1);
  return text;
}

std::vector<std::string_view> split_words(std::string_view text)
{
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i]))
      ++i;
    std::size_t start = i;
    while (i < text.size() && !is_space(text[i]))
      ++i;
    if (i > start)
      words.push_back(text.substr(start, i - start));
  }
  return words;
}

/// Removes the tag that `mpirun --tag-output` puts before each line: "[1,0]<stdout>:" or "[1,0]<stderr>:".
std::string_view strip_mpi_tag(std::string_view line)
{
  std::size_t i = 0;
  if (i >= line.size() || line[i] != '[')
    return line;
  ++i;
  auto digits = [&] {
    std::size_t start = i;
    while (i < line.size() && is_digit(line[i]))
      ++i;
    return i > start;
  };
  if (!digits() || i >= line.size() || line[i] != ',')
    return line;
  ++i;
  if (!digits() || i >= line.size() || line[i] != ']')
    return line;
  ++i;
  for (std::string_view stream : {"<stdout>:", "<stderr>:"})
    if (line.substr(i, stream.size()) == stream)
      return line.substr(i + stream.size());
  return line;
}

std::optional<std::int64_t> to_integer(std::string_view word)
{
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), value);
  if (ec != std::errc() || end != word.data() + word.size() || word.empty())
    return std::nullopt;
  return value;
}

std::optional<double> to_number(std::string_view word)
{
  double value = 0;
  auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), value, std::chars_format::general);
  if (ec != std::errc() || end != word.data() + word.size() || word.empty() || !std::isfinite(value))
    return std::nullopt;
  return value;
}

/// Half a unit in the last place of a printed number: "232.20" -> 0.005, "80922" -> 0.5, "1.2e+03" -> 50.
double half_ulp(std::string_view word)
{
  std::size_t e = word.find_first_of("eE");
  std::string_view mantissa = word.substr(0, e);
  int exponent = 0;
  if (e != std::string_view::npos) {
    std::string_view exp_text = word.substr(e + 1);
    if (!exp_text.empty() && exp_text.front() == '+')
      exp_text.remove_prefix(1);
    exponent = static_cast<int>(to_integer(exp_text).value_or(0));
  }
  std::size_t dot = mantissa.find('.');
  int decimals = dot == std::string_view::npos ? 0 : static_cast<int>(mantissa.size() - dot - 1);
  return 0.5 * std::pow(10.0, exponent - decimals);
}

/// `value` printed as `like` is (same decimals), for messages.
std::string printed_like(double value, std::string_view like)
{
  char buffer[64];
  if (like.find_first_of("eE") != std::string_view::npos) {
    std::snprintf(buffer, sizeof buffer, "%.6g", value);
  } else {
    std::size_t dot = like.find('.');
    int decimals = dot == std::string_view::npos ? 0 : static_cast<int>(like.size() - dot - 1);
    std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  }
  return buffer;
}

std::string number(double value)
{
  std::ostringstream out;
  out.precision(6);
  out << value;
  return out.str();
}

} // namespace zerosim::calibration::nccl_text
