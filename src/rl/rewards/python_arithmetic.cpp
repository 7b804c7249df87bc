#include "rl/rewards/python_arithmetic.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

namespace rf::rl {
namespace {

constexpr int kMaxParenDepth = 200;  // CPython's tokenizer MAXLEVEL: "too many nested parentheses"

enum class Token { number, plus, minus, star, double_star, slash, double_slash, lparen, rparen, end };

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_zero(const PyNumber& v) { return v.kind == PyNumber::Kind::integer ? v.integer == 0 : v.real == 0.0; }
bool both_int(const PyNumber& a, const PyNumber& b) {
  return a.kind == PyNumber::Kind::integer && b.kind == PyNumber::Kind::integer;
}

PyNumber negate(const PyNumber& v) {
  if (v.kind == PyNumber::Kind::real) return PyNumber::of_real(-v.real);
  if (v.integer == std::numeric_limits<int64_t>::min()) return PyNumber::of_real(-double(v.integer));
  return PyNumber::of_int(-v.integer);
}

// CPython's float floor division (floatobject.c _float_div_mod): the quotient of the exact divmod,
// not floor(x / y), which can differ by one when x / y rounds up to an integer.
double float_floor_div(double vx, double wx) {
  double mod = std::fmod(vx, wx);
  double div = (vx - mod) / wx;
  if (mod != 0.0 && (wx < 0) != (mod < 0)) div -= 1.0;
  if (div == 0.0) return std::copysign(0.0, vx / wx);
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}

// Integer exponentiation by squaring; nullopt when an intermediate leaves int64.
std::optional<int64_t> checked_int_pow(int64_t base, int64_t exponent) {
  int64_t result = 1;
  while (exponent > 0) {
    if (exponent & 1 && __builtin_mul_overflow(result, base, &result)) return std::nullopt;
    exponent >>= 1;
    if (exponent > 0 && __builtin_mul_overflow(base, base, &base)) return std::nullopt;
  }
  return result;
}

// Recursive descent over Python's expression grammar, restricted to the tokens above:
//   expr   := term (('+' | '-') term)*
//   term   := factor (('*' | '/' | '//') factor)*
//   factor := ('+' | '-')* power
//   power  := primary ('**' factor)?        (a ** chain is folded from the right, without recursion)
//   primary:= NUMBER | '(' expr ')'
// Only parentheses recurse, at most kMaxParenDepth deep. A Python exception sets failed_.
class Evaluator {
 public:
  explicit Evaluator(std::string_view text) : text_(text) {}

  std::optional<PyNumber> run() {
    advance();
    const PyNumber value = expr();
    if (failed_ || token_ != Token::end) return std::nullopt;
    return value;
  }

 private:
  PyNumber fail() {
    failed_ = true;
    token_ = Token::end;  // stops every loop above
    return {};
  }

  void advance() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      // Inside brackets a line break is implicit line joining; outside it ends the statement.
      if (c == ' ' || c == '\t' || c == '\f' || (c == '\r' && depth_ > 0)) {
        ++pos_;
      } else {
        break;
      }
    }
    if (failed_ || pos_ == text_.size()) {
      token_ = Token::end;
      return;
    }
    const char c = text_[pos_];
    const char next = pos_ + 1 < text_.size() ? text_[pos_ + 1] : '\0';
    if (is_digit(c) || (c == '.' && is_digit(next))) return lex_number();
    ++pos_;
    switch (c) {
      case '+': token_ = Token::plus; return;
      case '-': token_ = Token::minus; return;
      case '*':
      case '/': {  // `**` and `//` are one token each
        const bool doubled = next == c;
        pos_ += doubled;
        if (c == '*')
          token_ = doubled ? Token::double_star : Token::star;
        else
          token_ = doubled ? Token::double_slash : Token::slash;
        return;
      }
      case '(':
        if (depth_ >= kMaxParenDepth) break;
        ++depth_;
        token_ = Token::lparen;
        return;
      case ')':
        if (depth_ == 0) break;  // "unmatched ')'"
        --depth_;
        token_ = Token::rparen;
        return;
      default: break;
    }
    fail();
  }

  // digits ['.' digits] | '.' digits. An integer literal may not have a leading zero unless it is all
  // zeros ("00" is 0, "012" is a SyntaxError); a float literal may ("012.5").
  void lex_number() {
    const size_t begin = pos_;
    while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
    const size_t int_end = pos_;
    const bool is_float = pos_ < text_.size() && text_[pos_] == '.';
    if (is_float) {
      ++pos_;
      while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
    }
    const std::string literal(text_.substr(begin, pos_ - begin));
    token_ = Token::number;
    if (is_float) {
      number_ = PyNumber::of_real(std::strtod(literal.c_str(), nullptr));
      return;
    }
    if (literal.size() > 1 && literal[0] == '0' && literal.find_first_not_of('0') != std::string::npos) {
      fail();
      return;
    }
    int64_t value = 0;
    for (size_t i = begin; i < int_end; ++i) {
      if (__builtin_mul_overflow(value, int64_t(10), &value) ||
          __builtin_add_overflow(value, int64_t(text_[i] - '0'), &value)) {
        number_ = PyNumber::of_real(std::strtod(literal.c_str(), nullptr));
        return;
      }
    }
    number_ = PyNumber::of_int(value);
  }

