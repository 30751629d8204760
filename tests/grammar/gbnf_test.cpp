// GBNF parsing and matching: sentences accepted and rejected byte by byte, UTF-8 classes
// against a brute-force encoding, errors that name the place, rollback.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>

#include "base/error.h"
#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"
#include "grammar/utf8_ranges.h"

namespace tandem::grammar {
namespace {

std::shared_ptr<const Grammar> gbnf(std::string_view text) { return std::make_shared<const Grammar>(parse_gbnf(text)); }

// Whole-sentence match: every byte accepted and the end allowed after the last.
bool matches(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  GrammarMatcher m(g);
  for (char c : text) {
    if (!m.accept_byte(static_cast<uint8_t>(c))) return false;
  }
  return m.can_end();
}

std::string error_of(std::string_view text) {
  try {
    parse_gbnf(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(GrammarGbnf, LiteralsAlternativesAndGroups) {
  auto g = gbnf(R"(root ::= "ab" | "c" ("d" | "ef")  # a comment
)");
  EXPECT_TRUE(matches(g, "ab"));
  EXPECT_TRUE(matches(g, "cd"));
  EXPECT_TRUE(matches(g, "cef"));
  EXPECT_FALSE(matches(g, "a"));
  EXPECT_FALSE(matches(g, "ce"));
  EXPECT_FALSE(matches(g, "abc"));
  EXPECT_FALSE(matches(g, ""));
}

TEST(GrammarGbnf, RulesAcrossLinesAndReferencesBeforeDefinitions) {
  auto g = gbnf(R"(
root ::= greeting " " name
  "!"
greeting ::= "hi" | "hello"
name ::= [A-Z] [a-z]*
)");
  EXPECT_TRUE(matches(g, "hi Bob!"));
  EXPECT_TRUE(matches(g, "hello X!"));
  EXPECT_FALSE(matches(g, "hello x!"));
  EXPECT_FALSE(matches(g, "hey Bob!"));
}

TEST(GrammarGbnf, Repetition) {
  auto g = gbnf(R"(root ::= "a"+ "b"* "c"? "d"{2} "e"{1,3} "f"{2,})");
  EXPECT_TRUE(matches(g, "addeff"));
  EXPECT_TRUE(matches(g, "aaabbcddeeefffff"));
  EXPECT_FALSE(matches(g, "ddeff"));      // a+ needs one
  EXPECT_FALSE(matches(g, "adeff"));      // d{2}
  EXPECT_FALSE(matches(g, "addeeeeff"));  // e{1,3}
  EXPECT_FALSE(matches(g, "addef"));      // f{2,}
  EXPECT_FALSE(matches(g, "acceddeff"));  // c?
  auto group = gbnf(R"(root ::= ("ab" | "c"){0,2} "x")");
  EXPECT_TRUE(matches(group, "x"));
  EXPECT_TRUE(matches(group, "abcx"));
  EXPECT_FALSE(matches(group, "ababcx"));
}

TEST(GrammarGbnf, ClassesNegationEscapesAndDot) {
  auto g = gbnf(R"(root ::= [^"\\\n]* "\"" [\x41-\x43] [\]\-] . "\u00e9")");
  EXPECT_TRUE(matches(g, "x y\"B]zé"));
  EXPECT_TRUE(matches(g, "\"C-€é"));  // . is one code point of any length
  EXPECT_FALSE(matches(g, "a\nb\"B]zé"));
  EXPECT_FALSE(matches(g, "\"D]zé"));
  EXPECT_FALSE(matches(g, "\"B]zè"));
  auto cls = gbnf(R"(root ::= [a-cé-ë😀]+)");
  EXPECT_TRUE(matches(cls, "abcéêë😀"));
  EXPECT_FALSE(matches(cls, "è"));
  EXPECT_FALSE(matches(cls, "d"));
  // A partial UTF-8 character is accepted byte by byte but is not an end.
  EXPECT_FALSE(matches(cls, "\xC3"));
  GrammarMatcher m(cls);
  EXPECT_TRUE(m.accept_byte(0xC3));
  EXPECT_FALSE(m.can_end());
  EXPECT_FALSE(m.accept_byte(0xA8));  // è: U+00E8 is outside é-ë
  EXPECT_TRUE(m.accept_byte(0xA9));
  EXPECT_TRUE(m.can_end());
}

TEST(GrammarGbnf, NegatedClassNeverMatchesInvalidUtf8) {
  auto g = gbnf(R"(root ::= [^a]*)");
  EXPECT_TRUE(matches(g, "bcd\xE2\x82\xAC"));
  EXPECT_FALSE(matches(g, "\xFF"));
  EXPECT_FALSE(matches(g, "\xC0\x80"));          // overlong
  EXPECT_FALSE(matches(g, "\xED\xA0\x80"));      // a surrogate
  EXPECT_FALSE(matches(g, "\xF4\x90\x80\x80"));  // past U+10FFFF
}

TEST(GrammarGbnf, EmptyRootMatchesOnlyTheEmptyText) {
  auto g = gbnf("root ::=");
  GrammarMatcher m(g);
  EXPECT_TRUE(m.can_end());
  EXPECT_TRUE(m.must_end());
  EXPECT_FALSE(m.accept_byte('a'));
  EXPECT_TRUE(matches(gbnf("root ::= \"\" | \"a\""), ""));
}

TEST(GrammarGbnf, RecursionAndNullableRules) {
  auto g = gbnf(R"(
root ::= list
list ::= "[" ws (item (ws "," ws item)*)? ws "]"
item ::= list | [0-9]+
ws ::= " "?
)");
  EXPECT_TRUE(matches(g, "[]"));
  EXPECT_TRUE(matches(g, "[ 1, [2 ,[ ]], 34 ]"));
  EXPECT_FALSE(matches(g, "[1,]"));
  EXPECT_FALSE(matches(g, "[[1]"));
}

TEST(GrammarGbnf, ErrorsNameThePositionAndRule) {
  EXPECT_EQ(error_of("root ::= \"a\" foo"),
            "grammar: line 1, column 14 (rule 'root'): rule 'foo' is used but never defined");
  EXPECT_EQ(error_of("root ::= [a-"),
            "grammar: line 1, column 13 (rule 'root'): unterminated character class, expected ']'");
  EXPECT_EQ(error_of("root ::= \"a\"\nitem ::= (\"x\" "),
            "grammar: line 2, column 15 (rule 'item'): expected ')' before the end of the grammar");
  EXPECT_EQ(error_of("root ::= \"a\nb\""), "grammar: line 1, column 12 (rule 'root'): newline inside a string literal");
  EXPECT_EQ(error_of("root = \"a\""), "grammar: line 1, column 6 (rule 'root'): expected '::=' after the rule name");
  EXPECT_EQ(error_of("root ::= \"\\q\""), "grammar: line 1, column 12 (rule 'root'): unknown escape '\\q'");
  EXPECT_EQ(error_of("root ::= \"a\"{3,2}"), "grammar: line 1, column 18 (rule 'root'): repetition {m,n} with n < m");
  EXPECT_EQ(error_of("item ::= \"a\""), "grammar: no rule 'root'");
  EXPECT_EQ(error_of("root ::= root \"a\" | \"b\""),
            "grammar: rule 'root' is left-recursive (it can reach itself without consuming input)");
  EXPECT_EQ(error_of("root ::= \"a\" root"), "grammar: rule 'root' can never finish (every alternative recurses)");
  EXPECT_EQ(error_of("root ::= \"a\"\nroot ::= \"b\""), "grammar: line 2, column 1 (rule 'root'): rule defined twice");
  // Found by the fuzzer: a class character past U+10FFFF.
  EXPECT_EQ(error_of("root ::= [\xF5\x80\x80\x80]"),
            "grammar: line 1, column 11 (rule 'root'): invalid UTF-8 in a character class");
  EXPECT_EQ(error_of("root ::= [\xC0\x80]"),
            "grammar: line 1, column 11 (rule 'root'): invalid UTF-8 in a character class");
  EXPECT_EQ(error_of("root ::= \"a\"**"),
            "grammar: line 1, column 14 (rule 'root'): repetition of a repetition: use a group");
}

// Highly ambiguous: a run of letters splits among 300 optional items every possible way.
// Found by the fuzzer as a stall; now closures are shared per next node and the number of
// live stacks and the work per step are bounded (an InputError past them).
TEST(GrammarGbnf, AmbiguousRepetitionStaysBounded) {
  auto g = gbnf(R"(root ::= "a" ("" | [b-z]+){300} "."
)");
  GrammarMatcher m(g);
  ASSERT_TRUE(m.accept_byte('a'));
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(m.accept_byte('b'));
  EXPECT_TRUE(m.accept_byte('.'));
  EXPECT_TRUE(m.can_end());
  auto worse = gbnf(R"(root ::= (("" | [b-z]+){300} " "){20})");
  GrammarMatcher w(worse);
  bool refused = false;
  try {
    for (int i = 0; i < 200 && !refused; ++i) refused = !w.accept_bytes("bbbbbbbbb ");
  } catch (const InputError& e) {
    refused = true;
    // Whichever matching limit comes first (grammar_limits.h): the stacks or the work.
    const std::string why = e.what();
    EXPECT_TRUE(why.find("parse stacks alive at once (the limit is 4096)") != std::string::npos ||
                why.find("(the per-step limit)") != std::string::npos)
        << why;
  }
  EXPECT_TRUE(refused);
}

TEST(GrammarGbnf, RollbackRestoresEarlierStates) {
  auto g = gbnf(R"(root ::= "ab" "c"* "d")");
  GrammarMatcher m(g, 8);
  ASSERT_TRUE(m.accept_bytes("ab"));
  ASSERT_TRUE(m.accept_bytes("cc"));
  ASSERT_TRUE(m.accept_bytes("d"));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.accept_bytes("c"));
  EXPECT_TRUE(m.must_end());
  ASSERT_TRUE(m.rollback(2));  // back to after "ab"
  EXPECT_FALSE(m.can_end());
  EXPECT_FALSE(m.accept_bytes("a"));
  EXPECT_TRUE(m.accept_bytes("cd"));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.rollback(5));
  ASSERT_TRUE(m.rollback(2));
  EXPECT_TRUE(m.accept_bytes("abd"));
  // A long generation keeps only a bounded history.
  GrammarMatcher long_run(g, 4);
  ASSERT_TRUE(long_run.accept_bytes("ab"));
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(long_run.accept_bytes("c"));
  EXPECT_LE(long_run.n_steps_remembered(), 8u);
  EXPECT_GE(long_run.n_steps_remembered(), 4u);
  ASSERT_TRUE(long_run.rollback(4));
  EXPECT_TRUE(long_run.accept_bytes("d"));
  EXPECT_TRUE(long_run.can_end());
}

TEST(GrammarGbnf, CopiesAreIndependent) {
  auto g = gbnf(R"(root ::= "a" ("b" | "c"))");
  GrammarMatcher m(g);
  ASSERT_TRUE(m.accept_byte('a'));
  GrammarMatcher copy = m;
  EXPECT_TRUE(copy.accept_byte('b'));
  EXPECT_TRUE(copy.can_end());
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accept_byte('c'));
}

