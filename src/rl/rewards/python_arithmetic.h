// What Python's `eval` gives for the arithmetic expressions TinyZero's countdown scorer lets through
// (only digits, `+ - * / ( ) .` and white space), computed by a small parser instead of an
// interpreter. It follows CPython 3 where that changes a result:
//   - literals: `12`, `00` (but `012` is a SyntaxError), `1.5`, `1.`, `.5`, `01.5`;
//   - operators and precedence: binary `+ -`, `* / //`, unary `+ -`, `**` (right-associative, binds
//     tighter than a unary minus on its left: -2**2 == -4, 2**-1 == 0.5); parentheses nest 200 deep;
//   - int and float: int op int stays an int (`/` gives a float, `//` floors), mixing gives a float,
//     float `//` is CPython's floor of the divmod quotient;
//   - white space: space, tab, form feed anywhere, carriage return only inside parentheses;
//   - every Python error is "no value": SyntaxError, division by zero, 0 ** negative, calling a
//     number (`2(3)`), the empty tuple `()`.
// Where it differs, knowingly: Python ints are unbounded, ours are int64 and an operation that
// overflows continues in double precision (only expressions whose intermediates pass 9.2e18 can
// differ); a negative float to a non-integer power is a complex number in Python and no value here;
// Python gives up on expressions of thousands of operators (RecursionError), we evaluate them.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace rf::rl {

struct PyNumber {
  enum class Kind { integer, real };
  Kind kind = Kind::integer;
  int64_t integer = 0;  // when kind == integer
  double real = 0.0;    // when kind == real

  static PyNumber of_int(int64_t v) { return {Kind::integer, v, 0.0}; }
  static PyNumber of_real(double v) { return {Kind::real, 0, v}; }
  double as_double() const { return kind == Kind::integer ? double(integer) : real; }
};

// eval(expression, {"__builtins__": None}, {}) for an expression of the characters above, or nullopt
// where Python raises (any other character included).
std::optional<PyNumber> eval_python_arithmetic(std::string_view expression);

}  // namespace rf::rl
