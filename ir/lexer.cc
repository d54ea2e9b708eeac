// Lexer of the textual IR: identifiers, %values, strings, numbers, punctuation, with positions.
#include "ir/lexer.h"

#include <cctype>

#include "absl/strings/str_cat.h"
#include "ir/verifier.h"

namespace pdist::ir {

namespace {
bool IsIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }
bool IsDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
}  // namespace

absl::Status ErrorAt(int line, int column, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("line ", line, ":", column, ": ", message));
}

std::string Token::Describe() const {
  switch (kind) {
    case TokenKind::kEof: return "end of input";
    case TokenKind::kValueRef: return absl::StrCat("'%", text, "'");
    case TokenKind::kString: return absl::StrCat("string \"", text.substr(0, 40), text.size() > 40 ? "...\"" : "\"");
    default: return absl::StrCat("'", text, "'");
  }
}

void Lexer::Advance() {
  if (pos_ >= text_.size()) return;
  if (text_[pos_] == '\n') {
    ++line_;
    column_ = 1;
  } else {
    ++column_;
  }
  ++pos_;
}

void Lexer::SkipSpaceAndComments() {
  while (pos_ < text_.size()) {
    const char c = Peek();
    if (std::isspace(static_cast<unsigned char>(c))) {
      Advance();
    } else if (c == '/' && Peek(1) == '/') {
      while (pos_ < text_.size() && Peek() != '\n') Advance();
    } else {
      return;
    }
  }
}

absl::StatusOr<Token> Lexer::Next() {
  SkipSpaceAndComments();
  Token token;
  token.line = line_;
  token.column = column_;
  if (pos_ >= text_.size()) return token;  // kEof
  const char c = Peek();
  if (IsIdentStart(c)) {
    token.kind = TokenKind::kIdent;
    while (IsIdentChar(Peek())) {
      token.text += Peek();
      Advance();
    }
    return token;
  }
  if (c == '%') {
    Advance();
    token.kind = TokenKind::kValueRef;
    while (IsIdentChar(Peek())) {
      token.text += Peek();
      Advance();
    }
    if (token.text.empty()) return ErrorAt(token.line, token.column, "expected a value name after '%'");
    return token;
  }
  if (IsDigit(c) || (c == '-' && IsDigit(Peek(1)))) return LexNumber(std::move(token));
  if (c == '"') return LexString(std::move(token));
  token.kind = TokenKind::kPunct;
  if (c == '<' && Peek(1) == '-') {
    Advance();
    Advance();
    token.text = "<-";
    return token;
  }
  if (std::string_view("=(){}[],:-!@").find(c) != std::string_view::npos) {
    Advance();
    token.text = std::string(1, c);
    return token;
  }
  if (std::isprint(static_cast<unsigned char>(c))) {
    return ErrorAt(line_, column_, absl::StrCat("unexpected character '", std::string(1, c), "'"));
  }
  return ErrorAt(line_, column_, absl::StrCat("unexpected byte 0x", absl::Hex(static_cast<unsigned char>(c))));
}

absl::StatusOr<Token> Lexer::LexNumber(Token token) {
  token.kind = TokenKind::kInt;
  auto take = [&] {
    token.text += Peek();
    Advance();
  };
  if (Peek() == '-') take();
  while (IsDigit(Peek())) take();
  if (Peek() == '.') {
    token.kind = TokenKind::kFloat;
    take();
    while (IsDigit(Peek())) take();
  }
  if ((Peek() == 'e' || Peek() == 'E') &&
      (IsDigit(Peek(1)) || ((Peek(1) == '+' || Peek(1) == '-') && IsDigit(Peek(2))))) {
    token.kind = TokenKind::kFloat;
    take();
    if (Peek() == '+' || Peek() == '-') take();
    while (IsDigit(Peek())) take();
  }
  if (IsIdentChar(Peek())) {
    return ErrorAt(token.line, token.column, absl::StrCat("malformed number '", token.text, std::string(1, Peek()), "'"));
  }
  return token;
}

absl::StatusOr<Token> Lexer::LexString(Token token) {
  token.kind = TokenKind::kString;
  Advance();  // opening quote
  while (true) {
    if (pos_ >= text_.size()) return ErrorAt(token.line, token.column, "unterminated string");
    const char c = Peek();
    if (c == '"') {
      Advance();
      // Strings end up in model.pb as protobuf strings, which must be UTF-8.
      if (!IsValidUtf8(token.text)) return ErrorAt(token.line, token.column, "string is not valid UTF-8");
      return token;
    }
    if (c == '\\') {
      const int line = line_, column = column_;
      Advance();
      const char e = Peek();
      if (e == '"' || e == '\\') {
        token.text += e;
      } else if (e == 'n') {
        token.text += '\n';
      } else if (e == 't') {
        token.text += '\t';
      } else {
        return ErrorAt(line, column, "unknown escape in string (use \\\", \\\\, \\n or \\t)");
      }
      Advance();
      continue;
    }
    token.text += c;
    Advance();
  }
}

}  // namespace pdist::ir
