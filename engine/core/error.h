// Errors of the engine: one exception type, and a check macro that names the failed condition and where.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace ampwb {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
[[noreturn]] inline void fail(const char* file, int line, const std::string& what) {
  std::ostringstream out;
  out << what << " (" << file << ":" << line << ")";
  throw Error(out.str());
}
}  // namespace detail

}  // namespace ampwb

// AMPWB_CHECK(cond, "message " << value): throws ampwb::Error naming the condition when it fails.
#define AMPWB_CHECK(cond, msg)                                           \
  do {                                                                   \
    if (!(cond)) {                                                       \
      std::ostringstream ampwb_check_msg_;                               \
      ampwb_check_msg_ << msg << " [check failed: " #cond "]";           \
      ::ampwb::detail::fail(__FILE__, __LINE__, ampwb_check_msg_.str()); \
    }                                                                    \
  } while (0)
