#pragma once
// The message of the fx::Error a piece of test code throws: one helper for
// every test folder.

#include <fx/error.h>

#include <functional>
#include <string>

namespace fx_test {

/// The message of the fx::Error `f` throws ("<no error>" if none).
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const fx::Error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace fx_test
