// Python's str operations on UTF-8 text: Python indexes strings by code point and its
// whitespace, case and line-break rules are Unicode's, so these work on decoded code points.
// Case mapping covers ASCII, Latin-1, Greek and Cyrillic.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace invar::chat {

std::u32string utf8_decode(std::string_view s);
std::string utf8_encode(std::u32string_view s);
void utf8_append(std::string& out, char32_t c);
size_t utf8_length(std::string_view s);

bool py_isspace(char32_t c);
char32_t py_upper(char32_t c);
char32_t py_lower(char32_t c);
bool py_iscased(char32_t c);
bool py_isalnum(char32_t c);

// str.strip / lstrip / rstrip; chars == nullopt strips whitespace.
std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                     bool right);
// str.split / rsplit; sep == nullopt splits on whitespace runs. maxsplit < 0: no limit.
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep,
                                  long maxsplit, bool from_right);
std::vector<std::string> py_splitlines(std::string_view s);
std::string py_upper_str(std::string_view s);
std::string py_lower_str(std::string_view s);
std::string py_title(std::string_view s);
std::string py_capitalize(std::string_view s);
// str.replace(old, new, count); count < 0 replaces all.
std::string py_replace(std::string_view s, std::string_view from, std::string_view to, long count);
// str.find in code points (-1 when absent) and str.count of non-overlapping occurrences.
long py_find(std::string_view s, std::string_view sub);
long py_count(std::string_view s, std::string_view sub);
// markupsafe.escape: & < > ' " as HTML entities.
std::string html_escape(std::string_view s);

}  // namespace invar::chat
