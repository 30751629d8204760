// Recursive-descent parser over the lexer's tokens (see parser.h). Precedence, loosest
// first: ternary, or, and, not, comparisons/in, + -, ~, * / // %, **, unary - +, then
// postfix (. [] ()) with filters and tests. Nesting is capped so hostile input cannot
// exhaust the stack.
#include "chat/jinja/parser.h"

#include <algorithm>
#include <initializer_list>

#include <fmt/format.h>

#include "chat/jinja/filters.h"
#include "chat/jinja/lexer.h"

namespace tandem::jinja {
namespace {

constexpr int kMaxNesting = 96;

bool one_of(const std::string& s, std::initializer_list<const char*> names) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return s == n; });
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Template parse() {
    Template result;
    std::string end_tag;
    result.body = subparse({}, end_tag);
    return result;
  }

 private:
  // Counts nesting on the way down; throws past kMaxNesting.
  struct DepthGuard {
    explicit DepthGuard(Parser& p) : parser(p) {
      if (++parser.depth_ > kMaxNesting) {
        throw TemplateError("template nested too deeply", parser.peek().line);
      }
    }
    ~DepthGuard() { --parser.depth_; }
    Parser& parser;
  };

  const Token& peek(size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  const Token& next() {
    const Token& t = peek();
    if (pos_ < tokens_.size() - 1) ++pos_;
    return t;
  }
  bool is_op(const char* op, size_t ahead = 0) const {
    return peek(ahead).type == TokenType::kOperator && peek(ahead).text == op;
  }
  bool is_name(const char* name, size_t ahead = 0) const {
    return peek(ahead).type == TokenType::kName && peek(ahead).text == name;
  }
  std::string describe(const Token& t) const {
    switch (t.type) {
      case TokenType::kEnd: return "end of template";
      case TokenType::kBlockEnd: return "'%}'";
      case TokenType::kVariableEnd: return "'}}'";
      case TokenType::kBlockBegin: return "'{%'";
      case TokenType::kVariableBegin: return "'{{'";
      case TokenType::kText: return "text";
      case TokenType::kString: return "a string";
      default: return "'" + t.text + "'";
    }
  }
  [[noreturn]] void fail(const std::string& message) const { throw TemplateError(message, peek().line); }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(fmt::format("expected '{}', got {}", op, describe(peek())));
    next();
  }
  void expect(TokenType type, const char* what) {
    if (peek().type != type) fail(fmt::format("expected {}, got {}", what, describe(peek())));
    next();
  }
  std::string expect_name() {
    if (peek().type != TokenType::kName) fail(fmt::format("expected a name, got {}", describe(peek())));
    return next().text;
  }

  ExprPtr make(ExprKind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // ---- statements ----

  // Parses nodes until a block tag named in `end_tags` (consumed, name in `end_tag`).
  std::vector<NodePtr> subparse(std::initializer_list<const char*> end_tags, std::string& end_tag) {
    DepthGuard guard(*this);
    std::vector<NodePtr> body;
    while (true) {
      const Token& t = peek();
      if (t.type == TokenType::kEnd) {
        if (end_tags.size() == 0) return body;
        fail(fmt::format("unexpected end of template, expected '{}'", *end_tags.begin()));
      }
      if (t.type == TokenType::kText) {
        auto node = std::make_unique<Node>();
        node->kind = NodeKind::kText;
        node->line = t.line;
        node->text = next().text;
        body.push_back(std::move(node));
      } else if (t.type == TokenType::kVariableBegin) {
        auto node = std::make_unique<Node>();
        node->kind = NodeKind::kOutput;
        node->line = next().line;
        node->expr = parse_expression();
        expect(TokenType::kVariableEnd, "'}}'");
        body.push_back(std::move(node));
      } else if (t.type == TokenType::kBlockBegin) {
        next();
        const std::string tag = peek().type == TokenType::kName ? peek().text : "";
        if (std::any_of(end_tags.begin(), end_tags.end(), [&](const char* e) { return tag == e; })) {
          next();
          end_tag = tag;
          return body;
        }
        body.push_back(parse_statement());
      } else {
        fail(fmt::format("unexpected {}", describe(t)));
      }
    }
  }

  NodePtr parse_statement() {
    const int line = peek().line;
    if (peek().type != TokenType::kName) fail("expected a tag name after '{%'");
    const std::string tag = next().text;
    auto node = std::make_unique<Node>();
    node->line = line;
    if (tag == "if") {
      parse_if(*node);
    } else if (tag == "for") {
      parse_for(*node);
    } else if (tag == "set") {
      parse_set(*node);
    } else if (tag == "macro") {
      parse_macro(*node);
    } else if (tag == "filter") {
      node->kind = NodeKind::kFilterBlock;
      node->expr = parse_filter_chain(nullptr);
      expect(TokenType::kBlockEnd, "'%}'");
      std::string end_tag;
      node->body = subparse({"endfilter"}, end_tag);
      expect(TokenType::kBlockEnd, "'%}'");
    } else if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail(fmt::format("'{}' outside of a loop", tag));
      node->kind = tag == "break" ? NodeKind::kBreak : NodeKind::kContinue;
      expect(TokenType::kBlockEnd, "'%}'");
    } else if (one_of(tag, {"elif", "else", "endif", "endfor", "endset", "endmacro", "endfilter"})) {
      fail(fmt::format("unexpected tag '{}'", tag));
    } else {
      fail(fmt::format("unsupported tag '{}'", tag));
    }
    return node;
  }

  void parse_if(Node& node) {
    node.kind = NodeKind::kIf;
    while (true) {
      ExprPtr condition = parse_expression();
      expect(TokenType::kBlockEnd, "'%}'");
      std::string end_tag;
      std::vector<NodePtr> body = subparse({"elif", "else", "endif"}, end_tag);
      node.branches.emplace_back(std::move(condition), std::move(body));
      if (end_tag == "elif") continue;
      if (end_tag == "else") {
        expect(TokenType::kBlockEnd, "'%}'");
        node.else_body = subparse({"endif"}, end_tag);
      }
      expect(TokenType::kBlockEnd, "'%}'");
      return;
    }
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> targets;
    const bool paren = is_op("(");
    if (paren) next();
    targets.push_back(expect_name());
    while (is_op(",")) {
      next();
      if (peek().type != TokenType::kName || is_name("in")) break;
      targets.push_back(expect_name());
    }
    if (paren) expect_op(")");
    for (const std::string& t : targets) {
      if (one_of(t, {"true", "false", "none", "True", "False", "None", "loop"}) && t != "loop") {
        fail(fmt::format("cannot assign to '{}'", t));
      }
    }
    return targets;
  }

  void parse_for(Node& node) {
    node.kind = NodeKind::kFor;
    node.targets = parse_targets();
    if (!is_name("in")) fail(fmt::format("expected 'in' in a for loop, got {}", describe(peek())));
    next();
    node.expr = parse_or();  // no ternary here: a trailing `if` filters the loop
    if (is_name("if")) {
      next();
      node.condition = parse_expression();
    }
    if (is_name("recursive")) fail("unsupported construct 'recursive' loop");
    expect(TokenType::kBlockEnd, "'%}'");
    ++loop_depth_;
    std::string end_tag;
    node.body = subparse({"endfor", "else"}, end_tag);
    --loop_depth_;
    if (end_tag == "else") {
      expect(TokenType::kBlockEnd, "'%}'");
      node.else_body = subparse({"endfor"}, end_tag);
    }
    expect(TokenType::kBlockEnd, "'%}'");
  }

  void parse_set(Node& node) {
    if (peek().type == TokenType::kName && is_op(".", 1)) {
      node.kind = NodeKind::kSet;
      node.name = next().text;
      next();
      node.attribute = expect_name();
      expect_op("=");
      node.expr = parse_expression();
      expect(TokenType::kBlockEnd, "'%}'");
      return;
    }
    node.targets = parse_targets();
    if (is_op("=")) {
      next();
      node.kind = NodeKind::kSet;
      node.expr = parse_expression();
      expect(TokenType::kBlockEnd, "'%}'");
      return;
    }
    if (node.targets.size() != 1) fail("a block set assigns one name");
    node.kind = NodeKind::kSetBlock;
    if (is_op("|")) node.expr = parse_filter_chain(nullptr);
    expect(TokenType::kBlockEnd, "'%}'");
    std::string end_tag;
    node.body = subparse({"endset"}, end_tag);
    expect(TokenType::kBlockEnd, "'%}'");
  }

  void parse_macro(Node& node) {
    node.kind = NodeKind::kMacro;
    node.name = expect_name();
    expect_op("(");
    while (!is_op(")")) {
      if (!node.params.empty()) expect_op(",");
      if (is_op(")")) break;
      node.params.push_back(expect_name());
      if (is_op("=")) {
        next();
        node.defaults.push_back(parse_expression());
      } else {
        node.defaults.push_back(nullptr);
      }
    }
    next();
    expect(TokenType::kBlockEnd, "'%}'");
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;  // break/continue cannot cross a macro boundary
    std::string end_tag;
    node.body = subparse({"endmacro"}, end_tag);
    loop_depth_ = saved_loops;
    if (peek().type == TokenType::kName) next();  // {% endmacro name %}
    expect(TokenType::kBlockEnd, "'%}'");
  }

  // ---- expressions ----

  ExprPtr parse_expression() {
    DepthGuard guard(*this);
    ExprPtr expr = parse_or();
    while (is_name("if")) {
      const int line = next().line;
      auto cond = make(ExprKind::kCondition, line);
      cond->args.push_back(parse_or());
      cond->args.push_back(std::move(expr));
      if (is_name("else")) {
        next();
        cond->args.push_back(parse_expression());
      } else {
        cond->args.push_back(nullptr);
      }
      expr = std::move(cond);
    }
    return expr;
  }

  ExprPtr binary(const std::string& op, ExprPtr left, ExprPtr right, int line) {
    auto e = make(ExprKind::kBinary, line);
    e->name = op;
    e->args.push_back(std::move(left));
    e->args.push_back(std::move(right));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      const int line = next().line;
      left = binary("or", std::move(left), parse_and(), line);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      const int line = next().line;
      left = binary("and", std::move(left), parse_not(), line);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      auto e = make(ExprKind::kUnary, next().line);
      e->name = "not";
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = peek().line;
    ExprPtr first = parse_math1();
    ExprPtr chain;
    while (true) {
      std::string op;
      if (peek().type == TokenType::kOperator && one_of(peek().text, {"==", "!=", "<", "<=", ">", ">="})) {
        op = next().text;
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        next();
        next();
        op = "not in";
      } else {
        break;
      }
      if (!chain) {
        chain = make(ExprKind::kCompare, line);
        chain->args.push_back(std::move(first));
      }
      chain->ops.push_back(op);
      chain->args.push_back(parse_math1());
    }
    return chain ? std::move(chain) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& t = next();
      left = binary(t.text, std::move(left), parse_concat(), t.line);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (is_op("~")) {
      const int line = next().line;
      left = binary("~", std::move(left), parse_math2(), line);
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& t = next();
      left = binary(t.text, std::move(left), parse_pow(), t.line);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      const int line = next().line;
      left = binary("**", std::move(left), parse_unary(true), line);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const Token& t = next();
      node = make(ExprKind::kUnary, t.line);
      node->name = t.text;
      node->args.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = peek();
    switch (t.type) {
      case TokenType::kName: {
        next();
        if (one_of(t.text, {"true", "True"})) return literal(Value(true), t.line);
        if (one_of(t.text, {"false", "False"})) return literal(Value(false), t.line);
        if (one_of(t.text, {"none", "None"})) return literal(Value::none(), t.line);
        auto e = make(ExprKind::kName, t.line);
        e->name = t.text;
        return e;
      }
      case TokenType::kString: {
        std::string text;
        const int line = t.line;
        while (peek().type == TokenType::kString) text += next().text;  // "a" "b" == "ab"
        return literal(Value(std::move(text)), line);
      }
      case TokenType::kInteger: next(); return literal(Value(t.integer), t.line);
      case TokenType::kFloat: next(); return literal(Value(t.number), t.line);
      case TokenType::kOperator:
        if (t.text == "(") return parse_paren();
        if (t.text == "[") return parse_list();
        if (t.text == "{") return parse_dict();
        break;
      default: break;
    }
    fail(fmt::format("unexpected {} in an expression", describe(t)));
  }

  ExprPtr literal(Value v, int line) {
    auto e = make(ExprKind::kLiteral, line);
    e->value = std::move(v);
    return e;
  }

  ExprPtr parse_paren() {
    const int line = next().line;
    if (is_op(")")) {
      next();
      return make(ExprKind::kTuple, line);  // ()
    }
    ExprPtr first = parse_expression();
    if (!is_op(",")) {
      expect_op(")");
      return first;
    }
    auto tuple = make(ExprKind::kTuple, line);
    tuple->args.push_back(std::move(first));
    while (is_op(",")) {
      next();
      if (is_op(")")) break;
      tuple->args.push_back(parse_expression());
    }
    expect_op(")");
    return tuple;
  }

  ExprPtr parse_list() {
    auto list = make(ExprKind::kList, next().line);
    while (!is_op("]")) {
      if (!list->args.empty()) expect_op(",");
      if (is_op("]")) break;
      list->args.push_back(parse_expression());
    }
    next();
    return list;
  }

  ExprPtr parse_dict() {
    auto dict = make(ExprKind::kDict, next().line);
    while (!is_op("}")) {
      if (!dict->args.empty()) expect_op(",");
      if (is_op("}")) break;
      dict->args.push_back(parse_expression());
      expect_op(":");
      dict->args.push_back(parse_expression());
    }
    next();
    return dict;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".")) {
        const int line = next().line;
        if (peek().type == TokenType::kInteger) {
          auto e = make(ExprKind::kGetItem, line);
          e->args.push_back(std::move(node));
          e->args.push_back(literal(Value(next().integer), line));
          node = std::move(e);
        } else {
          auto e = make(ExprKind::kGetAttr, line);
          e->name = expect_name();
          e->args.push_back(std::move(node));
          node = std::move(e);
        }
      } else if (is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const int line = next().line;
    ExprPtr parts[3];
    int n_colons = 0;
    if (!is_op(":")) parts[0] = parse_expression();
    while (is_op(":") && n_colons < 2) {
      next();
      ++n_colons;
      if (!is_op(":") && !is_op("]")) parts[n_colons] = parse_expression();
    }
    expect_op("]");
    if (n_colons == 0) {
      if (!parts[0]) fail("expected an index");
      auto e = make(ExprKind::kGetItem, line);
      e->args.push_back(std::move(node));
      e->args.push_back(std::move(parts[0]));
      return e;
    }
    auto e = make(ExprKind::kSlice, line);
    e->args.push_back(std::move(node));
    for (ExprPtr& part : parts) e->args.push_back(std::move(part));
    return e;
  }

  // Parses `(args, name=value)` into `e` (positional after e->args' current items).
  void parse_call_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) fail("unsupported construct '*args'/'**kwargs' in a call");
      if (peek().type == TokenType::kName && is_op("=", 1)) {
        std::string key = next().text;
        next();
        e.kwargs.emplace_back(std::move(key), parse_expression());
      } else {
        if (!e.kwargs.empty()) fail("positional argument after keyword argument");
        e.args.push_back(parse_expression());
      }
    }
    next();
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto e = make(ExprKind::kCall, peek().line);
    e->args.push_back(std::move(callee));
    parse_call_args(*e);
    return e;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        node = parse_filter_chain(std::move(node));
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  // One or more `| name(args)`; `operand` is null for a {% filter %} / {% set %} block.
  ExprPtr parse_filter_chain(ExprPtr operand) {
    bool first = operand == nullptr;
    while (first || is_op("|")) {
      if (is_op("|")) next();
      first = false;
      const int line = peek().line;
      std::string name = expect_name();
      while (is_op(".")) {
        next();
        name += '.';  // not "." + expect_name(): GCC 12 -O3 warns falsely (-Wrestrict, bug 105329)
        name += expect_name();
      }
      if (!is_known_filter(name)) throw TemplateError(fmt::format("unsupported filter '{}'", name), line);
      auto e = make(ExprKind::kFilter, line);
      e->name = name;
      e->args.push_back(std::move(operand));
      if (is_op("(")) parse_call_args(*e);
      operand = std::move(e);
    }
    return operand;
  }

  ExprPtr parse_test(ExprPtr node) {
    const int line = next().line;  // `is`
    auto e = make(ExprKind::kTest, line);
    if (is_name("not")) {
      next();
      e->negated = true;
    }
    e->name = expect_name();
    while (is_op(".")) {
      next();
      e->name += "." + expect_name();
    }
    if (!is_known_test(e->name)) throw TemplateError(fmt::format("unsupported test '{}'", e->name), line);
    e->args.push_back(std::move(node));
    const Token& t = peek();
    if (is_op("(")) {
      parse_call_args(*e);
    } else if ((t.type == TokenType::kName || t.type == TokenType::kString || t.type == TokenType::kInteger ||
                t.type == TokenType::kFloat || is_op("[") || is_op("{")) &&
               !(t.type == TokenType::kName && one_of(t.text, {"else", "or", "and"}))) {
      // `x is divisibleby 3`: one argument without parentheses, as Jinja allows.
      if (is_name("is")) fail("tests cannot be chained with 'is'");
      e->args.push_back(parse_postfix(parse_primary()));
    }
    return e;
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Template parse_template(std::string_view source) { return Parser(tokenize(source)).parse(); }

}  // namespace tandem::jinja
