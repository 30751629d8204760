// Unit tests of the Jinja subset itself: whitespace control, scoping, Python value
// formatting, and the errors for unsupported or broken templates (type, message, line).
// The byte-for-byte comparison with python3-jinja2 lives in chat_template_test.cpp.
#include <gtest/gtest.h>

#include <string>

#include "chat/jinja/evaluator.h"
#include "chat/jinja/json_value.h"
#include "chat/jinja/parser.h"

namespace tandem::jinja {
namespace {

std::string render(const std::string& source, const std::string& json_vars = "{}", const RenderLimits& limits = {}) {
  std::vector<std::pair<std::string, Value>> vars;
  const auto json = nlohmann::ordered_json::parse(json_vars);
  for (auto it = json.begin(); it != json.end(); ++it) vars.emplace_back(it.key(), value_from_json(it.value()));
  return render_template(parse_template(source), vars, limits);
}

// The message of the TemplateError `source` raises (empty when none).
std::string error_of(const std::string& source, const RenderLimits& limits = {}) {
  try {
    render(source, "{}", limits);
  } catch (const TemplateError& e) {
    return e.what();
  }
  return "";
}

TEST(Jinja, WhitespaceControlMatchesHuggingFaceSettings) {
  // trim_blocks eats the newline after a block tag; lstrip_blocks the indentation before it.
  EXPECT_EQ(render("  {% if true %}\n  x\n  {% endif %}\n  {{ 'y' }}  {% if true %}z{% endif %}\n"), "  x\n  y  z");
  EXPECT_EQ(render("a  {{- ' b ' -}}  c"), "a b c");
  EXPECT_EQ(render("a\n  {%- if true -%}\n  b  {%- endif %}"), "ab");
  EXPECT_EQ(render("{# comment #}\nx {#- trimmed -#}  y"), "xy");
  EXPECT_EQ(render("keep\n"), "keep");  // one trailing newline dropped
  EXPECT_EQ(render("a\r\nb"), "a\nb");
}

TEST(Jinja, ForLoopScopesAndLoopVariables) {
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1,2] %}{{ x }}{% set x = 5 %}{{ x }}{% endfor %}{{ x }}"), "15151");
  EXPECT_EQ(
      render("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"),
      "6");
  EXPECT_EQ(render("{% for i in [3,4,5] if i != 4 %}{{ loop.index }}/{{ loop.length }}{{ loop.last }} {% endfor %}"),
            "1/2False 2/2True ");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for k, v in {'a': 1}.items() %}{{ k }}{{ v }}{% endfor %}"), "a1");
}

TEST(Jinja, MacrosWithDefaultsAndKeywordArguments) {
  EXPECT_EQ(render("{% macro f(a, b=2) %}{{ a }}-{{ b }}{% endmacro %}{{ f(1) }} {{ f(1, b=3) }} {{ f(b=4, a=0) }}"),
            "1-2 1-3 0-4");
  EXPECT_NE(error_of("{% macro f(a) %}{% endmacro %}{{ f(1, 2) }}").find("takes not more than 1"), std::string::npos);
}

TEST(Jinja, PythonValueFormatting) {
  EXPECT_EQ(render("{{ [1, 'a', none, true, 1.5, {'k': \"it's\"}] }}"), "[1, 'a', None, True, 1.5, {'k': \"it's\"}]");
  EXPECT_EQ(render("{{ 1/2 }} {{ 1e-5 }} {{ 1e16 }} {{ 123456789012345.6 }} {{ 2.0 }}"),
            "0.5 1e-05 1e+16 123456789012345.6 2.0");
  EXPECT_EQ(render("{{ x | tojson }}", R"({"x": {"b": "ü\n", "a": [1, 2.5, null]}})"),
            R"({"b": "ü\n", "a": [1, 2.5, null]})");
  EXPECT_EQ(render("{{ [1, {}] | tojson(indent=2) }}"), "[\n  1,\n  {}\n]");
}

TEST(Jinja, UndefinedBehavesAsInJinja) {
  EXPECT_EQ(render("[{{ missing }}]{{ missing is defined }}{{ missing | length }}"), "[]False0");
  EXPECT_NE(error_of("{{ missing.attribute }}").find("'missing' is undefined"), std::string::npos);
  EXPECT_NE(error_of("{{ 'a' + missing }}").find("undefined"), std::string::npos);
  EXPECT_EQ(render("{{ none.x }}|{{ {'a': 1}.b }}"), "|");
}

TEST(Jinja, SandboxHidesMutatingMethods) {
  EXPECT_EQ(render("{{ [1].append is defined }}"), "False");
  EXPECT_NE(error_of("{{ [1].append(2) }}").find("unsafe"), std::string::npos);
}

TEST(Jinja, ErrorsNameTheConstructAndLine) {
  EXPECT_EQ(error_of("a\nb\n{% include 'x' %}"), "chat template line 3: unsupported tag 'include'");
  EXPECT_EQ(error_of("{{ x | frobnicate }}"), "chat template line 1: unsupported filter 'frobnicate'");
  EXPECT_EQ(error_of("\n{{ x is frob }}"), "chat template line 2: unsupported test 'frob'");
  EXPECT_EQ(error_of("{% for x in y recursive %}{% endfor %}"),
            "chat template line 1: unsupported construct 'recursive' loop");
  EXPECT_EQ(error_of("{% if x %}"), "chat template line 1: unexpected end of template, expected 'elif'");
  EXPECT_EQ(error_of("x\n{{ raise_exception('boom') }}"), "chat template line 2: boom");
  EXPECT_EQ(error_of("{{ 'abc"), "chat template line 1: unterminated string literal");
  EXPECT_EQ(error_of("{% break %}"), "chat template line 1: 'break' outside of a loop");
  // TemplateError is bad input: the CLI and server catch it as InputError.
  EXPECT_THROW(parse_template("{% endfor %}"), InputError);
}

TEST(Jinja, LimitsStopRunawayTemplates) {
  EXPECT_NE(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("too deep"), std::string::npos);
  EXPECT_NE(error_of("{{ range(1000000) }}").find("Range too big"), std::string::npos);
  RenderLimits small;
  small.max_loop_iterations = 1000;
  EXPECT_NE(error_of("{% for i in range(99) %}{% for j in range(99) %}{% endfor %}{% endfor %}", small)
                .find("too many loop iterations"),
            std::string::npos);
  small.max_output_bytes = 100;
  EXPECT_NE(error_of("{% for i in range(99) %}{{ i }}{% endfor %}", small).find("output too large"), std::string::npos);
  EXPECT_NE(
      error_of("{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}")
          .find("too large"),
      std::string::npos);
  EXPECT_THROW(parse_template("{{ " + std::string(500, '(') + "1" + std::string(500, ')') + " }}"), TemplateError);
}

TEST(Jinja, StrftimeNowFormatsTheCurrentDate) {
  const std::string year = render("{{ strftime_now('%Y') }}");
  ASSERT_EQ(year.size(), 4u);
  EXPECT_GE(std::stoi(year), 2024);
}

}  // namespace
}  // namespace tandem::jinja
