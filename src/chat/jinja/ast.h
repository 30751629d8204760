// The syntax tree of a parsed template: expressions (Expr) and statements (Node). Plain
// data, built by the parser and walked by the evaluator; every node keeps its source line
// so runtime errors can name it.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja/value.h"

namespace tandem::jinja {

enum class ExprKind {
  kLiteral,   // value
  kName,      // name
  kList,      // args: items
  kTuple,     // args: items
  kDict,      // args: key, value, key, value, ...
  kGetAttr,   // args[0].name
  kGetItem,   // args[0][args[1]]
  kSlice,     // args[0][args[1]:args[2]:args[3]], absent parts are null
  kCall,      // args[0](args[1..], kwargs)
  kFilter,    // args[0] | name(args[1..], kwargs); args[0] is null in a {% filter %} block
  kTest,      // args[0] is [not] name(args[1..])
  kUnary,     // name: "not", "-", "+"
  kBinary,    // name: and or + - * / // % ** ~ in "not in"
  kCompare,   // args[0] ops[0] args[1] ops[1] args[2] ... (chained, as in Python)
  kCondition  // args[1] if args[0] else args[2] (args[2] null: Undefined)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  int line = 0;
  Value value;
  std::string name;
  std::vector<std::string> ops;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;  // `is not`
};

enum class NodeKind {
  kText,         // text
  kOutput,       // {{ expr }}
  kIf,           // branches: (condition, body)...; else_body
  kFor,          // targets in expr [if condition]: body; else_body
  kSet,          // targets = expr, or name.attribute = expr
  kSetBlock,     // {% set name %}body{% endset %}, then filters (expr: filter chain or null)
  kMacro,        // name(params = defaults): body
  kFilterBlock,  // {% filter expr %}body{% endfilter %}
  kBreak,
  kContinue,
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
struct Node {
  NodeKind kind = NodeKind::kText;
  int line = 0;
  std::string text;
  std::string name;
  std::string attribute;
  ExprPtr expr;
  ExprPtr condition;
  std::vector<std::string> targets;
  std::vector<std::pair<ExprPtr, std::vector<NodePtr>>> branches;
  std::vector<NodePtr> body;
  std::vector<NodePtr> else_body;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // one per param, null where none
};

struct Template {
  std::vector<NodePtr> body;
};

}  // namespace tandem::jinja
