#pragma once
// The warnings c10 reports (TORCH_WARN, aten::warn) while a test looks.

#include <c10/util/Exception.h>

#include <string>
#include <vector>

namespace fx_test {

/// Collects the messages of c10 warnings while it lives (then the previous
/// handler is back).
struct CapturedWarnings : c10::WarningHandler {
  std::vector<std::string> messages;
  c10::Warning::WarningHandlerGuard guard{this};
  void process(const c10::SourceLocation& /*where*/, const std::string& msg, const bool /*verbatim*/) override {
    messages.push_back(msg);
  }
};

}  // namespace fx_test
