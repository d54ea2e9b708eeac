// Lexer of the textual IR: turns `%3 = matmul(%1, %2) {trans_x = false} : f32[8,64]` into tokens
// that carry their line and column, for the parser's error messages.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace pdist::ir {

enum class TokenKind : int8_t {
  kEof,
  kIdent,     // matmul, f32, true, layer_norm.grad
  kValueRef,  // %3, %x (text holds the name without '%')
  kString,    // "tokens" (text holds the unescaped contents)
  kInt,       // 42, -1
  kFloat,     // 1.5, -1e-05
  kPunct,     // = ( ) { } [ ] , : - ! <-
};

struct Token {
  TokenKind kind = TokenKind::kEof;
  std::string text;
  int line = 1;
  int column = 1;

  bool Is(std::string_view punct) const { return kind == TokenKind::kPunct && text == punct; }
  bool IsIdent(std::string_view word) const { return kind == TokenKind::kIdent && text == word; }
  // For messages: "'{'", "'matmul'", "string \"x\"", "end of input".
  std::string Describe() const;
};

// Splits the text lazily; `//` comments and whitespace are skipped.
//
//   Lexer lex("%0 = data \"x\" : f32[2]");
//   Token t = *lex.Next();   // kValueRef "0" at 1:1
class Lexer {
 public:
  explicit Lexer(std::string_view text) : text_(text) {}

  // The next token; errors (an unterminated string, a stray character) carry line:column.
  absl::StatusOr<Token> Next();

 private:
  void SkipSpaceAndComments();
  char Peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }
  void Advance();
  absl::StatusOr<Token> LexNumber(Token token);
  absl::StatusOr<Token> LexString(Token token);

  std::string_view text_;
  size_t pos_ = 0;
  int line_ = 1;
  int column_ = 1;
};

// "line 4:17: <message>" — the one format of every text-IR error.
absl::Status ErrorAt(int line, int column, absl::string_view message);

}  // namespace pdist::ir