// Every code point of random ranges is encoded by exactly one sequence, and the sequences
// match nothing else (their products sum to the range's size).
TEST(GrammarUtf8Ranges, SequencesCoverExactlyTheRange) {
  std::mt19937 rng(7);
  auto encode = [](uint32_t cp) {
    std::string s;
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += static_cast<char>(0xE0 | (cp >> 12));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (cp >> 18));
      s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return s;
  };
  for (int trial = 0; trial < 200; ++trial) {
    uint32_t a = rng() % (kMaxCodePoint + 1), b = rng() % (kMaxCodePoint + 1);
    if (trial % 3 == 0) b = a + rng() % 3000;
    if (a > b) std::swap(a, b);
    b = std::min(b, kMaxCodePoint);
    for (CodePointRange r : normalize_ranges({{a, b}}, false)) {
      auto seqs = utf8_sequences(r);
      uint64_t total = 0;
      for (const auto& s : seqs) {
        uint64_t product = 1;
        for (auto [lo, hi] : s) product *= static_cast<uint64_t>(hi - lo + 1);
        total += product;
      }
      ASSERT_EQ(total, uint64_t{r.hi} - r.lo + 1);
      for (int k = 0; k < 50; ++k) {
        const uint32_t cp = r.lo + static_cast<uint32_t>(rng() % (r.hi - r.lo + 1));
        const std::string bytes = encode(cp);
        int hits = 0;
        for (const auto& s : seqs) {
          bool ok = s.size() == bytes.size();
          for (size_t i = 0; ok && i < s.size(); ++i) {
            const auto c = static_cast<uint8_t>(bytes[i]);
            ok = s[i].first <= c && c <= s[i].second;
          }
          hits += ok;
        }
        ASSERT_EQ(hits, 1) << "U+" << std::hex << cp;
      }
    }
  }
}

}  // namespace
}  // namespace tandem::grammar
