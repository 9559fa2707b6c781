#include "core/csv.hpp"

#include "core/error.hpp"

namespace zerosim::core {

std::vector<std::vector<std::string>> parse_csv(std::string_view text, const std::string& where)
{
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> record;
  std::string field;
  bool in_quotes = false;
  bool field_was_quoted = false; // the current field began with a quote (text after its closing quote is an error)
  bool record_open = false;      // something (even an empty field before a comma) belongs to the current record
  int line = 1;
  int quote_line = 0; // where the open quoted field began (for the message)

  auto end_field = [&]() {
    record.push_back(std::move(field));
    field.clear();
    field_was_quoted = false;
  };
  auto end_record = [&]() {
    end_field();
    records.push_back(std::move(record));
    record.clear();
    record_open = false;
  };

  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_quotes) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') { // a doubled quote stands for one quote
          field.push_back('"');
          ++i;
        } else {
          in_quotes = false;
        }
      } else {
        if (c == '\n')
          ++line;
        field.push_back(c);
      }
      continue;
    }
    switch (c) {
    case '"':
      if (!field.empty() || field_was_quoted)
        throw InputError(where + ":" + std::to_string(line) +
                         ": a double quote inside an unquoted field (quote the whole field and double the quote)");
      in_quotes = true;
      field_was_quoted = true;
      record_open = true;
      quote_line = line;
      break;
    case ',':
      end_field();
      record_open = true;
      break;
    case '\r':
      if (i + 1 < text.size() && text[i + 1] == '\n')
        break; // CRLF: the LF ends the record
      field.push_back(c);
      break;
    case '\n':
      if (record_open || !field.empty())
        end_record();
      else
        records.emplace_back(); // an empty line is an empty record (dropped below only at the end)
      ++line;
      break;
    default:
      if (field_was_quoted)
        throw InputError(where + ":" + std::to_string(line) + ": text after the closing quote of a field");
      field.push_back(c);
      record_open = true;
    }
  }
  if (in_quotes)
    throw InputError(where + ":" + std::to_string(quote_line) + ": quoted field is never closed");
  if (record_open || !field.empty())
    end_record();
  // Empty lines carry no record: drop them (a data file may end in blank lines).
  std::vector<std::vector<std::string>> out;
  out.reserve(records.size());
  for (auto& r : records)
    if (!r.empty())
      out.push_back(std::move(r));
  return out;
}

std::string csv_field(std::string_view field)
{
  if (field.find_first_of(",\"\r\n") == std::string_view::npos)
    return std::string(field);
  std::string out = "\"";
  for (char c : field) {
    if (c == '"')
      out += "\"\"";
    else
      out.push_back(c);
  }
  out += "\"";
  return out;
}

std::string csv_record(const std::vector<std::string>& fields)
{
  std::string out;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (i > 0)
      out.push_back(',');
    out += csv_field(fields[i]);
  }
  out.push_back('\n');
  return out;
}

CsvTable CsvTable::parse(std::string_view text, const std::string& where)
{
  CsvTable t;
  t.where_ = where;
  auto records = parse_csv(text, where);
  if (records.empty())
    throw InputError(where + ": empty file (expected a header record)");
  t.header_ = std::move(records.front());
  for (std::size_t c = 0; c < t.header_.size(); ++c) {
    if (!t.index_.emplace(t.header_[c], c).second)
      throw InputError(where + ": column '" + t.header_[c] + "' appears twice in the header");
  }
  for (std::size_t r = 1; r < records.size(); ++r) {
    if (records[r].size() != t.header_.size())
      throw InputError(where + ": record " + std::to_string(r + 1) + " has " + std::to_string(records[r].size()) +
                       " fields, the header has " + std::to_string(t.header_.size()));
    t.rows_.push_back(std::move(records[r]));
  }
  return t;
}

const std::string& CsvTable::get(std::size_t i, const std::string& column) const
{
  auto it = index_.find(column);
  if (it == index_.end())
    throw InputError(where_ + ": no column '" + column + "'");
  return rows_.at(i).at(it->second);
}

std::map<std::string, std::string> CsvTable::record(std::size_t i) const
{
  std::map<std::string, std::string> m;
  for (std::size_t c = 0; c < header_.size(); ++c)
    m[header_[c]] = rows_.at(i).at(c);
  return m;
}

} // namespace zerosim::core
