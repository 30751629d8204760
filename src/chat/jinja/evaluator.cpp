// Tree-walking renderer (see evaluator.h). Statements append to an output string;
// expressions evaluate to Values through operators.h and filters.h. Every runtime error
// leaves here as a TemplateError carrying the line of the statement that failed.
#include "chat/jinja/evaluator.h"

#include <memory>
#include <unordered_map>

#include <fmt/format.h>

#include "chat/jinja/filters.h"
#include "chat/jinja/operators.h"

namespace tandem::jinja {
namespace {

struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;

  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent.get()) {
      const auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
};
using ScopePtr = std::shared_ptr<Scope>;

ScopePtr child_of(const ScopePtr& parent) {
  auto scope = std::make_shared<Scope>();
  scope->parent = parent;
  return scope;
}

enum class Flow { kNormal, kBreak, kContinue };

class Renderer {
 public:
  explicit Renderer(const RenderLimits& limits) : limits_(limits) {}

  // Macros hold their defining scope and scopes hold macros: break those cycles so the
  // render frees everything, even when it ends in an exception.
  ~Renderer() {
    for (const ScopePtr& scope : macro_scopes_) scope->vars.clear();
  }

  std::string render(const Template& tmpl, const std::vector<std::pair<std::string, Value>>& variables) {
    auto globals = std::make_shared<Scope>();
    for (auto& [name, value] : builtin_globals()) globals->vars[name] = value;
    for (auto& [name, value] : variables) globals->vars[name] = value;
    ScopePtr root = child_of(globals);
    macro_scopes_.push_back(globals);
    macro_scopes_.push_back(root);
    std::string out;
    exec_body(tmpl.body, root, out);
    return out;
  }

 private:
  struct DepthGuard {
    explicit DepthGuard(Renderer& r) : renderer(r) {
      if (++renderer.depth_ > renderer.limits_.max_depth) {
        throw TemplateError("template recursion too deep");
      }
    }
    ~DepthGuard() { --renderer.depth_; }
    Renderer& renderer;
  };

  void append(std::string& out, const std::string& text) {
    if (out.size() + text.size() > limits_.max_output_bytes) throw TemplateError("rendered output too large");
    out += text;
  }

