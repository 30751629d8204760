# Which tests are `model` (need files from ../shared: models, vocabularies, chat templates)
# and which are `slow`; every test that is not `model` is `unit` (pure logic, runs anywhere).
# ctest reads this after the discovered tests (CMakeLists.txt), so the lists below are CMake
# regexes on the gtest name, Suite.Test (a parameterised test: Prefix/Suite.Test/Param).
#   ctest -L unit          what runs without ../shared
#   ctest -LE slow         the quick run (make asan)
# A new test that reads ../shared calls TANDEM_REQUIRE_SHARED (tests/support/shared_data.h)
# and gets its suite listed here; one that takes over ~20 s under ASan, or a large share of
# the run, goes under slow.

set(TANDEM_MODEL_TESTS
    # Every test of these suites.
    "^(ChatSpans|EmbeddingLookup|Engine|GenModel|Gpt2Bpe|GreedyReference|KQuantModel|LibraryApi|LlamaSpm)\\."
    "^LongText\\."
    "^(PerplexityTest|QuantizedPerplexity|Qwen3Engine|MoeEngine|Server|ServerOpenAIClient|SpeculativeEngine|Stories260KTest)\\."
    "^Types/KvTransferEngine\\."
    "^DisaggServer\\."
    "^SimulatedHosts\\."
    "^(HostileFraming|HostileBody)\\."
    "^(ConstrainedEngine|StructuredOutputClient|SlidingWindowEngine|ChatControlsClient|FinalMessagePrefillTemplates)\\."
    "^ServerEndpoints\\."
    "^(ResponsesServer|ResponsesClient)\\."
    "^(RequestFieldsServer|TokenSequences)\\."
    "^StreamingDetokenizer\\."
    "^CApi\\."
    "^ProfileRun\\."
    "^PipelineStageShared\\."
    "^EngineStepForward\\."
    "^EngineDeviceForward\\."
    "^DeviceFlagModel\\."
    "^GenModelReference\\."
    "^(CudaGreedy|CudaEngine)\\."
    "^ChatTools\\.ArgumentsReachEachTemplateAsItPrintsThem$"
    "^ChatTemplateFile\\."
    "^(RunFlags|CliProgress|ChatTerminal|WebChatPage|BuildVersion|DialectFlags|DialectCommandLine)\\."
    "^GrammarTokenMaskVocab\\."
    "^GrammarBombs\\."
    "^ToolCallParserTemplates\\."
    # Some tests of these (the others build their inputs).
    "^BadInput\\.(KvPoolLargerThanTheMachine|OutOfMemorySaysWhatTheProcessHeldAndTheLimit|Llama2cModelWithoutTokenizer|PromptLongerThanContext|TruncatedGguf|TruncatedLlama2cCheckpoint|WrongMagic)$"
    "^BenchmarkTest\\.(JsonLinesHaveTheRequiredFields|PromptLongerThanContextIsAnInputError|TinyRunsGivePositiveRates)$"
    "^ChatTemplate\\.(CliPrintsTheRenderedPromptExactly|MatchesPythonJinjaOnEveryTemplateAndMessageSet)$"
    "^GgufFile\\.ReadsAidreams260K$"
    "^HostileClient\\.(ChunkedBodyOverLimitIs413|ControlTokenTextInChatIsPlainText|DisconnectedClientsAreCancelled)$"
    "^HostileClient\\.(FloodPastQueueIsShedWith503|Http10StreamIsCloseDelimited|KeyGuardsMetricsAndUnknownPaths)$"
    "^HostileClient\\.(OutOfRangeTokenIdsAre400|PipelinedRequestsAreAnsweredInOrder|SecondServerOnTakenPortExits)$"
    "^HostileClient\\.(RequestsOnConnectionsOpenedBeforeSigtermGet503|SigtermFinishesAdmittedAndRefusesTheRest)$"
    "^HostileClient\\.(SlowlorisAndIdleSocketsDoNotStarveOthers|UnrepresentableJsonIs400)$"
    "^Llama2cVocab\\.(BothSourcesAgree|EmbeddedGgufVocabMatchesGreedyReference|LoadTokenizerFindsTheModelsTokenizer)$"
    "^Llama2cVocab\\.(ReadsToEndWithoutSize|Tok512MatchesGreedyReference|TruncatedFileIsInputErrorNamingThePath)$"
    "^SpecialSpans\\.(FindControlText|Gpt2WithChatMlMarkers|Gpt2WithLlama3Markers|Llama2SentencePiece)$"
    "^SpecialSpans\\.(Llama3VocabGguf|ManyMarkersAndControlTokens|Qwen2VocabGguf)$"
    "^TokenizeCommand\\.(Gpt2VocabWithoutBos|Llama2cModelFindsItsTokenizer|PrintsIdsForVocabOnlyGguf|ReadsStdinVerbatim)$"
)

