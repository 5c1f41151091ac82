#pragma once
// A fused kernel's program: the values a group of graph nodes computes, as
// the text a `fxcpp::fused_kernel` node carries and prints, e.g.
//
//   inputs 2; %2 = add(%0, %1); %3 = mean(%2); %4 = sub(%2, %3); return %4 full, %3 row
//
// %0 .. %(inputs-1) are the node's tensor inputs, broadcast to one
// iteration shape whose last dimension every reduction reduces (a "row").
// A value is either full (one element per element of the iteration shape)
// or a row value (one per row: a reduction, or arithmetic on row values and
// constants). Text and structure convert both ways exactly (numbers in
// %.17g), so the generated C++ depends on the text alone: a saved graph
// carries its kernels, and one text is one kernel in the cache.
#include <cstdint>
#include <string>
#include <vector>

namespace fx::compiler::detail {

/// One operand: a value, a number, or the row's length ("n").
struct Operand {
  enum class Kind { Value, Number, RowLength };
  Kind kind = Kind::Value;
  /// The value's index (Kind::Value).
  int value = -1;
  /// The number (Kind::Number).
  double number = 0;
};

/// How an output is stored: full, a row value keeping the reduced dimension
/// (size 1), or a row value without it.
enum class OutputKind { Full, Row, RowFlat };

/// One value of the program.
struct Op {
  /// "input" for %0 .. %(inputs-1); otherwise an operator of kOps.
  std::string name;
  /// Its operands (empty for inputs).
  std::vector<Operand> args;
  /// Whether it is one value per row.
  bool row = false;
  /// Reductions: the loop over the row that computes it (1, 2, ...); other
  /// values: the last such loop whose results they need (0: none).
  int level = 0;
};

/// A parsed program.
struct Program {
  /// Number of tensor inputs (the first values).
  int inputs = 0;
  /// Each input's storage: "f32" (float32) or "u8" (uint8 or bool, read as 0 / 1 ...: a dropout mask);
  /// the text lists them after the count ("inputs 2: u8 f32") when any is not f32. Values are float32.
  std::vector<std::string> input_types;
  /// Every value, inputs first.
  std::vector<Op> ops;
  /// The values returned, with how each is stored.
  std::vector<std::pair<int, OutputKind>> outputs;

  /// Whether any value is a reduction (the kernel then runs whole rows).
  bool reduces() const;
  /// The number of loops over a row computing reductions.
  int reduction_levels() const;
};

/// Operator arities and kinds: whether `name` is a pointwise operator of
/// `arity` operands or a reduction (sum, max, mean: 1 operand; var: the
/// operand and its correction).
bool is_pointwise(const std::string& name, size_t arity);
bool is_reduction(const std::string& name);

/// Parses a program's text; throws fx::Error naming the statement that is
/// wrong (unknown operator, operand count, a value used before it is made,
/// a reduction of a row value ...). Fills in rows and levels.
Program parse_program(const std::string& text);

/// The text of `p` (parse_program(print_program(p)) == p).
std::string print_program(const Program& p);

/// Fills in `row` and `level` of every value; throws fx::Error if a
/// reduction reduces a row value or an output's kind does not fit its value.
void analyse(Program& p);

}  // namespace fx::compiler::detail
