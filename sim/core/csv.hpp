// A small RFC 4180 CSV reader and writer, for every CSV zerosim reads or writes (the validation data
// results/validation/published.csv, measured runs, the sweep's and compare's tables): fields separated by commas, a
// field in double quotes may hold commas, line breaks and doubled quotes ("" stands for one "), lines end in LF or
// CRLF. No YAML, no SimGrid.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace zerosim::core {

/// Every record of `text`, each a list of fields, in file order. A blank last line is not a record.
/// Throws core::InputError for a quoted field that is never closed or a quote inside an unquoted field,
/// with the 1-based line where the problem is (`where` names the file in the message).
std::vector<std::vector<std::string>> parse_csv(std::string_view text, const std::string& where = "csv");

/// One field written for CSV: quoted (with inner quotes doubled) when it holds a comma, a quote or a line break.
std::string csv_field(std::string_view field);

/// One record written for CSV, fields joined by commas, ending in "\n".
std::string csv_record(const std::vector<std::string>& fields);

/// A CSV file with a header record: rows addressed by column name.
class CsvTable {
public:
  /// Parses `text`; the first record is the header. Throws core::InputError for a record whose field
  /// count differs from the header's, or for a repeated column name.
  static CsvTable parse(std::string_view text, const std::string& where = "csv");

  const std::vector<std::string>& header() const { return header_; }
  std::size_t size() const { return rows_.size(); }
  const std::vector<std::string>& row(std::size_t i) const { return rows_.at(i); }
  bool has_column(const std::string& name) const { return index_.count(name) > 0; }
  /// Field `column` of row `i`; throws core::InputError naming the column when it does not exist.
  const std::string& get(std::size_t i, const std::string& column) const;
  /// Row `i` as column -> value.
  std::map<std::string, std::string> record(std::size_t i) const;

private:
  std::string where_;
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
  std::map<std::string, std::size_t> index_;
};

} // namespace zerosim::core