# Measured with ctest -j2 on 2 cores; the whole suite's tests sum to 60 s in Release and
# 350 s under ASan (Debug). This one, run once per CPU level, is over a fifth of either:
# Release 3.6-4.6 s a run, ASan 12-31 s (scalar level 31 s). The low-bit k-quant model test
# writes three test-kquant files (its 32000-token embedding and head quantized each time) and
# runs each against its dequantized weights: 18 s a run in Release on a loaded machine; the
# Q3_K_M recipe test writes one such file (5 s).
set(TANDEM_SLOW_TESTS
    # Starts headless Chromium (a few seconds on 2 loaded cores) and asks three questions.
    "^WebChatPage\\.HeadlessChromiumChatsRendersMarkdownKeepsConversationsAndTrims$"
    "^KQuantModel\\.PrefillDecodeAndRowKernelsAgreeBitForBit$"
    "^KQuantModel\\.LowBitTypesMatchTheirDequantizedWeights$"
    "^GenModel\\.Q3KMMixFollowsTheRecipe$"
    # Under ASan (Debug) on 2 loaded cores: 50-147 s and 60-90 s (one request of the fifty
    # passed the client's 60 s limit), 31-53 s; 13, 4 and 4 s in Release.
    "^StructuredOutputClient\\.(FiftyRandomSchemasGiveValidJson|RequiredAndNamedToolCallsStreamedAndRunTools)$"
    "^SpeculativeEngine\\.DraftModelSamplingKeepsTheTargetDistribution$"
    # Under ASan (Debug) on 2 cores, an AMX CPU running every level: 287 s and 242 s (the AI SDK
    # client's time limit passed while one constrained reply ran to 2036 tokens); 3 s and 21 s
    # in Release. The other AttentionSegments tests run the segment code under ASan.
    "^AttentionSegmentsTest\\.TokensAcrossSegmentsEqualTokensAloneAndAnyCut$"
    "^StructuredOutputClient\\.AiSdkGenerateObjectAndLangChainWithStructuredOutput$"
    # Megabytes of text tokenized several times each: 4-6 s in Release.
    "^LongText\\.(SpmWithoutSpacesIsLinearAndBounded|OneHugeBpeWordIsLinearAndBounded)$"
    # Tokenizes 8 MB with the 32k Llama 2 vocabulary (2-3 s in Release) and writes a model.
    "^HostileBody\\.LongTokenizeStopsWhenTheClientLeavesOrTheServerStops$"
    # Each is a whole simulated_hosts.sh run (ten mpirun jobs and single processes over TCP
    # between namespaces): 13-20 s and 4-7 s in Release; under ASan (Debug) on 2 loaded cores
    # 49 s (its four tests 18, 4, 19 and 7 s) and 21 s. The same servers run under ASan on one
    # machine in DisaggServer.* and PipelineServe.
    "^SimulatedHosts\\."
)

# Tests that run several processes under mpirun (tandem serve --workers): also `dist` and `mpi`.
# Under ASan, LeakSanitizer finds OpenMPI's own allocations never freed at exit (libmpi and its
# plugins, unloaded by then, so no suppression can name them) and fails every rank; leak
# checking is off in these processes (the same code runs leak-checked in one process in the
# other tests). Read by cmake/mpi_tests.cmake too. No effect outside the ASan build.
set(TANDEM_MPI_TEST_ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")
# SimulatedHosts.*: ctest tests of their own (cmake/mpi_tests.cmake), each one run of
# tests/dist/simulated_hosts/simulated_hosts.sh over the servers' tests across namespaces.
set(TANDEM_MPI_TESTS "^DisaggServer\\." "^SimulatedHosts\\.")

# True in `out` when `name` matches one of the regexes in the list named `patterns` (one at a
# time: CMake's regexes allow few groups, so they cannot be joined into one).
function(tandem_matches_any name patterns out)
  foreach(pattern IN LISTS ${patterns})
    if(name MATCHES "${pattern}")
      set(${out} TRUE PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} FALSE PARENT_SCOPE)
endfunction()

# `tests`: the names gtest_discover_tests registered. In ctest, set_tests_properties adds to
# a test's LABELS (the module's label stays). A rerun at a lower CPU level is named
# Suite.Test.isa_<level>: it gets TANDEM_ISA=<level> and the label `levels`.
function(tandem_label_tests tests)
  foreach(test IN LISTS tests)
    set(name "${test}")
    set(labels "")
    if(test MATCHES "^(.*)\\.isa_([a-z0-9]+)$")
      set(name "${CMAKE_MATCH_1}")
      set_tests_properties("${test}" PROPERTIES ENVIRONMENT "TANDEM_ISA=${CMAKE_MATCH_2}")
      list(APPEND labels levels)
    endif()
    tandem_matches_any("${name}" TANDEM_MODEL_TESTS is_model)
    if(is_model)
      list(APPEND labels model)
    else()
      list(APPEND labels unit)
    endif()
    tandem_matches_any("${name}" TANDEM_MPI_TESTS is_mpi)
    if(is_mpi)
      list(APPEND labels dist mpi)
      # Three or four processes each, on CI's two cores: alone, so that their load does not
      # skew the timing of the test beside them (nor theirs).
      set_tests_properties("${test}" PROPERTIES RUN_SERIAL TRUE ENVIRONMENT "${TANDEM_MPI_TEST_ENVIRONMENT}")
    endif()
    tandem_matches_any("${name}" TANDEM_SLOW_TESTS is_slow)
    if(is_slow)
      list(APPEND labels slow)
    endif()
    set_tests_properties("${test}" PROPERTIES LABELS "${labels}")
  endforeach()
endfunction()