  PyNumber expr() {
    PyNumber value = term();
    while (token_ == Token::plus || token_ == Token::minus) {
      const Token op = token_;
      advance();
      const PyNumber rhs = term();
      if (failed_) return {};
      value = op == Token::plus ? add(value, rhs) : add(value, negate(rhs));
    }
    return value;
  }

  PyNumber term() {
    PyNumber value = factor();
    while (token_ == Token::star || token_ == Token::slash || token_ == Token::double_slash) {
      const Token op = token_;
      advance();
      const PyNumber rhs = factor();
      if (failed_) return {};
      value = op == Token::star ? multiply(value, rhs) : op == Token::slash ? true_divide(value, rhs)
                                                                            : floor_divide(value, rhs);
    }
    return value;
  }

  // Consumes a run of unary signs; true when it negates.
  bool unary_signs() {
    bool negative = false;
    for (; token_ == Token::plus || token_ == Token::minus; advance()) negative ^= token_ == Token::minus;
    return negative;
  }

  PyNumber factor() {
    const bool negative = unary_signs();
    const PyNumber value = power();
    return negative ? negate(value) : value;
  }

  PyNumber power() {
    std::vector<PyNumber> operands{primary()};
    std::vector<bool> negated;  // negated[i]: unary minus in front of operands[i + 1]
    while (token_ == Token::double_star) {
      advance();
      negated.push_back(unary_signs());
      operands.push_back(primary());
    }
    if (failed_) return {};
    PyNumber value = operands.back();
    for (size_t i = operands.size() - 1; i-- > 0 && !failed_;)
      value = raise(operands[i], negated[i] ? negate(value) : value);
    return value;
  }

  PyNumber primary() {
    if (token_ == Token::number) {
      const PyNumber value = number_;
      advance();
      return value;
    }
    if (token_ != Token::lparen) return fail();
    advance();
    if (token_ == Token::rparen) return fail();  // `()` is the empty tuple: not a number
    const PyNumber value = expr();
    if (token_ != Token::rparen) return fail();
    advance();
    return value;
  }

  static PyNumber add(const PyNumber& a, const PyNumber& b) {
    int64_t sum = 0;
    if (both_int(a, b) && !__builtin_add_overflow(a.integer, b.integer, &sum)) return PyNumber::of_int(sum);
    return PyNumber::of_real(a.as_double() + b.as_double());
  }

  static PyNumber multiply(const PyNumber& a, const PyNumber& b) {
    int64_t product = 0;
    if (both_int(a, b) && !__builtin_mul_overflow(a.integer, b.integer, &product)) return PyNumber::of_int(product);
    return PyNumber::of_real(a.as_double() * b.as_double());
  }

  PyNumber true_divide(const PyNumber& a, const PyNumber& b) {
    if (is_zero(b)) return fail();  // ZeroDivisionError
    return PyNumber::of_real(a.as_double() / b.as_double());
  }

  PyNumber floor_divide(const PyNumber& a, const PyNumber& b) {
    if (is_zero(b)) return fail();  // ZeroDivisionError
    if (both_int(a, b) && !(a.integer == std::numeric_limits<int64_t>::min() && b.integer == -1)) {
      const int64_t q = a.integer / b.integer;
      return PyNumber::of_int(a.integer % b.integer != 0 && (a.integer < 0) != (b.integer < 0) ? q - 1 : q);
    }
    return PyNumber::of_real(float_floor_div(a.as_double(), b.as_double()));
  }

  // int ** non-negative int is an exact int; everything else is CPython's float_pow.
  PyNumber raise(const PyNumber& a, const PyNumber& b) {
    if (both_int(a, b) && b.integer >= 0) {
      if (const std::optional<int64_t> exact = checked_int_pow(a.integer, b.integer)) return PyNumber::of_int(*exact);
      return PyNumber::of_real(std::pow(a.as_double(), b.as_double()));
    }
    const double x = a.as_double(), y = b.as_double();
    if (std::isfinite(x) && std::isfinite(y)) {
      if (x == 0.0 && y < 0.0) return fail();               // ZeroDivisionError
      if (x < 0.0 && y != std::floor(y)) return fail();     // a complex result
      const double result = std::pow(x, y);
      if (std::isinf(result)) return fail();                // OverflowError (underflow to 0 is fine)
      return PyNumber::of_real(result);
    }
    return PyNumber::of_real(std::pow(x, y));  // C99 Annex F's inf/nan cases are CPython's
  }

  std::string_view text_;
  size_t pos_ = 0;
  int depth_ = 0;
  bool failed_ = false;
  Token token_ = Token::end;
  PyNumber number_;
};

}  // namespace

std::optional<PyNumber> eval_python_arithmetic(std::string_view expression) { return Evaluator(expression).run(); }

}  // namespace rf::rl