  Flow exec_body(const std::vector<NodePtr>& body, const ScopePtr& scope, std::string& out) {
    for (const NodePtr& node : body) {
      const Flow flow = exec(*node, scope, out);
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Flow exec(const Node& node, const ScopePtr& scope, std::string& out) {
    DepthGuard guard(*this);
    try {
      return exec_node(node, scope, out);
    } catch (const TemplateError& e) {
      if (e.line() == 0) throw TemplateError(e.message(), node.line);
      throw;
    }
  }

  Flow exec_node(const Node& node, const ScopePtr& scope, std::string& out) {
    switch (node.kind) {
      case NodeKind::kText: append(out, node.text); return Flow::kNormal;
      case NodeKind::kOutput: append(out, py_str(eval(*node.expr, scope))); return Flow::kNormal;
      case NodeKind::kIf:
        for (const auto& [condition, body] : node.branches) {
          if (eval(*condition, scope).truthy()) return exec_body(body, scope, out);
        }
        return exec_body(node.else_body, scope, out);
      case NodeKind::kFor: exec_for(node, scope, out); return Flow::kNormal;
      case NodeKind::kSet: exec_set(node, scope); return Flow::kNormal;
      case NodeKind::kSetBlock: {
        std::string text;
        exec_body(node.body, child_of(scope), text);
        Value value(std::move(text));
        if (node.expr) value = apply_filter_chain(*node.expr, value, scope);
        scope->vars[node.targets[0]] = std::move(value);
        return Flow::kNormal;
      }
      case NodeKind::kMacro: define_macro(node, scope); return Flow::kNormal;
      case NodeKind::kFilterBlock: {
        std::string text;
        exec_body(node.body, child_of(scope), text);
        append(out, py_str(apply_filter_chain(*node.expr, Value(std::move(text)), scope)));
        return Flow::kNormal;
      }
      case NodeKind::kBreak: return Flow::kBreak;
      case NodeKind::kContinue: return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  void assign(Scope& scope, const std::vector<std::string>& targets, const Value& value) {
    if (targets.size() == 1) {
      scope.vars[targets[0]] = value;
      return;
    }
    const List items = iterate(value);
    if (items.size() != targets.size()) {
      throw TemplateError(fmt::format("cannot unpack {} values into {} names", items.size(), targets.size()));
    }
    for (size_t i = 0; i < targets.size(); ++i) scope.vars[targets[i]] = items[i];
  }

  void exec_set(const Node& node, const ScopePtr& scope) {
    Value value = eval(*node.expr, scope);
    if (node.attribute.empty()) {
      assign(*scope, node.targets, value);
      return;
    }
    const Value* target = scope->find(node.name);
    if (target == nullptr || !target->is_namespace()) {
      throw TemplateError("cannot assign attribute on non-namespace object");
    }
    target->as_dict().set(Value(node.attribute), std::move(value));
  }

  void exec_for(const Node& node, const ScopePtr& scope, std::string& out) {
    List items = iterate(eval(*node.expr, scope));
    if (node.condition) {
      // `for x in xs if cond` filters first: loop.index and loop.length count what is kept.
      List kept;
      for (Value& item : items) {
        ScopePtr test_scope = child_of(scope);
        assign(*test_scope, node.targets, item);
        if (eval(*node.condition, test_scope).truthy()) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      exec_body(node.else_body, child_of(scope), out);
      return;
    }
    const auto n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      if (++loop_iterations_ > limits_.max_loop_iterations) throw TemplateError("too many loop iterations");
      ScopePtr body_scope = child_of(scope);
      assign(*body_scope, node.targets, items[static_cast<size_t>(i)]);
      body_scope->vars["loop"] = loop_object(items, i);
      if (exec_body(node.body, body_scope, out) == Flow::kBreak) break;
    }
  }

  static Value loop_object(const List& items, int64_t i) {
    const auto n = static_cast<int64_t>(items.size());
    Value loop = Value::namespace_object();
    auto& d = loop.as_dict().items;  // distinct keys: append without Dict::set's search
    d.emplace_back(Value("index"), Value(i + 1));
    d.emplace_back(Value("index0"), Value(i));
    d.emplace_back(Value("revindex"), Value(n - i));
    d.emplace_back(Value("revindex0"), Value(n - i - 1));
    d.emplace_back(Value("first"), Value(i == 0));
    d.emplace_back(Value("last"), Value(i == n - 1));
    d.emplace_back(Value("length"), Value(n));
    d.emplace_back(Value("depth"), Value(int64_t{1}));
    d.emplace_back(Value("depth0"), Value(int64_t{0}));
    if (i > 0) d.emplace_back(Value("previtem"), items[static_cast<size_t>(i - 1)]);
    if (i + 1 < n) d.emplace_back(Value("nextitem"), items[static_cast<size_t>(i + 1)]);
    d.emplace_back(Value("cycle"), Value::callable("loop.cycle", [i](CallArgs& args) {
                     if (args.positional.empty()) throw TemplateError("no items for cycling given");
                     return args.positional[static_cast<size_t>(i) % args.positional.size()];
                   }));
    return loop;
  }

  void define_macro(const Node& node, const ScopePtr& scope) {
    macro_scopes_.push_back(scope);
    const Node* macro = &node;
    scope->vars[node.name] =
        Value::callable(node.name, [this, macro, scope](CallArgs& args) { return call_macro(*macro, scope, args); });
  }

  Value call_macro(const Node& macro, const ScopePtr& closure, CallArgs& args) {
    DepthGuard guard(*this);
    const size_t n_params = macro.params.size();
    if (args.positional.size() > n_params) {
      throw TemplateError(fmt::format("macro '{}' takes not more than {} argument(s)", macro.name, n_params));
    }
    ScopePtr scope = child_of(closure);
    std::vector<bool> bound(n_params, false);
    for (size_t i = 0; i < args.positional.size(); ++i) {
      scope->vars[macro.params[i]] = args.positional[i];
      bound[i] = true;
    }
    for (auto& [key, value] : args.keyword) {
      const auto it = std::find(macro.params.begin(), macro.params.end(), key);
      if (it == macro.params.end()) {
        throw TemplateError(fmt::format("macro '{}' takes no keyword argument '{}'", macro.name, key));
      }
      const auto i = static_cast<size_t>(it - macro.params.begin());
      if (bound[i])
        throw TemplateError(fmt::format("macro '{}' got multiple values for argument '{}'", macro.name, key));
      scope->vars[key] = value;
      bound[i] = true;
    }
    for (size_t i = 0; i < n_params; ++i) {
      if (bound[i]) continue;
      scope->vars[macro.params[i]] =
          macro.defaults[i] ? eval(*macro.defaults[i], scope)
                            : Value::undefined(fmt::format("parameter '{}' was not provided", macro.params[i]));
    }
    std::string out;
    exec_body(macro.body, scope, out);
    return Value(std::move(out));
  }

  CallArgs eval_args(const Expr& e, size_t first, const ScopePtr& scope) {
    CallArgs args;
    for (size_t i = first; i < e.args.size(); ++i) args.positional.push_back(eval(*e.args[i], scope));
    for (const auto& [key, value] : e.kwargs) args.keyword.emplace_back(key, eval(*value, scope));
    return args;
  }

  // Applies a filter chain parsed without an operand (args[0] null at its root) to `value`.
  Value apply_filter_chain(const Expr& chain, const Value& value, const ScopePtr& scope) {
    const Value input = chain.args[0] ? apply_filter_chain(*chain.args[0], value, scope) : value;
    CallArgs args = eval_args(chain, 1, scope);
    return apply_filter(chain.name, input, args);
  }

  bool compare(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return py_equal(a, b);
    if (op == "!=") return !py_equal(a, b);
    if (op == "in") return contains(b, a);
    if (op == "not in") return !contains(b, a);
    require_defined(a);
    require_defined(b);
    const int c = py_compare(a, b);
    if (op == "<") return c < 0;
    if (op == "<=") return c <= 0;
    if (op == ">") return c > 0;
    return c >= 0;
  }

  Value eval(const Expr& e, const ScopePtr& scope) {
    DepthGuard guard(*this);
    switch (e.kind) {
      case ExprKind::kLiteral: return e.value;
      case ExprKind::kName: {
        const Value* v = scope->find(e.name);
        return v != nullptr ? *v : Value::undefined(fmt::format("'{}' is undefined", e.name));
      }
      case ExprKind::kList:
      case ExprKind::kTuple: {
        List items;
        for (const ExprPtr& item : e.args) items.push_back(eval(*item, scope));
        return e.kind == ExprKind::kTuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
      }
      case ExprKind::kDict: {
        Value dict = Value::dict();
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          Value key = eval(*e.args[i], scope);
          if (key.is_list() || key.is_dict() || key.is_undefined()) {
            throw TemplateError(fmt::format("unhashable type: '{}'", type_name(key)));
          }
          dict.as_dict().set(key, eval(*e.args[i + 1], scope));
        }
        return dict;
      }
      case ExprKind::kGetAttr: return get_attr(eval(*e.args[0], scope), e.name);
      case ExprKind::kGetItem: return get_item(eval(*e.args[0], scope), eval(*e.args[1], scope));
      case ExprKind::kSlice: {
        const Value obj = eval(*e.args[0], scope);
        Value parts[3];
        for (int i = 0; i < 3; ++i) {
          if (e.args[static_cast<size_t>(i) + 1]) parts[i] = eval(*e.args[static_cast<size_t>(i) + 1], scope);
        }
        return get_slice(obj, parts[0], parts[1], parts[2]);
      }
      case ExprKind::kCall: {
        const Value callee = eval(*e.args[0], scope);
        CallArgs args = eval_args(e, 1, scope);
        return call_value(callee, args);
      }
      case ExprKind::kFilter: {
        const Value operand = eval(*e.args[0], scope);
        CallArgs args = eval_args(e, 1, scope);
        return apply_filter(e.name, operand, args);
      }
      case ExprKind::kTest: {
        const Value operand = eval(*e.args[0], scope);
        CallArgs args = eval_args(e, 1, scope);
        return Value(apply_test(e.name, operand, args) != e.negated);
      }
      case ExprKind::kUnary: {
        const Value v = eval(*e.args[0], scope);
        if (e.name == "not") return Value(!v.truthy());
        if (e.name == "-") return unary_minus(v);
        require_defined(v);
        if (!v.is_number()) throw TemplateError(fmt::format("bad operand type for unary +: '{}'", type_name(v)));
        return v.is_bool() ? Value(v.as_int()) : v;
      }
      case ExprKind::kBinary: {
        Value left = eval(*e.args[0], scope);
        if (e.name == "and") return left.truthy() ? eval(*e.args[1], scope) : left;
        if (e.name == "or") return left.truthy() ? left : eval(*e.args[1], scope);
        return binary_op(e.name, left, eval(*e.args[1], scope));
      }
      case ExprKind::kCompare: {
        Value left = eval(*e.args[0], scope);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(*e.args[i + 1], scope);
          if (!compare(e.ops[i], left, right)) return Value(false);
          left = std::move(right);
        }
        return Value(true);
      }
      case ExprKind::kCondition:
        if (eval(*e.args[0], scope).truthy()) return eval(*e.args[1], scope);
        if (e.args[2]) return eval(*e.args[2], scope);
        return Value::undefined("the inline if expression evaluated to false and no else section was defined");
    }
    return Value();
  }

  RenderLimits limits_;
  int depth_ = 0;
  int64_t loop_iterations_ = 0;
  std::vector<ScopePtr> macro_scopes_;
};

}  // namespace

std::string render_template(const Template& tmpl, const std::vector<std::pair<std::string, Value>>& variables,
                            const RenderLimits& limits) {
  return Renderer(limits).render(tmpl, variables);
}

}  // namespace tandem::jinja
