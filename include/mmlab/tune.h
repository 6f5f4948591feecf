// The catalogue of `tune` keys and of the sysfs files under /sys/kernel/mm
// the model has (src/mm/settings.cpp): what a scenario may name, checked at
// parse time.
#pragma once

#include <string>
#include <vector>

namespace mmlab {

// Every tune key with its meaning, its default, and its values in
// registration order (the order every list of them follows), each with
// its meaning ("" for numbers).
struct TuneValueInfo {
  std::string name, meaning;
};
struct TuneKeyInfo {
  std::string key, meaning, default_value;
  std::vector<TuneValueInfo> values;
};
std::vector<TuneKeyInfo> tune_catalogue();
// The values of a tune key in registration order ("v6.5", "legacy", ...); empty if unknown.
std::vector<std::string> tune_values(const std::string& key);

// Whether the build has this `tune` key and value (scenario parsing refuses unknown ones).
bool tune_value_known(const std::string& key, const std::string& value);
// The values of a tune key for messages ("legacy|walk|...", "0..8"); "" if the build has no such key.
std::string tune_values_text(const std::string& key);
// Every tune key with its values: "gup.walk v6.5|legacy|..., cow.max_order 0..8, ...".
std::string tune_choices_text();
// The value a fresh System has for a tune key ("" if none).
std::string tune_default(const std::string& key);
// Whether a sysfs path under /sys/kernel/mm is one the model has.
bool sysfs_path_known(const std::string& path);
// Whether value has the form path takes (a number for the khugepaged knobs);
// values of the right form that the kernel's store rejects are run-time errors.
bool sysfs_value_well_formed(const std::string& path, const std::string& value);

}  // namespace mmlab
