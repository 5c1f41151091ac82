// torch.fx's "While executing" error context (see node_error.h).
#include "execution/node_error.h"

#include <fx/error.h>

#include <c10/util/Exception.h>

namespace fx::detail {

std::string current_exception_message() {
  try {
    throw;
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

void rethrow_while_executing(const Node& node) {
  std::string msg = current_exception_message();
  msg += "\n\nWhile executing " + node.format_node();
  const std::string trace = node.stack_trace();
  if (!trace.empty()) msg += "\nOriginal traceback:\n" + trace;
  try {
    throw;
  } catch (const TargetError&) {
    throw TargetError(msg);
  } catch (const LintError&) {
    throw LintError(msg);
  } catch (const TraceError&) {
    throw TraceError(msg);
  } catch (const ImportError&) {
    throw ImportError(msg);
  } catch (...) {
    throw Error(msg);
  }
}

}  // namespace fx::detail
