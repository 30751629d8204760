"""The Python binding end to end, against the libtandem.so named by TANDEM_LIBRARY (CTest sets
it to the one just built): llama2.c's greedy references, streaming, chat, tokenization,
threads on one model, cancellation, usage and timings, errors as TandemError, and out-of-range
arguments as ValueError naming them."""

import json
import os
import threading
import unittest
from pathlib import Path

import tandem

SHARED = Path(os.environ.get("TANDEM_SHARED_DIR", Path(__file__).resolve().parents[3] / "shared"))
MODEL = SHARED / "models" / "aidreams260K" / "model.gguf"
REFERENCE = SHARED / "models" / "aidreams260K" / "greedy-reference.jsonl"


def require(path: Path) -> None:
    if not path.exists():
        raise unittest.SkipTest(f"{path} is not present (see ../shared/README.md)")


class TandemTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require(MODEL)
        require(REFERENCE)
        # llama2.c's run.c keeps its KV cache in f32; the references are its tokens.
        cls.model = tandem.Model(str(MODEL), threads=1, kv_type_k="f32", kv_type_v="f32")
        cls.reference = [json.loads(line) for line in REFERENCE.read_text().splitlines() if line.strip()]

    @classmethod
    def tearDownClass(cls):
        cls.model.close()

    def test_greedy_generation_matches_run_c(self):
        for run in self.reference:
            result = self.model.generate(run["prompt"], max_tokens=1000, temperature=0)
            self.assertEqual(self.model.tokenize(run["prompt"]) + result.tokens, run["ids"], run["prompt"])
            self.assertEqual(run["prompt"] + result.text, run["text"])
            self.assertEqual(result.finish_reason, "context limit")

    def test_streamed_pieces_join_to_the_full_text(self):
        whole = self.model.generate("The dream", max_tokens=60, temperature=0)
        stream = self.model.generate("The dream", max_tokens=60, temperature=0, stream=True)
        pieces = list(stream)
        self.assertGreater(len(pieces), 10)
        self.assertEqual("".join(pieces), whole.text)
        self.assertTrue(whole.text.startswith(" align, as I seep into the void."), whole.text)
        self.assertEqual(stream.result.text, whole.text)
        self.assertEqual(stream.result.tokens, whole.tokens)
        self.assertEqual(stream.result.finish_reason, "token limit")
        self.assertEqual(stream.result.usage.completion_tokens, 60)

    def test_usage_and_timings(self):
        result = self.model.generate("The dream", max_tokens=20, temperature=0)
        self.assertEqual(result.usage.prompt_tokens, len(self.model.tokenize("The dream")))
        self.assertEqual(result.usage.completion_tokens, 20)
        self.assertGreater(result.usage.kv_bytes, 0)
        self.assertEqual(result.usage.kv_bytes % self.model.kv_bytes_per_token, 0)
        t = result.timings
        self.assertGreater(t.ttft_ms, 0)
        self.assertGreater(t.prefill_ms, 0)
        self.assertGreater(t.decode_ms, 0)
        self.assertGreaterEqual(t.e2e_ms, t.ttft_ms)
        self.assertGreater(t.tpot_mean_ms, 0)
        self.assertLessEqual(t.tpot_p50_ms, t.tpot_p99_ms)

    def test_seed_and_stop(self):
        first = self.model.generate("I see", max_tokens=30, temperature=0.9, seed=11)
        second = self.model.generate("I see", max_tokens=30, temperature=0.9, seed=11)
        self.assertEqual(first.text, second.text)
        self.assertEqual(first.seed, 11)
        stopped = self.model.generate("The dream", max_tokens=40, temperature=0, stop=[" into"])
        self.assertEqual(stopped.text, " align, as I seep")
        self.assertEqual(stopped.finish_reason, "stop string")

    def test_grammar_and_json_schema_constrain_the_output(self):
        word = self.model.generate("The dream", max_tokens=40, seed=2, grammar='root ::= "yes" | "no"')
        self.assertIn(word.text, ("yes", "no"))
        self.assertEqual(word.finish_reason, "end of sequence")
        schema = {"type": "object", "properties": {"colour": {"enum": ["red", "green"]}},
                  "required": ["colour"], "additionalProperties": False}
        shaped = self.model.generate("The dream", max_tokens=100, seed=2, json_schema=schema)
        self.assertEqual(shaped.finish_reason, "end of sequence", shaped.text)
        self.assertIn(json.loads(shaped.text)["colour"], ("red", "green"))
        with self.assertRaises(tandem.TandemError):
            self.model.generate("The dream", max_tokens=4, grammar="root ::= undefined_rule")

    def test_a_grammar_past_its_matching_limit_says_why(self):
        # One "a" of ("a"?){0,2000} is any of 2000 places: the first mask passes the per-token
        # matching limit, and the request ends with finish_reason "error" and the reason.
        bomb = 'root ::= ("a"?){0,2000} "b"'
        for result in (self.model.generate("The dream", max_tokens=8, seed=1, grammar=bomb),
                       self.model.generate("The dream", max_tokens=8, seed=1, grammar=bomb, stream=True).read()):
            self.assertEqual(result.finish_reason, "error")
            self.assertIn("grammar: matching one token needed more than", result.error)
        self.assertEqual(self.model.generate("The dream", max_tokens=2, seed=1).error, "")

    def test_prompt_lookup_speculation_gives_the_same_text(self):
        plain = self.model.generate("The dream", max_tokens=80, temperature=0.8, seed=3)
        spec = self.model.generate("The dream", max_tokens=80, temperature=0.8, seed=3, speculative="ngram",
                                   draft_max=4)
        self.assertEqual(spec.tokens, plain.tokens)
        self.assertEqual(spec.text, plain.text)
        with self.assertRaises(ValueError):
            self.model.generate("The dream", max_tokens=4, speculative="guess")

    def test_draft_model_speculation_gives_the_same_text_and_counts_it(self):
        # The model as its own draft: every greedy proposal is kept, the text is run.c's.
        with_draft = tandem.Model(str(MODEL), threads=1, kv_type_k="f32", kv_type_v="f32", draft_model=str(MODEL))
        try:
            plain = self.model.generate("The dream", max_tokens=60, temperature=0)
            spec = with_draft.generate("The dream", max_tokens=60, temperature=0, speculative="draft", draft_max=4)
            self.assertEqual(spec.tokens, plain.tokens)
            self.assertGreater(spec.usage.drafted_tokens, 0)
            self.assertEqual(spec.usage.accepted_tokens, spec.usage.drafted_tokens)
            self.assertEqual(plain.usage.drafted_tokens, 0)
        finally:
            with_draft.close()
        with self.assertRaises(tandem.TandemError):  # no draft model in this engine
            self.model.generate("The dream", max_tokens=4, speculative="draft")

    def test_tokenize_detokenize_round_trip(self):
        self.assertEqual(self.model.vocab_size, 512)
        self.assertEqual(self.model.context_length, 128)
        for text in ["The dream align, as I seep into the void.", "I see", "Échos\nof light"]:
            ids = self.model.tokenize(text)
            self.assertEqual(ids[0], self.model.bos_token)
            self.assertEqual(self.model.detokenize(ids), text)
            self.assertEqual(self.model.tokenize(text, add_bos=False), ids[1:])
        self.assertEqual(self.model.detokenize(self.reference[1]["ids"]), self.reference[1]["text"])

    def test_chat(self):
        messages = [{"role": "system", "content": "You dream."}, ("user", "What do you see?")]
        self.assertEqual(self.model.render_chat(messages),
                         "<|im_start|>system\nYou dream.<|im_end|>\n<|im_start|>user\nWhat do you see?<|im_end|>\n"
                         "<|im_start|>assistant\n")
        reply = self.model.chat(messages, max_tokens=8, temperature=0)
        self.assertEqual(len(reply.tokens), 8)
        streamed = "".join(self.model.chat(messages, max_tokens=8, temperature=0, stream=True))
        self.assertEqual(streamed, reply.text)
        self.assertEqual(reply.text, self.model.generate(self.model.tokenize_chat(messages), max_tokens=8,
                                                         temperature=0).text)

    def test_threads_share_one_model(self):
        prompts = ["The dream", "Echoes of light", "I see"]
        alone = [self.model.generate(p, max_tokens=1000, temperature=0).tokens for p in prompts]
        together = [None] * len(prompts)

        def run(i):
            together[i] = self.model.generate(prompts[i], max_tokens=1000, temperature=0).tokens

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(prompts))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(together, alone)

    def test_cancel(self):
        # One sequence at a time: the last stream waits behind two full-context requests, and
        # is cancelled while it waits.
        with tandem.Model(str(MODEL), threads=1, max_sequences=1) as model:
            ahead = [model.generate(p, max_tokens=1000, temperature=0, stream=True) for p in ("The dream", "I see")]
            waiting = model.generate("Echoes of light", max_tokens=1000, temperature=0, stream=True)
            waiting.cancel()
            self.assertEqual(list(waiting), [])
            self.assertEqual(waiting.result.finish_reason, "cancelled")
            self.assertEqual(waiting.result.usage.completion_tokens, 0)
            self.assertEqual(ahead[0].read().tokens, self.model.generate("The dream", max_tokens=1000,
                                                                         temperature=0).tokens)
            # Dropped midway: cancelled, and the model goes on serving.
            ahead[1].close()
            self.assertEqual(len(model.generate("I see", max_tokens=5, temperature=0).tokens), 5)

    def test_errors_raise_tandem_error_with_the_message(self):
        with self.assertRaises(tandem.TandemError) as caught:
            tandem.Model("/nonexistent/model.gguf")
        self.assertIn("/nonexistent/model.gguf", str(caught.exception))
        with self.assertRaises(tandem.TandemError) as caught:
            self.model.generate("dream " * 300, max_tokens=4)
        self.assertIn("context", str(caught.exception))
        with self.assertRaises(tandem.TandemError):
            self.model.generate("The dream", repetition_penalty=0)
        with self.assertRaises(tandem.TandemError):
            self.model.render_chat([("narrator", "x")])
        with self.assertRaises(tandem.TandemError):
            self.model.detokenize([1, 512])
        with self.assertRaises(tandem.TandemError):
            tandem.Model(str(MODEL), max_sequences=0)
        with self.assertRaises(tandem.TandemError) as caught:  # aidreams260K's heads are 16 wide
            tandem.Model(str(MODEL), kv_type_k="q8_0")
        self.assertIn("head_dim", str(caught.exception))
        with self.assertRaises(ValueError):
            tandem.Model(str(MODEL), kv_type_v="q5_0")

    def test_out_of_range_arguments_raise_value_error_naming_them(self):
        bad = [("temperature", -1), ("top_p", 5), ("top_p", -0.1), ("min_p", 2), ("top_k", -3),
               ("temperature", float("nan")), ("repetition_penalty", 0), ("presence_penalty", 3),
               ("frequency_penalty", -2.5), ("max_tokens", -1), ("max_tokens", 1.5), ("seed", -1),
               ("draft_max", -1), ("temperature", "hot")]
        for name, value in bad:
            with self.subTest(name=name, value=value):
                with self.assertRaises(ValueError) as caught:
                    self.model.generate("The dream", **{"max_tokens": 4, "temperature": 0, name: value})
                self.assertIn(name, str(caught.exception))
                with self.assertRaises(ValueError):
                    self.model.chat([{"role": "user", "content": "hi"}], **{"max_tokens": 4, name: value})
        # The edges are allowed.
        edges = self.model.generate("The dream", max_tokens=2, temperature=0, top_p=1, min_p=0, top_k=0, seed=0)
        self.assertEqual(len(edges.tokens), 2)

    def test_llama2c_checkpoint_with_its_tokenizer(self):
        checkpoint = SHARED / "models" / "aidreams260K" / "model.bin"
        require(checkpoint)
        with tandem.Model(str(checkpoint), tokenizer_path=str(checkpoint.parent / "tok512.bin"), threads=1) as model:
            run = self.reference[1]
            result = model.generate(run["prompt"], max_tokens=1000, temperature=0)
            self.assertEqual(model.tokenize(run["prompt"]) + result.tokens, run["ids"])

    def test_version(self):
        self.assertRegex(tandem.__version__, r"^\d+\.\d+\.\d+$")


if __name__ == "__main__":
    unittest.main()
